//! ACLs: the bootstrap, policies and tokens.

use caravan_proto::acl_service_client::AclServiceClient;
use caravan_proto::{
    AclBootstrapRequest, AclPolicy, AclToken, AclTokenSelfRequest, DeleteAclPolicyRequest,
    DeleteAclTokenRequest, GetAclPolicyRequest, GetAclTokenRequest, ListAclPoliciesRequest,
    ListAclTokensRequest, UpsertAclPolicyRequest, UpsertAclTokenRequest,
};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::transport::GrpcChannel;

fn service(ch: GrpcChannel) -> AclServiceClient<GrpcChannel> {
    AclServiceClient::new(ch)
}

/// The ACL calls of a [`Client`]: [`Client::acl`].
#[derive(Debug, Clone, Copy)]
pub struct Acl<'a> {
    client: &'a Client,
}

impl<'a> Acl<'a> {
    pub(crate) fn new(client: &'a Client) -> Self {
        Acl { client }
    }

    /// Creates the first management token and returns it with its secret;
    /// sent once (a second bootstrap is refused).
    ///
    /// ```no_run
    /// # async fn demo() -> caravan_client::Result<()> {
    /// let anonymous = caravan_client::Client::connect("127.0.0.1:4647").await?;
    /// let root = anonymous.acl().bootstrap().await?;
    /// let client = caravan_client::Client::builder().token(root.secret_id).connect().await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Conflict`] or [`Error::PermissionDenied`] once bootstrapped.
    pub async fn bootstrap(&self) -> Result<AclToken> {
        let resp = self
            .client
            .write_once(AclBootstrapRequest {}, |ch, r| async move {
                service(ch).bootstrap(r).await
            })
            .await?;
        resp.token
            .ok_or_else(|| Error::missing("token", "bootstrap"))
    }

    /// Every policy (for a management token; else the caller's own).
    ///
    /// # Errors
    ///
    /// As any read.
    pub async fn policies(&self) -> Result<Vec<AclPolicy>> {
        let resp = self
            .client
            .read(ListAclPoliciesRequest {}, |ch, r| async move {
                service(ch).list_policies(r).await
            })
            .await?;
        Ok(resp.policies)
    }

    /// One policy.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown policy.
    pub async fn policy(&self, name: &str) -> Result<AclPolicy> {
        let req = GetAclPolicyRequest {
            name: name.to_string(),
        };
        let resp = self
            .client
            .read(req, |ch, r| async move { service(ch).get_policy(r).await })
            .await?;
        resp.policy.ok_or_else(|| Error::missing("policy", name))
    }

    /// Writes a policy (its rules in Nomad's policy language); writing the
    /// same policy twice leaves the same state, so it is retried.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for rules that do not parse.
    pub async fn upsert_policy(&self, policy: AclPolicy) -> Result<i64> {
        let req = UpsertAclPolicyRequest {
            policy: Some(policy),
        };
        let resp = self
            .client
            .read(
                req,
                |ch, r| async move { service(ch).upsert_policy(r).await },
            )
            .await?;
        Ok(resp.revision)
    }

    /// Deletes a policy; sent once (a second delete would fail as unknown).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown policy.
    pub async fn delete_policy(&self, name: &str) -> Result<i64> {
        let req = DeleteAclPolicyRequest {
            name: name.to_string(),
        };
        let resp = self
            .client
            .write_once(
                req,
                |ch, r| async move { service(ch).delete_policy(r).await },
            )
            .await?;
        Ok(resp.revision)
    }

    /// Every token (management).
    ///
    /// # Errors
    ///
    /// As any read.
    pub async fn tokens(&self) -> Result<Vec<AclToken>> {
        let resp = self
            .client
            .read(ListAclTokensRequest {}, |ch, r| async move {
                service(ch).list_tokens(r).await
            })
            .await?;
        Ok(resp.tokens)
    }

    /// One token by its accessor id.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown token.
    pub async fn token(&self, accessor_id: &str) -> Result<AclToken> {
        let req = GetAclTokenRequest {
            accessor_id: accessor_id.to_string(),
        };
        let resp = self
            .client
            .read(req, |ch, r| async move { service(ch).get_token(r).await })
            .await?;
        resp.token
            .ok_or_else(|| Error::missing("token", accessor_id))
    }

    /// The caller's own token.
    ///
    /// # Errors
    ///
    /// [`Error::PermissionDenied`] without a valid token.
    pub async fn own_token(&self) -> Result<AclToken> {
        let resp = self
            .client
            .read(AclTokenSelfRequest {}, |ch, r| async move {
                service(ch).token_self(r).await
            })
            .await?;
        resp.token.ok_or_else(|| Error::missing("token", "self"))
    }

    /// Creates a token (empty `accessor_id`; the answer carries its secret)
    /// or updates one. A creation is sent once (each makes a token); an
    /// update leaves the same state twice, so it is retried.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an unknown type or policy.
    pub async fn upsert_token(&self, token: AclToken) -> Result<AclToken> {
        let creates = token.accessor_id.is_empty();
        let req = UpsertAclTokenRequest { token: Some(token) };
        let resp = self
            .client
            .write(creates, req, |ch, r| async move {
                service(ch).upsert_token(r).await
            })
            .await?;
        resp.token
            .ok_or_else(|| Error::missing("token", "upserted"))
    }

    /// Deletes a token; sent once.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown token.
    pub async fn delete_token(&self, accessor_id: &str) -> Result<i64> {
        let req = DeleteAclTokenRequest {
            accessor_id: accessor_id.to_string(),
        };
        let resp = self
            .client
            .write_once(
                req,
                |ch, r| async move { service(ch).delete_token(r).await },
            )
            .await?;
        Ok(resp.revision)
    }
}

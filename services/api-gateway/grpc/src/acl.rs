//! `AclService` over gRPC: the same bootstrap, policies and tokens as the
//! HTTP `/v1/acl` endpoints, over [`caravan_gateway_core::acl::store`]. The guard has
//! already resolved the caller; each handler checks what its method needs
//! with [`authorize`] first.

use std::sync::Arc;

use caravan_proto::acl_service_server::AclService;
use caravan_proto::{
    AclBootstrapRequest, AclPolicy, AclPolicyResponse, AclToken, AclTokenResponse,
    AclTokenSelfRequest, AclWriteResponse, DeleteAclPolicyRequest, DeleteAclTokenRequest,
    GetAclPolicyRequest, GetAclTokenRequest, ListAclPoliciesRequest, ListAclPoliciesResponse,
    ListAclTokensRequest, ListAclTokensResponse, UpsertAclPolicyRequest, UpsertAclTokenRequest,
};
use tonic::{Request, Response, Status};

use crate::acl_guard::authorize;
use caravan_gateway_core::acl::store::{
    self, AclCache, Caller, PolicyEntry, StoredPolicy, TokenEntry, TokenRequest, TokenWritten,
};
use caravan_gateway_core::error::GatewayError;
use caravan_gateway_core::gateway::Gateway;

/// The ACL API.
#[derive(Debug, Clone)]
pub struct AclApi(pub Gateway);

impl AclApi {
    fn cache(&self) -> Result<&Arc<AclCache>, Status> {
        self.0
            .acl
            .as_ref()
            .ok_or_else(|| Status::failed_precondition("ACL support disabled"))
    }
}

fn caller<T>(request: &Request<T>) -> Result<Caller, Status> {
    request
        .extensions()
        .get::<Caller>()
        .cloned()
        .ok_or_else(|| Status::permission_denied("Permission denied"))
}

fn policy(p: &PolicyEntry, with_rules: bool) -> AclPolicy {
    AclPolicy {
        name: p.stored.name.clone(),
        description: p.stored.description.clone(),
        rules: if with_rules {
            p.stored.rules.clone()
        } else {
            String::new()
        },
        create_revision: p.create_index,
        modify_revision: p.modify_index,
    }
}

fn token(t: &TokenEntry, secret: Option<&str>) -> AclToken {
    AclToken {
        accessor_id: t.stored.accessor_id.clone(),
        secret_id: secret.unwrap_or_default().to_string(),
        name: t.stored.name.clone(),
        r#type: t.stored.token_type.clone(),
        policies: t.stored.policies.clone(),
        global: t.stored.global,
        create_time: t.stored.create_time,
        create_revision: t.create_index,
        modify_revision: t.modify_index,
    }
}

fn written(w: &TokenWritten) -> AclTokenResponse {
    AclTokenResponse {
        token: Some(token(&w.token, w.secret.as_deref())),
        revision: w.token.modify_index,
    }
}

#[tonic::async_trait]
impl AclService for AclApi {
    async fn bootstrap(
        &self,
        request: Request<AclBootstrapRequest>,
    ) -> Result<Response<AclTokenResponse>, Status> {
        authorize(&self.0, &request)?;
        let cache = self.cache()?;
        let w = store::bootstrap(self.0.store.as_ref(), &self.0.keys, cache).await?;
        Ok(Response::new(written(&w)))
    }

    async fn list_policies(
        &self,
        request: Request<ListAclPoliciesRequest>,
    ) -> Result<Response<ListAclPoliciesResponse>, Status> {
        authorize(&self.0, &request)?;
        let cache = self.cache()?;
        let caller = caller(&request)?;
        let policies = cache
            .policies()
            .iter()
            .filter(|p| caller.may_read_policy(&p.stored.name))
            .map(|p| policy(p, false))
            .collect();
        Ok(Response::new(ListAclPoliciesResponse {
            policies,
            revision: cache.revision(),
        }))
    }

    async fn get_policy(
        &self,
        request: Request<GetAclPolicyRequest>,
    ) -> Result<Response<AclPolicyResponse>, Status> {
        authorize(&self.0, &request)?;
        let cache = self.cache()?;
        let caller = caller(&request)?;
        let name = request.into_inner().name;
        if !caller.may_read_policy(&name) {
            return Err(Status::permission_denied("Permission denied"));
        }
        let found = cache
            .policy(&name)
            .ok_or_else(|| Status::not_found("ACL policy not found"))?;
        Ok(Response::new(AclPolicyResponse {
            policy: Some(policy(&found, true)),
            revision: cache.revision(),
        }))
    }

    async fn upsert_policy(
        &self,
        request: Request<UpsertAclPolicyRequest>,
    ) -> Result<Response<AclWriteResponse>, Status> {
        authorize(&self.0, &request)?;
        let cache = self.cache()?;
        let p = request
            .into_inner()
            .policy
            .ok_or_else(|| Status::from(GatewayError::field("policy", "is required")))?;
        let stored = StoredPolicy {
            name: p.name,
            description: p.description,
            rules: p.rules,
        };
        let revision =
            store::upsert_policy(self.0.store.as_ref(), &self.0.keys, cache, stored).await?;
        Ok(Response::new(AclWriteResponse { revision }))
    }

    async fn delete_policy(
        &self,
        request: Request<DeleteAclPolicyRequest>,
    ) -> Result<Response<AclWriteResponse>, Status> {
        authorize(&self.0, &request)?;
        let cache = self.cache()?;
        let name = request.into_inner().name;
        let revision =
            store::delete_policy(self.0.store.as_ref(), &self.0.keys, cache, &name).await?;
        Ok(Response::new(AclWriteResponse { revision }))
    }

    async fn list_tokens(
        &self,
        request: Request<ListAclTokensRequest>,
    ) -> Result<Response<ListAclTokensResponse>, Status> {
        authorize(&self.0, &request)?;
        let cache = self.cache()?;
        let tokens = cache.tokens().iter().map(|t| token(t, None)).collect();
        Ok(Response::new(ListAclTokensResponse {
            tokens,
            revision: cache.revision(),
        }))
    }

    async fn get_token(
        &self,
        request: Request<GetAclTokenRequest>,
    ) -> Result<Response<AclTokenResponse>, Status> {
        authorize(&self.0, &request)?;
        let cache = self.cache()?;
        let caller = caller(&request)?;
        let accessor = request.into_inner().accessor_id;
        let own = caller.owns(&accessor);
        if !caller.is_management() && !own {
            return Err(Status::permission_denied("Permission denied"));
        }
        let found = cache
            .token(&accessor)
            .ok_or_else(|| Status::not_found("ACL token not found"))?;
        let secret = if own { caller.secret.as_deref() } else { None };
        Ok(Response::new(AclTokenResponse {
            token: Some(token(&found, secret)),
            revision: cache.revision(),
        }))
    }

    async fn token_self(
        &self,
        request: Request<AclTokenSelfRequest>,
    ) -> Result<Response<AclTokenResponse>, Status> {
        authorize(&self.0, &request)?;
        let cache = self.cache()?;
        let caller = caller(&request)?;
        let own = caller
            .token
            .as_ref()
            .ok_or_else(|| Status::not_found("ACL token not found"))?;
        Ok(Response::new(AclTokenResponse {
            token: Some(token(own, caller.secret.as_deref())),
            revision: cache.revision(),
        }))
    }

    async fn upsert_token(
        &self,
        request: Request<UpsertAclTokenRequest>,
    ) -> Result<Response<AclTokenResponse>, Status> {
        authorize(&self.0, &request)?;
        let cache = self.cache()?;
        let t = request
            .into_inner()
            .token
            .ok_or_else(|| Status::from(GatewayError::field("token", "is required")))?;
        let req = TokenRequest {
            accessor_id: t.accessor_id,
            name: t.name,
            token_type: t.r#type,
            policies: t.policies,
            global: t.global,
        };
        let w = store::upsert_token(
            self.0.store.as_ref(),
            &self.0.keys,
            cache,
            self.0.attempts(),
            req,
        )
        .await?;
        Ok(Response::new(written(&w)))
    }

    async fn delete_token(
        &self,
        request: Request<DeleteAclTokenRequest>,
    ) -> Result<Response<AclWriteResponse>, Status> {
        authorize(&self.0, &request)?;
        let cache = self.cache()?;
        let accessor = request.into_inner().accessor_id;
        let revision =
            store::delete_token(self.0.store.as_ref(), &self.0.keys, cache, &accessor).await?;
        Ok(Response::new(AclWriteResponse { revision }))
    }
}

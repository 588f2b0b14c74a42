//! Variables (Nomad's Variables): list, read, write and delete, with
//! check-and-set.

use std::collections::BTreeMap;

use caravan_proto::variable_service_client::VariableServiceClient;
use caravan_proto::{
    DeleteVariableRequest, DeleteVariableResponse, GetVariableRequest, ListVariablesRequest,
    PutVariableRequest, PutVariableResponse, VariableDecrypted, VariableMetadata,
};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::transport::{GrpcChannel, MAX_MESSAGE_BYTES};

fn service(ch: GrpcChannel) -> VariableServiceClient<GrpcChannel> {
    VariableServiceClient::new(ch).max_decoding_message_size(MAX_MESSAGE_BYTES)
}

/// The variable calls of a [`Client`]: [`Client::variables`].
#[derive(Debug, Clone, Copy)]
pub struct Variables<'a> {
    client: &'a Client,
}

impl<'a> Variables<'a> {
    pub(crate) fn new(client: &'a Client) -> Self {
        Variables { client }
    }

    /// The metadata of the variables whose paths start with `prefix`.
    ///
    /// # Errors
    ///
    /// As any read.
    pub async fn list(&self, prefix: &str) -> Result<Vec<VariableMetadata>> {
        let req = ListVariablesRequest {
            options: self.client.options(prefix),
        };
        let resp = self
            .client
            .read(
                req,
                |ch, r| async move { service(ch).list_variables(r).await },
            )
            .await?;
        Ok(resp.variables)
    }

    /// One variable with its items.
    ///
    /// ```no_run
    /// # async fn demo(client: caravan_client::Client) -> caravan_client::Result<()> {
    /// let db = client.variables().get("nomad/jobs/web").await?;
    /// println!("{:?}", db.items.get("password"));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when there is no variable at `path`.
    pub async fn get(&self, path: &str) -> Result<VariableDecrypted> {
        let req = GetVariableRequest {
            path: path.to_string(),
            options: self.client.options(""),
        };
        let resp = self
            .client
            .read(
                req,
                |ch, r| async move { service(ch).get_variable(r).await },
            )
            .await?;
        resp.variable
            .ok_or_else(|| Error::missing("variable", path))
    }

    /// Writes a variable in the client's namespace; see [`Variables::put_in`].
    ///
    /// # Errors
    ///
    /// As [`Variables::put_in`].
    pub async fn put(
        &self,
        path: &str,
        items: BTreeMap<String, String>,
        cas: Option<i64>,
    ) -> Result<PutVariableResponse> {
        let namespace = self.client.namespace().to_string();
        self.put_in(&namespace, path, items, cas).await
    }

    /// Writes a variable in `namespace`; with `cas`, only if its modify
    /// revision is `cas` (0: only if it does not exist), else the answer is
    /// not `written` and carries the variable that won. Without `cas` a
    /// second write of the same items leaves the same state, so it is
    /// retried; with one it is sent once (a second attempt would lose to the
    /// first).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a bad path or items.
    pub async fn put_in(
        &self,
        namespace: &str,
        path: &str,
        items: BTreeMap<String, String>,
        cas: Option<i64>,
    ) -> Result<PutVariableResponse> {
        let req = PutVariableRequest {
            namespace: namespace.to_string(),
            path: path.to_string(),
            items,
            cas,
        };
        self.client
            .write(cas.is_some(), req, |ch, r| async move {
                service(ch).put_variable(r).await
            })
            .await
    }

    /// Deletes a variable; with `cas`, only if its modify revision is `cas`,
    /// else the answer is not `deleted` and carries the variable that won.
    /// Retried without `cas` (deleting twice leaves it deleted), sent once
    /// with one.
    ///
    /// # Errors
    ///
    /// As any write.
    pub async fn delete(&self, path: &str, cas: Option<i64>) -> Result<DeleteVariableResponse> {
        let req = DeleteVariableRequest {
            namespace: self.client.namespace().to_string(),
            path: path.to_string(),
            cas,
        };
        self.client
            .write(cas.is_some(), req, |ch, r| async move {
                service(ch).delete_variable(r).await
            })
            .await
    }
}

//! The servers' API as one node sees it: the node's connections to the
//! api-gateways, with its id and secret, for what a task's prestart needs
//! beyond the alloc stream (its identities, the Variables and services its
//! templates read).

use caravan_proto::SignIdentitiesRequest;
use caravan_proto::node_client_service_client::NodeClientServiceClient;
use tonic::Status;

use crate::gateway::Gateway;

/// The gateways as this node; shared by its alloc runners.
#[derive(Debug, Clone)]
pub struct NodeApi {
    /// The node's connections.
    pub gateway: Gateway,
    /// The node's id.
    pub node_id: String,
    /// The node's secret, which node calls present.
    pub secret_id: String,
}

impl NodeApi {
    /// Runs `f` with a channel to each gateway in turn until one answers
    /// (or fails for a reason another gateway would share).
    pub async fn call<T, F, Fut>(&self, what: &str, f: F) -> Result<T, Status>
    where
        F: Fn(crate::gateway::Conn) -> Fut,
        Fut: std::future::Future<Output = Result<T, Status>>,
    {
        self.gateway
            .call(what, |i| f(self.gateway.bulk_conn(i)))
            .await
    }

    /// Has the servers sign the workload identities `names` (none: the
    /// default one) of `task` in `alloc_id`, which must run on this node:
    /// `(name, jwt)` pairs in the order asked.
    pub async fn sign_identities(
        &self,
        alloc_id: &str,
        task: &str,
        names: &[String],
    ) -> Result<Vec<(String, String)>, Status> {
        let response = self
            .call("SignIdentities", |conn| async move {
                let mut req = tonic::Request::new(SignIdentitiesRequest {
                    node_id: self.node_id.clone(),
                    secret_id: self.secret_id.clone(),
                    alloc_id: alloc_id.to_string(),
                    task: task.to_string(),
                    identities: names.to_vec(),
                });
                req.set_timeout(SIGN_TIMEOUT);
                NodeClientServiceClient::new(conn)
                    .sign_identities(req)
                    .await
            })
            .await?;
        Ok(response
            .into_inner()
            .identities
            .into_iter()
            .map(|s| (s.name, s.jwt))
            .collect())
    }
}

/// How long a gateway may take to sign a task's identities.
const SIGN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

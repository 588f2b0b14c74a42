//! The servers' API as one node sees it: the node's connections to the
//! api-gateways, with its id and secret, for what a task's prestart needs
//! beyond the alloc stream (its identities, the Variables and services its
//! templates read).

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
}

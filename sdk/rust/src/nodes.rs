//! Client nodes: read, list, their allocations, eligibility and drains.

use caravan_proto::node_service_client::NodeServiceClient;
use caravan_proto::{
    Allocation, DrainStrategy, EvaluateNodeRequest, GetNodeRequest, ListNodesRequest, Node,
    NodeAllocationsRequest, NodeUpdateResponse, PurgeNodeRequest, QueryOptions,
    SchedulingEligibility, UpdateDrainRequest, UpdateEligibilityRequest,
};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::transport::{GrpcChannel, MAX_MESSAGE_BYTES};

fn service(ch: GrpcChannel) -> NodeServiceClient<GrpcChannel> {
    NodeServiceClient::new(ch).max_decoding_message_size(MAX_MESSAGE_BYTES)
}

/// The node calls of a [`Client`]: [`Client::nodes`].
#[derive(Debug, Clone, Copy)]
pub struct Nodes<'a> {
    client: &'a Client,
}

impl<'a> Nodes<'a> {
    pub(crate) fn new(client: &'a Client) -> Self {
        Nodes { client }
    }

    /// One node.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when there is no such node.
    pub async fn get(&self, node_id: &str) -> Result<Node> {
        let req = GetNodeRequest {
            node_id: node_id.to_string(),
            options: self.client.options(""),
        };
        let resp = self
            .client
            .read(req, |ch, r| async move { service(ch).get_node(r).await })
            .await?;
        resp.node.ok_or_else(|| Error::missing("node", node_id))
    }

    /// The nodes whose ids start with `prefix`.
    ///
    /// # Errors
    ///
    /// As any read.
    pub async fn list(&self, prefix: &str) -> Result<Vec<Node>> {
        let req = ListNodesRequest {
            options: self.client.options(prefix),
        };
        let resp = self
            .client
            .read(req, |ch, r| async move { service(ch).list_nodes(r).await })
            .await?;
        Ok(resp.nodes)
    }

    /// The allocations of a node, of every namespace.
    ///
    /// # Errors
    ///
    /// As any read.
    pub async fn allocations(&self, node_id: &str) -> Result<Vec<Allocation>> {
        let req = NodeAllocationsRequest {
            node_id: node_id.to_string(),
            options: Some(QueryOptions {
                namespace: "*".into(),
                ..Default::default()
            }),
        };
        let resp = self
            .client
            .read(
                req,
                |ch, r| async move { service(ch).node_allocations(r).await },
            )
            .await?;
        Ok(resp.allocs)
    }

    /// Marks a node eligible or ineligible for new placements. Setting the
    /// same eligibility twice leaves it as once, so it is retried.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown node; [`Error::Conflict`] when
    /// making a draining node eligible.
    pub async fn set_eligibility(
        &self,
        node_id: &str,
        eligible: bool,
    ) -> Result<NodeUpdateResponse> {
        let eligibility = if eligible {
            SchedulingEligibility::Eligible
        } else {
            SchedulingEligibility::Ineligible
        };
        let req = UpdateEligibilityRequest {
            node_id: node_id.to_string(),
            eligibility: eligibility as i32,
        };
        self.client
            .read(req, |ch, r| async move {
                service(ch).update_eligibility(r).await
            })
            .await
    }

    /// Starts a drain (`Some`) or cancels one (`None`; with `mark_eligible`
    /// the node takes placements again). Sent once: a drain's deadline runs
    /// from when it starts, and each one creates evaluations.
    ///
    /// ```no_run
    /// # async fn demo(client: caravan_client::Client, node_id: &str) -> caravan_client::Result<()> {
    /// use caravan_client::proto::DrainStrategy;
    /// let hour = std::time::Duration::from_secs(3600).as_nanos() as i64;
    /// let drain = DrainStrategy { deadline_ns: hour, ..Default::default() };
    /// client.nodes().drain(node_id, Some(drain), false).await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown node.
    pub async fn drain(
        &self,
        node_id: &str,
        strategy: Option<DrainStrategy>,
        mark_eligible: bool,
    ) -> Result<NodeUpdateResponse> {
        let req = UpdateDrainRequest {
            node_id: node_id.to_string(),
            drain_strategy: strategy,
            mark_eligible,
        };
        self.client
            .write_once(
                req,
                |ch, r| async move { service(ch).update_drain(r).await },
            )
            .await
    }

    /// Creates evaluations for the node's jobs; sent once.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown node.
    pub async fn evaluate(&self, node_id: &str) -> Result<NodeUpdateResponse> {
        let req = EvaluateNodeRequest {
            node_id: node_id.to_string(),
        };
        self.client
            .write_once(
                req,
                |ch, r| async move { service(ch).evaluate_node(r).await },
            )
            .await
    }

    /// Removes a node; its jobs get evaluations. Sent once.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown node.
    pub async fn purge(&self, node_id: &str) -> Result<NodeUpdateResponse> {
        let req = PurgeNodeRequest {
            node_id: node_id.to_string(),
        };
        self.client
            .write_once(req, |ch, r| async move { service(ch).purge_node(r).await })
            .await
    }
}

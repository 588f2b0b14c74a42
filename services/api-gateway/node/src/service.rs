//! `NodeClientService` over gRPC: the API client nodes call, thin handlers
//! over [`crate`]. Every call carries the node's secret, checked by
//! [`identity`] before anything else is done for the node.

use std::pin::Pin;

use caravan_proto::node_client_service_server::NodeClientService;
use caravan_proto::{
    HeartbeatRequest, HeartbeatResponse, NodeAllocations, RegisterNodeRequest,
    RegisterNodeResponse, SignIdentitiesRequest, SignIdentitiesResponse, SignedIdentity,
    UpdateAllocationsRequest, UpdateAllocationsResponse, WatchAllocationsRequest,
};
use futures::{Stream, StreamExt};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::{NodeApi, identity, registration, updates, watch};
use caravan_gateway_core::error::GatewayError;

/// The node-facing API.
#[derive(Debug, Clone)]
pub struct NodeClientApi(pub NodeApi);

/// The stream of a node's allocation sets.
pub type AllocStream =
    Pin<Box<dyn Stream<Item = Result<NodeAllocations, Status>> + Send + 'static>>;

fn duration_ns(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

#[tonic::async_trait]
impl NodeClientService for NodeClientApi {
    async fn register_node(
        &self,
        request: Request<RegisterNodeRequest>,
    ) -> Result<Response<RegisterNodeResponse>, Status> {
        let req = request.into_inner();
        let node = req
            .node
            .ok_or_else(|| Status::from(GatewayError::field("node", "missing node")))?;
        let r = self.0.register(node, req.secret_id).await?;
        Ok(Response::new(RegisterNodeResponse {
            heartbeat_ttl_ns: duration_ns(r.heartbeat_ttl),
            revision: r.revision,
        }))
    }

    async fn heartbeat(
        &self,
        request: Request<HeartbeatRequest>,
    ) -> Result<Response<HeartbeatResponse>, Status> {
        let req = request.into_inner();
        let ttl = registration::heartbeat(&self.0, &req.node_id, &req.secret_id).await?;
        caravan_gateway_core::metrics::heartbeat_received();
        Ok(Response::new(HeartbeatResponse {
            heartbeat_ttl_ns: duration_ns(ttl),
        }))
    }

    type WatchAllocationsStream = AllocStream;

    async fn watch_allocations(
        &self,
        request: Request<WatchAllocationsRequest>,
    ) -> Result<Response<Self::WatchAllocationsStream>, Status> {
        let req = request.into_inner();
        watch::validate(&req.node_id)?;
        identity::authenticate(&self.0, &req.node_id, &req.secret_id).await?;
        let (tx, rx) = mpsc::channel(4);
        tokio::spawn(watch::stream_allocations(
            self.0.clone(),
            req.node_id,
            req.min_revision,
            tx,
        ));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx).map(Ok))))
    }

    async fn update_allocations(
        &self,
        request: Request<UpdateAllocationsRequest>,
    ) -> Result<Response<UpdateAllocationsResponse>, Status> {
        let req = request.into_inner();
        identity::authenticate(&self.0, &req.node_id, &req.secret_id).await?;
        let revision = updates::update_allocations(&self.0, &req.node_id, req.updates).await?;
        Ok(Response::new(UpdateAllocationsResponse { revision }))
    }

    async fn sign_identities(
        &self,
        request: Request<SignIdentitiesRequest>,
    ) -> Result<Response<SignIdentitiesResponse>, Status> {
        let req = request.into_inner();
        identity::authenticate(&self.0, &req.node_id, &req.secret_id).await?;
        let signed = caravan_gateway_core::identity::sign::sign_identities(
            &self.0,
            &req.node_id,
            &req.alloc_id,
            &req.task,
            &req.identities,
        )
        .await?;
        let identities = signed
            .into_iter()
            .map(|s| SignedIdentity {
                name: s.name,
                jwt: s.jwt,
            })
            .collect();
        Ok(Response::new(SignIdentitiesResponse { identities }))
    }
}

//! The heartbeat listener: `NodeClientService` on an address of its own
//! (`heartbeat_addr`), served by the heartbeat thread, taking heartbeats
//! only. A heartbeat there is accepted, decoded and answered on that thread,
//! so it waits neither for the gateway's main runtime (alloc streams, cache
//! updates, status writes, the HTTP API) nor behind bulk traffic on a
//! shared connection (Nomad's rule: heartbeats never queue behind bulk
//! traffic). Registrations, alloc streams and status updates belong on
//! `grpc_addr` and are refused here with a message that says so.

use caravan_proto::node_client_service_server::{NodeClientService, NodeClientServiceServer};
use caravan_proto::{
    HeartbeatRequest, HeartbeatResponse, RegisterNodeRequest, RegisterNodeResponse,
    UpdateAllocationsRequest, UpdateAllocationsResponse, WatchAllocationsRequest,
};
use tokio::net::TcpListener;
use tokio::runtime::Handle;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use crate::NodeApi;
use crate::service::{AllocStream, NodeClientApi};

/// `NodeClientService` with every method but `Heartbeat` refused.
#[derive(Debug, Clone)]
struct HeartbeatsOnly(NodeClientApi);

fn elsewhere(method: &str) -> Status {
    Status::unimplemented(format!(
        "{method}: this is the gateway's heartbeat listener (heartbeat_addr), which takes \
         heartbeats only; send it to the gateway's grpc_addr"
    ))
}

#[tonic::async_trait]
impl NodeClientService for HeartbeatsOnly {
    async fn register_node(
        &self,
        _request: Request<RegisterNodeRequest>,
    ) -> Result<Response<RegisterNodeResponse>, Status> {
        Err(elsewhere("RegisterNode"))
    }

    async fn heartbeat(
        &self,
        request: Request<HeartbeatRequest>,
    ) -> Result<Response<HeartbeatResponse>, Status> {
        self.0.heartbeat(request).await
    }

    type WatchAllocationsStream = AllocStream;

    async fn watch_allocations(
        &self,
        _request: Request<WatchAllocationsRequest>,
    ) -> Result<Response<AllocStream>, Status> {
        Err(elsewhere("WatchAllocations"))
    }

    async fn update_allocations(
        &self,
        _request: Request<UpdateAllocationsRequest>,
    ) -> Result<Response<UpdateAllocationsResponse>, Status> {
        Err(elsewhere("UpdateAllocations"))
    }

    async fn sign_identities(
        &self,
        _request: Request<caravan_proto::SignIdentitiesRequest>,
    ) -> Result<Response<caravan_proto::SignIdentitiesResponse>, Status> {
        Err(elsewhere("SignIdentities"))
    }
}

/// Serves heartbeats on `listener` from `runtime` (the heartbeat thread's)
/// until `shutdown`, with the same TLS, role check and drain as the main
/// gRPC listener.
pub fn serve(
    node: &NodeApi,
    runtime: &Handle,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> JoinHandle<anyhow::Result<()>> {
    let router = caravan_runtime::grpc::server().add_service(NodeClientServiceServer::new(
        HeartbeatsOnly(NodeClientApi(node.clone())),
    ));
    // A listener is polled by the reactor of the runtime it was registered
    // with: re-registered on the heartbeat thread's, so accepting a
    // connection waits for the main runtime no more than answering does.
    let listener = listener.into_std();
    runtime.spawn(async move {
        let listener = TcpListener::from_std(listener?)?;
        caravan_runtime::grpc::serve(router, listener, shutdown).await?;
        Ok(())
    })
}

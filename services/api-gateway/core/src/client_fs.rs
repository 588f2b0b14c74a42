//! What only the client node running an allocation can answer: its file
//! system, its resource usage and the node's, signals, in-place restarts and
//! garbage collection. The gateway finds the node in its cache and calls the
//! node's own API (`ClientNodeService`) at `Node.http_addr`.

use caravan_proto::client_node_service_client::ClientNodeServiceClient;
use caravan_proto::{
    AllocActionResponse, AllocFileChunk, AllocFileInfo, AllocPathRequest, AllocResourceUsage,
    AllocStatsRequest, GcAllocRequest, GcNodeRequest, GcNodeResponse, HostStats, HostStatsRequest,
    ListAllocFilesResponse, Node, NodeStatus, ReadAllocFileRequest, RestartAllocRequest,
    SignalAllocRequest,
};
use caravan_runtime::grpc::{channel_to, propagate_trace};
use caravan_runtime::tls::Role;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use crate::error::{GatewayError, Result};
use crate::gateway::Gateway;

type NodeClient = ClientNodeServiceClient<
    InterceptedService<
        Channel,
        fn(tonic::Request<()>) -> std::result::Result<tonic::Request<()>, tonic::Status>,
    >,
>;

/// A client of `node`'s own API (logs, files, stats, alloc actions).
pub fn dial(node: &Node) -> Result<NodeClient> {
    if node.http_addr.is_empty() {
        return Err(GatewayError::Unavailable(format!(
            "node {} does not serve a client API",
            node.id
        )));
    }
    let ch = channel_to(&node.http_addr, Role::Client).map_err(|e| {
        GatewayError::Unavailable(format!(
            "client node {} at {}: {e}",
            node.id, node.http_addr
        ))
    })?;
    let interceptor: fn(
        tonic::Request<()>,
    ) -> std::result::Result<tonic::Request<()>, tonic::Status> = propagate_trace;
    Ok(ClientNodeServiceClient::with_interceptor(ch, interceptor))
}

fn check_alloc_id(alloc_id: &str) -> Result<()> {
    if alloc_id.is_empty() {
        return Err(GatewayError::field(
            "alloc_id",
            "must provide a valid alloc id",
        ));
    }
    Ok(())
}

/// The node running `alloc_id`, dialled.
fn node_of_alloc(gw: &Gateway, alloc_id: &str) -> Result<NodeClient> {
    check_alloc_id(alloc_id)?;
    let snap = gw.cache.snapshot();
    let alloc = snap
        .alloc(alloc_id)
        .ok_or_else(|| GatewayError::NotFound(format!("Unknown allocation \"{alloc_id}\"")))?;
    let node = snap
        .node(&alloc.node_id)
        .ok_or_else(|| GatewayError::NotFound(format!("Unknown node \"{}\"", alloc.node_id)))?;
    dial(node)
}

/// The node `node_id`, or without one the first ready node serving a
/// client API (by id): a gateway is no client itself, so it answers for
/// the one node a single-node cluster has.
fn pick_node(gw: &Gateway, node_id: &str) -> Result<(String, NodeClient)> {
    let snap = gw.cache.snapshot();
    let node = if node_id.is_empty() {
        snap.nodes()
            .find(|n| n.status() == NodeStatus::Ready && !n.http_addr.is_empty())
            .ok_or_else(|| {
                GatewayError::field(
                    "node_id",
                    "no ready client node to answer; name one with node_id",
                )
            })?
    } else {
        snap.node(node_id)
            .ok_or_else(|| GatewayError::NotFound(format!("Unknown node \"{node_id}\"")))?
    };
    Ok((node.id.clone(), dial(node)?))
}

/// Lists a directory of an alloc dir.
pub async fn list(gw: &Gateway, req: AllocPathRequest) -> Result<ListAllocFilesResponse> {
    let mut node = node_of_alloc(gw, &req.alloc_id)?;
    let r = node.list_alloc_files(req).await;
    Ok(r.map_err(GatewayError::Upstream)?.into_inner())
}

/// Stats a file of an alloc dir.
pub async fn stat(gw: &Gateway, req: AllocPathRequest) -> Result<AllocFileInfo> {
    if req.path.is_empty() {
        return Err(GatewayError::field("path", "must provide a file name"));
    }
    let mut node = node_of_alloc(gw, &req.alloc_id)?;
    let r = node.stat_alloc_file(req).await;
    Ok(r.map_err(GatewayError::Upstream)?.into_inner())
}

/// Opens a read of a file of an alloc dir.
pub async fn read(
    gw: &Gateway,
    req: ReadAllocFileRequest,
) -> Result<tonic::Streaming<AllocFileChunk>> {
    if req.path.is_empty() {
        return Err(GatewayError::field("path", "must provide a file name"));
    }
    if req.offset < 0 {
        return Err(GatewayError::field("offset", "must not be negative"));
    }
    if req.limit < 0 {
        return Err(GatewayError::field("limit", "must not be negative"));
    }
    let mut node = node_of_alloc(gw, &req.alloc_id)?;
    let r = node.read_alloc_file(req).await;
    Ok(r.map_err(GatewayError::Upstream)?.into_inner())
}

/// A node's host stats; the node answering, with its stats.
pub async fn host_stats(gw: &Gateway, req: HostStatsRequest) -> Result<(String, HostStats)> {
    let (id, mut node) = pick_node(gw, &req.node_id)?;
    let r = node.get_host_stats(req).await;
    Ok((id, r.map_err(GatewayError::Upstream)?.into_inner()))
}

/// An alloc's resource usage.
pub async fn alloc_stats(gw: &Gateway, req: AllocStatsRequest) -> Result<AllocResourceUsage> {
    let mut node = node_of_alloc(gw, &req.alloc_id)?;
    let r = node.alloc_stats(req).await;
    Ok(r.map_err(GatewayError::Upstream)?.into_inner())
}

/// Signals an alloc's task(s).
pub async fn signal(gw: &Gateway, req: SignalAllocRequest) -> Result<AllocActionResponse> {
    let mut node = node_of_alloc(gw, &req.alloc_id)?;
    let r = node.signal_alloc(req).await;
    Ok(r.map_err(GatewayError::Upstream)?.into_inner())
}

/// Restarts an alloc's task(s) in place.
pub async fn restart(gw: &Gateway, req: RestartAllocRequest) -> Result<AllocActionResponse> {
    let mut node = node_of_alloc(gw, &req.alloc_id)?;
    let r = node.restart_alloc(req).await;
    Ok(r.map_err(GatewayError::Upstream)?.into_inner())
}

/// Garbage-collects a finished alloc on its node.
pub async fn gc_alloc(gw: &Gateway, req: GcAllocRequest) -> Result<AllocActionResponse> {
    let mut node = node_of_alloc(gw, &req.alloc_id)?;
    let r = node.gc_alloc(req).await;
    Ok(r.map_err(GatewayError::Upstream)?.into_inner())
}

/// Garbage-collects every finished alloc of a node.
pub async fn gc_node(gw: &Gateway, req: GcNodeRequest) -> Result<GcNodeResponse> {
    let (_, mut node) = pick_node(gw, &req.node_id)?;
    let r = node.gc_node(req).await;
    Ok(r.map_err(GatewayError::Upstream)?.into_inner())
}

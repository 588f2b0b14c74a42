//! The node-facing API of the api-gateways, with failover: calls go to one
//! gateway until it fails, then to the next in the list. Every node of the
//! process shares one [`Gateway`]: alloc streams and status batches spread
//! over a small pool of connections to each gateway, and registration and
//! heartbeats have connections of their own, driven by the process's
//! [`HeartbeatThread`], so a heartbeat never queues behind a large alloc set
//! or status batch, nor behind the work of the main runtime: a late
//! heartbeat gets a node marked down.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use caravan_proto::node_client_service_client::NodeClientServiceClient;
use caravan_proto::{
    HeartbeatRequest, HeartbeatResponse, Node, NodeAllocations, RegisterNodeRequest,
    RegisterNodeResponse, UpdateAllocationsRequest, UpdateAllocationsResponse,
    WatchAllocationsRequest,
};
use prost::Message;
use tokio::task::JoinHandle;
use tonic::GrpcMethod;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Code, Status, Streaming};

use crate::encoded::Encoded;
use crate::error::ClientError;
use crate::heartbeat_thread::HeartbeatThread;

/// Deadline of one unary call.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Deadline of one status report. A report the gateway admitted waits in
/// its writer's backlog and is written whether or not the node still
/// waits; a node that gave up at 10 s sent the same updates again, so a
/// backlog past 10 s (a busy store, a starved machine) was written twice
/// and grew with every resend. The gateway bounds the wait itself (room in
/// its backlog, `status_backlog_wait_ms`); meanwhile the node's newer
/// states gather at the node, merged one per allocation, and its
/// heartbeats go their own way.
const STATUS_CALL_TIMEOUT: Duration = Duration::from_secs(30);

type Interceptor = fn(tonic::Request<()>) -> Result<tonic::Request<()>, Status>;
/// A connection to one gateway, with trace propagation.
pub type Conn = InterceptedService<Channel, Interceptor>;
type Client = NodeClientServiceClient<Conn>;

/// The api-gateways the nodes of this process talk to; cheap to clone.
/// Clones made by [`Gateway::for_node`] share every connection and pick
/// their bulk connection by node.
#[derive(Debug, Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
    /// Which of each gateway's bulk connections this node's calls use.
    slot: usize,
}

#[derive(Debug)]
struct Inner {
    addrs: Vec<String>,
    /// Alloc streams and status updates: for each gateway, a pool of
    /// connections the nodes are spread over (an HTTP/2 connection caps the
    /// streams open at once).
    bulk: Vec<Vec<Channel>>,
    /// Registrations, for each gateway: driven by the heartbeat thread,
    /// apart from heartbeats so a burst of them delays no heartbeat.
    register: Vec<Channel>,
    /// Heartbeats, for each gateway: driven by the heartbeat thread.
    heartbeat: Vec<Channel>,
    current: AtomicUsize,
    /// Declared last: the connections above close before their runtime.
    heartbeats: HeartbeatThread,
}

/// Which connections a call uses.
#[derive(Clone, Copy, Debug)]
enum Lane {
    Bulk,
    Register,
    Heartbeat,
}

/// Whether another gateway (or a later try) may succeed where this failed.
pub fn is_retryable(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable
            | Code::Unknown
            | Code::DeadlineExceeded
            | Code::Cancelled
            | Code::ResourceExhausted
            | Code::Aborted
            | Code::Internal
    )
}

impl Gateway {
    /// Lazily connecting channels to every address: `pool` bulk
    /// connections to each (the simulated nodes of one process share them),
    /// and the registration and heartbeat connections, heartbeats to
    /// `heartbeat_addrs` (each gateway's heartbeat listener, in the order
    /// of `addrs`; empty sends them to `addrs`). Starts the heartbeat
    /// thread.
    pub fn pooled(
        addrs: &[String],
        heartbeat_addrs: &[String],
        pool: usize,
    ) -> Result<Gateway, ClientError> {
        if addrs.is_empty() {
            return Err(ClientError::invalid("servers", "no api-gateway address"));
        }
        let (heartbeat_addrs, heartbeat_key) =
            crate::config::heartbeat_targets(addrs, heartbeat_addrs)?;
        let connect = |addrs: &[String], key: &str| {
            addrs
                .iter()
                .map(|a| {
                    caravan_runtime::grpc::channel(a)
                        .map_err(|e| ClientError::invalid(key, format!("{a}: {e}")))
                })
                .collect::<Result<Vec<_>, _>>()
        };
        let mut bulk: Vec<Vec<Channel>> = vec![Vec::new(); addrs.len()];
        for _ in 0..pool.max(1) {
            for (channels, channel) in bulk.iter_mut().zip(connect(addrs, "servers")?) {
                channels.push(channel);
            }
        }
        let heartbeats = HeartbeatThread::start()?;
        // A channel's connection is driven by the runtime it is made in.
        let (register, heartbeat) = {
            let _on = heartbeats.handle().enter();
            (
                connect(addrs, "servers")?,
                connect(heartbeat_addrs, heartbeat_key)?,
            )
        };
        Ok(Gateway {
            inner: Arc::new(Inner {
                addrs: addrs.to_vec(),
                bulk,
                register,
                heartbeat,
                current: AtomicUsize::new(0),
                heartbeats,
            }),
            slot: 0,
        })
    }

    /// This gateway set for node `index` of the process: the same
    /// connections, with the node's share of the bulk pool.
    pub fn for_node(&self, index: usize) -> Gateway {
        Gateway {
            inner: Arc::clone(&self.inner),
            slot: index,
        }
    }

    /// Runs `future` (a node's registration and heartbeat loop) on the
    /// heartbeat thread, which drives the connections it calls on.
    pub fn spawn_heartbeats<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.inner.heartbeats.spawn(future)
    }

    /// The connection of `lane` to gateway `i`, with trace propagation.
    fn conn(&self, lane: Lane, i: usize) -> Conn {
        let ch = match lane {
            Lane::Bulk => {
                let pool = &self.inner.bulk[i];
                &pool[self.slot % pool.len()]
            }
            Lane::Register => &self.inner.register[i],
            Lane::Heartbeat => &self.inner.heartbeat[i],
        };
        InterceptedService::new(
            ch.clone(),
            caravan_runtime::grpc::propagate_trace as Interceptor,
        )
    }

    /// The bulk connection to gateway `i` (see [`Gateway::call`]).
    pub(crate) fn bulk_conn(&self, i: usize) -> Conn {
        self.conn(Lane::Bulk, i)
    }

    fn client(&self, lane: Lane, i: usize) -> Client {
        NodeClientServiceClient::new(self.conn(lane, i))
    }

    /// Tries each gateway once, starting with the one that worked last.
    pub(crate) async fn call<T, F, Fut>(&self, what: &str, f: F) -> Result<T, Status>
    where
        F: Fn(usize) -> Fut,
        Fut: std::future::Future<Output = Result<T, Status>>,
    {
        let n = self.inner.addrs.len();
        let start = self.inner.current.load(Ordering::Relaxed);
        let mut last = Status::unavailable("no api-gateway configured");
        for k in 0..n {
            let i = (start + k) % n;
            match f(i).await {
                Ok(v) => {
                    if k > 0 {
                        self.inner.current.store(i, Ordering::Relaxed);
                        tracing::info!(gateway = %self.inner.addrs[i], "failed over to api-gateway");
                    }
                    return Ok(v);
                }
                Err(status) if is_retryable(&status) => {
                    tracing::debug!(gateway = %self.inner.addrs[i], call = what, %status, "api-gateway call failed");
                    last = status;
                }
                Err(status) => return Err(status),
            }
        }
        // Start the next round with the gateway after the one that failed first.
        self.inner.current.store((start + 1) % n, Ordering::Relaxed);
        Err(last)
    }

    fn request<T>(msg: T) -> tonic::Request<T> {
        Self::request_within(msg, CALL_TIMEOUT)
    }

    fn request_within<T>(msg: T, timeout: Duration) -> tonic::Request<T> {
        let mut req = tonic::Request::new(msg);
        req.set_timeout(timeout);
        req
    }

    /// Registers (or re-registers) the node, proving it holds `secret_id`.
    pub async fn register(
        &self,
        node: &Node,
        secret_id: &str,
    ) -> Result<RegisterNodeResponse, Status> {
        self.call("RegisterNode", |i| {
            let mut c = self.client(Lane::Register, i);
            let req = Self::request(RegisterNodeRequest {
                node: Some(node.clone()),
                secret_id: secret_id.to_string(),
            });
            async move { c.register_node(req).await.map(tonic::Response::into_inner) }
        })
        .await
    }

    /// Keeps the node's heartbeat lease alive.
    pub async fn heartbeat(
        &self,
        node_id: &str,
        secret_id: &str,
    ) -> Result<HeartbeatResponse, Status> {
        self.call("Heartbeat", |i| {
            let mut c = self.client(Lane::Heartbeat, i);
            let req = Self::request(HeartbeatRequest {
                node_id: node_id.to_string(),
                secret_id: secret_id.to_string(),
            });
            async move { c.heartbeat(req).await.map(tonic::Response::into_inner) }
        })
        .await
    }

    /// Sends a batch of alloc status updates. The request is encoded once
    /// and the same bytes go to each gateway tried: a batch is the largest
    /// message a node sends, and the caller keeps it for a later retry.
    pub async fn update_allocations(
        &self,
        req: &UpdateAllocationsRequest,
    ) -> Result<UpdateAllocationsResponse, Status> {
        let encoded = Bytes::from(req.encode_to_vec());
        self.call("UpdateAllocations", |i| {
            let mut grpc = tonic::client::Grpc::new(self.conn(Lane::Bulk, i));
            let mut req = Self::request_within(encoded.clone(), STATUS_CALL_TIMEOUT);
            req.extensions_mut().insert(GrpcMethod::new(
                "caravan.v1.NodeClientService",
                "UpdateAllocations",
            ));
            async move {
                grpc.ready()
                    .await
                    .map_err(|e| Status::unavailable(format!("api-gateway not ready: {e}")))?;
                let path =
                    PathAndQuery::from_static("/caravan.v1.NodeClientService/UpdateAllocations");
                grpc.unary(req, path, Encoded::default())
                    .await
                    .map(tonic::Response::into_inner)
            }
        })
        .await
    }

    /// Opens the stream of the node's alloc sets.
    pub async fn watch_allocations(
        &self,
        node_id: &str,
        secret_id: &str,
        min_revision: i64,
    ) -> Result<Streaming<NodeAllocations>, Status> {
        self.call("WatchAllocations", |i| {
            let mut c = self.client(Lane::Bulk, i);
            let req = tonic::Request::new(WatchAllocationsRequest {
                node_id: node_id.to_string(),
                min_revision,
                secret_id: secret_id.to_string(),
            });
            async move {
                c.watch_allocations(req)
                    .await
                    .map(tonic::Response::into_inner)
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_codes() {
        assert!(is_retryable(&Status::unavailable("x")));
        assert!(!is_retryable(&Status::not_found("x")));
        assert!(!is_retryable(&Status::invalid_argument("x")));
        assert!(Gateway::pooled(&[], &[], 1).is_err());
    }

    #[tokio::test]
    async fn heartbeat_listeners_pair_with_servers() {
        let servers = ["127.0.0.1:1".to_string(), "127.0.0.1:2".to_string()];
        let err = Gateway::pooled(&servers, &servers[..1], 1).unwrap_err();
        assert!(err.to_string().starts_with("heartbeat_servers"), "{err}");
        assert!(Gateway::pooled(&servers, &servers, 1).is_ok());
    }
}

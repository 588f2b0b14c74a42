//! The node-facing API of the api-gateways, with failover: calls go to one
//! gateway until it fails, then to the next in the list. Registration and
//! heartbeats have connections of their own, so they never queue behind a
//! large alloc set or status batch on a busy connection: a late heartbeat
//! gets a node marked down.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use caravan_proto::node_client_service_client::NodeClientServiceClient;
use caravan_proto::{
    HeartbeatRequest, HeartbeatResponse, Node, NodeAllocations, RegisterNodeRequest,
    RegisterNodeResponse, UpdateAllocationsRequest, UpdateAllocationsResponse,
    WatchAllocationsRequest,
};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Code, Status, Streaming};

use crate::error::ClientError;

/// Deadline of one unary call.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

type Interceptor = fn(tonic::Request<()>) -> Result<tonic::Request<()>, Status>;
type Client = NodeClientServiceClient<InterceptedService<Channel, Interceptor>>;

/// A set of api-gateways the node talks to; cheap to clone.
#[derive(Debug, Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    addrs: Vec<String>,
    /// Alloc streams and status updates.
    bulk: Vec<Channel>,
    /// Registration and heartbeats.
    control: Vec<Channel>,
    current: AtomicUsize,
}

/// Which connections a call uses.
#[derive(Clone, Copy, Debug)]
enum Lane {
    Bulk,
    Control,
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
    /// Lazily connecting channels to every address.
    pub fn new(addrs: &[String]) -> Result<Gateway, ClientError> {
        if addrs.is_empty() {
            return Err(ClientError::invalid("servers", "no api-gateway address"));
        }
        let connect = || {
            addrs
                .iter()
                .map(|a| {
                    caravan_runtime::grpc::channel(a)
                        .map_err(|e| ClientError::invalid("servers", format!("{a}: {e}")))
                })
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(Gateway {
            inner: Arc::new(Inner {
                addrs: addrs.to_vec(),
                bulk: connect()?,
                control: connect()?,
                current: AtomicUsize::new(0),
            }),
        })
    }

    fn client(&self, lane: Lane, i: usize) -> Client {
        let channels = match lane {
            Lane::Bulk => &self.inner.bulk,
            Lane::Control => &self.inner.control,
        };
        let ch = channels[i % channels.len()].clone();
        NodeClientServiceClient::with_interceptor(
            ch,
            caravan_runtime::grpc::propagate_trace as Interceptor,
        )
    }

    /// Tries each gateway once, starting with the one that worked last.
    async fn call<T, F, Fut>(&self, lane: Lane, what: &str, f: F) -> Result<T, Status>
    where
        F: Fn(Client) -> Fut,
        Fut: std::future::Future<Output = Result<T, Status>>,
    {
        let n = self.inner.addrs.len();
        let start = self.inner.current.load(Ordering::Relaxed);
        let mut last = Status::unavailable("no api-gateway configured");
        for k in 0..n {
            let i = (start + k) % n;
            match f(self.client(lane, i)).await {
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
        let mut req = tonic::Request::new(msg);
        req.set_timeout(CALL_TIMEOUT);
        req
    }

    /// Registers (or re-registers) the node, proving it holds `secret_id`.
    pub async fn register(
        &self,
        node: &Node,
        secret_id: &str,
    ) -> Result<RegisterNodeResponse, Status> {
        self.call(Lane::Control, "RegisterNode", |mut c| {
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
        self.call(Lane::Control, "Heartbeat", |mut c| {
            let req = Self::request(HeartbeatRequest {
                node_id: node_id.to_string(),
                secret_id: secret_id.to_string(),
            });
            async move { c.heartbeat(req).await.map(tonic::Response::into_inner) }
        })
        .await
    }

    /// Sends a batch of alloc status updates.
    pub async fn update_allocations(
        &self,
        req: UpdateAllocationsRequest,
    ) -> Result<UpdateAllocationsResponse, Status> {
        self.call(Lane::Bulk, "UpdateAllocations", |mut c| {
            let req = Self::request(req.clone());
            async move {
                c.update_allocations(req)
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
        self.call(Lane::Bulk, "WatchAllocations", |mut c| {
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
        assert!(Gateway::new(&[]).is_err());
    }
}

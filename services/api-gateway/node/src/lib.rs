//! The api-gateway's node-facing API: node identity, registration and
//! heartbeats (and where their leases are renewed), the allocation stream,
//! and batched client status updates, served as `NodeClientService` on the
//! gateway's gRPC address ([`routes`]) and, for heartbeats alone, on its
//! heartbeat listener ([`heartbeat_listener`]). [`NodeApi`] holds the
//! domain core ([`Gateway`]) plus the handles only this surface uses.

pub mod feed;
pub mod heartbeat_listener;
pub mod heartbeats;
pub mod identity;
pub(crate) mod own_writes;
pub(crate) mod registered;
pub mod registration;
pub mod service;
pub mod status_writes;
pub mod updates;
pub mod watch;

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use feed::NodeAllocFeed;
use heartbeats::Heartbeats;
use status_writes::{StatusWrites, WriterContext};

use caravan_gateway_core::gateway::Gateway;
use caravan_proto::node_client_service_server::{self, NodeClientServiceServer};
use caravan_runtime::grpc::Router;

/// The node-facing API: the domain core, the feed that tells allocation
/// streams of changes, the batched status writer and where heartbeats renew
/// their leases. Cheap to clone; derefs to the core.
#[derive(Clone)]
pub struct NodeApi {
    gw: Gateway,
    pub(crate) feed: Arc<NodeAllocFeed>,
    pub(crate) status_writes: StatusWrites,
    pub(crate) heartbeats: Heartbeats,
}

impl std::fmt::Debug for NodeApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeApi")
            .field("gw", &self.gw)
            .finish_non_exhaustive()
    }
}

impl NodeApi {
    /// The node-facing API over `gw`, renewing heartbeat leases through
    /// `heartbeats`. Must be called inside a tokio runtime: it starts the
    /// feed's task and the status writer.
    pub fn new(gw: Gateway, heartbeats: Heartbeats) -> Self {
        let feed = Arc::new(NodeAllocFeed::default());
        tokio::spawn(feed.clone().run(gw.cache.clone(), gw.shutdown.clone()));
        let config = &gw.config;
        let status_writes = StatusWrites::start(
            WriterContext {
                store: gw.store.clone(),
                keys: gw.keys.clone(),
                cache: gw.cache.clone(),
                attempts: config.write_attempts,
                max_allocs: config.status_batch_max_allocs,
                linger: Duration::from_millis(config.status_batch_linger_ms),
                max_backlog: config.status_backlog_max_allocs,
                own: Default::default(),
            },
            gw.shutdown.clone(),
        );
        NodeApi {
            gw,
            feed,
            status_writes,
            heartbeats,
        }
    }
}

impl Deref for NodeApi {
    type Target = Gateway;

    fn deref(&self) -> &Gateway {
        &self.gw
    }
}

/// The node-facing gRPC service's name.
pub const SERVICE: &str = node_client_service_server::SERVICE_NAME;

/// `router` with `NodeClientService` over `node` added. Not behind the ACL
/// guard: every call carries the node's secret, checked first.
pub fn routes(router: Router, node: &NodeApi) -> Router {
    let limit = node.config.max_body_bytes;
    router.add_service(
        NodeClientServiceServer::new(service::NodeClientApi(node.clone()))
            .max_decoding_message_size(limit.max(16 * 1024 * 1024))
            .max_encoding_message_size(usize::MAX),
    )
}

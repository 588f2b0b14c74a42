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
pub(crate) mod permits;
pub(crate) mod registered;
pub mod registration;
pub(crate) mod registration_turns;
pub mod service;
pub mod status_writes;
pub mod updates;
pub mod watch;

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use feed::NodeAllocFeed;
use heartbeats::Heartbeats;
use registration_turns::RegistrationTurns;
use status_writes::{StatusWrites, WriterContext};

use caravan_gateway_core::gateway::Gateway;
use caravan_gateway_core::lane::Lane;
use caravan_proto::node_client_service_server::{self, NodeClientServiceServer};
use caravan_runtime::grpc::Router;
use tokio_util::task::AbortOnDropHandle;

/// The node-facing API: the domain core, the feed that tells allocation
/// streams of changes, the batched status writer and where heartbeats renew
/// their leases. Cheap to clone; derefs to the core.
#[derive(Clone)]
pub struct NodeApi {
    gw: Gateway,
    pub(crate) feed: Arc<NodeAllocFeed>,
    pub(crate) status_writes: StatusWrites,
    pub(crate) heartbeats: Heartbeats,
    /// Where node registrations run (see [`NodeApi::with_registrations`]);
    /// `None`: on the caller's runtime, over the gateway's store.
    registrations: Option<Lane>,
    /// Turns at registering (`max_registrations_in_flight`).
    registration_turns: RegistrationTurns,
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
                backlog_wait: Duration::from_millis(config.status_backlog_wait_ms),
                own: Default::default(),
            },
            gw.shutdown.clone(),
        );
        let registration_turns = RegistrationTurns::new(
            config.max_registrations_in_flight,
            Duration::from_millis(config.registration_wait_ms),
        );
        NodeApi {
            gw,
            feed,
            status_writes,
            heartbeats,
            registrations: None,
            registration_turns,
        }
    }

    /// Runs node registrations on `lane` (its thread and store connection):
    /// a registration is a node's first heartbeat, and like the later ones
    /// it must not queue behind bulk traffic. On a saturated gateway, a
    /// registration's four store round trips on the shared runtime and
    /// connection took longer than the client waits; each retry granted
    /// another lease while the node, never told, sent no heartbeat, until
    /// its lease ran out and the node was marked down.
    pub fn with_registrations(mut self, lane: Option<Lane>) -> Self {
        self.registrations = lane;
        self
    }

    /// Registers `node` ([`registration::register`]) in its turn (see
    /// [`registration_turns`]), on the registrations' lane when there is
    /// one. A caller that stops waiting cancels its registration there as
    /// it would here, and gives back its turn: a client that timed out
    /// sends it again, and finishing the abandoned one only lengthens the
    /// queue.
    pub(crate) async fn register(
        &self,
        node: caravan_proto::Node,
        secret: String,
    ) -> caravan_gateway_core::error::Result<registration::NodeRegistered> {
        let _turn = self.registration_turns.take().await?;
        let Some(lane) = &self.registrations else {
            return registration::register(self, self.gw.store.as_ref(), node, &secret).await;
        };
        let api = self.clone();
        let store = Arc::clone(lane.store());
        // Aborted when dropped: a caller that left cancels its registration.
        let task = AbortOnDropHandle::new(lane.handle().spawn(async move {
            registration::register(&api, store.as_ref(), node, &secret).await
        }));
        task.await.unwrap_or_else(|err| {
            Err(caravan_gateway_core::error::GatewayError::Unavailable(
                format!("the registrations' thread dropped a registration: {err}"),
            ))
        })
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

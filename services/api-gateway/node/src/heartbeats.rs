//! Where heartbeats renew their leases. On etcd, a lane of their own (a
//! thread running a runtime with a store connection of its own, see
//! [`caravan_gateway_core::lane`]): a renewal waits neither for the
//! gateway's runtime (busy with alloc streams, cache updates and status
//! writes) nor behind the status writes' transactions and the watch's
//! events on the shared connection. Nomad's rule: heartbeats never queue
//! behind bulk traffic.

use std::sync::Arc;

use caravan_runtime::service::StoreAccess;
use caravan_store::{LeaseId, Store, StoreError, with_member_timeout};
use tokio_util::sync::CancellationToken;

use caravan_gateway_core::config::GatewayConfig;
use caravan_gateway_core::lane::{Lane, ThreadRuntime};

/// The OS thread's name, as `top -H` and profilers show it.
const THREAD_NAME: &str = "caravan-heartbeats";

/// How long one etcd member may take to renew a heartbeat's lease before
/// the renewal moves on to another (doubled after each round of them all):
/// a member whose disk froze keeps its connections and answers nothing,
/// and a renewal that waited out the whole request timeout on it would let
/// every node's lease expire on the members that carry on.
const RENEWAL_PATIENCE: std::time::Duration = std::time::Duration::from_millis(500);

/// How a gateway renews heartbeat leases; cheap to clone.
#[derive(Clone)]
pub enum Heartbeats {
    /// On the caller's runtime, over this store.
    Shared(Arc<dyn Store>),
    /// On a lane of their own.
    Lane(Lane),
}

impl std::fmt::Debug for Heartbeats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Heartbeats")
            .field("own_thread", &matches!(self, Heartbeats::Lane(_)))
            .finish_non_exhaustive()
    }
}

impl Heartbeats {
    /// Renewals on the caller's runtime over `store` (the embedded store,
    /// which has no connection to wait on).
    pub fn shared(store: Arc<dyn Store>) -> Self {
        Heartbeats::Shared(store)
    }

    /// Renewals on a thread of their own, over a store connection that
    /// thread makes (with `connect`) and drives. `None` when `shutdown`
    /// fires before the store answers.
    async fn own_thread<F, Fut>(connect: F) -> anyhow::Result<Option<Self>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Option<Arc<dyn Store>>> + Send + 'static,
    {
        Ok(Lane::start(THREAD_NAME, connect)
            .await?
            .map(Heartbeats::Lane))
    }

    /// These renewals with a thread of their own (started here when they
    /// have none, on the embedded store), and that thread's runtime, where
    /// the heartbeat listener is served.
    pub fn with_thread(self) -> std::io::Result<(Self, tokio::runtime::Handle)> {
        let lane = match self {
            Heartbeats::Lane(lane) => lane,
            Heartbeats::Shared(store) => {
                Lane::on(Arc::new(ThreadRuntime::start(THREAD_NAME)?), store)
            }
        };
        let runtime = lane.handle().clone();
        Ok((Heartbeats::Lane(lane), runtime))
    }

    /// Renews `lease`; returns its TTL in seconds.
    pub async fn renew(&self, lease: LeaseId) -> Result<i64, StoreError> {
        let lane = match self {
            Heartbeats::Shared(store) => {
                return with_member_timeout(RENEWAL_PATIENCE, store.lease_keep_alive(lease)).await;
            }
            Heartbeats::Lane(lane) => lane,
        };
        let store = Arc::clone(lane.store());
        lane.handle()
            .spawn(async move {
                with_member_timeout(RENEWAL_PATIENCE, store.lease_keep_alive(lease)).await
            })
            .await
            .unwrap_or_else(|err| {
                Err(StoreError::Unavailable(format!(
                    "the heartbeat thread dropped a renewal: {err}"
                )))
            })
    }
}

/// The thread job registrations commit on.
const JOB_WRITES_THREAD: &str = "caravan-job-writes";

/// The thread node registrations run on.
const REGISTRATIONS_THREAD: &str = "caravan-node-registrations";

/// The thread the watch cache follows the store on.
const WATCH_CACHE_THREAD: &str = "caravan-watch-cache";

/// The gateway's store: the one it reads and writes, where heartbeats
/// renew their leases, and where job registrations commit.
pub struct GatewayStore {
    /// Reads and writes.
    pub store: Arc<dyn Store>,
    /// Lease renewals.
    pub heartbeats: Heartbeats,
    /// Job registrations' lane; `None`: they commit on the gateway's
    /// runtime and connection.
    pub job_writes: Option<Lane>,
    /// The watch cache's lane: its watch, decoding and applying run there;
    /// `None`: on the gateway's runtime and connection.
    pub watch_cache: Option<Lane>,
    /// Node registrations' lane (`NodeApi::with_registrations`); `None`:
    /// they run on the gateway's runtime and connection.
    pub registrations: Option<Lane>,
}

impl From<Arc<dyn Store>> for GatewayStore {
    /// One store for everything, heartbeats on the caller's runtime: for a
    /// gateway started in-process on a store it is handed (the embedded one).
    fn from(store: Arc<dyn Store>) -> Self {
        GatewayStore {
            heartbeats: Heartbeats::shared(Arc::clone(&store)),
            store,
            job_writes: None,
            watch_cache: None,
            registrations: None,
        }
    }
}

impl StoreAccess<GatewayConfig> for GatewayStore {
    const NEEDED: bool = true;

    fn check(config: &GatewayConfig) -> anyhow::Result<()> {
        config.store.validate()
    }

    async fn reach(config: &GatewayConfig, shutdown: &CancellationToken) -> Option<Self> {
        let store = config.store.connect_until(shutdown).await?;
        // Every lane's connection shares the shared one's choice of member:
        // a member that any request finds silent, or the watch lagging, is
        // left by every request of the gateway at once, rather than after a
        // request timeout of each connection's own. Heartbeats need it most:
        // an etcd 3.4 leader whose disk froze keeps answering lease renewals
        // from memory after the others elected a new leader (etcd issue
        // 15247), which expires the leases it was not told of; the status
        // writes and the watch see that member stall and take the renewals
        // with them when they leave.
        let sibling = || {
            let store = Arc::clone(&store);
            || async move { Some(store.with_own_connections().unwrap_or(store)) }
        };
        let heartbeats = match Heartbeats::own_thread(sibling()).await {
            Ok(Some(heartbeats)) => heartbeats,
            Ok(None) => return None,
            Err(err) => {
                // Heartbeats still work, on the shared runtime and connection.
                tracing::error!(%err, "cannot start the heartbeat thread; renewing leases on the shared runtime");
                Heartbeats::shared(Arc::clone(&store))
            }
        };
        let job_writes = optional_lane(
            JOB_WRITES_THREAD,
            sibling(),
            "registrations commit on the shared runtime",
        )
        .await?;
        let watch_cache = optional_lane(
            WATCH_CACHE_THREAD,
            sibling(),
            "the cache follows the store on the shared runtime",
        )
        .await?;
        let registrations = optional_lane(
            REGISTRATIONS_THREAD,
            sibling(),
            "node registrations run on the shared runtime",
        )
        .await?;
        Some(GatewayStore {
            store,
            heartbeats,
            job_writes,
            watch_cache,
            registrations,
        })
    }
}

/// A lane `name` over the connection `connect` makes: `Some(None)` when
/// its thread cannot start (logged, with what runs `instead`), `None` when
/// the gateway shuts down before the store answered.
async fn optional_lane<F, Fut>(
    name: &'static str,
    connect: F,
    instead: &str,
) -> Option<Option<Lane>>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Option<Arc<dyn Store>>> + Send + 'static,
{
    match Lane::start(name, connect).await {
        Ok(lane) => lane.map(Some),
        Err(err) => {
            tracing::error!(%err, thread = name, "cannot start the thread; {instead}");
            Some(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use caravan_store::EtcdStore;

    use super::*;

    async fn etcd() -> Arc<dyn Store> {
        Arc::new(
            EtcdStore::connect(&caravan_testkit::etcd_endpoints())
                .await
                .unwrap(),
        )
    }

    /// Keeps the one worker of the current runtime spinning until dropped.
    struct BusyWorker(Arc<AtomicBool>);

    impl BusyWorker {
        fn start() -> Self {
            let busy = Arc::new(AtomicBool::new(true));
            let spinning = Arc::new(AtomicBool::new(false));
            tokio::spawn({
                let (busy, spinning) = (Arc::clone(&busy), Arc::clone(&spinning));
                async move {
                    spinning.store(true, Ordering::Relaxed);
                    while busy.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                }
            });
            while !spinning.load(Ordering::Relaxed) {
                std::thread::yield_now();
            }
            BusyWorker(busy)
        }
    }

    impl Drop for BusyWorker {
        fn drop(&mut self) {
            self.0.store(false, Ordering::Relaxed);
        }
    }

    /// Runs `request` from a thread outside the runtime (whose timers and
    /// connections the busy worker holds up) and waits up to 5 s for it.
    fn from_outside<T: Send + 'static>(
        request: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, std::sync::mpsc::RecvTimeoutError> {
        let (tx, rx) = std::sync::mpsc::channel();
        let runtime = tokio::runtime::Handle::current();
        std::thread::spawn(move || {
            let _in = runtime.enter();
            let _ = tx.send(futures::executor::block_on(request));
        });
        rx.recv_timeout(Duration::from_secs(5))
    }

    /// With every worker of the gateway's runtime busy (a burst of alloc
    /// streams, cache updates and status writes on a saturated machine), a
    /// renewal still reaches etcd and comes back: the heartbeat thread
    /// sends it on a connection it drives. On the shared runtime's
    /// connection it would wait until the burst ends.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn renewals_complete_while_the_gateway_runtime_is_busy() {
        let shared = etcd().await;
        let lease = shared.lease_grant(30).await.unwrap();
        let heartbeats = Heartbeats::own_thread(|| async { Some(etcd().await) })
            .await
            .unwrap()
            .unwrap();
        heartbeats.renew(lease.id).await.unwrap();

        let busy = BusyWorker::start();
        let renewing = heartbeats.clone();
        let renewed = from_outside(async move { renewing.renew(lease.id).await });
        drop(busy);
        assert_eq!(
            renewed
                .expect("no renewal within 5 s while the runtime was busy")
                .unwrap(),
            30
        );
        shared.lease_revoke(lease.id).await.unwrap();
    }

    /// The same for a job registration's commit: on its lane, it reaches
    /// etcd and is answered while the gateway's runtime is busy.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn job_writes_commit_while_the_gateway_runtime_is_busy() {
        let shared = etcd().await;
        let prefix = caravan_testkit::unique_prefix("job-writes-lane");
        let cache = caravan_state::Informer::start(
            Arc::clone(&shared),
            caravan_state::Keyspace::new(&prefix),
            caravan_gateway_core::cache_config(),
        )
        .await
        .unwrap();
        let lane = Lane::start(JOB_WRITES_THREAD, || async { Some(etcd().await) })
            .await
            .unwrap()
            .unwrap();
        let gw = caravan_gateway_core::Gateway::new(
            Arc::clone(&shared),
            Arc::new(cache),
            GatewayConfig::default(),
            CancellationToken::new(),
            Some(lane),
        );
        let key = format!("{prefix}jobs/default/lane").into_bytes();

        let busy = BusyWorker::start();
        let writes = gw.job_writes.clone();
        let put =
            caravan_store::Txn::new().and_then(caravan_store::Op::put(key.clone(), b"x".to_vec()));
        let committed = from_outside(async move { writes.txn(put).await });
        drop(busy);
        let committed = committed
            .expect("no commit within 5 s while the runtime was busy")
            .unwrap();
        assert!(committed.succeeded);
        let stored = shared.get(&key).await.unwrap().unwrap();
        assert_eq!(stored.mod_revision, committed.revision);
        shared
            .delete(caravan_store::Range::prefix(prefix.as_bytes()))
            .await
            .unwrap();
    }

    /// The same for the watch cache: on its lane, it applies a write the
    /// store sends while the gateway's runtime is busy, so a registration's
    /// settle wait and the node feeds do not wait for the burst to end.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn the_watch_cache_keeps_up_while_the_gateway_runtime_is_busy() {
        let prefix = caravan_testkit::unique_prefix("watch-cache-lane");
        let lane = Lane::start(WATCH_CACHE_THREAD, || async { Some(etcd().await) })
            .await
            .unwrap()
            .unwrap();
        let cache = lane
            .informer(
                caravan_state::Keyspace::new(&prefix),
                caravan_gateway_core::cache_config(),
            )
            .await
            .unwrap();
        // The write goes out from a lane of its own too: the test's busy
        // runtime would hold up a connection it drives.
        let writer = Lane::start("test-writer", || async { Some(etcd().await) })
            .await
            .unwrap()
            .unwrap();
        let (store, key) = (
            Arc::clone(writer.store()),
            format!("{prefix}jobs/default/cached").into_bytes(),
        );
        let job = prost::Message::encode_to_vec(&caravan_proto::Job {
            id: "cached".into(),
            namespace: "default".into(),
            ..Default::default()
        });

        let busy = BusyWorker::start();
        let put = writer
            .handle()
            .spawn(async move { store.put(&key, &job, 0).await });
        let applied = from_outside(async move {
            let revision = put.await.unwrap().unwrap();
            let deadline = std::time::Instant::now() + Duration::from_secs(4);
            while cache.revision() < revision && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            (cache.revision(), revision)
        });
        drop(busy);
        let (reached, written) = applied.expect("no answer within 5 s while the runtime was busy");
        assert!(
            reached >= written,
            "the cache stayed at {reached} while the runtime was busy; the write is at {written}"
        );
        writer
            .store()
            .delete(caravan_store::Range::prefix(prefix.as_bytes()))
            .await
            .unwrap();
    }

    /// The same for a node registration: on its lane (thread and
    /// connection of its own, the cache on one too, as the gateway runs
    /// them), it is written and answered while the gateway's runtime is
    /// busy. On the shared runtime it would wait for the burst to end, and
    /// a client that gave up would register again on a fresh lease.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn node_registrations_complete_while_the_gateway_runtime_is_busy() {
        let prefix = caravan_testkit::unique_prefix("registrations-lane");
        let keys = caravan_state::Keyspace::new(&prefix);
        let lane = |name| Lane::start(name, || async { Some(etcd().await) });
        let cache_lane = lane(WATCH_CACHE_THREAD).await.unwrap().unwrap();
        let cache = cache_lane
            .informer(keys.clone(), caravan_gateway_core::cache_config())
            .await
            .unwrap();
        let registrations = lane(REGISTRATIONS_THREAD).await.unwrap().unwrap();
        let shared = etcd().await;
        let gw = caravan_gateway_core::Gateway::new(
            Arc::clone(&shared),
            Arc::new(cache),
            GatewayConfig::default(),
            CancellationToken::new(),
            None,
        );
        let api = crate::NodeApi::new(gw, Heartbeats::shared(Arc::clone(&shared)))
            .with_registrations(Some(registrations));
        let node = caravan_proto::Node {
            id: "n1".into(),
            name: "n1".into(),
            datacenter: "dc1".into(),
            ..Default::default()
        };

        let busy = BusyWorker::start();
        let registering = api.clone();
        let registered =
            from_outside(async move { registering.register(node, "s3cret".into()).await });
        drop(busy);
        let registered = registered
            .expect("no registration within 5 s while the runtime was busy")
            .unwrap();
        let stored = shared.get(&keys.node("n1")).await.unwrap().unwrap();
        assert_eq!(stored.mod_revision, registered.revision);
        let heartbeat = shared.get(&keys.heartbeat("n1")).await.unwrap().unwrap();
        assert_ne!(
            heartbeat.lease, 0,
            "the heartbeat key hangs on the node's lease"
        );
        shared.lease_revoke(heartbeat.lease).await.unwrap();
        shared
            .delete(caravan_store::Range::prefix(prefix.as_bytes()))
            .await
            .unwrap();
    }

    /// A registration whose caller left is cancelled on the lane, as it
    /// would be on the caller's runtime.
    #[tokio::test]
    async fn a_registration_whose_caller_left_is_aborted() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(30)).await;
            let _ = tx.send(());
            Ok::<(), caravan_gateway_core::error::GatewayError>(())
        }));
        drop(task);
        assert!(rx.await.is_err(), "the abandoned task ran on");
    }

    #[tokio::test]
    async fn renewals_on_the_thread_reach_the_store() {
        let store: Arc<dyn Store> = Arc::new(caravan_store::MemStore::new());
        let lease = store.lease_grant(30).await.unwrap();
        let connect = {
            let store = Arc::clone(&store);
            || async move { Some(store) }
        };
        let heartbeats = Heartbeats::own_thread(connect).await.unwrap().unwrap();
        assert_eq!(heartbeats.renew(lease.id).await.unwrap(), 30);
        store.lease_revoke(lease.id).await.unwrap();
        assert!(matches!(
            heartbeats.renew(lease.id).await,
            Err(StoreError::LeaseNotFound(_))
        ));
    }
}

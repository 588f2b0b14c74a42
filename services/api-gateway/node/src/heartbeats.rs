//! Where heartbeats renew their leases. On etcd, a thread of their own runs
//! a runtime with a store connection of its own: a renewal waits neither
//! for the gateway's runtime (busy with alloc streams, cache updates and
//! status writes) nor behind the status writes' transactions and the
//! watch's events on the shared connection. Nomad's rule: heartbeats never
//! queue behind bulk traffic.

use std::sync::Arc;

use caravan_runtime::service::StoreAccess;
use caravan_store::{LeaseId, Store, StoreError, with_member_timeout};
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

use caravan_gateway_core::config::GatewayConfig;

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
pub struct Heartbeats {
    store: Arc<dyn Store>,
    thread: Option<Arc<HeartbeatThread>>,
}

impl std::fmt::Debug for Heartbeats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Heartbeats")
            .field("own_thread", &self.thread.is_some())
            .finish_non_exhaustive()
    }
}

impl Heartbeats {
    /// Renewals on the caller's runtime over `store` (the embedded store,
    /// which has no connection to wait on).
    pub fn shared(store: Arc<dyn Store>) -> Self {
        Heartbeats {
            store,
            thread: None,
        }
    }

    /// Renewals on a thread of their own, over a store connection that
    /// thread makes (with `connect`) and drives. `None` when `shutdown`
    /// fires before the store answers.
    async fn own_thread<F, Fut>(connect: F) -> anyhow::Result<Option<Self>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Option<Arc<dyn Store>>> + Send + 'static,
    {
        let thread = HeartbeatThread::start()?;
        // Connected on the thread, so the connection's tasks run there.
        let Ok(Some(store)) = thread.runtime().spawn(connect()).await else {
            return Ok(None);
        };
        Ok(Some(Heartbeats {
            store,
            thread: Some(Arc::new(thread)),
        }))
    }

    /// These renewals with a thread of their own (started here when they
    /// have none, on the embedded store), and that thread's runtime, where
    /// the heartbeat listener is served.
    pub fn with_thread(self) -> std::io::Result<(Self, tokio::runtime::Handle)> {
        let thread = match self.thread {
            Some(thread) => thread,
            None => Arc::new(HeartbeatThread::start()?),
        };
        let runtime = thread.runtime().clone();
        let heartbeats = Heartbeats {
            store: self.store,
            thread: Some(thread),
        };
        Ok((heartbeats, runtime))
    }

    /// Renews `lease`; returns its TTL in seconds.
    pub async fn renew(&self, lease: LeaseId) -> Result<i64, StoreError> {
        let Some(thread) = &self.thread else {
            return with_member_timeout(RENEWAL_PATIENCE, self.store.lease_keep_alive(lease)).await;
        };
        let store = Arc::clone(&self.store);
        thread
            .runtime()
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

/// A one-thread runtime; stops (without waiting for its tasks) when dropped.
struct HeartbeatThread {
    runtime: Option<Runtime>,
}

impl HeartbeatThread {
    fn start() -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(THREAD_NAME)
            .enable_all()
            .build()?;
        Ok(HeartbeatThread {
            runtime: Some(runtime),
        })
    }

    fn runtime(&self) -> &tokio::runtime::Handle {
        match &self.runtime {
            Some(runtime) => runtime.handle(),
            None => unreachable!("the runtime is taken only by drop"),
        }
    }
}

impl Drop for HeartbeatThread {
    fn drop(&mut self) {
        // Dropped from async code, a runtime that waited for its tasks would
        // block the caller; its tasks are renewals whose callers are gone.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// The gateway's store: the one it reads and writes, and where heartbeats
/// renew their leases.
pub struct GatewayStore {
    /// Reads and writes.
    pub store: Arc<dyn Store>,
    /// Lease renewals.
    pub heartbeats: Heartbeats,
}

impl From<Arc<dyn Store>> for GatewayStore {
    /// One store for everything, heartbeats on the caller's runtime: for a
    /// gateway started in-process on a store it is handed (the embedded one).
    fn from(store: Arc<dyn Store>) -> Self {
        GatewayStore {
            heartbeats: Heartbeats::shared(Arc::clone(&store)),
            store,
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
        let (store_config, stop) = (config.store.clone(), shutdown.clone());
        let heartbeats =
            Heartbeats::own_thread(|| async move { store_config.connect_until(&stop).await }).await;
        match heartbeats {
            Ok(Some(heartbeats)) => Some(GatewayStore { store, heartbeats }),
            Ok(None) => None,
            Err(err) => {
                // Heartbeats still work, on the shared runtime and connection.
                tracing::error!(%err, "cannot start the heartbeat thread; renewing leases on the shared runtime");
                Some(GatewayStore::from(store))
            }
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
        // Renewed from a thread outside the runtime (whose timers and
        // connections the busy worker holds up), waited for here.
        let (tx, rx) = std::sync::mpsc::channel();
        let runtime = tokio::runtime::Handle::current();
        let renewing = heartbeats.clone();
        std::thread::spawn(move || {
            let _in = runtime.enter();
            let _ = tx.send(futures::executor::block_on(renewing.renew(lease.id)));
        });
        let renewed = rx.recv_timeout(Duration::from_secs(5));
        busy.store(false, Ordering::Relaxed);
        assert_eq!(
            renewed
                .expect("no renewal within 5 s while the runtime was busy")
                .unwrap(),
            30
        );
        shared.lease_revoke(lease.id).await.unwrap();
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

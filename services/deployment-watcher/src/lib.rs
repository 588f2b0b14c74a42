//! Caravan's deployment-watcher service: the leader-elected follower of
//! deployments.
//!
//! The leader finds every active deployment in its watch cache when it
//! wins, follows their changes and the health of their allocations through
//! snapshot diffs, and writes what follows, fenced by its leadership and
//! guarded by the mod revision of what it rewrites: the healthy and
//! unhealthy counts and the progress deadline of each group; the batched
//! `deployment-watcher` evaluations that let the scheduler place the next
//! `max_parallel` once allocations turn healthy; failure on an unhealthy
//! allocation or a passed progress deadline, with auto-revert registering
//! the latest stable version again; success with the version marked
//! stable; automatic promotion of healthy canaries. Operators steer through
//! `grpc` (promote, fail, pause and resume, allocation health). Standbys
//! keep their cache warm and answer with the leader's address.
//!
//! The decisions (`assess`, `steer`, `revert`, `evals`) are pure and take
//! the time as an argument; `term` and `operator` wire them to the cache and
//! the store through `writes` ([`DeploymentWriter`]).
//! [`DeploymentWatcherService`] is how a process or `caravan dev` runs it.

mod assess;
mod config;
mod error;
mod evals;
mod grpc;
mod operator;
mod revert;
mod steer;
mod term;
mod watcher;
mod writes;

use std::sync::Arc;

use caravan_proto::deployment_watcher_service_server::{self, DeploymentWatcherServiceServer};
use caravan_runtime::names::DEPLOYMENT_WATCHER;
use caravan_runtime::service::{Lead, Service, Serving, serve_cached_leader};
use caravan_store::{Leadership, Store};
use tokio_util::sync::CancellationToken;

pub use config::DeploymentWatcherConfig;
pub use error::WatcherError;
pub use writes::DeploymentWriter;

use crate::grpc::DeploymentWatcherGrpc;
use crate::watcher::DeploymentWatcher;

/// The deployment watcher as a service: serves gRPC, keeps the watch
/// cache, and campaigns for leadership, leading while it wins.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeploymentWatcherService;

impl Service for DeploymentWatcherService {
    const NAME: &'static str = DEPLOYMENT_WATCHER;
    const LEADER_ELECTED: bool = true;
    const GRPC_SERVICES: &'static [&'static str] =
        &[deployment_watcher_service_server::SERVICE_NAME];
    type Config = DeploymentWatcherConfig;
    type Store = Arc<dyn Store>;
    type Ready = ();

    async fn serve(
        self,
        config: DeploymentWatcherConfig,
        store: Arc<dyn Store>,
        serving: Serving<()>,
    ) -> anyhow::Result<()> {
        let prefix = config.store.prefix.clone();
        let ttl = config.leader_ttl();
        let config = Arc::new(config);
        serve_cached_leader(
            DEPLOYMENT_WATCHER,
            store,
            prefix,
            ttl,
            serving,
            |parts, router| {
                let address = parts.advertise_addr.clone();
                let watcher = Arc::new(DeploymentWatcher::new(
                    parts.store,
                    parts.cache,
                    config,
                    parts.election,
                    parts.advertise_addr,
                ));
                let grpc = DeploymentWatcherServiceServer::new(DeploymentWatcherGrpc::new(
                    Arc::clone(&watcher),
                ));
                parts
                    .local
                    .keep(caravan_runtime::local::register(&address, grpc.clone()));
                (watcher, router.add_service(grpc))
            },
        )
        .await
    }
}

impl Lead for DeploymentWatcher {
    async fn lead(&self, leadership: Arc<Leadership>, stop: CancellationToken) {
        DeploymentWatcher::lead(self, leadership, stop).await;
    }
}

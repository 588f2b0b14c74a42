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

use anyhow::Context;
use caravan_proto::deployment_watcher_service_server::{self, DeploymentWatcherServiceServer};
use caravan_runtime::leader::{Candidate, serve_and_lead};
use caravan_runtime::names::DEPLOYMENT_WATCHER;
use caravan_runtime::service::{Service, Serving};
use caravan_store::{Store, election_name};

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
        let informer = caravan_runtime::cache::start_lean(&store, &prefix).await?;
        let config = Arc::new(config);
        let watcher = Arc::new(DeploymentWatcher::new(
            Arc::clone(&store),
            Arc::clone(&informer),
            Arc::clone(&config),
            election_name(&prefix, DEPLOYMENT_WATCHER),
            serving.advertise_addr.clone(),
        ));
        let router = serving
            .router
            .add_service(DeploymentWatcherServiceServer::new(
                DeploymentWatcherGrpc::new(Arc::clone(&watcher)),
            ));
        tracing::info!(local = %serving.local_addr, advertise = %serving.advertise_addr, prefix, "deployment-watcher listening");
        serving.ready.report(());
        let candidate = Candidate {
            store,
            prefix,
            service: DEPLOYMENT_WATCHER,
            address: serving.advertise_addr,
            ttl: config.leader_ttl(),
        };
        let served = serve_and_lead(
            router,
            serving.listener,
            candidate,
            serving.shutdown,
            |leadership, term_stop| {
                let watcher = Arc::clone(&watcher);
                async move { watcher.lead(leadership, term_stop).await }
            },
        )
        .await;
        drop(watcher);
        caravan_runtime::cache::stop(informer).await;
        served.context("serving gRPC")
    }
}

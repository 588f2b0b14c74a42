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
//! [`grpc`] (promote, fail, pause and resume, allocation health). Standbys
//! keep their cache warm and answer with the leader's address.
//!
//! The decisions ([`assess`], [`steer`], [`revert`], [`evals`]) are pure
//! and take the time as an argument; [`term`] and [`operator`] wire them to
//! the cache and the store through [`writes`].

pub mod assess;
pub mod config;
pub mod error;
pub mod evals;
pub mod grpc;
pub mod operator;
pub mod revert;
pub mod steer;
pub mod term;
pub mod watcher;
pub mod writes;

use std::sync::Arc;

use anyhow::Context;
use caravan_proto::deployment_watcher_service_server::DeploymentWatcherServiceServer;
use caravan_runtime::grpc::advertise_addr;
use caravan_runtime::leader::{Candidate, serve_and_lead};
use caravan_state::{AllocDetail, Informer, InformerConfig, Keyspace};
use caravan_store::{Store, election_name};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use config::DeploymentWatcherConfig;
pub use error::{SERVICE, WatcherError};
pub use grpc::DeploymentWatcherGrpc;
pub use watcher::DeploymentWatcher;

/// Runs the deployment watcher on `config.grpc_addr` until `shutdown` fires.
pub async fn run(
    config: DeploymentWatcherConfig,
    store: Arc<dyn Store>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let listener = caravan_runtime::grpc::listen(&config.grpc_addr).await?;
    serve(config, store, listener, shutdown).await
}

/// Runs the deployment watcher on an already bound listener (port 0 in
/// tests and `caravan dev`) until `shutdown` fires: serves gRPC and health,
/// keeps the watch cache, and campaigns for leadership, leading while it
/// wins.
pub async fn serve(
    config: DeploymentWatcherConfig,
    store: Arc<dyn Store>,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let local = listener
        .local_addr()
        .context("reading the listener's address")?;
    let advertise = advertise_addr(&config.advertise_addr, local);
    let keyspace = Keyspace::new(&config.store.prefix);
    let informer = Arc::new(
        Informer::start(
            Arc::clone(&store),
            keyspace.clone(),
            // Allocations are only read here (a rewrite reads the store
            // first), so the cache keeps the lean copy.
            InformerConfig {
                alloc_detail: AllocDetail::Scheduling,
                ..InformerConfig::default()
            },
        )
        .await
        .context("starting the watch cache")?,
    );
    let config = Arc::new(config);
    let watcher = Arc::new(DeploymentWatcher::new(
        Arc::clone(&store),
        Arc::clone(&informer),
        Arc::clone(&config),
        election_name(keyspace.prefix(), SERVICE),
        advertise.clone(),
    ));

    let health = caravan_runtime::grpc::health_serving::<
        DeploymentWatcherServiceServer<DeploymentWatcherGrpc>,
    >()
    .await;
    let router = caravan_runtime::grpc::server()
        .add_service(health)
        .add_service(DeploymentWatcherServiceServer::new(
            DeploymentWatcherGrpc::new(Arc::clone(&watcher)),
        ));
    tracing::info!(%local, advertise = %advertise, prefix = keyspace.prefix(), "deployment-watcher listening");

    let candidate = Candidate {
        store: Arc::clone(&store),
        prefix: keyspace.prefix().to_string(),
        service: SERVICE,
        address: advertise,
        ttl: config.leader_ttl(),
    };
    let served = serve_and_lead(
        router,
        listener,
        candidate,
        shutdown,
        |leadership, term_stop| {
            let watcher = Arc::clone(&watcher);
            async move { watcher.lead(leadership, term_stop).await }
        },
    )
    .await;
    drop(watcher);
    if let Ok(informer) = Arc::try_unwrap(informer) {
        informer.shutdown().await;
    }
    served.context("serving gRPC")
}

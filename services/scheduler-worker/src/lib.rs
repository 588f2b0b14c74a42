//! Caravan's scheduler-worker service: any number of replicas, each with a
//! watch cache of the cluster and N worker loops that dequeue evaluations
//! from the eval broker's leader, run `caravan-scheduler` on a snapshot at
//! least as new as the eval, submit plans to the plan applier's leader, write
//! evals back through the broker with the delivery token, and ack or nack.

mod clients;
mod config;
mod error;
mod planner;
mod service;
mod state;
mod worker;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use caravan_proto::scheduler_worker_service_server::SchedulerWorkerServiceServer;
use caravan_runtime::grpc;
use caravan_runtime::leader::LeaderChannel;
use caravan_state::{AllocDetail, Informer, InformerConfig, Keyspace};
use caravan_store::Store;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use clients::{ApplierClient, BrokerClient, MAX_MESSAGE_BYTES, Submitted};
pub use config::SchedulerWorkerConfig;
pub use error::WorkerError;
pub use planner::WorkerPlanner;
pub use service::SchedulerWorkerGrpc;
pub use state::SnapshotState;
pub use worker::{WorkerCounters, WorkerPool};

/// Runs a scheduler-worker replica until `shutdown`: binds
/// `config.grpc_addr` and serves.
pub async fn run(
    config: SchedulerWorkerConfig,
    store: Arc<dyn Store>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let listener = grpc::listen(&config.grpc_addr).await?;
    serve(config, store, listener, shutdown, |_| {}).await
}

/// Runs a replica on a listener bound by the caller (port 0 in tests and
/// `caravan dev`); `started` receives the worker pool once the cache is
/// loaded, for callers that pause it or read its counters.
pub async fn serve(
    config: SchedulerWorkerConfig,
    store: Arc<dyn Store>,
    listener: TcpListener,
    shutdown: CancellationToken,
    started: impl FnOnce(Arc<WorkerPool>),
) -> anyhow::Result<()> {
    let local = listener.local_addr().context("grpc listener address")?;
    let prefix = config.store.prefix.clone();
    let timing = config.timing();
    let informer = Arc::new(
        Informer::start(
            store.clone(),
            Keyspace::new(&prefix),
            // Allocations are only read here (a rewrite reads the store
            // first), so the cache keeps the lean copy.
            InformerConfig {
                alloc_detail: AllocDetail::Scheduling,
                ..InformerConfig::default()
            },
        )
        .await
        .context("loading the cluster state")?,
    );
    let broker = BrokerClient::new(
        LeaderChannel::new(store.clone(), &prefix, "eval-broker"),
        timing.rpc,
        timing.leader_wait,
    );
    let applier = ApplierClient::new(
        LeaderChannel::new(store.clone(), &prefix, "plan-applier"),
        timing.rpc,
        timing.leader_wait,
    );
    let workers = config.worker_count();
    let pool = Arc::new(WorkerPool::new(
        broker,
        applier,
        informer.clone(),
        store,
        config.schedulers.clone(),
        timing,
        workers,
        config.paused,
        shutdown.clone(),
    ));
    started(pool.clone());
    let health = grpc::health_serving::<SchedulerWorkerServiceServer<SchedulerWorkerGrpc>>().await;
    let router = grpc::server()
        .add_service(health)
        .add_service(SchedulerWorkerServiceServer::new(SchedulerWorkerGrpc::new(
            pool.clone(),
        )));
    let advertised = if config.advertised_addr.is_empty() {
        local.to_string()
    } else {
        config.advertised_addr.clone()
    };
    tracing::info!(%local, %advertised, workers, schedulers = ?config.schedulers, "scheduler-worker serving");
    let server = tokio::spawn(grpc::serve(router, listener, shutdown.clone()));
    let loops: Vec<_> = (0..workers)
        .map(|i| tokio::spawn(pool.clone().run_worker(i)))
        .collect();
    shutdown.cancelled().await;
    // In-flight evals get a grace period, then their planner calls fail and
    // they are nacked.
    let grace = Duration::from_millis(config.shutdown_grace_ms);
    let abort = pool.abort.clone();
    let aborter = tokio::spawn(async move {
        tokio::time::sleep(grace).await;
        abort.cancel();
    });
    for l in loops {
        if let Err(err) = l.await {
            tracing::warn!(%err, "a worker loop failed");
        }
    }
    aborter.abort();
    server
        .await
        .context("grpc server task")?
        .context("grpc server")?;
    Ok(())
}

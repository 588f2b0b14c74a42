//! Caravan's scheduler-worker service: any number of replicas, each with a
//! watch cache of the cluster and N worker loops that dequeue evaluations
//! from the eval broker's leader, run `caravan-scheduler` on a snapshot at
//! least as new as the eval, submit plans to the plan applier's leader, write
//! evals back through the broker with the delivery token, and ack or nack.
//! [`SchedulerWorkerService`] is how a process or `caravan dev` runs it.

mod budget;
mod clients;
mod config;
mod error;
pub mod metrics;
mod planner;
mod service;
mod state;
mod worker;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use caravan_proto::scheduler_worker_service_server::{self, SchedulerWorkerServiceServer};
use caravan_runtime::grpc;
use caravan_runtime::leader::LeaderChannel;
use caravan_runtime::names::{EVAL_BROKER, PLAN_APPLIER, SCHEDULER_WORKER};
use caravan_runtime::service::{Service, Serving};
use caravan_store::Store;

pub use clients::{ApplierClient, BrokerClient, MAX_MESSAGE_BYTES, Submitted};
pub use config::SchedulerWorkerConfig;
pub use error::WorkerError;
pub use planner::WorkerPlanner;
pub use service::SchedulerWorkerGrpc;
pub use state::SnapshotState;
pub use worker::{WorkerCounters, WorkerPool};

/// A scheduler-worker replica as a service: loads the watch cache, runs its
/// worker loops and serves its control API until shutdown, then gives
/// in-flight evals their grace. Ready with its worker pool once the cache
/// is loaded (for callers that pause it or read its counters).
#[derive(Debug, Clone, Copy, Default)]
pub struct SchedulerWorkerService;

impl Service for SchedulerWorkerService {
    const NAME: &'static str = SCHEDULER_WORKER;
    const LEADER_ELECTED: bool = false;
    const GRPC_SERVICES: &'static [&'static str] = &[scheduler_worker_service_server::SERVICE_NAME];
    type Config = SchedulerWorkerConfig;
    type Store = Arc<dyn Store>;
    type Ready = Arc<WorkerPool>;

    async fn serve(
        self,
        config: SchedulerWorkerConfig,
        store: Arc<dyn Store>,
        serving: Serving<Arc<WorkerPool>>,
    ) -> anyhow::Result<()> {
        metrics::register();
        let prefix = config.store.prefix.clone();
        let timing = config.timing();
        // The first read of the state waits out an etcd outage; a SIGTERM
        // meanwhile stops the worker instead of waiting with it.
        let informer = tokio::select! {
            informer = caravan_runtime::cache::start_lean(&store, &prefix) => informer?,
            () = serving.shutdown.cancelled() => {
                tracing::info!("stopped before the state could be read");
                return Ok(());
            }
        };
        let broker = BrokerClient::new(
            LeaderChannel::new(store.clone(), &prefix, EVAL_BROKER),
            timing.rpc,
            timing.leader_wait,
        );
        let applier = ApplierClient::new(
            LeaderChannel::new(store.clone(), &prefix, PLAN_APPLIER),
            timing.rpc,
            timing.leader_wait,
        );
        let workers = config.worker_count();
        let large_evals = config.large_eval_count();
        let shutdown = serving.shutdown;
        let pool = Arc::new(WorkerPool::new(
            broker,
            applier,
            informer,
            store,
            config.schedulers.clone(),
            timing,
            workers,
            large_evals,
            config.paused,
            shutdown.clone(),
        ));
        let router = serving
            .router
            .add_service(SchedulerWorkerServiceServer::new(SchedulerWorkerGrpc::new(
                pool.clone(),
            )));
        let (local, advertise) = (serving.local_addr, serving.advertise_addr);
        tracing::info!(%local, %advertise, workers, large_evals, schedulers = ?config.schedulers, "scheduler-worker serving");
        serving.ready.report(pool.clone());
        let server = tokio::spawn(grpc::serve(router, serving.listener, shutdown.clone()));
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
}

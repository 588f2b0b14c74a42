//! Caravan's eval-broker service: the leader-elected queues of evaluations.
//!
//! The leader restores every non-terminal eval from the store when it wins,
//! follows new and changed evals through its watch cache, and hands them to
//! scheduler workers by priority with delivery tokens, one eval per job at a
//! time. It owns every later write of an eval (acks, nacks, the delivery
//! limit, failed follow-ups, blocked evals and their unblocking, and the
//! writes of workers checked against their token), and marks nodes down
//! when their heartbeat lease expires. The leader also launches periodic
//! jobs (`periodic`), collects garbage (`gc`) and enforces drain deadlines
//! (`drain`). Standbys keep their cache warm and answer with
//! the leader's address.
//!
//! The queue logic (`queues::EvalQueues`, `blocked::BlockedEvals`) and the
//! launch, collection and drain decisions are pure and driven by a clock
//! the caller passes in; `term`, `follow` and the runners wire them to the
//! store; `grpc` is the transport. [`EvalBrokerService`] is how a process
//! or `caravan dev` runs it.

mod blocked;
mod broker;
mod compact;
mod config;
mod drain;
mod error;
mod evals;
mod fan_out;
mod follow;
mod gc;
mod grpc;
mod heartbeat_loss;
pub mod metrics;
mod nodes;
mod periodic;
mod queues;
mod term;
#[cfg(test)]
mod testing;
mod writes;

use std::sync::Arc;

use caravan_proto::eval_broker_service_server::{self, EvalBrokerServiceServer};
use caravan_runtime::names::EVAL_BROKER;
use caravan_runtime::service::{Lead, Service, Serving, serve_cached_leader};
use caravan_store::{Leadership, Store};
use tokio_util::sync::CancellationToken;

pub use config::{EvalBrokerConfig, GcConfig};

use crate::broker::EvalBroker;
use crate::grpc::EvalBrokerGrpc;

/// The eval broker as a service: serves gRPC, keeps the watch cache, and
/// campaigns for leadership, leading while it wins.
#[derive(Debug, Clone, Copy, Default)]
pub struct EvalBrokerService;

impl Service for EvalBrokerService {
    const NAME: &'static str = EVAL_BROKER;
    const LEADER_ELECTED: bool = true;
    const GRPC_SERVICES: &'static [&'static str] = &[eval_broker_service_server::SERVICE_NAME];
    type Config = EvalBrokerConfig;
    type Store = Arc<dyn Store>;
    type Ready = ();

    async fn serve(
        self,
        config: EvalBrokerConfig,
        store: Arc<dyn Store>,
        serving: Serving<()>,
    ) -> anyhow::Result<()> {
        metrics::register();
        let prefix = config.store.prefix.clone();
        let ttl = config.leader_ttl();
        let config = Arc::new(config);
        serve_cached_leader(EVAL_BROKER, store, prefix, ttl, serving, |parts, router| {
            let address = parts.advertise_addr.clone();
            let broker = Arc::new(EvalBroker::new(
                parts.store,
                parts.cache,
                config,
                parts.election,
                parts.advertise_addr,
            ));
            let grpc = EvalBrokerServiceServer::new(EvalBrokerGrpc::new(Arc::clone(&broker)));
            parts
                .local
                .keep(caravan_runtime::local::register(&address, grpc.clone()));
            (broker, router.add_service(grpc))
        })
        .await
    }
}

impl Lead for EvalBroker {
    async fn lead(&self, leadership: Arc<Leadership>, stop: CancellationToken) {
        EvalBroker::lead(self, leadership, stop).await;
    }
}

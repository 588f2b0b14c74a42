//! Caravan's eval-broker service: the leader-elected queues of evaluations.
//!
//! The leader restores every non-terminal eval from the store when it wins,
//! follows new and changed evals through its watch cache, and hands them to
//! scheduler workers by priority with delivery tokens, one eval per job at a
//! time. It owns every later write of an eval (acks, nacks, the delivery
//! limit, failed follow-ups, blocked evals and their unblocking, and the
//! writes of workers checked against their token), and marks nodes down
//! when their heartbeat lease expires. The leader also launches periodic
//! jobs ([`periodic`]), collects garbage ([`gc`]) and enforces drain
//! deadlines ([`drain`]). Standbys keep their cache warm and answer with
//! the leader's address.
//!
//! The queue logic ([`queues::EvalQueues`], [`blocked::BlockedEvals`]) and
//! the launch, collection and drain decisions are pure and driven by a
//! clock the caller passes in; [`term`], [`follow`] and the runners wire
//! them to the store; [`grpc`] is the transport.

pub mod blocked;
pub mod broker;
pub mod config;
pub mod drain;
pub mod error;
pub mod evals;
pub mod follow;
pub mod gc;
pub mod grpc;
pub mod nodes;
pub mod periodic;
pub mod queues;
pub mod term;
#[cfg(test)]
mod testing;
pub mod writes;

use std::sync::Arc;

use anyhow::Context;
use caravan_proto::eval_broker_service_server::EvalBrokerServiceServer;
use caravan_runtime::grpc::advertise_addr;
use caravan_runtime::leader::{Candidate, serve_and_lead};
use caravan_state::{AllocDetail, Informer, InformerConfig, Keyspace};
use caravan_store::{Store, election_name};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use broker::EvalBroker;
pub use config::{EvalBrokerConfig, GcConfig};
pub use error::{BrokerError, SERVICE};
pub use grpc::EvalBrokerGrpc;

/// Runs the eval broker on `config.grpc_addr` until `shutdown` fires.
pub async fn run(
    config: EvalBrokerConfig,
    store: Arc<dyn Store>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let listener = caravan_runtime::grpc::listen(&config.grpc_addr).await?;
    serve(config, store, listener, shutdown).await
}

/// Runs the eval broker on an already bound listener (port 0 in tests and
/// `caravan dev`) until `shutdown` fires: serves gRPC and health, keeps the
/// watch cache, and campaigns for leadership, leading while it wins.
pub async fn serve(
    config: EvalBrokerConfig,
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
    let broker = Arc::new(EvalBroker::new(
        Arc::clone(&store),
        Arc::clone(&informer),
        Arc::clone(&config),
        election_name(keyspace.prefix(), SERVICE),
        advertise.clone(),
    ));

    let health =
        caravan_runtime::grpc::health_serving::<EvalBrokerServiceServer<EvalBrokerGrpc>>().await;
    let router = caravan_runtime::grpc::server()
        .add_service(health)
        .add_service(EvalBrokerServiceServer::new(EvalBrokerGrpc::new(
            Arc::clone(&broker),
        )));
    tracing::info!(%local, advertise = %advertise, prefix = keyspace.prefix(), "eval-broker listening");

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
            let broker = Arc::clone(&broker);
            async move { broker.lead(leadership, term_stop).await }
        },
    )
    .await;
    drop(broker);
    if let Ok(informer) = Arc::try_unwrap(informer) {
        informer.shutdown().await;
    }
    served.context("serving gRPC")
}

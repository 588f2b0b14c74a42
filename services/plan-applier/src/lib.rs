//! Caravan's plan-applier service: the one writer of placements.
//!
//! The leader (elected on `<prefix>/leader/plan-applier`, fenced) takes the
//! plans of the scheduler workers from a priority queue, checks each plan's
//! delivery token with the eval broker, refuses plans computed before the
//! last change to their job, verifies every node in parallel against its
//! watch cache plus the plans it committed that the cache has not seen yet,
//! and commits what fits in fenced transactions, split by node when over
//! budget. Verification of the next plan overlaps the commit of the
//! previous one. Followers answer UNAVAILABLE naming the leader.

mod applier;
mod commit;
mod config;
mod error;
mod mutation;
mod overlay;
mod queue;
mod service;
mod tokens;
mod verify;

#[cfg(test)]
mod fixtures;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use caravan_proto::plan_applier_service_server::PlanApplierServiceServer;
use caravan_runtime::grpc;
use caravan_runtime::leader::{Candidate, LeaderChannel, serve_and_lead};
use caravan_store::Store;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use applier::{ApplierStats, PlanApplier, Settings};
pub use config::PlanApplierConfig;
pub use error::ApplierError;
pub use service::PlanApplierGrpc;
pub use tokens::{BrokerTokens, TokenCheck};

/// The largest plan message accepted: a plan of thousands of allocations is
/// well over tonic's default of 4 MiB.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// Runs a plan-applier replica until `shutdown`: binds `config.grpc_addr`
/// and serves.
pub async fn run(
    config: PlanApplierConfig,
    store: Arc<dyn Store>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let listener = grpc::listen(&config.grpc_addr).await?;
    serve(config, store, listener, shutdown).await
}

/// Runs a plan-applier replica on a listener bound by the caller (port 0
/// in tests and `caravan dev`), checking tokens with the eval broker's leader.
pub async fn serve(
    config: PlanApplierConfig,
    store: Arc<dyn Store>,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let broker = LeaderChannel::new(store.clone(), &config.store.prefix, "eval-broker");
    let tokens = Arc::new(BrokerTokens::new(
        broker,
        Duration::from_millis(config.broker_timeout_ms),
    ));
    serve_with(config, store, listener, tokens, shutdown).await
}

/// Runs a replica with a given token check (tests use fakes).
pub async fn serve_with(
    config: PlanApplierConfig,
    store: Arc<dyn Store>,
    listener: TcpListener,
    tokens: Arc<dyn TokenCheck>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let local = listener.local_addr().context("grpc listener address")?;
    let address = grpc::advertise_addr(&config.advertised_addr, local);
    let prefix = config.store.prefix.clone();
    let applier = Arc::new(PlanApplier::new(
        store.clone(),
        &prefix,
        tokens,
        Settings::from(&config),
    ));
    let health = grpc::health_serving::<PlanApplierServiceServer<PlanApplierGrpc>>().await;
    let router = grpc::server().add_service(health).add_service(
        PlanApplierServiceServer::new(PlanApplierGrpc::new(applier.clone()))
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES),
    );
    tracing::info!(%local, %address, prefix, "plan-applier serving");
    let candidate = Candidate {
        store,
        prefix,
        service: error::SERVICE,
        address,
        ttl: Duration::from_millis(config.leader_ttl_ms.max(1_000)),
    };
    serve_and_lead(router, listener, candidate, shutdown, |leadership, stop| {
        let applier = applier.clone();
        async move { applier.lead(leadership, stop).await }
    })
    .await
    .context("grpc server")?;
    Ok(())
}

//! Caravan's api-gateway: the public gRPC API, the Nomad-compatible HTTP
//! API, job and node writes, node heartbeats and allocation sync. Stateless:
//! it reads from a watch cache of the store and writes to the store
//! directly, so any number of replicas can run side by side.
//!
//! The domain modules ([`jobs`], [`evals`], [`allocs`], [`nodes`],
//! [`deployments`], [`broker`], [`client`], [`status`], [`logs`], [`operator`],
//! [`query`], [`events`]) hold the logic; [`grpc`] and [`http`] are thin transports over them.

pub mod allocs;
pub mod broker;
pub mod client;
pub mod config;
pub mod deployments;
pub mod error;
pub mod evals;
pub mod events;
pub mod gateway;
pub mod grpc;
pub mod http;
pub mod jobs;
pub mod logs;
pub mod nodes;
pub mod operator;
pub mod query;
pub mod status;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use caravan_state::{Informer, InformerConfig, Keyspace};
use caravan_store::Store;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

pub use config::GatewayConfig;
pub use error::GatewayError;
pub use gateway::Gateway;

/// The addresses a running gateway listens on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    /// The gRPC API.
    pub grpc: SocketAddr,
    /// The HTTP API.
    pub http: SocketAddr,
}

/// Runs the gateway until `shutdown` is cancelled.
pub async fn run(
    config: GatewayConfig,
    store: Arc<dyn Store>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    run_with(config, store, shutdown, None).await
}

/// Runs the gateway, reporting the bound addresses on `ready` once both
/// listeners are up and the watch cache holds the first list (so port 0
/// works for tests and `caravan dev`).
pub async fn run_with(
    config: GatewayConfig,
    store: Arc<dyn Store>,
    shutdown: CancellationToken,
    ready: Option<oneshot::Sender<Bound>>,
) -> anyhow::Result<()> {
    let (grpc_listener, grpc_addr) = caravan_runtime::grpc::bind(&config.grpc_addr)
        .await
        .with_context(|| format!("binding grpc_addr {}", config.grpc_addr))?;
    let (http_listener, http_addr) = caravan_runtime::grpc::bind(&config.http_addr)
        .await
        .with_context(|| format!("binding http_addr {}", config.http_addr))?;
    let cache = Informer::start(
        store.clone(),
        Keyspace::new(&config.store.prefix),
        InformerConfig::default(),
    )
    .await
    .context("starting the watch cache")?;
    let bound = Bound {
        grpc: grpc_addr,
        http: http_addr,
    };
    let gw = Gateway::new(store, Arc::new(cache), config, shutdown.clone());
    let grpc_router = grpc::router(&gw).await;
    let http_router = http::router(gw.clone(), bound);
    tracing::info!(grpc = %grpc_addr, http = %http_addr, prefix = gw.keys().prefix(), "api-gateway serving");
    if let Some(ready) = ready {
        // The caller may have stopped waiting; the gateway serves regardless.
        let _ = ready.send(bound);
    }
    let grpc_serve = caravan_runtime::grpc::serve(grpc_router, grpc_listener, shutdown.clone());
    let http_serve = axum::serve(http_listener, http_router)
        .with_graceful_shutdown(shutdown.clone().cancelled_owned())
        .into_future();
    // Requests in flight (a write waiting on an unreachable etcd, a blocking
    // query) get the same drain as gRPC's, then are dropped.
    let http_name = format!("HTTP server on {http_addr}");
    let http_serve = caravan_runtime::shutdown::within_grace(
        &http_name,
        http_serve,
        &shutdown,
        caravan_runtime::grpc::DRAIN_TIMEOUT,
    );
    let (grpc_result, http_result) = tokio::join!(grpc_serve, http_serve);
    grpc_result.context("serving gRPC")?;
    http_result.unwrap_or(Ok(())).context("serving HTTP")?;
    Ok(())
}

//! Caravan's api-gateway: the public gRPC API, the Nomad-compatible HTTP
//! API, job and node writes, node heartbeats and allocation sync. Stateless:
//! it reads from a watch cache of the store and writes to the store
//! directly, so any number of replicas can run side by side.
//!
//! The domain modules (`jobs`, `evals`, `allocs`, `nodes`, `deployments`,
//! `broker`, `client`, `status`, `logs`, `operator`, `query`, `events`,
//! `vars`) hold the logic; `grpc` and `http` are thin transports over them.
//! [`ApiGatewayService`] is how a process or `caravan dev` runs it.

pub use caravan_gateway_core::metrics;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use caravan_runtime::names::API_GATEWAY;
use caravan_runtime::service::{Readiness, Service, Serving};
use caravan_state::{Informer, Keyspace};
use futures::future::BoxFuture;
use tokio::net::TcpListener;
use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

pub use caravan_gateway_core::Bound;
pub use caravan_gateway_core::acl::need::Need as AclNeed;
pub use caravan_gateway_core::acl::ops::{self as acl_ops, Op as AclOp};
pub use caravan_gateway_core::config::{AclConfig, GatewayConfig};
pub use caravan_gateway_core::vars::VariableKey;
pub use caravan_gateway_grpc::acl_guard::{METHODS as ACL_METHODS, MethodRule as AclMethod};
pub use caravan_gateway_http::acl_routes::{RULES as ACL_ROUTES, Rule as AclRule};
pub use caravan_gateway_node::heartbeats::GatewayStore;

use caravan_gateway_core::gateway::Gateway;
use caravan_gateway_core::lane::{Lane, ThreadRuntime};
use caravan_gateway_core::store_health;
use caravan_gateway_node::NodeApi;
use caravan_gateway_node::heartbeats::Heartbeats;

/// Every gRPC service the gateway serves: the public ones and the
/// node-facing one.
const GRPC_SERVICES: [&str; caravan_gateway_grpc::SERVICES.len() + 1] = {
    let public = caravan_gateway_grpc::SERVICES;
    let mut all = [caravan_gateway_node::SERVICE; caravan_gateway_grpc::SERVICES.len() + 1];
    let mut i = 0;
    while i < public.len() {
        all[i] = public[i];
        i += 1;
    }
    all
};

/// The gateway as a service: the gRPC API on `grpc_addr` and the HTTP API
/// on `http_addr`, over a watch cache of the store. Ready (with the
/// [`Bound`] addresses, so port 0 works) once both listen and the cache
/// holds the first list.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiGatewayService;

impl Service for ApiGatewayService {
    const NAME: &'static str = API_GATEWAY;
    const LEADER_ELECTED: bool = false;
    const GRPC_SERVICES: &'static [&'static str] = &GRPC_SERVICES;
    type Config = GatewayConfig;
    type Store = GatewayStore;
    type Ready = Bound;

    async fn serve(
        self,
        config: GatewayConfig,
        store: GatewayStore,
        serving: Serving<Bound>,
    ) -> anyhow::Result<()> {
        let variables_key = prepare(&config)?;
        let GatewayStore {
            store,
            heartbeats,
            job_writes,
            watch_cache,
            registrations,
        } = store;
        let listeners = Listeners::bind(&config, heartbeats).await?;
        // Kept until the gateway stops: the cache's task runs on its thread.
        let (cache, _watch_cache_lane) = start_cache(&config, &store, watch_cache).await?;
        let bound = listeners.bound(serving.local_addr);
        let shutdown = serving.shutdown;
        let gw = Gateway::new(store, Arc::new(cache), config, shutdown.clone(), job_writes)
            .with_variables_key(variables_key);
        let node = NodeApi::new(gw.clone(), listeners.heartbeats).with_registrations(registrations);
        let grpc_router =
            caravan_gateway_node::routes(caravan_gateway_grpc::routes(serving.router, &gw), &node);
        let http_router = caravan_gateway_http::router(gw.clone(), bound);
        let heartbeat_serve = serve_heartbeats(&node, listeners.heartbeat);
        announce(&gw, bound, serving.ready);
        let grpc_serve =
            caravan_runtime::grpc::serve(grpc_router, serving.listener, shutdown.clone());
        let http_serve = serve_http(&gw, listeners.http, bound.http, http_router);
        let (grpc_result, http_result, heartbeat_result) =
            tokio::join!(grpc_serve, http_serve, heartbeat_serve);
        grpc_result.context("serving gRPC")?;
        http_result?;
        heartbeat_result
    }
}

/// The gateway's watch cache of the store, following it on `lane` when
/// there is one (its watch, decoding and applying then wait for neither the
/// gateway's runtime nor the shared connection, so a registration's settle
/// wait and the node feeds see a write as soon as the store sends it), and
/// the lane, which must outlive the cache.
async fn start_cache(
    config: &GatewayConfig,
    store: &Arc<dyn caravan_store::Store>,
    lane: Option<Lane>,
) -> anyhow::Result<(Informer, Option<Lane>)> {
    let keyspace = Keyspace::new(&config.store.prefix);
    let cache_config = caravan_gateway_core::cache_config();
    let cache = match &lane {
        None => Informer::start(Arc::clone(store), keyspace, cache_config).await,
        Some(lane) => lane.informer(keyspace, cache_config).await,
    };
    Ok((cache.context("starting the watch cache")?, lane))
}

/// Registers the gateway's metrics and reads its variables key, refusing
/// to serve plaintext when HTTPS was asked for.
fn prepare(config: &GatewayConfig) -> anyhow::Result<Option<VariableKey>> {
    caravan_gateway_core::metrics::register();
    store_health::register();
    let variables_key = VariableKey::configured(&config.variables_key, &config.variables_key_file)
        .map_err(anyhow::Error::msg)?;
    // Never plaintext when HTTPS was asked for: the process's TLS is
    // installed at start (`tls::install`) from this same section.
    anyhow::ensure!(
        !config.tls.http || caravan_runtime::tls::https().is_some(),
        "tls.http: set, but this process's TLS was installed without it"
    );
    Ok(variables_key)
}

/// The listeners the gateway binds besides the bootstrap's gRPC one.
struct Listeners {
    /// The HTTP API's listener.
    http: TcpListener,
    /// Its address.
    http_addr: SocketAddr,
    /// The heartbeat listener, when `heartbeat_addr` is set.
    heartbeat: Option<HeartbeatListener>,
    /// Lease renewals, on the heartbeat thread when there is a heartbeat
    /// listener.
    heartbeats: Heartbeats,
}

/// The heartbeat listener and the runtime (its own thread) that serves it.
struct HeartbeatListener {
    listener: TcpListener,
    addr: SocketAddr,
    runtime: Handle,
}

impl Listeners {
    /// Binds `http_addr`, then `heartbeat_addr` (when set) with the thread
    /// that serves it and renews leases.
    async fn bind(config: &GatewayConfig, mut heartbeats: Heartbeats) -> anyhow::Result<Self> {
        let (http, http_addr) = caravan_runtime::grpc::bind_http(&config.http_addr)
            .await
            .with_context(|| format!("binding http_addr {}", config.http_addr))?;
        let heartbeat = match config.heartbeat_addr.as_str() {
            "" => None,
            addr => {
                let (listener, bound) = caravan_runtime::grpc::bind(addr)
                    .await
                    .with_context(|| format!("binding heartbeat_addr {addr}"))?;
                let runtime;
                (heartbeats, runtime) = heartbeats
                    .with_thread()
                    .context("starting the heartbeat thread for heartbeat_addr")?;
                Some(HeartbeatListener {
                    listener,
                    addr: bound,
                    runtime,
                })
            }
        };
        Ok(Listeners {
            http,
            http_addr,
            heartbeat,
            heartbeats,
        })
    }

    /// The addresses bound, with the bootstrap's gRPC one.
    fn bound(&self, grpc: SocketAddr) -> Bound {
        Bound {
            grpc,
            http: self.http_addr,
            heartbeat: self.heartbeat.as_ref().map(|h| h.addr),
        }
    }
}

/// Logs what the gateway serves where, and reports it ready with `bound`.
fn announce(gw: &Gateway, bound: Bound, ready: Readiness<Bound>) {
    let https = caravan_runtime::tls::https().is_some();
    tracing::info!(grpc = %bound.grpc, http = %bound.http, heartbeat = ?bound.heartbeat, https, prefix = gw.keys().prefix(), "api-gateway serving");
    ready.report(bound);
}

/// Serves heartbeats on the heartbeat listener's thread (started now) until
/// the gateway shuts down; without a heartbeat listener, nothing.
fn serve_heartbeats(
    node: &NodeApi,
    listener: Option<HeartbeatListener>,
) -> impl Future<Output = anyhow::Result<()>> + use<> {
    let serving = listener.map(|h| {
        caravan_gateway_node::heartbeat_listener::serve(
            node,
            &h.runtime,
            h.listener,
            node.shutdown.clone(),
        )
    });
    async move {
        match serving {
            Some(serving) => serving
                .await
                .context("the heartbeat listener's thread stopped")?
                .context("serving heartbeats"),
            None => Ok(()),
        }
    }
}

/// The threads the HTTP API is served on.
const HTTP_THREAD: &str = "caravan-http";

/// Serves the HTTP API until the gateway shuts down: HTTPS with `tls.http`
/// (the process's certificate, reloaded with it). Requests in flight (a
/// write waiting on an unreachable etcd, a blocking query) get the same
/// drain as gRPC's, then are dropped.
///
/// On a runtime of its own (`caravan-http`, as many threads as the main
/// runtime has), with the listener registered there: an operator's request
/// (a `job run`, a blocking query, the UI) is polled in a queue of
/// operators' requests, not behind thousands of nodes' alloc streams and
/// status reports on a loaded machine, and each of its steps (reading the
/// body, the commit's answer, the cache catching up, the response) waits
/// for that queue only.
fn serve_http(
    gw: &Gateway,
    listener: TcpListener,
    addr: SocketAddr,
    router: axum::Router,
) -> impl Future<Output = anyhow::Result<()>> + use<> {
    let shutdown = gw.shutdown.clone();
    let workers = Handle::current().metrics().num_workers();
    let thread = ThreadRuntime::with_workers(HTTP_THREAD, workers);
    let listener = listener.into_std();
    async move {
        let thread = thread.with_context(|| format!("starting the {HTTP_THREAD} threads"))?;
        let serving = thread.handle().spawn(async move {
            // A listener is polled by the reactor of the runtime it was
            // registered with: registered again on the HTTP threads'.
            let listener = TcpListener::from_std(listener?)?;
            serve_http_on(listener, addr, router, shutdown).await
        });
        let result = serving
            .await
            .with_context(|| format!("the {HTTP_THREAD} threads stopped"))?;
        // Dropped only now: the threads run what `serving` awaited.
        drop(thread);
        result
    }
}

/// [`serve_http`] on the runtime it is called from.
async fn serve_http_on(
    listener: TcpListener,
    addr: SocketAddr,
    router: axum::Router,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let stop = shutdown.clone().cancelled_owned();
    let serve: BoxFuture<'static, std::io::Result<()>> = match caravan_runtime::tls::https() {
        Some(tls) => {
            let listener = caravan_runtime::tls::TlsIncoming::new(listener, tls.https_config());
            Box::pin(
                axum::serve(listener, router)
                    .with_graceful_shutdown(stop)
                    .into_future(),
            )
        }
        None => Box::pin(
            axum::serve(listener, router)
                .with_graceful_shutdown(stop)
                .into_future(),
        ),
    };
    let name = format!("HTTP server on {addr}");
    caravan_runtime::shutdown::within_grace(
        &name,
        serve,
        &shutdown,
        caravan_runtime::grpc::DRAIN_TIMEOUT,
    )
    .await
    .unwrap_or(Ok(()))
    .context("serving HTTP")
}

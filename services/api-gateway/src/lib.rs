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

use std::sync::Arc;

use anyhow::Context;
use caravan_runtime::names::API_GATEWAY;
use caravan_runtime::service::{Service, Serving};
use caravan_state::{Informer, Keyspace};
use futures::future::BoxFuture;

pub use caravan_gateway_core::Bound;
pub use caravan_gateway_core::acl::need::Need as AclNeed;
pub use caravan_gateway_core::acl::ops::{self as acl_ops, Op as AclOp};
pub use caravan_gateway_core::config::{AclConfig, GatewayConfig};
pub use caravan_gateway_core::vars::VariableKey;
pub use caravan_gateway_grpc::acl_guard::{METHODS as ACL_METHODS, MethodRule as AclMethod};
pub use caravan_gateway_http::acl_routes::{RULES as ACL_ROUTES, Rule as AclRule};
pub use caravan_gateway_node::heartbeats::GatewayStore;

use caravan_gateway_core::gateway::Gateway;
use caravan_gateway_core::store_health;
use caravan_gateway_node::NodeApi;

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
        caravan_gateway_core::metrics::register();
        store_health::register();
        let variables_key =
            VariableKey::configured(&config.variables_key, &config.variables_key_file)
                .map_err(anyhow::Error::msg)?;
        // Never plaintext when HTTPS was asked for: the process's TLS is
        // installed at start (`tls::install`) from this same section.
        anyhow::ensure!(
            !config.tls.http || caravan_runtime::tls::https().is_some(),
            "tls.http: set, but this process's TLS was installed without it"
        );
        let (http_listener, http_addr) = caravan_runtime::grpc::bind_http(&config.http_addr)
            .await
            .with_context(|| format!("binding http_addr {}", config.http_addr))?;
        let GatewayStore {
            store,
            mut heartbeats,
        } = store;
        // The heartbeat listener and the runtime that serves it.
        let heartbeat_listener = match config.heartbeat_addr.as_str() {
            "" => None,
            addr => {
                let bound = caravan_runtime::grpc::bind(addr)
                    .await
                    .with_context(|| format!("binding heartbeat_addr {addr}"))?;
                let runtime;
                (heartbeats, runtime) = heartbeats
                    .with_thread()
                    .context("starting the heartbeat thread for heartbeat_addr")?;
                Some((bound, runtime))
            }
        };
        let cache = Informer::start(
            store.clone(),
            Keyspace::new(&config.store.prefix),
            caravan_gateway_core::cache_config(),
        )
        .await
        .context("starting the watch cache")?;
        let bound = Bound {
            grpc: serving.local_addr,
            http: http_addr,
            heartbeat: heartbeat_listener.as_ref().map(|((_, addr), _)| *addr),
        };
        let shutdown = serving.shutdown;
        let gw = Gateway::new(store, Arc::new(cache), config, shutdown.clone())
            .with_variables_key(variables_key);
        let node = NodeApi::new(gw.clone(), heartbeats);
        let grpc_router =
            caravan_gateway_node::routes(caravan_gateway_grpc::routes(serving.router, &gw), &node);
        let http_router = caravan_gateway_http::router(gw.clone(), bound);
        let https = caravan_runtime::tls::https().is_some();
        let heartbeat_serve = heartbeat_listener.map(|((listener, _), runtime)| {
            caravan_gateway_node::heartbeat_listener::serve(
                &node,
                &runtime,
                listener,
                shutdown.clone(),
            )
        });
        let heartbeat_serve = async move {
            match heartbeat_serve {
                Some(serving) => serving
                    .await
                    .context("the heartbeat listener's thread stopped")?
                    .context("serving heartbeats"),
                None => Ok(()),
            }
        };
        tracing::info!(grpc = %bound.grpc, http = %bound.http, heartbeat = ?bound.heartbeat, https, prefix = gw.keys().prefix(), "api-gateway serving");
        serving.ready.report(bound);
        let grpc_serve =
            caravan_runtime::grpc::serve(grpc_router, serving.listener, shutdown.clone());
        let stop = shutdown.clone().cancelled_owned();
        // HTTPS with `tls.http`: the process's certificate, reloaded with it.
        let http_serve: BoxFuture<'_, std::io::Result<()>> = match caravan_runtime::tls::https() {
            Some(tls) => {
                let listener =
                    caravan_runtime::tls::TlsIncoming::new(http_listener, tls.https_config());
                Box::pin(
                    axum::serve(listener, http_router)
                        .with_graceful_shutdown(stop)
                        .into_future(),
                )
            }
            None => Box::pin(
                axum::serve(http_listener, http_router)
                    .with_graceful_shutdown(stop)
                    .into_future(),
            ),
        };
        // Requests in flight (a write waiting on an unreachable etcd, a blocking
        // query) get the same drain as gRPC's, then are dropped.
        let http_name = format!("HTTP server on {http_addr}");
        let http_serve = caravan_runtime::shutdown::within_grace(
            &http_name,
            http_serve,
            &shutdown,
            caravan_runtime::grpc::DRAIN_TIMEOUT,
        );
        let (grpc_result, http_result, heartbeat_result) =
            tokio::join!(grpc_serve, http_serve, heartbeat_serve);
        grpc_result.context("serving gRPC")?;
        http_result.unwrap_or(Ok(())).context("serving HTTP")?;
        heartbeat_result?;
        Ok(())
    }
}

//! One way to be a Caravan service. A service crate implements [`Service`]:
//! its name, its configuration, whether it needs the store, whether it is
//! leader-elected, the gRPC services it serves, and how it serves on a bound
//! listener until its shutdown token fires. [`main`] runs it as a process;
//! [`start`] runs it inside this one (tests, `caravan dev`). Both take the
//! same steps: bind `grpc_addr`, work out the advertised address, start the
//! `/metrics` listener on `metrics_addr`, build the router with the health
//! and reflection services, and serve.

mod cached_leader;
mod config_impl;
mod health;
mod launch;
mod process;
mod threads;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::grpc::Router;
use caravan_store::Store;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

pub use cached_leader::{Lead, LeaderParts, serve_cached_leader};
pub use health::{HealthArgs, reachable_addr, serving};
pub use launch::{Running, run, start, start_on};
pub use process::{ServiceArgs, ServiceCommand, main, main_with};
pub use threads::{DEFAULT_NICE, RuntimeConfig};

use crate::store::StoreConfig;
use crate::telemetry::TelemetryConfig;

/// A Caravan service, as the bootstrap and `caravan dev` run it.
pub trait Service: Send + 'static {
    /// Its name (see [`crate::names`]): configuration prefix, leader key, logs.
    const NAME: &'static str;
    /// Whether its replicas campaign for leadership on `leader/<NAME>`.
    const LEADER_ELECTED: bool;
    /// The fully qualified gRPC services it serves (health reports them
    /// serving, reflection lists them).
    const GRPC_SERVICES: &'static [&'static str];
    /// Its configuration.
    type Config: ServiceConfig;
    /// How it reaches the store: [`Arc<dyn Store>`], or [`NoStore`] for a
    /// service that talks only gRPC.
    type Store: StoreAccess<Self::Config>;
    /// What it reports once it serves (bound addresses, a handle to its
    /// work), for whoever started it in-process.
    type Ready: Send + 'static;

    /// Serves on `serving.listener` until `serving.shutdown` fires, reporting
    /// [`Serving::ready`] once it is up; an error when it cannot serve.
    fn serve(
        self,
        config: Self::Config,
        store: Self::Store,
        serving: Serving<Self::Ready>,
    ) -> impl Future<Output = anyhow::Result<()>> + Send;
}

/// What the bootstrap needs from a service's configuration.
pub trait ServiceConfig: Serialize + DeserializeOwned + Default + Send + Sync + 'static {
    /// Configuration keys holding comma-separated lists in env variables.
    const LIST_KEYS: &'static [&'static str] = &[];
    /// The `[telemetry]` section.
    fn telemetry(&self) -> &TelemetryConfig;
    /// The `[tls]` section.
    fn tls(&self) -> &crate::tls::TlsConfig;
    /// The gRPC listen address (`grpc_addr`); port 0 picks a free port.
    fn grpc_addr(&self) -> &str;
    /// The address to name this replica by (`advertise_addr`); empty means
    /// the bound one (see [`crate::grpc::advertise_addr`]).
    fn advertise_addr(&self) -> &str;
    /// The listen address of `/metrics` (`metrics_addr`); port 0 picks a
    /// free port, empty serves none (the gateway serves it on its HTTP port).
    fn metrics_addr(&self) -> &str;
    /// Checks what serving relies on, naming the first bad key; the process
    /// exits with code 2 before starting when it fails.
    fn validate(&self) -> anyhow::Result<()> {
        Ok(())
    }
    /// The shortest shutdown deadline this configuration allows: work that
    /// legitimately takes that long (stopping tasks within their kill
    /// timeout) must not be cut short.
    fn min_shutdown_deadline(&self) -> Duration {
        Duration::ZERO
    }
    /// `runtime.nice` when the configuration sets none.
    fn default_runtime_nice(&self) -> i32 {
        threads::DEFAULT_NICE
    }
}

/// A configuration with a `[store]` section.
pub trait StoreSection {
    /// The `[store]` section.
    fn store(&self) -> &StoreConfig;
}

/// How a service with configuration `C` reaches the store.
pub trait StoreAccess<C>: Sized + Send + 'static {
    /// Whether the service needs the store: the bootstrap connects to it
    /// (retrying until it answers) before the service serves.
    const NEEDED: bool;
    /// Checks the store settings in `config`, naming the first bad key;
    /// the process exits with code 2 before starting when it fails.
    fn check(_config: &C) -> anyhow::Result<()> {
        Ok(())
    }
    /// Reaches the store `config` names; `None` when `shutdown` fired first.
    fn reach(config: &C, shutdown: &CancellationToken)
    -> impl Future<Output = Option<Self>> + Send;
}

impl<C: StoreSection + Sync> StoreAccess<C> for Arc<dyn Store> {
    const NEEDED: bool = true;

    fn check(config: &C) -> anyhow::Result<()> {
        config.store().validate()
    }

    async fn reach(config: &C, shutdown: &CancellationToken) -> Option<Self> {
        config.store().connect_until(shutdown).await
    }
}

/// The store access of a service that talks only gRPC (the client node).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoStore;

impl<C: Sync> StoreAccess<C> for NoStore {
    const NEEDED: bool = false;

    async fn reach(_config: &C, _shutdown: &CancellationToken) -> Option<Self> {
        Some(NoStore)
    }
}

/// What a service serves with, prepared by the bootstrap.
pub struct Serving<R> {
    /// The bound gRPC listener.
    pub listener: TcpListener,
    /// Its address.
    pub local_addr: SocketAddr,
    /// The address this replica names itself by: the configured
    /// `advertise_addr`, else the bound one with loopback for "every
    /// interface" ([`crate::grpc::advertise_addr`]).
    pub advertise_addr: String,
    /// Where `/metrics` is served (`metrics_addr`), when it is.
    pub metrics_addr: Option<SocketAddr>,
    /// A router already serving health and reflection for
    /// [`Service::GRPC_SERVICES`]; the service adds its own.
    pub router: Router,
    /// Fires when the service is to stop.
    pub shutdown: CancellationToken,
    /// Where to report that it is up.
    pub ready: Readiness<R>,
}

impl<R> std::fmt::Debug for Serving<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Serving")
            .field("local_addr", &self.local_addr)
            .field("advertise_addr", &self.advertise_addr)
            .field("metrics_addr", &self.metrics_addr)
            .finish_non_exhaustive()
    }
}

/// Tells whoever started a service in-process that it is up.
#[derive(Debug)]
pub struct Readiness<R>(Option<oneshot::Sender<R>>);

impl<R> Readiness<R> {
    /// Reports `what` (nobody may be waiting: a process's own bootstrap
    /// does not).
    pub fn report(self, what: R) {
        if let Some(tx) = self.0 {
            // The starter may have given up waiting; the service serves anyway.
            let _ = tx.send(what);
        }
    }
}

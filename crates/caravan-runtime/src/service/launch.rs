//! Running a service on a bound listener: in the caller's task ([`run`],
//! the process bootstrap) or in a task of its own once it is up ([`start`],
//! tests and `caravan dev`).

use std::net::SocketAddr;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Readiness, Service, ServiceConfig, Serving};
use crate::{grpc, metrics};

/// A service started in this process by [`start`], up and serving.
pub struct Running<S: Service> {
    /// What the service reported once up.
    pub ready: S::Ready,
    /// Its bound gRPC address.
    pub local_addr: SocketAddr,
    /// The address it names itself by.
    pub advertise_addr: String,
    /// Where it serves `/metrics`, when it does.
    pub metrics_addr: Option<SocketAddr>,
    task: JoinHandle<anyhow::Result<()>>,
}

impl<S: Service> std::fmt::Debug for Running<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running")
            .field("service", &S::NAME)
            .field("local_addr", &self.local_addr)
            .field("advertise_addr", &self.advertise_addr)
            .field("metrics_addr", &self.metrics_addr)
            .finish_non_exhaustive()
    }
}

impl<S: Service> Running<S> {
    /// Waits until the service has stopped (its shutdown token fired, or
    /// it failed); its outcome (its own error, or that it panicked).
    pub async fn stopped(self) -> anyhow::Result<()> {
        joined::<S>(self.task).await
    }

    /// Ends the service at once, as a crash would: its task is dropped
    /// mid-flight, without a graceful stop or a resignation.
    pub async fn abort(self) {
        self.task.abort();
        // Aborted on purpose: the outcome says nothing more.
        let _aborted = self.task.await;
    }
}

/// Binds `config`'s `grpc_addr` and serves `service` on it in the caller's
/// task until `shutdown` fires.
pub async fn run<S: Service>(
    service: S,
    config: S::Config,
    store: S::Store,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let listener = grpc::listen(config.grpc_addr()).await?;
    let (serving, _) = serving::<S>(&config, listener, shutdown, Readiness(None)).await?;
    service.serve(config, store, serving).await
}

/// Binds `config`'s `grpc_addr` (port 0 picks a free one), starts `service`
/// in a task of its own and waits until it is up; an error naming the
/// service when it stopped first.
pub async fn start<S: Service>(
    service: S,
    config: S::Config,
    store: S::Store,
    shutdown: CancellationToken,
) -> anyhow::Result<Running<S>> {
    let listener = grpc::listen(config.grpc_addr())
        .await
        .with_context(|| S::NAME)?;
    start_on(service, config, store, listener, shutdown).await
}

/// [`start`] on a listener the caller bound.
pub async fn start_on<S: Service>(
    service: S,
    config: S::Config,
    store: S::Store,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<Running<S>> {
    let (tx, rx) = oneshot::channel();
    let (serving, (local_addr, advertise_addr)) =
        serving::<S>(&config, listener, shutdown, Readiness(Some(tx)))
            .await
            .with_context(|| S::NAME)?;
    let metrics_addr = serving.metrics_addr;
    let task = tokio::spawn(service.serve(config, store, serving));
    match rx.await {
        Ok(ready) => Ok(Running {
            ready,
            local_addr,
            advertise_addr,
            metrics_addr,
            task,
        }),
        // It stopped before it was up: its own error says why.
        Err(_) => match joined::<S>(task).await {
            Err(err) => Err(err.context(S::NAME)),
            Ok(()) => Err(anyhow::anyhow!("{} stopped before it was up", S::NAME)),
        },
    }
}

/// What `S` serves with on `listener`, and its local and advertised addresses.
async fn serving<S: Service>(
    config: &S::Config,
    listener: TcpListener,
    shutdown: CancellationToken,
    ready: Readiness<S::Ready>,
) -> anyhow::Result<(Serving<S::Ready>, (SocketAddr, String))> {
    let local_addr = listener
        .local_addr()
        .context("reading the listener's address")?;
    let advertise_addr = grpc::advertise_addr(config.advertise_addr(), local_addr);
    let metrics_addr = metrics::serve_admin(config.metrics_addr(), shutdown.clone()).await?;
    let router = grpc::router(S::GRPC_SERVICES)
        .await
        .context("building the gRPC reflection service")?;
    let addresses = (local_addr, advertise_addr.clone());
    let serving = Serving {
        listener,
        local_addr,
        advertise_addr,
        metrics_addr,
        router,
        shutdown,
        ready,
    };
    Ok((serving, addresses))
}

/// The outcome of a service's task, with a panic as an error naming it.
async fn joined<S: Service>(task: JoinHandle<anyhow::Result<()>>) -> anyhow::Result<()> {
    task.await
        .with_context(|| format!("{} panicked or was cancelled", S::NAME))?
}

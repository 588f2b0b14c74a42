//! The shape the eval-broker and the deployment-watcher share: a
//! leader-elected service that follows the store through a lean watch cache
//! and runs one term at a time while it leads.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::grpc::Router;
use anyhow::Context as _;
use caravan_state::Informer;
use caravan_store::{Leadership, Store, election_name};
use tokio_util::sync::CancellationToken;

use super::Serving;
use crate::leader::{Candidate, serve_and_lead};

/// What a leader-elected service does while it leads.
pub trait Lead: Send + Sync + 'static {
    /// Runs one term until `stop` fires or `leadership` is lost.
    fn lead(
        &self,
        leadership: Arc<Leadership>,
        stop: CancellationToken,
    ) -> impl Future<Output = ()> + Send;
}

/// What a cached leader's state is built from.
pub struct LeaderParts {
    /// The store.
    pub store: Arc<dyn Store>,
    /// The watch cache over the service's key prefix.
    pub cache: Arc<Informer>,
    /// The election key the service campaigns on.
    pub election: String,
    /// The address it names itself by.
    pub advertise_addr: String,
    /// Keeps the service's registration for calls from this process
    /// ([`crate::local::register`]) while it serves.
    pub local: Arc<crate::local::Held>,
}

/// Serves service `name` under `prefix`: starts the lean watch cache, lets
/// `build` make the service's state and add its gRPC service to the router,
/// reports ready, then serves and campaigns with a lease of `ttl`, running
/// [`Lead::lead`] while it leads, until the shutdown token fires. The cache
/// stops once the service has.
///
/// # Errors
///
/// Fails when the cache cannot start or serving fails.
pub async fn serve_cached_leader<L: Lead>(
    name: &'static str,
    store: Arc<dyn Store>,
    prefix: String,
    ttl: Duration,
    serving: Serving<()>,
    build: impl FnOnce(LeaderParts, Router) -> (Arc<L>, Router),
) -> anyhow::Result<()> {
    let cache = crate::cache::start_lean(&store, &prefix).await?;
    let local = Arc::new(crate::local::Held::default());
    let parts = LeaderParts {
        store: Arc::clone(&store),
        cache: Arc::clone(&cache),
        election: election_name(&prefix, name),
        advertise_addr: serving.advertise_addr.clone(),
        local: Arc::clone(&local),
    };
    let (state, router) = build(parts, serving.router);
    tracing::info!(local = %serving.local_addr, advertise = %serving.advertise_addr, prefix, "{name} listening");
    serving.ready.report(());
    let candidate = Candidate {
        store,
        prefix,
        service: name,
        address: serving.advertise_addr,
        ttl,
    };
    let served = serve_and_lead(
        router,
        serving.listener,
        candidate,
        serving.shutdown,
        |leadership, term_stop| {
            let state = Arc::clone(&state);
            async move { state.lead(leadership, term_stop).await }
        },
    )
    .await;
    drop(state);
    crate::cache::stop(cache).await;
    served.context("serving gRPC")
}

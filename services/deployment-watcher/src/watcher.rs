//! The watcher of one replica across leadership terms: the watch cache it
//! keeps warm while standing by, the current term while leading, and the
//! not-leader answer (naming the leader) while not.

use std::sync::Arc;
use std::time::Duration;

use caravan_runtime::term::CurrentTerm;
use caravan_state::Informer;
use caravan_store::{Leadership, Store};
use tokio_util::sync::CancellationToken;

use crate::config::DeploymentWatcherConfig;
use crate::error::WatcherError;
use crate::term::LeaderTerm;
use crate::writes::DeploymentWriter;

/// How long a new leader waits for its cache to reach the store's revision.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(30);

/// One replica of the deployment watcher.
pub struct DeploymentWatcher {
    store: Arc<dyn Store>,
    informer: Arc<Informer>,
    config: Arc<DeploymentWatcherConfig>,
    terms: CurrentTerm<LeaderTerm>,
}

impl DeploymentWatcher {
    /// A replica following `informer`, campaigning in `election` as
    /// `advertise_addr`.
    pub fn new(
        store: Arc<dyn Store>,
        informer: Arc<Informer>,
        config: Arc<DeploymentWatcherConfig>,
        election: String,
        advertise_addr: String,
    ) -> Self {
        DeploymentWatcher {
            terms: CurrentTerm::new(Arc::clone(&store), election, advertise_addr),
            store,
            informer,
            config,
        }
    }

    /// The current term, or the not-leader error naming the leader.
    pub async fn term(&self) -> Result<Arc<LeaderTerm>, WatcherError> {
        self.terms
            .current_or_not_leader()
            .await
            .map_err(|leader| WatcherError::NotLeader { leader })
    }

    /// Leads one term: waits for the cache to reach the store, follows
    /// deployments until leadership is lost or `stop` fires, then drops
    /// everything it kept in memory.
    pub async fn lead(&self, leadership: Arc<Leadership>, stop: CancellationToken) {
        if !self.terms.catch_up(&self.informer, CATCH_UP_TIMEOUT).await {
            return;
        }
        let writer = DeploymentWriter::new(
            leadership,
            Arc::clone(&self.store),
            self.informer.keyspace().clone(),
        );
        let term = LeaderTerm::new(
            writer,
            Arc::clone(&self.informer),
            Arc::clone(&self.config),
            stop.child_token(),
        );
        self.terms.begin(Arc::clone(&term), term.stop.clone());
        tracing::info!(address = %self.terms.advertise_addr(), "deployment watcher leading");
        match term.run().await {
            Ok(()) => {}
            Err(err) if err.is_deposed() => {
                tracing::warn!("deposed; dropping the followed deployments")
            }
            Err(err) => tracing::error!(error = %err, "deployment watcher term failed"),
        }
        term.stop.cancel();
        self.terms.end();
        tracing::info!("deployment watcher term ended");
    }
}

//! The watcher of one replica across leadership terms: the watch cache it
//! keeps warm while standing by, the current term while leading, and the
//! not-leader answer (naming the leader) while not.

use std::sync::Arc;
use std::time::Duration;

use caravan_state::Informer;
use caravan_store::{Leadership, Store, current_leader};
use parking_lot::RwLock;
use tokio_util::sync::CancellationToken;

use crate::config::DeploymentWatcherConfig;
use crate::error::WatcherError;
use crate::term::LeaderTerm;
use crate::writes::DeploymentWriter;

/// How long a new leader waits for its cache to reach the store's revision.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a term that ended waits for in-flight requests to let go of it,
/// so its leadership can be resigned rather than left to lapse.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// One replica of the deployment watcher.
pub struct DeploymentWatcher {
    store: Arc<dyn Store>,
    informer: Arc<Informer>,
    config: Arc<DeploymentWatcherConfig>,
    election: String,
    advertise_addr: String,
    current: RwLock<Option<Arc<LeaderTerm>>>,
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
            store,
            informer,
            config,
            election,
            advertise_addr,
            current: RwLock::new(None),
        }
    }

    /// Whether this replica leads.
    pub fn is_leading(&self) -> bool {
        self.current.read().is_some()
    }

    /// The current term, or the not-leader error naming the leader.
    pub async fn term(&self) -> Result<Arc<LeaderTerm>, WatcherError> {
        if let Some(term) = self.current.read().clone()
            && !term.stop.is_cancelled()
        {
            return Ok(term);
        }
        let leader = current_leader(self.store.as_ref(), self.election.as_bytes())
            .await
            .ok()
            .flatten()
            // While this replica is still catching up, naming itself would
            // only send the caller back here.
            .filter(|addr| *addr != self.advertise_addr);
        Err(WatcherError::NotLeader { leader })
    }

    /// Leads one term: waits for the cache to reach the store, follows
    /// deployments until leadership is lost or `stop` fires, then drops
    /// everything it kept in memory.
    pub async fn lead(&self, leadership: Arc<Leadership>, stop: CancellationToken) {
        let revision = match self.store.current_revision().await {
            Ok(r) => r,
            Err(err) => {
                tracing::warn!(error = %err, "cannot read the store's revision; giving up the term");
                return;
            }
        };
        if let Err(err) = self
            .informer
            .wait_for_revision(revision, CATCH_UP_TIMEOUT)
            .await
        {
            tracing::warn!(error = %err, "the cache did not catch up; giving up the term");
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
        *self.current.write() = Some(Arc::clone(&term));
        tracing::info!(address = %self.advertise_addr, "deployment watcher leading");
        match term.run().await {
            Ok(()) => {}
            Err(err) if err.is_deposed() => {
                tracing::warn!("deposed; dropping the followed deployments")
            }
            Err(err) => tracing::error!(error = %err, "deployment watcher term failed"),
        }
        term.stop.cancel();
        *self.current.write() = None;
        let deadline = tokio::time::Instant::now() + DRAIN_TIMEOUT;
        while Arc::strong_count(&term) > 1 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tracing::info!("deployment watcher term ended");
    }
}

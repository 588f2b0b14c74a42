//! The term a leader-elected replica serves, shared with its request
//! handlers: whether it leads, and otherwise the leader to send callers to.

use std::sync::Arc;
use std::time::Duration;

use caravan_state::Informer;
use caravan_store::{Store, current_leader};
use parking_lot::RwLock;
use tokio_util::sync::CancellationToken;

/// The term `T` this replica is leading, if any, with the election it won.
pub struct CurrentTerm<T> {
    store: Arc<dyn Store>,
    election: String,
    advertise_addr: String,
    current: RwLock<Option<(Arc<T>, CancellationToken)>>,
}

impl<T> CurrentTerm<T> {
    /// No term yet, for a replica campaigning in `election` as
    /// `advertise_addr`.
    pub fn new(store: Arc<dyn Store>, election: String, advertise_addr: String) -> Self {
        CurrentTerm {
            store,
            election,
            advertise_addr,
            current: RwLock::new(None),
        }
    }

    /// The address this replica campaigns with.
    pub fn advertise_addr(&self) -> &str {
        &self.advertise_addr
    }

    /// Whether a term has begun and not yet ended.
    pub fn is_leading(&self) -> bool {
        self.current.read().is_some()
    }

    /// The current term, or the address of the leader to send the caller to
    /// (`None` when no other replica is known to lead).
    pub async fn current_or_not_leader(&self) -> Result<Arc<T>, Option<String>> {
        let current = self.current.read().clone();
        if let Some((term, stop)) = current
            && !stop.is_cancelled()
        {
            return Ok(term);
        }
        let leader = current_leader(self.store.as_ref(), self.election.as_bytes())
            .await
            .ok()
            .flatten()
            // While this replica won but is still catching up, naming itself
            // would only send the caller back here.
            .filter(|addr| *addr != self.advertise_addr);
        Err(leader)
    }

    /// Waits for `informer` to reach the store's current revision, so a new
    /// term starts from everything its predecessors wrote; `false` (logged)
    /// means the term should be given up.
    pub async fn catch_up(&self, informer: &Informer, timeout: Duration) -> bool {
        let revision = match self.store.current_revision().await {
            Ok(r) => r,
            Err(err) => {
                tracing::warn!(error = %err, "cannot read the store's revision; giving up the term");
                return false;
            }
        };
        if let Err(err) = informer.wait_for_revision(revision, timeout).await {
            tracing::warn!(error = %err, "the cache did not catch up; giving up the term");
            return false;
        }
        true
    }

    /// Makes `term` the current one until [`end`](Self::end) or until `stop`
    /// fires.
    pub fn begin(&self, term: Arc<T>, stop: CancellationToken) {
        *self.current.write() = Some((term, stop));
    }

    /// Ends the current term: handlers get the not-leader answer from now on.
    pub fn end(&self) {
        *self.current.write() = None;
    }
}

#[cfg(test)]
mod tests {
    use caravan_store::{Leadership, MemStore, election_name};

    use super::*;

    #[tokio::test]
    async fn followers_name_the_leader_but_never_themselves() {
        let store: Arc<dyn Store> = Arc::new(MemStore::new());
        let election = election_name("/t", "broker");
        let terms: CurrentTerm<u32> =
            CurrentTerm::new(store.clone(), election.clone(), "b:1".into());
        assert!(!terms.is_leading());
        assert_eq!(terms.current_or_not_leader().await.err(), Some(None));

        let other = Leadership::campaign(store.clone(), &election, "a:1", Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(
            terms.current_or_not_leader().await.err(),
            Some(Some("a:1".to_string()))
        );
        other.resign().await.unwrap();

        let _won = Leadership::campaign(store.clone(), &election, "b:1", Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(terms.current_or_not_leader().await.err(), Some(None));

        let stop = CancellationToken::new();
        let term = Arc::new(7);
        terms.begin(term.clone(), stop.clone());
        assert!(terms.is_leading());
        assert_eq!(terms.current_or_not_leader().await.ok(), Some(term.clone()));

        // A stopped term is no longer served even before it is ended.
        stop.cancel();
        assert_eq!(terms.current_or_not_leader().await.err(), Some(None));
        terms.end();
        assert!(!terms.is_leading());
    }
}

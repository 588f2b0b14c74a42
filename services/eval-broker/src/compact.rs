//! Keeps the store's history bounded. etcd keeps every revision of every key
//! until it is compacted, and refuses every write, cluster-wide, once its
//! database reaches its quota. The leader compacts every interval, up to the
//! revision its own watch cache had reached one interval before: a cache or
//! a blocking query that lags less than that never meets a compacted
//! revision, and one that lags more re-lists (the watch cache does so on its
//! own). Compaction is not fenced: a deposed leader compacting an old
//! revision removes only history nobody reads.

use std::sync::Arc;

use caravan_store::{Revision, StoreError};

use crate::error::BrokerError;
use crate::term::LeaderTerm;

/// Compacts on the configured interval until the term stops.
pub async fn run(term: Arc<LeaderTerm>) -> Result<(), BrokerError> {
    let Some(interval) = term.config.compaction_interval() else {
        term.stop.cancelled().await;
        return Ok(());
    };
    let mut seen_before: Revision = 0;
    loop {
        tokio::select! {
            () = term.stop.cancelled() => return Ok(()),
            () = tokio::time::sleep(interval) => {}
        }
        if seen_before > 0 {
            compact(&term, seen_before).await;
        }
        seen_before = term.informer.snapshot().revision();
    }
}

/// Compacts the store up to `revision`; failures are logged, the next
/// interval tries again.
async fn compact(term: &LeaderTerm, revision: Revision) {
    match term.writer.store().compact(revision).await {
        Ok(()) => tracing::info!(revision, "compacted the store's history"),
        // Compacted further already (by an operator, or etcd's own
        // auto-compaction): nothing to do.
        Err(StoreError::Compacted { .. }) => {}
        Err(err) => tracing::warn!(revision, error = %err, "compacting the store failed"),
    }
}

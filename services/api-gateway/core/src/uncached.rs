//! Reads of the kinds the watch cache does not hold (variables, service
//! registrations): a whole prefix read in pages at one revision, and the
//! wait of a blocking query on a watch of the prefix.

use caravan_store::{KeyValue, Revision};
use futures::StreamExt;

use crate::error::Result;
use crate::gateway::Gateway;
use crate::query::Query;

/// Keys read per range request of a whole prefix.
const PAGE: i64 = 1000;

/// Every key under `prefix`, read in pages all at the revision of the
/// first, and that revision.
pub async fn range_all(gw: &Gateway, prefix: &[u8]) -> Result<(Vec<KeyValue>, Revision)> {
    Ok(caravan_store::read_prefix(gw.store.as_ref(), prefix, PAGE).await?)
}

/// Waits, for a blocking query, until a key under `prefix` for which
/// `relevant` holds changes after `q.min_revision`, the wait ends or the
/// gateway shuts down. The watch replays history from that revision, so a
/// change made before the wait began ends it at once; a compacted history
/// ends it too (the caller reads afresh).
pub async fn wait_for_change(
    gw: &Gateway,
    prefix: &[u8],
    q: &Query,
    relevant: impl Fn(&[u8]) -> bool,
) {
    if q.min_revision <= 0 {
        return;
    }
    let deadline = tokio::time::Instant::now() + q.wait;
    let from = q.min_revision.saturating_add(1);
    let mut watch = match gw.store.watch(prefix, from).await {
        Ok(watch) => watch,
        Err(err) => {
            tracing::debug!(%err, "watch failed; answering at once");
            return;
        }
    };
    // The watch replays from the revision asked: nothing is missed.
    let _waiting = gw.waiting.enter();
    loop {
        tokio::select! {
            batch = watch.stream.next() => match batch {
                Some(Ok(batch)) => {
                    if batch.events.iter().any(|e| relevant(&e.kv.key)) {
                        return;
                    }
                }
                _ => return,
            },
            _ = tokio::time::sleep_until(deadline) => return,
            _ = gw.shutdown.cancelled() => return,
        }
    }
}

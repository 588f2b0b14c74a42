//! What the watch cache records: the revision it has applied, how far that
//! is behind the store's revision, and its troubles (re-lists, reconnects,
//! keys it could not decode), by key prefix.

use std::sync::LazyLock;

use caravan_metrics::{IntCounterVec, IntGaugeVec};
use caravan_store::Revision;

struct CacheMetrics {
    revision: IntGaugeVec,
    lag: IntGaugeVec,
    events: IntCounterVec,
}

static METRICS: LazyLock<CacheMetrics> = LazyLock::new(|| CacheMetrics {
    revision: caravan_metrics::gauge_vec(
        "caravan_watch_cache_revision",
        "The store revision the watch cache has applied, by key prefix.",
        &["prefix"],
    ),
    lag: caravan_metrics::gauge_vec(
        "caravan_watch_cache_lag_revisions",
        "The store's revision as its watch last reported it minus the revision the watch cache has applied, by key prefix.",
        &["prefix"],
    ),
    events: caravan_metrics::counter_vec(
        "caravan_watch_cache_events_total",
        "What befell a watch cache: relist (a full list after a compaction), reconnect (a watch opened again after one was lost), decode_error (a key or value skipped), by key prefix.",
        &["prefix", "event"],
    ),
});

/// Registers the watch cache's metrics in the process registry.
pub fn register() {
    LazyLock::force(&METRICS);
}

/// Records that the cache of `prefix` applied `applied` while the store
/// was at `store` (its watch's latest header revision).
pub(crate) fn applied(prefix: &str, applied: Revision, store: Revision) {
    let metrics = &*METRICS;
    metrics.revision.with_label_values(&[prefix]).set(applied);
    metrics
        .lag
        .with_label_values(&[prefix])
        .set(store.saturating_sub(applied).max(0));
}

/// The cache of `prefix` went through `event` (`relist`, `reconnect`,
/// `decode_error`).
pub(crate) fn event(prefix: &str, event: &str) {
    METRICS.events.with_label_values(&[prefix, event]).inc();
}

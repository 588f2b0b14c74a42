//! What the watch cache records: the revision it has applied, how far that
//! is behind the store's revision, and its troubles (re-lists, reconnects,
//! keys it could not decode), by key prefix.

use std::sync::LazyLock;

use caravan_metrics::{IntCounterVec, IntGaugeVec};
use caravan_store::Revision;

use crate::keyspace::Kind;

struct CacheMetrics {
    revision: IntGaugeVec,
    lag: IntGaugeVec,
    events: IntCounterVec,
    received: IntCounterVec,
    received_bytes: IntCounterVec,
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
    received: caravan_metrics::counter_vec(
        "caravan_watch_received_total",
        "Watch events the watch cache received, by key prefix and kind of key (the segment after the prefix, `jobs`, `allocs`, …; `progress` for progress marks): every event of the cache's watch, whether or not the cache keeps its kind.",
        &["prefix", "kind"],
    ),
    received_bytes: caravan_metrics::counter_vec(
        "caravan_watch_received_bytes_total",
        "Bytes of the keys and values of the watch events the watch cache received, by key prefix and kind of key.",
        &["prefix", "kind"],
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

/// Watch events received by the cache of `prefix`: per kind of key, how
/// many and their key and value bytes.
pub(crate) fn received(prefix: &str, counts: &Received) {
    let metrics = &*METRICS;
    for (kind, (events, bytes)) in counts.iter() {
        metrics
            .received
            .with_label_values(&[prefix, kind])
            .inc_by(events);
        metrics
            .received_bytes
            .with_label_values(&[prefix, kind])
            .inc_by(bytes);
    }
}

/// Events and bytes of one watch batch by kind of key, added to the
/// counters once per batch rather than once per event.
#[derive(Debug, Default)]
pub(crate) struct Received {
    by_kind: [(u64, u64); Kind::ALL.len()],
    progress: (u64, u64),
    unknown: (u64, u64),
}

impl Received {
    /// Counts an event of `kind` (`None`: a key of no known kind) with
    /// `bytes` of key and value.
    pub(crate) fn add(&mut self, kind: Option<Kind>, bytes: usize) {
        let slot = match kind {
            Some(kind) => &mut self.by_kind[kind as usize],
            None => &mut self.unknown,
        };
        slot.0 += 1;
        slot.1 += bytes as u64;
    }

    /// Counts a progress mark of `bytes`.
    pub(crate) fn add_progress(&mut self, bytes: usize) {
        self.progress.0 += 1;
        self.progress.1 += bytes as u64;
    }

    /// The kinds with events, by label.
    fn iter(&self) -> impl Iterator<Item = (&'static str, (u64, u64))> + '_ {
        Kind::ALL
            .iter()
            .map(|k| (k.segment(), self.by_kind[*k as usize]))
            .chain([("progress", self.progress), ("unknown", self.unknown)])
            .filter(|(_, (events, _))| *events > 0)
    }
}

/// The cache of `prefix` went through `event` (`relist`, `reconnect`,
/// `decode_error`).
pub(crate) fn event(prefix: &str, event: &str) {
    METRICS.events.with_label_values(&[prefix, event]).inc();
}

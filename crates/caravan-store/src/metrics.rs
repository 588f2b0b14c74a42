//! What the store records: each etcd request's latency and each failed
//! request, by operation, and the size of each group a group committer
//! sends.

use std::sync::LazyLock;
use std::time::Instant;

use caravan_metrics::{HistogramVec, IntCounterVec};

use crate::error::StoreError;

struct StoreMetrics {
    latency: HistogramVec,
    errors: IntCounterVec,
    txn_group: HistogramVec,
}

static METRICS: LazyLock<StoreMetrics> = LazyLock::new(|| StoreMetrics {
    latency: caravan_metrics::histogram_vec(
        "caravan_etcd_request_duration_seconds",
        "Time an etcd request took, retries on other members included, by operation.",
        &["op"],
        caravan_metrics::LATENCY_BUCKETS,
    ),
    errors: caravan_metrics::counter_vec(
        "caravan_etcd_request_errors_total",
        "etcd requests that failed, by operation and kind of error.",
        &["op", "kind"],
    ),
    txn_group: caravan_metrics::histogram_vec(
        "caravan_store_txn_group_size",
        "Transactions a group committer sent to the store as one, by committer: 1 when a transaction went alone.",
        &["committer"],
        &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0],
    ),
});

/// Registers the store's metrics in the process registry.
pub fn register() {
    LazyLock::force(&METRICS);
}

/// The group committer `committer` sent `n` transactions as one.
pub(crate) fn txn_group(committer: &'static str, n: usize) {
    METRICS
        .txn_group
        .with_label_values(&[committer])
        .observe(n as f64);
}

/// Times one request from now until [`RequestTimer::finish`].
pub(crate) fn request_timer(op: &'static str) -> RequestTimer {
    RequestTimer {
        op,
        started: Instant::now(),
    }
}

/// One etcd request being timed.
pub(crate) struct RequestTimer {
    op: &'static str,
    started: Instant,
}

impl RequestTimer {
    /// Records the request's latency and, when it failed, its error.
    pub(crate) fn finish(self, err: Option<&StoreError>) {
        let metrics = &*METRICS;
        metrics
            .latency
            .with_label_values(&[self.op])
            .observe(self.started.elapsed().as_secs_f64());
        if let Some(err) = err {
            metrics
                .errors
                .with_label_values(&[self.op, error_kind(err)])
                .inc();
        }
    }
}

/// A short name for the kind of `err`, as the `kind` label.
fn error_kind(err: &StoreError) -> &'static str {
    match err {
        StoreError::Compacted { .. } => "compacted",
        StoreError::FutureRevision { .. } => "future_revision",
        StoreError::LeaseNotFound(_) => "lease_not_found",
        StoreError::InvalidArgument(_) => "invalid_argument",
        StoreError::Unavailable(_) => "unavailable",
        StoreError::Closed(_) => "closed",
        StoreError::NoSpace(_) => "no_space",
        StoreError::Internal(_) => "internal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(op: &str, kind: &str) -> u64 {
        METRICS.errors.with_label_values(&[op, kind]).get()
    }

    #[test]
    fn a_failed_request_counts_as_an_error_of_its_kind() {
        let before = count("test_op", "unavailable");
        let samples = METRICS
            .latency
            .with_label_values(&["test_op"])
            .get_sample_count();
        request_timer("test_op").finish(Some(&StoreError::Unavailable("down".into())));
        request_timer("test_op").finish(None);
        assert_eq!(count("test_op", "unavailable"), before + 1);
        assert_eq!(
            METRICS
                .latency
                .with_label_values(&["test_op"])
                .get_sample_count(),
            samples + 2
        );
        let text = caravan_metrics::exposition();
        assert!(
            text.contains("caravan_etcd_request_errors_total{kind=\"unavailable\",op=\"test_op\"}"),
            "{text}"
        );
    }
}

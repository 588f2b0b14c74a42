//! What the etcd backend records: each request's latency and each failed
//! request, by operation.

use std::sync::LazyLock;
use std::time::Instant;

use caravan_metrics::{HistogramVec, IntCounterVec};

use crate::error::StoreError;

struct StoreMetrics {
    latency: HistogramVec,
    errors: IntCounterVec,
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
});

/// Registers the store's metrics in the process registry.
pub fn register() {
    LazyLock::force(&METRICS);
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

//! What the scheduler workers record: how long a dequeue waits for an eval,
//! how long the cache takes to reach an eval's revision, and how long the
//! scheduler runs on one eval.

use std::sync::LazyLock;
use std::time::Duration;

use caravan_metrics::{Histogram, HistogramVec};

struct WorkerMetrics {
    dequeue: HistogramVec,
    cache_wait: Histogram,
    budget_wait: Histogram,
    invoke: HistogramVec,
}

static METRICS: LazyLock<WorkerMetrics> = LazyLock::new(|| WorkerMetrics {
    dequeue: caravan_metrics::histogram_vec(
        "caravan_worker_dequeue_seconds",
        "Time a worker's dequeue call took, by result: eval, empty (the long poll ran out) or error.",
        &["result"],
        caravan_metrics::WAIT_BUCKETS,
    ),
    cache_wait: caravan_metrics::histogram(
        "caravan_worker_cache_wait_seconds",
        "Time a worker waited for its watch cache to reach a dequeued eval's revision.",
        caravan_metrics::LATENCY_BUCKETS,
    ),
    budget_wait: caravan_metrics::histogram(
        "caravan_worker_budget_wait_seconds",
        "Time a worker waited for a dequeued eval's share of the replica's placement budget (large_evals).",
        caravan_metrics::LATENCY_BUCKETS,
    ),
    invoke: caravan_metrics::histogram_vec(
        "caravan_worker_invoke_seconds",
        "Time the scheduler ran on one eval, plan submissions included, by scheduler type and result (ok, failed).",
        &["scheduler", "result"],
        caravan_metrics::LATENCY_BUCKETS,
    ),
});

/// Registers the workers' metrics in the process registry.
pub fn register() {
    LazyLock::force(&METRICS);
}

/// A dequeue call took `took` and ended with `result`.
pub(crate) fn dequeued(result: &str, took: Duration) {
    METRICS
        .dequeue
        .with_label_values(&[result])
        .observe(took.as_secs_f64());
}

/// The cache took `took` to reach an eval's revision.
pub(crate) fn cache_waited(took: Duration) {
    METRICS.cache_wait.observe(took.as_secs_f64());
}

/// An eval waited `took` for its share of the placement budget.
pub(crate) fn budget_waited(took: Duration) {
    METRICS.budget_wait.observe(took.as_secs_f64());
}

/// The scheduler ran `took` on an eval of `scheduler`.
pub(crate) fn invoked(scheduler: &str, ok: bool, took: Duration) {
    let result = if ok { "ok" } else { "failed" };
    METRICS
        .invoke
        .with_label_values(&[scheduler, result])
        .observe(took.as_secs_f64());
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn every_worker_metric_is_documented() {
        register();
        caravan_runtime::metrics::register();
        let wrong = caravan_metrics::undocumented(include_str!("../../../docs/metrics.md"));
        assert!(wrong.is_empty(), "docs/metrics.md: {wrong:#?}");
    }

    #[test]
    fn an_invocation_counts_under_its_scheduler_and_result() {
        let count = || {
            METRICS
                .invoke
                .with_label_values(&["batch", "failed"])
                .get_sample_count()
        };
        let before = count();
        invoked("batch", false, Duration::from_millis(3));
        assert_eq!(count(), before + 1);
    }
}

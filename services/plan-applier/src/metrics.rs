//! What the plan applier records: the plans waiting in its queue, how long
//! verifying and committing a plan take, and what became of each plan.

use std::sync::LazyLock;
use std::time::Duration;

use caravan_metrics::{Histogram, IntCounterVec, IntGauge};
use caravan_proto::PlanResult;

struct ApplierMetrics {
    queue_depth: IntGauge,
    verify: Histogram,
    commit: Histogram,
    plans: IntCounterVec,
}

static METRICS: LazyLock<ApplierMetrics> = LazyLock::new(|| ApplierMetrics {
    queue_depth: caravan_metrics::gauge(
        "caravan_plan_queue_depth",
        "Plans waiting in the leading applier's queue.",
    ),
    verify: caravan_metrics::histogram(
        "caravan_plan_verify_seconds",
        "Time verifying one plan's nodes against the newest state.",
        caravan_metrics::LATENCY_BUCKETS,
    ),
    commit: caravan_metrics::histogram(
        "caravan_plan_commit_seconds",
        "Time committing one plan's accepted part to the store.",
        caravan_metrics::LATENCY_BUCKETS,
    ),
    plans: caravan_metrics::counter_vec(
        "caravan_plans_total",
        "Plans answered, by outcome: applied whole, partially applied (some nodes refused), refused (nothing committed), or failed (an error, e.g. a stale delivery token).",
        &["outcome"],
    ),
});

/// Registers the applier's metrics in the process registry.
pub fn register() {
    LazyLock::force(&METRICS);
}

/// The gauge of the plans waiting in the queue.
pub(crate) fn queue_depth_gauge() -> IntGauge {
    METRICS.queue_depth.clone()
}

/// Verifying one plan took `took`.
pub(crate) fn verified(took: Duration) {
    METRICS.verify.observe(took.as_secs_f64());
}

/// Committing one plan took `took`.
pub(crate) fn committed(took: Duration) {
    METRICS.commit.observe(took.as_secs_f64());
}

/// A plan was answered with `result`.
pub(crate) fn answered(result: &PlanResult) {
    METRICS.plans.with_label_values(&[outcome(result)]).inc();
}

/// A plan was answered with an error.
pub(crate) fn failed() {
    METRICS.plans.with_label_values(&["failed"]).inc();
}

/// The `outcome` label of a plan answered with `result`.
fn outcome(result: &PlanResult) -> &'static str {
    let committed_any = [
        &result.node_allocation,
        &result.node_update,
        &result.node_preemptions,
    ]
    .iter()
    .any(|m| m.values().any(|l| !l.allocs.is_empty()))
        || result.deployment.is_some()
        || !result.deployment_updates.is_empty();
    match (result.rejected_nodes.is_empty(), committed_any) {
        (true, _) => "applied",
        (false, true) => "partial",
        (false, false) => "refused",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use caravan_proto::AllocList;

    use super::*;

    #[test]
    fn every_applier_metric_is_documented() {
        register();
        caravan_runtime::metrics::register();
        let wrong = caravan_metrics::undocumented(include_str!("../../../docs/metrics.md"));
        assert!(wrong.is_empty(), "docs/metrics.md: {wrong:#?}");
    }

    #[test]
    fn a_result_is_applied_partial_or_refused() {
        let placed = AllocList {
            allocs: vec![Default::default()],
        };
        let mut result = PlanResult::default();
        result.node_allocation.insert("n1".into(), placed);
        assert_eq!(outcome(&result), "applied");
        result.rejected_nodes.push("n2".into());
        assert_eq!(outcome(&result), "partial");
        result.node_allocation.clear();
        assert_eq!(outcome(&result), "refused");
        let before = METRICS.plans.with_label_values(&["refused"]).get();
        answered(&result);
        assert_eq!(
            METRICS.plans.with_label_values(&["refused"]).get(),
            before + 1
        );
    }
}

//! Evaluations the schedulers write: final status, blocked and rolling evals.

use std::collections::BTreeMap;

use caravan_model::trigger;
use caravan_proto::{AllocMetric, EvalStatus, Evaluation};

use crate::context::Eligibility;
use crate::rng::Rng;

/// Blocked eval description when placements failed.
pub const BLOCKED_FAILED_PLACEMENTS: &str = "created to place remaining allocations";
/// Blocked eval description when plans kept conflicting.
pub const BLOCKED_MAX_PLANS: &str = "created due to placement conflicts";

/// A blocked evaluation that waits for capacity for `eval`'s job. It carries
/// the revision of the snapshot the scheduler worked from, so capacity freed
/// after that revision is known to unblock it.
pub fn blocked_eval(
    eval: &Evaluation,
    rng: &mut Rng,
    eligibility: &Eligibility,
    failed: &BTreeMap<String, AllocMetric>,
    plan_failure: bool,
    snapshot_revision: i64,
    now: i64,
) -> Evaluation {
    Evaluation {
        id: rng.uuid(),
        namespace: eval.namespace.clone(),
        priority: eval.priority,
        r#type: eval.r#type.clone(),
        triggered_by: if plan_failure {
            trigger::MAX_PLAN_ATTEMPTS.into()
        } else {
            trigger::QUEUED_ALLOCS.into()
        },
        job_id: eval.job_id.clone(),
        job_modify_revision: eval.job_modify_revision,
        status: EvalStatus::Blocked as i32,
        status_description: if plan_failure {
            BLOCKED_MAX_PLANS.into()
        } else {
            BLOCKED_FAILED_PLACEMENTS.into()
        },
        previous_eval: eval.id.clone(),
        failed_tg_allocs: failed.clone(),
        class_eligibility: if eligibility.escaped {
            BTreeMap::new()
        } else {
            eligibility.classes.clone()
        },
        escaped_computed_class: eligibility.escaped,
        snapshot_revision,
        create_time_unix_ns: now,
        modify_time_unix_ns: now,
        ..Default::default()
    }
}

/// The final form of the evaluation being processed.
#[derive(Debug, Default)]
pub struct FinalStatus {
    /// Its status.
    pub status: i32,
    /// Why.
    pub description: String,
    /// A rolling-update eval created after it.
    pub next_eval: String,
    /// The blocked eval created for what did not fit.
    pub blocked_eval: String,
    /// Per group: why placements failed.
    pub failed: BTreeMap<String, AllocMetric>,
    /// Per group: what is still waiting.
    pub queued: BTreeMap<String, i64>,
    /// The deployment the eval worked on.
    pub deployment_id: String,
}

/// Applies a final status to a copy of `eval`.
pub fn finished(eval: &Evaluation, s: FinalStatus, revision: i64, now: i64) -> Evaluation {
    let mut e = eval.clone();
    e.status = s.status;
    e.status_description = s.description;
    if !s.next_eval.is_empty() {
        e.next_eval = s.next_eval;
    }
    if !s.blocked_eval.is_empty() {
        e.blocked_eval = s.blocked_eval;
    }
    e.failed_tg_allocs = s.failed;
    e.queued_allocations = s.queued;
    if !s.deployment_id.is_empty() {
        e.deployment_id = s.deployment_id;
    }
    e.snapshot_revision = revision;
    e.modify_time_unix_ns = now;
    e
}

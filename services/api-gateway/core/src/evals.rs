//! Evaluations: the ones the gateway creates alongside its writes, and reads.

use caravan_model::{NomadName, now_unix_ns};
use caravan_proto::{Allocation, EvalStatus, Evaluation, Job, QueryMeta};
use caravan_state::Snapshot;

use crate::error::{GatewayError, Result};
use crate::gateway::Gateway;
use crate::query::{self, Query};

/// A pending evaluation of `job` for `trigger`. Its `job_modify_revision`
/// is the job's (0 when the job is written in the same transaction, which
/// resolves to that transaction's revision).
pub fn for_job(job: &Job, trigger: &str) -> Evaluation {
    let now = now_unix_ns();
    let mut eval = Evaluation {
        id: caravan_model::fresh_id(),
        namespace: job.namespace.clone(),
        priority: job.priority,
        r#type: job.r#type().nomad_name().to_string(),
        triggered_by: trigger.to_string(),
        job_id: job.id.clone(),
        job_modify_revision: job.job_modify_revision,
        create_time_unix_ns: now,
        modify_time_unix_ns: now,
        // The request's trace, continued by every service that handles it.
        trace_context: caravan_runtime::trace::capture(),
        ..Default::default()
    };
    eval.set_status(EvalStatus::Pending);
    eval
}

/// Every evaluation in the query's namespace whose id has its prefix.
pub async fn list(gw: &Gateway, query: &Query) -> (Vec<Evaluation>, QueryMeta) {
    let snap = query::block(gw, query).await;
    let evals = snap
        .evals()
        .filter(|e| query.matches_namespace(&e.namespace) && query.matches_prefix(&e.id))
        .map(|e| (**e).clone())
        .collect();
    (evals, query::meta(gw, &snap))
}

/// One evaluation.
pub async fn get(gw: &Gateway, eval_id: &str, query: &Query) -> Result<(Evaluation, QueryMeta)> {
    let snap = query::block(gw, query).await;
    let eval = snap
        .eval(eval_id)
        .map(|e| (**e).clone())
        .ok_or_else(|| GatewayError::NotFound(format!("eval not found: {eval_id}")))?;
    Ok((eval, query::meta(gw, &snap)))
}

/// The allocations an evaluation placed or last updated.
pub async fn allocations(
    gw: &Gateway,
    eval_id: &str,
    query: &Query,
) -> Result<(Vec<Allocation>, QueryMeta)> {
    allocations_in(gw, &query::block(gw, query).await, eval_id)
}

/// [`allocations`] from `snap`, for an answer that renders more of the
/// same snapshot beside them.
pub fn allocations_in(
    gw: &Gateway,
    snap: &Snapshot,
    eval_id: &str,
) -> Result<(Vec<Allocation>, QueryMeta)> {
    let eval = snap
        .eval(eval_id)
        .ok_or_else(|| GatewayError::NotFound(format!("eval not found: {eval_id}")))?;
    let allocs = snap
        .allocs_by_job(&eval.namespace, &eval.job_id)
        .filter(|a| a.eval_id == eval_id)
        .map(|a| (**a).clone())
        .collect();
    Ok((allocs, query::meta(gw, snap)))
}

#[cfg(test)]
mod tests {
    use caravan_model::trigger;
    use caravan_proto::JobType;

    use super::*;

    #[test]
    fn evals_carry_the_jobs_scheduling_fields() {
        let mut job = Job {
            id: "web".into(),
            namespace: "default".into(),
            priority: 70,
            job_modify_revision: 12,
            ..Default::default()
        };
        job.set_type(JobType::Batch);
        let eval = for_job(&job, trigger::JOB_REGISTER);
        assert_eq!(eval.status(), EvalStatus::Pending);
        assert_eq!(eval.r#type, "batch");
        assert_eq!(eval.priority, 70);
        assert_eq!(eval.job_modify_revision, 12);
        assert_eq!(eval.triggered_by, "job-register");
        assert_eq!(eval.id.len(), 36);
    }
}

//! Allocations: reads, and an operator's stop (mark for migration plus an
//! evaluation that replaces it, as Nomad's `alloc stop` does).

use caravan_model::{AllocExt, trigger};
use caravan_proto::{Allocation, Job, JobType, QueryMeta};
use caravan_state::{Snapshot, encode};
use caravan_store::{Compare, CompareOp, Op, Revision, Txn};

use crate::cas;
use crate::error::{GatewayError, Result};
use crate::evals;
use crate::gateway::Gateway;
use crate::query::{self, Query};

/// Every allocation in the query's namespace whose id has its prefix.
pub async fn list(gw: &Gateway, query: &Query) -> (Vec<Allocation>, QueryMeta) {
    list_in(gw, &query::block(gw, query).await, query)
}

/// [`list`] from `snap`, for an answer that renders more of the same
/// snapshot beside the allocations (its index and its data then agree).
pub fn list_in(gw: &Gateway, snap: &Snapshot, query: &Query) -> (Vec<Allocation>, QueryMeta) {
    let allocs = snap
        .allocs()
        .filter(|a| query.matches_namespace(&a.namespace) && query.matches_prefix(&a.id))
        .map(|a| (**a).clone())
        .collect();
    (allocs, query::meta(gw, snap))
}

/// One allocation, whole. The cache keeps allocations without their
/// placement metrics: one the cache shows is read from the store once the
/// cache has reached the revision the query waits for, so the answer is
/// never older than the cache, and the index reported covers it.
pub async fn get(gw: &Gateway, alloc_id: &str, query: &Query) -> Result<(Allocation, QueryMeta)> {
    let not_found = || GatewayError::NotFound(format!("alloc not found: {alloc_id}"));
    let snap = query::block(gw, query).await;
    if snap.alloc(alloc_id).is_none() {
        return Err(not_found());
    }
    let alloc = gw.read_alloc(alloc_id).await?.ok_or_else(not_found)?;
    let mut meta = query::meta(gw, &snap);
    meta.revision = meta.revision.max(alloc.modify_index());
    Ok((alloc, meta))
}

/// Stops one allocation: marks it to migrate and creates an `alloc-stop`
/// evaluation of its job, in one transaction compared on the allocation.
pub async fn stop(gw: &Gateway, alloc_id: &str) -> Result<(String, Revision)> {
    if alloc_id.is_empty() {
        return Err(GatewayError::field("alloc_id", "missing allocation ID"));
    }
    let key = &gw.keys.alloc(alloc_id);
    let conflict = || cas::kept_changing(format_args!("allocation {alloc_id}"));
    cas::retry(gw, conflict, move |_| async move {
        let Some(alloc) = gw.read_alloc(alloc_id).await? else {
            return Err(GatewayError::NotFound(format!(
                "alloc not found: {alloc_id}"
            )));
        };
        let job = gw
            .cache
            .snapshot()
            .job(&alloc.namespace, &alloc.job_id)
            .map(|j| (**j).clone())
            .unwrap_or_else(|| orphan_job(&alloc));
        let mut updated = alloc.clone();
        updated
            .desired_transition
            .get_or_insert_with(Default::default)
            .migrate = Some(true);
        let mut eval = evals::for_job(&job, trigger::ALLOC_STOP);
        eval.related_alloc_ids = vec![alloc.id.clone()];
        let txn = Txn::new()
            .when(Compare::mod_revision(
                key.clone(),
                CompareOp::Equal,
                alloc.modify_revision,
            ))
            .and_then(Op::put(key.clone(), encode(&updated)))
            .and_then(Op::put(gw.keys.eval(&eval.id), encode(&eval)));
        let Some(revision) = cas::commit(gw, txn).await? else {
            return Ok(None);
        };
        tracing::info!(alloc = %alloc_id, eval = %eval.id, "allocation stop requested");
        crate::metrics::eval_created(&eval.triggered_by);
        Ok(Some((eval.id, revision)))
    })
    .await
}

/// Stand-in job for an allocation whose job is gone, so the evaluation still
/// names a scheduler; the scheduler then stops what the job no longer wants.
fn orphan_job(alloc: &Allocation) -> Job {
    let mut job = Job {
        id: alloc.job_id.clone(),
        namespace: alloc.namespace.clone(),
        priority: caravan_jobspec::DEFAULT_PRIORITY,
        ..Default::default()
    };
    job.set_type(JobType::Service);
    job
}

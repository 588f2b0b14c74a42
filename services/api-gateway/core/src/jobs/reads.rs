//! Job reads from the watch cache: list, get, versions, allocations,
//! evaluations and the per-group summary, with the job's status derived
//! from its allocations and evaluations as Nomad derives it.

use std::collections::BTreeMap;
use std::sync::Arc;

use caravan_model::job_status;
use caravan_proto::{AllocClientStatus, Allocation, Evaluation, Job, QueryMeta, TaskGroupSummary};
use caravan_state::Snapshot;

use crate::error::{GatewayError, Result};
use crate::gateway::Gateway;
use crate::query::{self, Query};

/// A job with the status its allocations and evaluations give it
/// ([`caravan_model::job_status`]).
pub fn with_status(snap: &Snapshot, job: &Job) -> Job {
    let status = job_status(
        job,
        snap.allocs_by_job(&job.namespace, &job.id).map(Arc::as_ref),
        snap.evals_by_job(&job.namespace, &job.id).map(Arc::as_ref),
    );
    let mut job = job.clone();
    job.set_status(status);
    job
}

/// The jobs of the query's namespace whose id has its prefix.
pub async fn list(gw: &Gateway, query: &Query) -> (Vec<Job>, QueryMeta) {
    list_in(gw, &query::block(gw, query).await, query)
}

/// [`list`] from `snap`, for an answer that renders more of the same
/// snapshot beside the jobs (its index and its data then agree).
pub fn list_in(gw: &Gateway, snap: &Snapshot, query: &Query) -> (Vec<Job>, QueryMeta) {
    let jobs = snap
        .jobs()
        .filter(|j| query.matches_namespace(&j.namespace) && query.matches_prefix(&j.id))
        .map(|j| with_status(snap, j))
        .collect();
    (jobs, query::meta(gw, snap))
}

fn find<'a>(snap: &'a Snapshot, query: &Query, job_id: &str) -> Result<&'a Job> {
    snap.job(&query.namespace, job_id)
        .map(|j| &**j)
        .ok_or_else(|| GatewayError::NotFound(format!("job not found: {job_id}")))
}

/// One job.
pub async fn get(gw: &Gateway, job_id: &str, query: &Query) -> Result<(Job, QueryMeta)> {
    let snap = query::block(gw, query).await;
    let job = with_status(&snap, find(&snap, query, job_id)?);
    Ok((job, query::meta(gw, &snap)))
}

/// The kept versions of a job, newest first.
pub async fn versions(gw: &Gateway, job_id: &str, query: &Query) -> Result<(Vec<Job>, QueryMeta)> {
    let snap = query::block(gw, query).await;
    let versions: Vec<Job> = snap
        .job_versions(&query.namespace, job_id)
        .rev()
        .map(|j| (**j).clone())
        .collect();
    if versions.is_empty() {
        return Err(GatewayError::NotFound(format!("job not found: {job_id}")));
    }
    Ok((versions, query::meta(gw, &snap)))
}

/// The allocations of a job, terminal ones included.
pub async fn allocations(
    gw: &Gateway,
    job_id: &str,
    query: &Query,
) -> Result<(Vec<Allocation>, QueryMeta)> {
    Ok(allocations_in(
        gw,
        &query::block(gw, query).await,
        job_id,
        query,
    ))
}

/// [`allocations`] from `snap`, for an answer that renders more of the
/// same snapshot beside them.
pub fn allocations_in(
    gw: &Gateway,
    snap: &Snapshot,
    job_id: &str,
    query: &Query,
) -> (Vec<Allocation>, QueryMeta) {
    let allocs = snap
        .allocs_by_job(&query.namespace, job_id)
        .map(|a| (**a).clone())
        .collect();
    (allocs, query::meta(gw, snap))
}

/// The evaluations of a job.
pub async fn evaluations(
    gw: &Gateway,
    job_id: &str,
    query: &Query,
) -> Result<(Vec<Evaluation>, QueryMeta)> {
    let snap = query::block(gw, query).await;
    let evals = snap
        .evals_by_job(&query.namespace, job_id)
        .map(|e| (**e).clone())
        .collect();
    Ok((evals, query::meta(gw, &snap)))
}

/// A job's summary: per task group, allocations by client status and the
/// placements still queued according to its newest evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSummary {
    /// The job.
    pub job: Job,
    /// Per task group counts.
    pub groups: BTreeMap<String, TaskGroupSummary>,
}

/// Builds the summary of `job` from `snap`.
pub fn summarize(snap: &Snapshot, job: &Job) -> BTreeMap<String, TaskGroupSummary> {
    let mut groups: BTreeMap<String, TaskGroupSummary> = job
        .task_groups
        .iter()
        .map(|tg| (tg.name.clone(), TaskGroupSummary::default()))
        .collect();
    for alloc in snap.allocs_by_job(&job.namespace, &job.id) {
        let s = groups.entry(alloc.task_group.clone()).or_default();
        match alloc.client_status() {
            AllocClientStatus::Pending | AllocClientStatus::Unspecified => s.starting += 1,
            AllocClientStatus::Running => s.running += 1,
            AllocClientStatus::Complete => s.complete += 1,
            AllocClientStatus::Failed => s.failed += 1,
            AllocClientStatus::Lost => s.lost += 1,
            AllocClientStatus::Unknown => s.unknown += 1,
        }
    }
    let newest = snap
        .evals_by_job(&job.namespace, &job.id)
        .filter(|e| !e.queued_allocations.is_empty())
        .max_by_key(|e| (e.modify_revision, e.create_revision));
    if let Some(eval) = newest {
        for (group, queued) in &eval.queued_allocations {
            groups.entry(group.clone()).or_default().queued = *queued;
        }
    }
    groups
}

/// A job's summary.
pub async fn summary(gw: &Gateway, job_id: &str, query: &Query) -> Result<(JobSummary, QueryMeta)> {
    let snap = query::block(gw, query).await;
    let job = with_status(&snap, find(&snap, query, job_id)?);
    let groups = summarize(&snap, &job);
    Ok((JobSummary { job, groups }, query::meta(gw, &snap)))
}

/// The submission kept with version `version` of a job, if one was sent
/// with it.
pub async fn submission(
    gw: &Gateway,
    namespace: &str,
    job_id: &str,
    version: u64,
) -> Result<Option<caravan_proto::JobSubmission>> {
    gw.read(&gw.keys.job_submission(namespace, job_id, version))
        .await
}

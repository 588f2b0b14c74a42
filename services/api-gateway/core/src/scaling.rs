//! Scaling policies: the `scaling` blocks of the jobs' task groups, read
//! from the cache. A policy is not stored on its own; its id is derived
//! from its target (namespace, job, group), so it is stable across job
//! versions and the same on every gateway.

use std::sync::Arc;

use caravan_proto::{Job, ScalingPolicy, TaskGroup};
use caravan_state::Snapshot;

use crate::query::Query;

/// One group's policy, with what it targets.
#[derive(Debug, Clone)]
pub struct Found {
    /// The policy's id.
    pub id: String,
    /// The job holding it.
    pub job: Arc<Job>,
    /// Index of its group in the job.
    pub group: usize,
}

impl Found {
    /// The task group the policy scales.
    pub fn group(&self) -> &TaskGroup {
        &self.job.task_groups[self.group]
    }

    /// The policy itself.
    pub fn policy(&self) -> Option<&ScalingPolicy> {
        self.group().scaling.as_ref()
    }
}

/// Every policy of the jobs in the cache, ordered by id.
fn all(snap: &Snapshot) -> Vec<Found> {
    let mut found: Vec<Found> = snap
        .jobs()
        .flat_map(|job| {
            job.task_groups
                .iter()
                .enumerate()
                .filter(|(_, tg)| tg.scaling.is_some())
                .map(|(i, tg)| Found {
                    id: caravan_jobspec::scaling_policy_id(&job.namespace, &job.id, &tg.name),
                    job: job.clone(),
                    group: i,
                })
        })
        .collect();
    found.sort_by(|a, b| a.id.cmp(&b.id));
    found
}

/// The policies `query`'s namespace covers, of job `job` when given
/// (Nomad's `?job=`) and of a type starting with `type_prefix` when given
/// (Nomad's `?type=`).
pub fn list(
    snap: &Snapshot,
    query: &Query,
    job: Option<&str>,
    type_prefix: Option<&str>,
) -> Vec<Found> {
    all(snap)
        .into_iter()
        .filter(|f| query.matches_namespace(&f.job.namespace))
        .filter(|f| job.is_none_or(|j| f.job.id == j))
        .filter(|f| type_prefix.is_none_or(|t| f.policy().is_some_and(|p| p.r#type.starts_with(t))))
        .collect()
}

/// The policy with id `id`, in any namespace.
pub fn get(snap: &Snapshot, id: &str) -> Option<Found> {
    all(snap).into_iter().find(|f| f.id == id)
}

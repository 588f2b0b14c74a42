//! Which job version a non-canary replacement runs while canaries wait for
//! promotion: the version the group ran before them, not the one on trial.

use std::sync::Arc;

use caravan_proto::{Allocation, Job};

use crate::state::State;

/// An older job version to place a replacement with, and the deployment that
/// rolled it out (empty when none did).
#[derive(Debug, Clone)]
pub(crate) struct StableVersion {
    /// The older job version.
    pub job: Arc<Job>,
    /// The deployment of that version the replacement belongs to.
    pub deployment_id: String,
}

/// The version a replacement of `previous` in `group` runs while `job`'s
/// canaries are unpromoted: that of the newest deployment of an older version
/// in which the group was promoted or needed no canaries, else the version the
/// replaced allocation ran. `None` when that is the current version or it is
/// no longer stored (the replacement then runs the current version).
pub(crate) fn stable_version(
    state: &dyn State,
    job: &Job,
    group: &str,
    previous: Option<&Allocation>,
) -> Option<StableVersion> {
    let same_job = |create_revision: i64| {
        create_revision == 0 || job.create_revision == 0 || create_revision == job.create_revision
    };
    let mut deployments = state.deployments_by_job(&job.namespace, &job.id);
    deployments.retain(|d| d.job_version < job.version && same_job(d.job_create_revision));
    deployments.sort_by(|a, b| {
        (b.job_version, b.create_revision, &b.id).cmp(&(a.job_version, a.create_revision, &a.id))
    });
    let from_deployment = deployments.iter().find_map(|d| {
        let group_state = d.task_groups.get(group)?;
        (group_state.promoted || group_state.desired_canaries == 0)
            .then(|| (d.job_version, d.id.clone()))
    });
    let (version, deployment_id) = match from_deployment {
        Some(found) => found,
        None => (previous?.job_version, String::new()),
    };
    if version >= job.version {
        return None;
    }
    let old = state.job_version(&job.namespace, &job.id, version)?;
    crate::model::group(&old, group)?;
    Some(StableVersion {
        job: old,
        deployment_id,
    })
}

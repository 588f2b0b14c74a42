//! Periodic jobs: which jobs the launcher follows, what a launch writes (the
//! child job and its eval), when the next launch is due, and whether an
//! earlier child still runs. Pure functions of a snapshot and a clock; the
//! launcher ([`launcher`]) runs them in the leader.
//!
//! Nothing about past launches is kept outside the store: the children are
//! the record. A child's id carries its launch time, so the newest child
//! says when the parent last launched, and a launch that exists already is
//! never made again.

pub mod cron;
pub mod launcher;

use std::sync::Arc;

use caravan_model::{AllocExt, EvalStatusExt, JobExt, NomadName, trigger};
use caravan_proto::{EvalStatus, Evaluation, Job, JobStatus};
use caravan_state::Tables;

pub use cron::CronSchedule;

/// What separates a parent's id from its child's launch time.
pub const LAUNCH_SUFFIX: &str = "/periodic-";

/// Whether the launcher follows a job: periodic, enabled, not stopped, and
/// not a parameterized template (those launch by dispatch).
pub fn is_active(job: &Job) -> bool {
    job.is_periodic() && !job.stop && job.parameterized.is_none() && !job.dispatched
}

/// The id of the child launched at `launch` (Unix seconds).
pub fn child_id(parent_id: &str, launch: i64) -> String {
    format!("{parent_id}{LAUNCH_SUFFIX}{launch}")
}

/// The launch time a child's id names, if it is a periodic child of
/// `parent_id`.
pub fn launch_time(parent_id: &str, child_id: &str) -> Option<i64> {
    let rest = child_id
        .strip_prefix(parent_id)?
        .strip_prefix(LAUNCH_SUFFIX)?;
    if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    rest.parse().ok()
}

/// The periodic children of `parent` in the snapshot, with their launch
/// times.
pub fn children<'a>(
    snap: &'a Tables,
    parent: &'a Job,
) -> impl Iterator<Item = (i64, &'a Arc<Job>)> + 'a {
    snap.jobs_in(&parent.namespace).filter_map(move |j| {
        if j.parent_id != parent.id {
            return None;
        }
        launch_time(&parent.id, &j.id).map(|t| (t, j))
    })
}

/// The parent's last launch (Unix seconds): the newest child's launch time,
/// else when the parent was first registered (its oldest kept version's
/// submit time), as Nomad records a periodic job's insertion as its first
/// launch.
pub fn last_launch(snap: &Tables, parent: &Job) -> i64 {
    if let Some(newest) = children(snap, parent).map(|(t, _)| t).max() {
        return newest;
    }
    let submitted = snap
        .job_versions(&parent.namespace, &parent.id)
        .map(|v| v.submit_time_unix_ns)
        .filter(|t| *t > 0)
        .min()
        .unwrap_or(parent.submit_time_unix_ns);
    submitted.div_euclid(1_000_000_000)
}

/// Whether a child of `parent` still runs: it has a non-terminal alloc or
/// a non-terminal eval (what `prohibit_overlap` waits for).
pub fn has_running_child(snap: &Tables, parent: &Job) -> bool {
    children(snap, parent).any(|(_, child)| {
        snap.allocs_by_job(&child.namespace, &child.id)
            .any(|a| !a.is_terminal())
            || snap
                .evals_by_job(&child.namespace, &child.id)
                .any(|e| e.status().is_waiting())
    })
}

/// The child job launched from `parent` at `launch`: the parent's
/// specification under the child's id, with `parent_id` set, periodic
/// cleared, status pending, version 0 and its revisions left to the store.
pub fn derive_child(parent: &Job, launch: i64, now_ns: i64) -> Job {
    let mut child = parent.clone();
    child.id = child_id(&parent.id, launch);
    child.name = child.id.clone();
    child.parent_id = parent.id.clone();
    child.periodic = None;
    child.set_status(JobStatus::Pending);
    child.status_description.clear();
    child.stop = false;
    child.stable = false;
    child.version = 0;
    child.submit_time_unix_ns = now_ns;
    child.create_revision = 0;
    child.modify_revision = 0;
    // Resolved on read to the launch transaction's revision.
    child.job_modify_revision = 0;
    child
}

/// The pending eval that schedules a freshly launched child; its job
/// revision resolves to the launch transaction's.
pub fn launch_eval(child: &Job, now_ns: i64) -> Evaluation {
    // A launch starts its own trace, which the child's scheduling continues.
    let launch = tracing::info_span!("periodic.launch", job = %child.id);
    Evaluation {
        id: caravan_model::fresh_id(),
        namespace: child.namespace.clone(),
        priority: child.priority,
        r#type: child.r#type().nomad_name().to_string(),
        triggered_by: trigger::PERIODIC_JOB.into(),
        job_id: child.id.clone(),
        job_modify_revision: 0,
        status: EvalStatus::Pending as i32,
        create_time_unix_ns: now_ns,
        modify_time_unix_ns: now_ns,
        trace_context: caravan_runtime::trace::of(&launch),
        ..Default::default()
    }
}

/// When a parent the launcher starts following should launch first.
///
/// On the first look of a leadership term (`restoring`), a launch that fell
/// due after the last one while no leader was launching happens once, now,
/// and the runs missed before it are not replayed, as Nomad's leader does
/// when it restores its periodic dispatcher. A parent registered or changed
/// during the term launches at the next time after now.
pub fn first_due(
    schedule: &CronSchedule,
    last_launch: i64,
    now: i64,
    restoring: bool,
) -> Option<i64> {
    if restoring {
        match schedule.next_after(last_launch) {
            Some(missed) if missed <= now => return Some(now),
            Some(next) => return Some(next),
            None => return None,
        }
    }
    schedule.next_after(now)
}

/// When the launch after one due at `due` falls, handled at `now`: the
/// next time after `due`, but never one already past, so a launcher that
/// fell behind launches the latest run rather than every missed one.
pub fn due_after(schedule: &CronSchedule, due: i64, now: i64) -> Option<i64> {
    schedule.next_after(due.max(now - 1))
}

/// What the launcher does with a launch that is due.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LaunchDecision {
    /// Launch the child `child_id`.
    Launch {
        /// The child to create.
        child_id: String,
    },
    /// A child for this launch exists already (a launch made before a
    /// failover): nothing to do.
    AlreadyLaunched,
    /// `prohibit_overlap` and an earlier child still runs: skip this launch.
    Overlap,
}

/// Decides a due launch of `parent` at `launch`.
pub fn decide(snap: &Tables, parent: &Job, launch: i64) -> LaunchDecision {
    let child_id = child_id(&parent.id, launch);
    if snap.job(&parent.namespace, &child_id).is_some() {
        return LaunchDecision::AlreadyLaunched;
    }
    let prohibit = parent.periodic.as_ref().is_some_and(|p| p.prohibit_overlap);
    if prohibit && has_running_child(snap, parent) {
        return LaunchDecision::Overlap;
    }
    LaunchDecision::Launch { child_id }
}

#[cfg(test)]
mod tests;

//! In place or destructive: whether a group's running allocations must be
//! replaced when its job changes (Nomad's `tasksUpdated`). The scheduler
//! decides updates by it and `job plan` annotates its diff by it, so the two
//! cannot disagree.

use std::collections::BTreeMap;

use caravan_proto::{Affinity, Job, Spread, Task, TaskGroup};

/// Whether moving `old_tg` of `old_job` to `new_tg` of `new_job` needs new
/// allocations: a task was added, removed or renamed, anything a running
/// task was started with changed (driver, user, config, env, resources,
/// networks and ports, lifecycle, dispatch payload, leader, the merged
/// job/group/task meta, artifacts, templates, workload identities, the
/// ephemeral disk), or the placement preferences
/// that chose its node did (job, group and task affinities; job and group
/// spreads). Counts, update/restart/reschedule policies, constraints, kill
/// settings and priority are applied in place.
pub fn tasks_updated(old_job: &Job, old_tg: &TaskGroup, new_job: &Job, new_tg: &TaskGroup) -> bool {
    if old_tg.tasks.len() != new_tg.tasks.len()
        || group_destructive(old_tg, new_tg)
        || preferences_updated(old_job, old_tg, new_job, new_tg)
    {
        return true;
    }
    old_tg.tasks.iter().any(|old_task| {
        new_tg
            .tasks
            .iter()
            .find(|t| t.name == old_task.name)
            .is_none_or(|new_task| {
                task_destructive(old_job, old_tg, old_task, new_job, new_tg, new_task)
            })
    })
}

/// [`tasks_updated`] for the group named `group` of two versions of a job;
/// a group missing from either version is a change.
pub fn tasks_updated_in(old: &Job, new: &Job, group: &str) -> bool {
    match (find_group(old, group), find_group(new, group)) {
        (Some(old_tg), Some(new_tg)) => tasks_updated(old, old_tg, new, new_tg),
        _ => true,
    }
}

fn find_group<'a>(job: &'a Job, name: &str) -> Option<&'a TaskGroup> {
    job.task_groups.iter().find(|g| g.name == name)
}

/// Group-level changes that replace every allocation of the group: the
/// ephemeral disk, the group's networks or its volumes (which decide the
/// nodes it may run on).
pub fn group_destructive(old: &TaskGroup, new: &TaskGroup) -> bool {
    old.ephemeral_disk != new.ephemeral_disk
        || old.networks != new.networks
        || old.volumes != new.volumes
}

/// Task-level changes that need the task started from scratch: anything it
/// was started with, the meta it sees (job, group and task meta merged)
/// included, and the files and tokens prepared for it (artifacts, templates,
/// workload identities).
pub fn task_destructive(
    old_job: &Job,
    old_tg: &TaskGroup,
    old: &Task,
    new_job: &Job,
    new_tg: &TaskGroup,
    new: &Task,
) -> bool {
    old.driver != new.driver
        || old.user != new.user
        || old.config != new.config
        || old.env != new.env
        || old.lifecycle != new.lifecycle
        || old.dispatch_payload_file != new.dispatch_payload_file
        || old.leader != new.leader
        || old.resources != new.resources
        || old.volume_mounts != new.volume_mounts
        || old.artifacts != new.artifacts
        || old.templates != new.templates
        || old.identities != new.identities
        || log_config(old) != log_config(new)
        || merged_meta(old_job, old_tg, old) != merged_meta(new_job, new_tg, new)
}

/// A task's `logs` block as (max files, max file size in MB, disabled);
/// none is Nomad's default of 10 files of 10 MB.
fn log_config(t: &Task) -> (i32, i32, bool) {
    t.log_config.as_ref().map_or((10, 10, false), |l| {
        (l.max_files, l.max_file_size_mb, l.disabled)
    })
}

/// Affinities (job, group, then task level, in order) or spreads (job, then
/// group level) differ: an allocation placed for the old preferences may sit
/// on a node the new ones would not choose.
fn preferences_updated(
    old_job: &Job,
    old_tg: &TaskGroup,
    new_job: &Job,
    new_tg: &TaskGroup,
) -> bool {
    !affinities(old_job, old_tg).eq(affinities(new_job, new_tg))
        || !spreads(old_job, old_tg).eq(spreads(new_job, new_tg))
}

fn affinities<'a>(job: &'a Job, tg: &'a TaskGroup) -> impl Iterator<Item = &'a Affinity> {
    job.affinities
        .iter()
        .chain(&tg.affinities)
        .chain(tg.tasks.iter().flat_map(|t| &t.affinities))
}

fn spreads<'a>(job: &'a Job, tg: &'a TaskGroup) -> impl Iterator<Item = &'a Spread> {
    job.spreads.iter().chain(&tg.spreads)
}

/// Job meta, overridden by group meta, overridden by task meta: what the
/// task sees.
fn merged_meta<'a>(job: &'a Job, tg: &'a TaskGroup, task: &'a Task) -> BTreeMap<&'a str, &'a str> {
    job.meta
        .iter()
        .chain(&tg.meta)
        .chain(&task.meta)
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

#[cfg(test)]
mod tests;

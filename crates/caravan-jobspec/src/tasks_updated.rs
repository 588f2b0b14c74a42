//! In-place or destructive: whether a group's running allocations must be replaced.
//!
//! This is Nomad's `tasksUpdated`, field for field as `caravan_scheduler::tasks_updated`
//! decides it, so that `job plan` annotates exactly what the scheduler will do.

use caravan_proto::{Affinity, Job, Spread, Task, TaskGroup};
use std::collections::BTreeMap;

/// Whether moving group `group` from `old` to `new` needs new allocations: a task was
/// added or removed, anything a running task was started with changed (driver, user,
/// config, env, resources, networks and ports, lifecycle, dispatch payload, leader, the
/// merged job/group/task meta, the ephemeral disk), or the placement preferences did
/// (job, group and task affinities; job and group spreads). Counts, update/restart/
/// reschedule policies, constraints and kill settings are applied in place. A group
/// missing from either version is a change.
pub fn tasks_updated(old: &Job, new: &Job, group: &str) -> bool {
    let (Some(old_tg), Some(new_tg)) = (find_group(old, group), find_group(new, group)) else {
        return true;
    };
    if old_tg.tasks.len() != new_tg.tasks.len()
        || group_destructive(old_tg, new_tg)
        || preferences_updated(old, old_tg, new, new_tg)
    {
        return true;
    }
    old_tg.tasks.iter().any(|old_task| {
        new_tg
            .tasks
            .iter()
            .find(|t| t.name == old_task.name)
            .is_none_or(|new_task| task_destructive(old, old_tg, old_task, new, new_tg, new_task))
    })
}

pub(crate) fn find_group<'a>(job: &'a Job, name: &str) -> Option<&'a TaskGroup> {
    job.task_groups.iter().find(|g| g.name == name)
}

/// Group-level changes that replace every allocation of the group.
pub(crate) fn group_destructive(old: &TaskGroup, new: &TaskGroup) -> bool {
    old.ephemeral_disk != new.ephemeral_disk || old.networks != new.networks
}

/// Task-level changes that need the task restarted from scratch.
pub(crate) fn task_destructive(
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
        || merged_meta(old_job, old_tg, old) != merged_meta(new_job, new_tg, new)
}

/// Affinities (job, group, then task level) or spreads (job, then group level) differ:
/// an allocation placed for the old preferences may sit where the new ones would not.
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

/// Job meta, overridden by group meta, overridden by task meta: what the task sees.
fn merged_meta<'a>(job: &'a Job, tg: &'a TaskGroup, task: &'a Task) -> BTreeMap<&'a str, &'a str> {
    job.meta
        .iter()
        .chain(&tg.meta)
        .chain(&task.meta)
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use caravan_proto::{
        Constraint, EphemeralDisk, NetworkResource, Port, Resources, RestartPolicy, UpdateStrategy,
    };

    fn job() -> Job {
        Job {
            id: "j".into(),
            task_groups: vec![TaskGroup {
                name: "g".into(),
                count: 1,
                ephemeral_disk: Some(EphemeralDisk {
                    size_mb: 300,
                    ..Default::default()
                }),
                tasks: vec![Task {
                    name: "t".into(),
                    driver: "raw_exec".into(),
                    resources: Some(Resources {
                        cpu_mhz: 100,
                        memory_mb: 128,
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn changed(f: impl FnOnce(&mut Job)) -> bool {
        let old = job();
        let mut new = old.clone();
        f(&mut new);
        tasks_updated(&old, &new, "g")
    }

    #[test]
    fn in_place_changes() {
        assert!(!changed(|_| {}));
        assert!(!changed(|j| j.task_groups[0].count = 5));
        assert!(!changed(|j| j.task_groups[0].tasks[0].kill_timeout_ns = 9));
        assert!(!changed(
            |j| j.task_groups[0].tasks[0].kill_signal = "SIGINT".into()
        ));
        assert!(!changed(
            |j| j.task_groups[0].update = Some(UpdateStrategy::default())
        ));
        assert!(!changed(
            |j| j.task_groups[0].restart_policy = Some(RestartPolicy::default())
        ));
        assert!(!changed(|j| j.task_groups[0]
            .constraints
            .push(Constraint::default())));
        assert!(!changed(|j| j.priority = 90));
    }

    #[test]
    fn destructive_changes() {
        assert!(changed(|j| j.task_groups[0].tasks[0].driver = "exec".into()));
        assert!(changed(|j| {
            j.task_groups[0].tasks[0].env.insert("A".into(), "1".into());
        }));
        assert!(changed(
            |j| j.task_groups[0].tasks[0].config = Some(Default::default())
        ));
        assert!(changed(|j| {
            if let Some(r) = j.task_groups[0].tasks[0].resources.as_mut() {
                r.memory_mb = 256;
            }
        }));
        assert!(changed(|j| j.task_groups[0].tasks[0].user = "nobody".into()));
        assert!(changed(|j| {
            j.meta.insert("k".into(), "v".into());
        }));
        assert!(changed(|j| {
            j.task_groups[0].meta.insert("k".into(), "v".into());
        }));
        assert!(changed(|j| j.task_groups[0].networks.push(
            NetworkResource {
                dynamic_ports: vec![Port {
                    label: "http".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }
        )));
        assert!(changed(|j| j.task_groups[0].ephemeral_disk = None));
        assert!(changed(
            |j| j.task_groups[0].tasks[0].name = "renamed".into()
        ));
        assert!(changed(|j| {
            let t = j.task_groups[0].tasks[0].clone();
            j.task_groups[0].tasks.push(t);
        }));
        assert!(
            changed(|j| j.task_groups.clear()),
            "a removed group is a change"
        );
    }

    #[test]
    fn placement_preference_changes_are_destructive() {
        let affinity = Affinity {
            l_target: "${node.datacenter}".into(),
            r_target: "dc1".into(),
            operand: "=".into(),
            weight: 50,
        };
        let spread = Spread {
            attribute: "${meta.rack}".into(),
            weight: 50,
            targets: vec![],
        };
        assert!(changed(|j| j.affinities.push(affinity.clone())));
        assert!(changed(|j| j.task_groups[0]
            .affinities
            .push(affinity.clone())));
        assert!(changed(|j| j.task_groups[0].tasks[0]
            .affinities
            .push(affinity.clone())));
        assert!(changed(|j| j.spreads.push(spread.clone())));
        assert!(changed(|j| j.task_groups[0].spreads.push(spread.clone())));
        let mut old = job();
        old.affinities.push(affinity.clone());
        let mut new = old.clone();
        new.affinities[0].weight = 100;
        assert!(tasks_updated(&old, &new, "g"));
        assert!(!tasks_updated(&old, &old.clone(), "g"));
    }

    #[test]
    fn meta_overridden_to_the_same_value_is_not_a_change() {
        let mut old = job();
        old.meta.insert("k".into(), "v".into());
        let mut new = job();
        new.task_groups[0].meta.insert("k".into(), "v".into());
        assert!(!tasks_updated(&old, &new, "g"));
    }
}

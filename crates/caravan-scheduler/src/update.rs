//! Telling in-place updates from destructive ones.

use std::collections::BTreeMap;

use caravan_proto::{Affinity, Job, Spread, TaskGroup};

/// Whether moving `old_tg` of `old_job` to `new_tg` of `new_job` needs new
/// allocations: anything a running task was started with changed, or the
/// placement preferences (affinities, spreads) that chose its node did.
pub fn tasks_updated(old_job: &Job, old_tg: &TaskGroup, new_job: &Job, new_tg: &TaskGroup) -> bool {
    if old_tg.tasks.len() != new_tg.tasks.len()
        || old_tg.ephemeral_disk != new_tg.ephemeral_disk
        || old_tg.networks != new_tg.networks
        || preferences_updated(old_job, old_tg, new_job, new_tg)
    {
        return true;
    }
    for old in &old_tg.tasks {
        let Some(new) = new_tg.tasks.iter().find(|t| t.name == old.name) else {
            return true;
        };
        if old.driver != new.driver
            || old.user != new.user
            || old.config != new.config
            || old.env != new.env
            || old.lifecycle != new.lifecycle
            || old.dispatch_payload_file != new.dispatch_payload_file
            || old.leader != new.leader
            || old.resources != new.resources
            || merged_meta(old_job, old_tg, &old.meta) != merged_meta(new_job, new_tg, &new.meta)
        {
            return true;
        }
    }
    false
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

fn merged_meta<'a>(
    job: &'a Job,
    tg: &'a TaskGroup,
    task: &'a BTreeMap<String, String>,
) -> BTreeMap<&'a str, &'a str> {
    let mut m = BTreeMap::new();
    for (k, v) in job.meta.iter().chain(tg.meta.iter()).chain(task.iter()) {
        m.insert(k.as_str(), v.as_str());
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use caravan_proto::{Resources, Task};

    fn job() -> (Job, TaskGroup) {
        let tg = TaskGroup {
            name: "g".into(),
            count: 1,
            tasks: vec![Task {
                name: "t".into(),
                driver: "exec".into(),
                resources: Some(Resources {
                    cpu_mhz: 100,
                    memory_mb: 128,
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        };
        (Job::default(), tg)
    }

    #[test]
    fn destructive_vs_in_place_fields() {
        let (j, tg) = job();
        let mut same = tg.clone();
        same.count = 5;
        same.tasks[0].kill_timeout_ns = 99;
        assert!(!tasks_updated(&j, &tg, &j, &same));
        let mut cpu = tg.clone();
        cpu.tasks[0].resources.as_mut().unwrap().cpu_mhz = 200;
        assert!(tasks_updated(&j, &tg, &j, &cpu));
        let mut drv = tg.clone();
        drv.tasks[0].driver = "docker".into();
        assert!(tasks_updated(&j, &tg, &j, &drv));
        let mut j2 = j.clone();
        j2.meta.insert("k".into(), "v".into());
        assert!(tasks_updated(&j, &tg, &j2, &tg));
    }

    #[test]
    fn affinity_and_spread_changes_are_destructive() {
        let (j, tg) = job();
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
        let mut at_job = j.clone();
        at_job.affinities.push(affinity.clone());
        assert!(tasks_updated(&j, &tg, &at_job, &tg));
        let mut at_group = tg.clone();
        at_group.affinities.push(affinity.clone());
        assert!(tasks_updated(&j, &tg, &j, &at_group));
        let mut at_task = tg.clone();
        at_task.tasks[0].affinities.push(affinity.clone());
        assert!(tasks_updated(&j, &tg, &j, &at_task));
        let mut reweighted = at_task.clone();
        reweighted.tasks[0].affinities[0].weight = -50;
        assert!(tasks_updated(&j, &at_task, &j, &reweighted));
        assert!(!tasks_updated(&j, &at_task, &j, &at_task.clone()));

        let mut spread_job = j.clone();
        spread_job.spreads.push(spread.clone());
        assert!(tasks_updated(&j, &tg, &spread_job, &tg));
        let mut spread_group = tg.clone();
        spread_group.spreads.push(spread);
        assert!(tasks_updated(&j, &tg, &j, &spread_group));
        assert!(!tasks_updated(&spread_job, &tg, &spread_job, &tg));
    }
}

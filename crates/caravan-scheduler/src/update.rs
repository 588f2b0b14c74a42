//! Telling in-place updates from destructive ones.

use std::collections::BTreeMap;

use caravan_proto::{Job, TaskGroup};

/// Whether moving `old_tg` of `old_job` to `new_tg` of `new_job` needs new
/// allocations (anything a running task was started with changed).
pub fn tasks_updated(old_job: &Job, old_tg: &TaskGroup, new_job: &Job, new_tg: &TaskGroup) -> bool {
    if old_tg.tasks.len() != new_tg.tasks.len()
        || old_tg.ephemeral_disk != new_tg.ephemeral_disk
        || old_tg.networks != new_tg.networks
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
}

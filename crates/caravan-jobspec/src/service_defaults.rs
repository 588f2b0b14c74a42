//! Nomad's defaults for `service` and `check` blocks, filled at canonicalization: a
//! service's name (`<job>-<group>-<task>`, or `<job>-<group>` for a group's), with
//! `${JOB}`, `${TASKGROUP}`, `${TASK}` and `${BASE}` replaced as Nomad's servers do; its
//! task, address mode, provider and `on_update`; each check's name, task, `on_update`
//! and `check_restart` grace.

use crate::validate::PROVIDER_CONSUL;
use caravan_proto::{Service, TaskGroup};

const ADDRESS_MODE_AUTO: &str = "auto";
const ON_UPDATE_REQUIRE_HEALTHY: &str = "require_healthy";
/// Nomad's `check_restart` grace when it is left out.
const DEFAULT_GRACE_NS: i64 = 1_000_000_000;

/// Fills the defaults of every service of `group` and of its tasks.
pub(crate) fn fill(job_name: &str, group: &mut TaskGroup) {
    for service in &mut group.services {
        one(service, job_name, &group.name, None);
    }
    for task in &mut group.tasks {
        for service in &mut task.services {
            one(service, job_name, &group.name, Some(&task.name));
        }
    }
}

fn one(s: &mut Service, job: &str, group: &str, task: Option<&str>) {
    if s.name.is_empty() {
        s.name = match task {
            Some(t) => format!("{job}-{group}-{t}"),
            None => format!("{job}-{group}"),
        };
    }
    let task_label = task.unwrap_or("group");
    let base = format!("{job}-{group}-{task_label}");
    s.name = s
        .name
        .replace("${JOB}", job)
        .replace("${TASKGROUP}", group)
        .replace("${TASK}", task_label)
        .replace("${BASE}", &base);
    if let Some(t) = task
        && s.task_name.is_empty()
    {
        s.task_name = t.to_string();
    }
    if s.address_mode.is_empty() {
        s.address_mode = ADDRESS_MODE_AUTO.to_string();
    }
    if s.on_update.is_empty() {
        s.on_update = ON_UPDATE_REQUIRE_HEALTHY.to_string();
    }
    if s.provider.is_empty() {
        s.provider = PROVIDER_CONSUL.to_string();
    }
    for check in &mut s.checks {
        if check.name.is_empty() {
            check.name = format!("service: {:?} check", s.name);
        }
        if check.task_name.is_empty() {
            check.task_name.clone_from(&s.task_name);
        }
        if check.on_update.is_empty() {
            check.on_update.clone_from(&s.on_update);
        }
        check.r#type = check.r#type.to_lowercase();
        if let Some(r) = check.check_restart.as_mut()
            && r.grace_ns == 0
        {
            r.grace_ns = DEFAULT_GRACE_NS;
        }
    }
}

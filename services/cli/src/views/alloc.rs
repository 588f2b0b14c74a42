//! `alloc status`: an allocation's page with its service checks, its tasks,
//! their resources and recent events, and its reschedule history.

use caravan_model::NomadName;
use caravan_proto::{Allocation, Job, TaskEvent, TaskState};

use crate::format::{ibytes, kv, mb, pretty_time_diff, rfc3339, short_id, table};

/// The allocation's tasks in the job's order, then any others it reports.
pub fn task_names(alloc: &Allocation, job: Option<&Job>) -> Vec<String> {
    let mut names: Vec<String> = job
        .and_then(|j| j.task_groups.iter().find(|g| g.name == alloc.task_group))
        .map(|g| g.tasks.iter().map(|t| t.name.clone()).collect())
        .unwrap_or_default();
    for name in alloc.task_states.keys() {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    names
}

/// The latest result of one of an allocation's service checks, as the
/// page shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceCheck {
    /// The service the check belongs to.
    pub service: String,
    /// Its task; empty for a group's service.
    pub task: String,
    /// The check's name.
    pub name: String,
    /// `healthiness` or `readiness`.
    pub mode: String,
    /// `success`, `failure` or `pending`.
    pub status: String,
}

/// Nomad's `Nomad Service Checks:` section, rows sorted; none without
/// checks.
pub fn service_checks(checks: &[ServiceCheck]) -> Option<String> {
    if checks.is_empty() {
        return None;
    }
    let mut rows: Vec<Vec<String>> = checks
        .iter()
        .map(|c| {
            let task = if c.task.is_empty() {
                "(group)"
            } else {
                &c.task
            };
            vec![
                c.service.clone(),
                task.to_string(),
                c.name.clone(),
                c.mode.clone(),
                c.status.clone(),
            ]
        })
        .collect();
    rows.sort();
    let header = ["Service", "Task", "Name", "Mode", "Status"].map(String::from);
    let table = table(std::iter::once(header.to_vec()).chain(rows));
    Some(format!("Nomad Service Checks:\n{table}"))
}

/// One allocation's status page. `job` is the version it runs, when known;
/// it gives the task order and the reschedule policy's limit.
/// `reschedule_at` is when its follow-up evaluation will place a
/// replacement (the eval's wait_until), when known. `checks` are the
/// latest results of its service checks.
pub fn alloc_page(
    alloc: &Allocation,
    job: Option<&Job>,
    reschedule_at: Option<i64>,
    checks: &[ServiceCheck],
    now: i64,
) -> String {
    let mut basic: Vec<(&str, String)> = vec![
        ("ID", alloc.id.clone()),
        ("Eval ID", short_id(&alloc.eval_id).to_string()),
        ("Name", alloc.name.clone()),
        ("Node ID", short_id(&alloc.node_id).to_string()),
        ("Node Name", alloc.node_name.clone()),
        ("Job ID", alloc.job_id.clone()),
        ("Job Version", alloc.job_version.to_string()),
        (
            "Client Status",
            alloc.client_status().nomad_name().to_string(),
        ),
        ("Client Description", alloc.client_description.clone()),
        (
            "Desired Status",
            alloc.desired_status().nomad_name().to_string(),
        ),
        ("Desired Description", alloc.desired_description.clone()),
        ("Created", pretty_time_diff(alloc.create_time_unix_ns, now)),
        ("Modified", pretty_time_diff(alloc.modify_time_unix_ns, now)),
    ];
    if !alloc.deployment_id.is_empty() {
        let status = alloc.deployment_status.as_ref();
        let health = match status.and_then(|s| s.healthy) {
            Some(true) => "healthy",
            Some(false) => "unhealthy",
            None => "unset",
        };
        basic.push(("Deployment ID", short_id(&alloc.deployment_id).to_string()));
        basic.push(("Deployment Health", health.to_string()));
        if status.is_some_and(|s| s.canary) {
            basic.push(("Canary", "true".to_string()));
        }
    }
    if let Some(attempts) = reschedule_attempts(alloc, job) {
        basic.push(("Reschedule Attempts", attempts));
    }
    if !alloc.previous_allocation.is_empty() {
        basic.push((
            "Rescheduled Alloc ID",
            short_id(&alloc.previous_allocation).to_string(),
        ));
    }
    if !alloc.next_allocation.is_empty() {
        basic.push((
            "Replacement Alloc ID",
            short_id(&alloc.next_allocation).to_string(),
        ));
    }
    // Only a replacement still to come is worth a line, as in Nomad.
    if let Some(at) = reschedule_at.filter(|at| *at > now) {
        basic.push(("Reschedule Eligibility", pretty_time_diff(at, now)));
    }
    let mut out = kv(&basic);
    if let Some(checks) = service_checks(checks) {
        out.push_str("\n\n");
        out.push_str(&checks);
    }
    for task in task_names(alloc, job) {
        let state = alloc.task_states.get(&task);
        let label = state.map_or("pending", |s| s.state.as_str());
        out.push_str(&format!("\n\nTask {task:?} is {label:?}"));
        if let Some(resources) = task_resources(alloc, &task) {
            out.push_str("\nTask Resources:\n");
            out.push_str(&resources);
        }
        if let Some(state) = state {
            out.push_str("\n\n");
            out.push_str(&task_events(state));
        }
    }
    if let Some(history) = reschedule_history(alloc, now) {
        out.push_str("\n\nReschedule History\n");
        out.push_str(&history);
    }
    out
}

/// `1/3` when the job's policy limits attempts: the reschedules within the
/// policy's interval before the allocation's last change, out of the
/// attempts allowed (Nomad's `RescheduleInfo`).
fn reschedule_attempts(alloc: &Allocation, job: Option<&Job>) -> Option<String> {
    let events = &alloc.reschedule_tracker.as_ref()?.events;
    if events.is_empty() {
        return None;
    }
    let policy = job
        .and_then(|j| j.task_groups.iter().find(|g| g.name == alloc.task_group))
        .and_then(|g| g.reschedule_policy.as_ref())?;
    if policy.unlimited || policy.attempts <= 0 {
        return None;
    }
    let attempted = events
        .iter()
        .filter(|e| alloc.modify_time_unix_ns - e.reschedule_time_unix_ns < policy.interval_ns)
        .count();
    Some(format!("{attempted}/{}", policy.attempts))
}

fn reschedule_history(alloc: &Allocation, now: i64) -> Option<String> {
    let events = &alloc.reschedule_tracker.as_ref()?.events;
    if events.is_empty() {
        return None;
    }
    let mut rows = vec![vec![
        "Time".to_string(),
        "Previous Alloc".to_string(),
        "Previous Node".to_string(),
        "Delay".to_string(),
    ]];
    for e in events.iter().rev() {
        rows.push(vec![
            pretty_time_diff(e.reschedule_time_unix_ns, now),
            short_id(&e.prev_alloc_id).to_string(),
            short_id(&e.prev_node_id).to_string(),
            caravan_jobspec::format_duration(e.delay_ns),
        ]);
    }
    Some(table(rows))
}

fn task_resources(alloc: &Allocation, task: &str) -> Option<String> {
    let resources = alloc.allocated_resources.as_ref()?;
    let t = resources.tasks.get(task)?;
    let disk = resources.shared.as_ref().map_or(0, |s| s.disk_mb);
    let address = t
        .ports
        .iter()
        .chain(resources.shared.iter().flat_map(|s| s.ports.iter()))
        .map(|p| format!("{}: {}:{}", p.label, p.host_ip, p.value))
        .collect::<Vec<_>>()
        .join(", ");
    Some(table([
        vec![
            "CPU".to_string(),
            "Memory".to_string(),
            "Disk".to_string(),
            "Addresses".to_string(),
        ],
        vec![
            format!("{} MHz", t.cpu_mhz),
            ibytes(mb(u64::from(t.memory_mb))),
            ibytes(mb(u64::from(disk))),
            address,
        ],
    ]))
}

fn task_time(unix_ns: i64) -> String {
    if unix_ns > 0 {
        rfc3339(unix_ns)
    } else {
        "N/A".to_string()
    }
}

fn task_events(state: &TaskState) -> String {
    let mut out = String::from("Task Events:\n");
    out.push_str(&kv(&[
        ("Started At", task_time(state.started_at_unix_ns)),
        ("Finished At", task_time(state.finished_at_unix_ns)),
        ("Total Restarts", state.restarts.to_string()),
        ("Last Restart", task_time(state.last_restart_unix_ns)),
    ]));
    out.push_str("\n\nRecent Events:\n");
    let mut rows = vec![vec![
        "Time".to_string(),
        "Type".to_string(),
        "Description".to_string(),
    ]];
    for e in state.events.iter().rev() {
        rows.push(vec![rfc3339(e.time_unix_ns), e.r#type.clone(), describe(e)]);
    }
    out.push_str(&table(rows));
    out
}

/// The event's message, or one built from its fields when it has none.
fn describe(e: &TaskEvent) -> String {
    if !e.message.is_empty() {
        return e.message.clone();
    }
    match e.r#type.as_str() {
        "Terminated" if e.signal != 0 => {
            format!("Exit Code: {}, Signal: {}", e.exit_code, e.signal)
        }
        "Terminated" => format!("Exit Code: {}", e.exit_code),
        "Restarting" => format!(
            "Task restarting in {}",
            caravan_jobspec::format_duration(e.restart_delay_ns)
        ),
        "Driver Failure" => e.driver_error.clone(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use caravan_proto::{
        AllocatedResources, AllocatedSharedResources, AllocatedTaskResources, RescheduleEvent,
        ReschedulePolicy, RescheduleTracker, Task, TaskGroup,
    };

    use super::*;
    use crate::views::fixtures::*;

    fn running() -> Allocation {
        let mut a = alloc("0af996ed-4a0c-1c9e-6a5f-8b0f3c3f1f2e", 10);
        a.client_description = "Tasks are running".into();
        a.allocated_resources = Some(AllocatedResources {
            tasks: [(
                "hello".to_string(),
                AllocatedTaskResources {
                    cpu_mhz: 50,
                    memory_mb: 32,
                    ..Default::default()
                },
            )]
            .into(),
            shared: Some(AllocatedSharedResources {
                disk_mb: 300,
                ..Default::default()
            }),
        });
        a.task_states.insert(
            "hello".into(),
            TaskState {
                state: "running".into(),
                started_at_unix_ns: NOW - 60 * S,
                events: vec![
                    TaskEvent {
                        r#type: "Received".into(),
                        time_unix_ns: NOW - 62 * S,
                        message: "Task received by client".into(),
                        ..Default::default()
                    },
                    TaskEvent {
                        r#type: "Started".into(),
                        time_unix_ns: NOW - 60 * S,
                        message: "Task started by client".into(),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            },
        );
        a
    }

    #[test]
    fn the_page_shows_tasks_resources_and_events() {
        assert_eq!(
            alloc_page(&running(), None, None, &[], NOW),
            "ID                  = 0af996ed-4a0c-1c9e-6a5f-8b0f3c3f1f2e\n\
             Eval ID             = be9bde98\n\
             Name                = hello.hello[0]\n\
             Node ID             = f7476465\n\
             Node Name           = dev\n\
             Job ID              = hello\n\
             Job Version         = 0\n\
             Client Status       = running\n\
             Client Description  = Tasks are running\n\
             Desired Status      = run\n\
             Desired Description = <none>\n\
             Created             = 1m5s ago\n\
             Modified            = 5s ago\n\
             \n\
             Task \"hello\" is \"running\"\n\
             Task Resources:\n\
             CPU     Memory  Disk     Addresses\n\
             50 MHz  32 MiB  300 MiB  <none>\n\
             \n\
             Task Events:\n\
             Started At     = 2023-11-14T22:12:20Z\n\
             Finished At    = N/A\n\
             Total Restarts = 0\n\
             Last Restart   = N/A\n\
             \n\
             Recent Events:\n\
             Time                  Type      Description\n\
             2023-11-14T22:12:20Z  Started   Task started by client\n\
             2023-11-14T22:12:18Z  Received  Task received by client"
        );
    }

    #[test]
    fn rescheduled_allocations_show_attempts_and_history() {
        let mut a = running();
        a.previous_allocation = "11111111-aaaa".into();
        a.reschedule_tracker = Some(Box::new(RescheduleTracker {
            events: vec![RescheduleEvent {
                reschedule_time_unix_ns: NOW - 30 * S,
                prev_alloc_id: "11111111-aaaa".into(),
                prev_node_id: "22222222-bbbb".into(),
                delay_ns: 5 * S,
            }],
        }));
        let job = Job {
            task_groups: vec![TaskGroup {
                name: "hello".into(),
                tasks: vec![Task {
                    name: "hello".into(),
                    ..Default::default()
                }],
                reschedule_policy: Some(ReschedulePolicy {
                    attempts: 3,
                    interval_ns: 3600 * S,
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        };
        let out = alloc_page(&a, Some(&job), None, &[], NOW);
        assert!(out.contains("\nReschedule Attempts  = 1/3\n"), "{out}");
        assert!(out.contains("\nRescheduled Alloc ID = 11111111\n"), "{out}");
        assert!(!out.contains("Reschedule Eligibility"), "{out}");
        assert!(
            out.ends_with(
                "Reschedule History\n\
             Time     Previous Alloc  Previous Node  Delay\n\
             30s ago  11111111        22222222       5s"
            ),
            "{out}"
        );
    }

    #[test]
    fn attempts_outside_the_interval_do_not_count() {
        let mut a = running();
        a.modify_time_unix_ns = NOW;
        let event = |ago: i64| RescheduleEvent {
            reschedule_time_unix_ns: NOW - ago * S,
            prev_alloc_id: "11111111-aaaa".into(),
            prev_node_id: "22222222-bbbb".into(),
            delay_ns: 5 * S,
        };
        a.reschedule_tracker = Some(Box::new(RescheduleTracker {
            events: vec![event(7200), event(600), event(30)],
        }));
        let mut job = Job {
            task_groups: vec![TaskGroup {
                name: "hello".into(),
                reschedule_policy: Some(ReschedulePolicy {
                    attempts: 3,
                    interval_ns: 3600 * S,
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(reschedule_attempts(&a, Some(&job)).as_deref(), Some("2/3"));
        job.task_groups[0].reschedule_policy = Some(ReschedulePolicy {
            unlimited: true,
            ..Default::default()
        });
        assert_eq!(reschedule_attempts(&a, Some(&job)), None);
        assert_eq!(reschedule_attempts(&a, None), None);
    }

    #[test]
    fn a_pending_replacement_shows_when_it_is_due() {
        let mut a = running();
        a.set_client_status(caravan_proto::AllocClientStatus::Failed);
        a.followup_eval_id = "33333333-cccc".into();
        let out = alloc_page(&a, None, Some(NOW + 25 * S), &[], NOW);
        assert!(
            out.contains("\nReschedule Eligibility = 25s from now\n"),
            "{out}"
        );
        let out = alloc_page(&a, None, Some(NOW - 5 * S), &[], NOW);
        assert!(!out.contains("Reschedule Eligibility"), "{out}");
    }

    #[test]
    fn events_without_messages_are_described() {
        let e = TaskEvent {
            r#type: "Terminated".into(),
            exit_code: 2,
            ..Default::default()
        };
        assert_eq!(describe(&e), "Exit Code: 2");
        let e = TaskEvent {
            r#type: "Restarting".into(),
            restart_delay_ns: 15 * S,
            ..Default::default()
        };
        assert_eq!(describe(&e), "Task restarting in 15s");
    }

    #[test]
    fn service_checks_follow_the_basic_info_sorted_with_group_checks_named_so() {
        let check = |service: &str, task: &str, name: &str, status: &str| ServiceCheck {
            service: service.into(),
            task: task.into(),
            name: name.into(),
            mode: "healthiness".into(),
            status: status.into(),
        };
        let checks = [
            check("web", "", "port", "failure"),
            check("api", "server", "alive", "success"),
        ];
        assert_eq!(
            service_checks(&checks).unwrap(),
            "Nomad Service Checks:\n\
             Service  Task     Name   Mode         Status\n\
             api      server   alive  healthiness  success\n\
             web      (group)  port   healthiness  failure"
        );
        assert_eq!(service_checks(&[]), None);
        let page = alloc_page(&running(), None, None, &checks, NOW);
        let at = page
            .find("\n\nNomad Service Checks:\n")
            .expect("the section");
        assert!(
            page[..at].ends_with("Modified            = 5s ago"),
            "{page}"
        );
        assert!(
            page[at..].contains("\n\nTask \"hello\""),
            "tasks after: {page}"
        );
    }
}

use std::time::Duration;

use caravan_proto::{Allocation, CheckRestart, Node, Task};
use tokio::net::TcpListener;

use super::*;
use crate::checks::Observation;
use crate::checks::status::Outcome;

fn group(check: Option<ServiceCheck>) -> TaskGroup {
    let web = Service {
        name: "web-${NOMAD_TASK_NAME}".into(),
        port_label: "8080".into(),
        checks: check.into_iter().collect(),
        ..Default::default()
    };
    TaskGroup {
        name: "g".into(),
        tasks: vec![
            Task {
                name: "web".into(),
                services: vec![web],
                ..Default::default()
            },
            Task {
                name: "log".into(),
                ..Default::default()
            },
        ],
        services: vec![Service {
            name: "g-svc".into(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn alloc() -> Allocation {
    Allocation {
        id: "a1".into(),
        namespace: "default".into(),
        job_id: "j".into(),
        ..Default::default()
    }
}

fn interpolate(task: Option<&str>, input: &str) -> String {
    input.replace("${NOMAD_TASK_NAME}", task.unwrap_or("-"))
}

/// Syncs with `web` and `log` running as given, and everything sent.
fn sync(s: &mut AllocServices, g: &TaskGroup, web: bool, log: bool, stopping: bool) -> Vec<String> {
    let (a, n) = (alloc(), Node::default());
    let tasks = [
        TaskNow {
            name: "web",
            running: web,
            handle: None,
        },
        TaskNow {
            name: "log",
            running: log,
            handle: None,
        },
    ];
    s.sync(&Now {
        group: g,
        placement: Placement {
            alloc: &a,
            node: &n,
            ports: &[],
        },
        tasks: &tasks,
        main_running: web || log,
        main_dead: !web && !log,
        stopping,
        interpolate: &interpolate,
    })
}

fn ids(v: &[ServiceRegistration]) -> Vec<&str> {
    v.iter().map(|r| r.id.as_str()).collect()
}

const WEB: &str = "_nomad-task-a1-web-web-web-8080";
const GROUP: &str = "_nomad-task-a1-group-g-g-svc-";

#[test]
fn services_follow_their_tasks_and_the_group_its_main_tasks() {
    let g = group(None);
    let mut s = AllocServices::new(true);
    assert!(sync(&mut s, &g, false, false, false).is_empty());
    assert!(!s.has_unsent());

    // `log` runs: the group's service; `web` not yet.
    sync(&mut s, &g, false, true, false);
    let (reg, dereg) = s.take_unsent();
    assert_eq!(ids(&reg), vec![GROUP]);
    assert!(dereg.is_empty());

    sync(&mut s, &g, true, true, false);
    let (reg, _) = s.take_unsent();
    assert_eq!(ids(&reg), vec![WEB]);
    assert_eq!(
        reg[0].service_name, "web-web",
        "interpolated in the task's env"
    );
    assert_eq!((reg[0].address.as_str(), reg[0].port), ("127.0.0.1", 8080));
    sync(&mut s, &g, true, true, false);
    assert!(!s.has_unsent(), "nothing changes, nothing is sent");

    // `web` restarts: gone while it is down, back once it runs; the group's stays.
    sync(&mut s, &g, false, true, false);
    let (reg, dereg) = s.take_unsent();
    assert!(reg.is_empty());
    assert_eq!(ids(&dereg), vec![WEB]);
    assert_eq!(dereg[0].service_name, "web-web");
    // Down and up again before a send: the registration alone goes.
    sync(&mut s, &g, true, true, false);
    sync(&mut s, &g, false, true, false);
    sync(&mut s, &g, true, true, false);
    let (reg, dereg) = s.take_unsent();
    assert_eq!((ids(&reg), dereg.len()), (vec![WEB], 0));

    // The alloc stops: everything goes, at once.
    sync(&mut s, &g, true, true, true);
    let (reg, dereg) = s.take_unsent();
    assert!(reg.is_empty());
    assert_eq!(ids(&dereg), vec![GROUP, WEB]);
}

#[test]
fn a_promoted_canary_takes_its_tags_back() {
    let mut g = group(None);
    g.tasks[0].services[0].tags = vec!["v2".into()];
    g.tasks[0].services[0].canary_tags = vec!["canary".into()];
    let mut s = AllocServices::new(true);
    sync(&mut s, &g, true, false, false);
    s.take_unsent();
    s.set_canary(false);
    assert!(!s.has_unsent(), "not a canary before either");
    s.set_canary(true);
    let (reg, _) = s.take_unsent();
    assert_eq!(
        ids(&reg),
        vec![WEB],
        "the group's service has no canary tags"
    );
    assert_eq!(reg[0].tags, vec!["canary"]);
    s.set_canary(false);
    let (reg, _) = s.take_unsent();
    assert_eq!(reg[0].tags, vec!["v2"]);
}

#[test]
fn a_registration_error_names_the_service() {
    let mut g = group(None);
    g.tasks[0].services[0].port_label = "http".into();
    let mut s = AllocServices::new(true);
    let errors = sync(&mut s, &g, true, false, false);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("\"web-web\""), "{errors:?}");
}

#[tokio::test]
async fn a_check_that_cannot_run_says_why_in_its_result() {
    let mut g = group(None);
    g.tasks[0].services.clear();
    g.services[0].checks = vec![ServiceCheck {
        name: "inside".into(),
        r#type: "script".into(),
        command: "/bin/true".into(),
        ..Default::default()
    }];
    let mut s = AllocServices::new(true);
    let errors = sync(&mut s, &g, true, false, false);
    assert_eq!(errors.len(), 1, "{errors:?}");
    let (reg, _) = s.take_unsent();
    assert!(
        reg[0].checks[0].output.contains("needs a running task"),
        "{:?}",
        reg[0].checks[0]
    );
    assert!(!s.checks_healthy());
}

fn tcp_check(name: &str, on_update: &str) -> ServiceCheck {
    ServiceCheck {
        name: name.into(),
        r#type: "tcp".into(),
        interval_ns: 20_000_000,
        timeout_ns: 1_000_000_000,
        on_update: on_update.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_check_result_is_sent_only_when_its_status_changes() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut g = group(Some(tcp_check("alive", "")));
    g.tasks[0].services[0].port_label = port.to_string();
    g.services.clear();
    let mut s = AllocServices::new(true);
    sync(&mut s, &g, true, false, false);
    assert!(s.checking());
    let (reg, _) = s.take_unsent();
    assert_eq!(reg[0].checks[0].status, "pending");
    assert!(!s.checks_healthy(), "pending does not pass");

    let first = s.next_report().await;
    let effect = s.on_report(&first, Instant::now(), 1);
    assert!(effect.changed);
    let (reg, _) = s.take_unsent();
    assert_eq!(reg[0].checks[0].status, "passing");
    assert_eq!(reg[0].checks[0].timestamp, 1);
    assert_eq!(reg[0].checks[0].check_name, "alive");
    assert!(s.checks_healthy());

    for _ in 0..3 {
        let r = s.next_report().await;
        assert_eq!(s.on_report(&r, Instant::now(), 2), Effect::default());
        assert!(!s.has_unsent(), "the same status again is not written");
    }

    drop(listener);
    loop {
        let r = s.next_report().await;
        if s.on_report(&r, Instant::now(), 3).changed {
            break;
        }
    }
    let (reg, _) = s.take_unsent();
    assert_eq!(reg[0].checks[0].status, "critical");
    assert!(reg[0].checks[0].output.contains("dial tcp"));
    assert!(!s.checks_healthy());

    // Once deregistered, a result still in flight changes nothing.
    sync(&mut s, &g, false, false, false);
    s.take_unsent();
    assert!(!s.checking());
    let stale = Report {
        id: first.id.clone(),
        status: Status::Passing,
        changed: true,
        seen: first.seen.clone(),
    };
    assert_eq!(s.on_report(&stale, Instant::now(), 4), Effect::default());
    assert!(!s.has_unsent());
}

fn report(id: &str, status: Status, changed: bool) -> Report {
    Report {
        id: id.into(),
        status,
        changed,
        seen: Observation {
            outcome: Outcome::Failure,
            status_code: 0,
            output: "refused".into(),
        },
    }
}

#[tokio::test]
async fn check_restart_asks_for_a_restart_after_limit_unhealthy_results_past_grace() {
    let mut check = tcp_check("alive", "");
    check.interval_ns = 3_600_000_000_000;
    check.check_restart = Some(CheckRestart {
        limit: 2,
        grace_ns: 10_000_000_000,
        ignore_warnings: false,
    });
    let mut g = group(Some(check));
    g.services.clear();
    let mut s = AllocServices::new(true);
    sync(&mut s, &g, true, false, false);
    let key = format!("1/{WEB}/0");
    let now = Instant::now();
    for _ in 0..3 {
        let e = s.on_report(&report(&key, Status::Critical, false), now, 0);
        assert_eq!(e.restart, None, "inside the grace");
    }
    backdate(&mut s, Duration::from_secs(11));
    assert_eq!(
        s.on_report(&report(&key, Status::Critical, false), now, 0)
            .restart,
        None
    );
    let e = s.on_report(&report(&key, Status::Critical, false), now, 0);
    assert_eq!(
        e.restart,
        Some((
            Restart::Task("web".into()),
            "healthcheck: check \"alive\" unhealthy".into()
        ))
    );
}

#[tokio::test]
async fn a_group_check_without_a_task_restarts_the_alloc() {
    let mut check = tcp_check("alive", "");
    check.interval_ns = 3_600_000_000_000;
    check.check_restart = Some(CheckRestart {
        limit: 1,
        grace_ns: 0,
        ignore_warnings: false,
    });
    let mut g = group(None);
    g.tasks[0].services.clear();
    g.services[0].port_label = "1".into();
    g.services[0].checks = vec![check.clone()];
    let mut s = AllocServices::new(true);
    sync(&mut s, &g, true, false, false);
    let key = format!("1/{GROUP}1/0");
    let e = s.on_report(&report(&key, Status::Critical, true), Instant::now(), 0);
    assert_eq!(e.restart.map(|r| r.0), Some(Restart::Alloc));

    // Naming a task restarts that task only.
    check.task_name = "log".into();
    g.services[0].checks = vec![check];
    let mut s = AllocServices::new(true);
    sync(&mut s, &g, true, false, false);
    let e = s.on_report(&report(&key, Status::Critical, true), Instant::now(), 0);
    assert_eq!(e.restart.map(|r| r.0), Some(Restart::Task("log".into())));
}

#[tokio::test]
async fn health_counts_checks_by_their_on_update() {
    let svc = |checks: Vec<ServiceCheck>| Service {
        name: "s".into(),
        port_label: "1".into(),
        checks,
        ..Default::default()
    };
    let mut g = group(None);
    g.services.clear();
    g.tasks[0].services = vec![svc(vec![
        tcp_check("strict", "require_healthy"),
        tcp_check("lenient", "ignore_warnings"),
        tcp_check("ignored", "ignore"),
    ])];
    g.tasks[0].services[0]
        .checks
        .iter_mut()
        .for_each(|c| c.interval_ns = 3_600_000_000_000);
    let mut s = AllocServices::new(true);
    sync(&mut s, &g, true, false, false);
    let id = "_nomad-task-a1-web-s-1";
    let key = |i: usize| format!("1/{id}/{i}");
    let now = Instant::now();
    s.on_report(&report(&key(0), Status::Passing, true), now, 0);
    assert!(!s.checks_healthy(), "lenient still pending");
    s.on_report(&report(&key(1), Status::Warning, true), now, 0);
    assert!(
        s.checks_healthy(),
        "a warning passes ignore_warnings; ignored never counts"
    );
    s.on_report(&report(&key(0), Status::Warning, true), now, 0);
    assert!(!s.checks_healthy(), "a warning fails require_healthy");
    let (reg, _) = s.take_unsent();
    let modes: Vec<&str> = reg[0].checks.iter().map(|c| c.mode.as_str()).collect();
    assert_eq!(modes, vec!["healthiness", "healthiness", "readiness"]);
}

#[test]
fn a_simulated_node_registers_without_checks() {
    let mut g = group(Some(tcp_check("alive", "")));
    g.services.clear();
    let mut s = AllocServices::new(false);
    sync(&mut s, &g, true, false, false);
    assert!(!s.checking());
    assert!(s.checks_healthy());
    let (reg, _) = s.take_unsent();
    assert_eq!(ids(&reg), vec![WEB]);
}

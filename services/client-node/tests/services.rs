//! Services and their checks on a real client node against the fake
//! gateway: a raw_exec `python3 -m http.server` registered in the update
//! that reports it running, its http check going passing and deciding the
//! deployment's health (`health_check = "checks"`), its deregistration on
//! stop; a script check run through the driver's exec; `check_restart`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use caravan_proto::{
    AllocClientStatus, AllocUpdate, AllocatedPort, AllocatedSharedResources, CheckRestart, JobType,
    Service, ServiceCheck, ServiceRegistration, UpdateStrategy,
};
use common::*;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);

/// Every update the fake received for `alloc_id`, in order.
fn updates(fake: &FakeGateway, alloc_id: &str) -> Vec<AllocUpdate> {
    fake.seen
        .lock()
        .update_calls
        .iter()
        .flat_map(|c| c.updates.iter())
        .filter(|u| u.alloc_id == alloc_id)
        .cloned()
        .collect()
}

/// The newest registration of instance `id` sent so far.
fn registered(fake: &FakeGateway, alloc_id: &str, id: &str) -> Option<ServiceRegistration> {
    updates(fake, alloc_id)
        .into_iter()
        .flat_map(|u| u.registered)
        .rfind(|r| r.id == id)
}

fn deregistered(fake: &FakeGateway, alloc_id: &str, id: &str) -> bool {
    updates(fake, alloc_id)
        .iter()
        .any(|u| u.deregistered.iter().any(|r| r.id == id))
}

/// A port no one listens on now.
fn free_port() -> u32 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    u32::from(l.local_addr().unwrap().port())
}

/// The interpreter itself, not a shim that needs the caller's environment.
fn python() -> String {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn with_port(a: &mut caravan_proto::Allocation, port: u32) {
    a.allocated_resources.as_mut().unwrap().shared = Some(AllocatedSharedResources {
        ports: vec![AllocatedPort {
            label: "http".into(),
            value: port,
            to: 0,
            host_ip: "127.0.0.1".into(),
        }],
        ..Default::default()
    });
}

fn check(name: &str, kind: &str) -> ServiceCheck {
    ServiceCheck {
        name: name.into(),
        r#type: kind.into(),
        interval_ns: 200_000_000,
        timeout_ns: 2_000_000_000,
        on_update: "require_healthy".into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_raw_exec_http_server_registers_passes_its_check_and_is_healthy_by_checks() {
    let stop_fake = CancellationToken::new();
    let fake = FakeGateway::new(Duration::from_secs(5));
    let addr = fake.serve(stop_fake.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let client = start(config(addr, dir.path()), shutdown.clone())
        .await
        .unwrap();
    let node_id = client.ready.node_ids[0].clone();

    let mut web = sh_task(
        "web",
        &format!(
            "exec {} -m http.server $NOMAD_PORT_http --bind 127.0.0.1",
            python()
        ),
    );
    let mut http = check("index", "http");
    http.path = "/".into();
    web.services = vec![Service {
        name: "${NOMAD_JOB_NAME}-web".into(),
        task_name: "web".into(),
        port_label: "http".into(),
        address_mode: "auto".into(),
        provider: "nomad".into(),
        tags: vec!["v1".into()],
        checks: vec![http],
        ..Default::default()
    }];
    let mut job = job("shop", JobType::Service, vec![web]);
    job.task_groups[0].update = Some(UpdateStrategy {
        max_parallel: 1,
        health_check: "checks".into(),
        min_healthy_time_ns: 300_000_000,
        healthy_deadline_ns: 30_000_000_000,
        ..Default::default()
    });
    let mut a = alloc(&job, 0);
    a.deployment_id = "dep-1".into();
    let port = free_port();
    with_port(&mut a, port);
    fake.push(&node_id, vec![a.clone()], vec![job.clone()]);

    let id = format!("_nomad-task-{}-web-shop-web-http", a.id);
    until("registered", WAIT, || {
        registered(&fake, &a.id, &id).is_some()
    })
    .await;
    // It rode on the update that reported the task running.
    let first = updates(&fake, &a.id)
        .into_iter()
        .find(|u| !u.registered.is_empty())
        .unwrap();
    assert_eq!(first.client_status(), AllocClientStatus::Running);
    assert_eq!(first.task_states["web"].state, "running");
    let r = &first.registered[0];
    assert_eq!(r.service_name, "shop-web");
    assert_eq!((r.address.as_str(), r.port), ("127.0.0.1", port as i32));
    assert_eq!(
        (r.node_id.as_str(), r.job_id.as_str()),
        (node_id.as_str(), "shop")
    );
    assert_eq!(r.namespace, "default");
    assert_eq!(r.tags, vec!["v1"]);
    assert_eq!(r.checks[0].check_name, "index");

    until("check passing", WAIT, || {
        registered(&fake, &a.id, &id).is_some_and(|r| r.checks[0].status == "passing")
    })
    .await;
    let r = registered(&fake, &a.id, &id).unwrap();
    assert_eq!(r.checks[0].status_code, 200);
    assert_eq!(r.checks[0].task, "web");
    let healthy = || {
        fake.update(&a.id)
            .and_then(|u| u.deployment_status)
            .and_then(|d| d.healthy)
    };
    until("healthy by its checks", WAIT, || healthy().is_some()).await;
    assert_eq!(healthy(), Some(true));

    // Passing again and again (5 probes a second) is not written again.
    let sent = || {
        updates(&fake, &a.id)
            .iter()
            .filter(|u| u.registered.iter().any(|r| r.id == id))
            .count()
    };
    let before = sent();
    assert!(before <= 2, "registered, then its check passing: {before}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(sent(), before);

    fake.push(&node_id, vec![stopped(a.clone())], vec![]);
    until("deregistered", WAIT, || deregistered(&fake, &a.id, &id)).await;
    until("complete", WAIT, || {
        fake.status(&a.id) == Some(AllocClientStatus::Complete)
    })
    .await;
    stop(client, shutdown).await;
    stop_fake.cancel();
}

#[tokio::test]
async fn a_script_check_runs_inside_the_task_and_check_restart_restarts_it() {
    let stop_fake = CancellationToken::new();
    let fake = FakeGateway::new(Duration::from_secs(5));
    let addr = fake.serve(stop_fake.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let client = start(config(addr, dir.path()), shutdown.clone())
        .await
        .unwrap();
    let node_id = client.ready.node_ids[0].clone();

    let mut t = sh_task("app", "while true; do sleep 0.05; done");
    let mut script = check("env", "script");
    script.command = "/bin/sh".into();
    script.args = vec!["-c".into(), "echo task $NOMAD_TASK_NAME".into()];
    // Nothing listens on the port: the tcp check fails and restarts the task.
    let mut port = check("port", "tcp");
    port.interval_ns = 100_000_000;
    port.check_restart = Some(CheckRestart {
        limit: 2,
        // Time for the script check to pass first.
        grace_ns: 2_000_000_000,
        ignore_warnings: false,
    });
    t.services = vec![Service {
        name: "app".into(),
        task_name: "app".into(),
        port_label: "http".into(),
        checks: vec![script, port],
        ..Default::default()
    }];
    let job = job("app", JobType::Service, vec![t]);
    let mut a = alloc(&job, 0);
    with_port(&mut a, free_port());
    fake.push(&node_id, vec![a.clone()], vec![job.clone()]);

    let id = format!("_nomad-task-{}-app-app-http", a.id);
    until("the script check passing", WAIT, || {
        registered(&fake, &a.id, &id).is_some_and(|r| r.checks[0].status == "passing")
    })
    .await;
    let r = registered(&fake, &a.id, &id).unwrap();
    assert_eq!(r.checks[0].output.trim(), "task app");

    let restarted = || {
        fake.update(&a.id).is_some_and(|u| {
            u.task_states.get("app").is_some_and(|s| {
                s.events.iter().any(|e| {
                    e.r#type == "Restart Signaled"
                        && e.message == "healthcheck: check \"port\" unhealthy"
                })
            })
        })
    };
    until("restarted by its check", WAIT, restarted).await;
    // Down while restarting, registered again once it runs.
    until("deregistered while restarting", WAIT, || {
        deregistered(&fake, &a.id, &id)
    })
    .await;
    stop(client, shutdown).await;
    stop_fake.cancel();
}

#[tokio::test]
async fn a_canary_registers_its_canary_tags_and_a_promotion_takes_them_back() {
    let stop_fake = CancellationToken::new();
    let fake = FakeGateway::new(Duration::from_secs(5));
    let addr = fake.serve(stop_fake.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let client = start(config(addr, dir.path()), shutdown.clone())
        .await
        .unwrap();
    let node_id = client.ready.node_ids[0].clone();

    let mut t = task("api", "mock", vec![("run_for", s("1h"))]);
    t.services = vec![Service {
        name: "api".into(),
        task_name: "api".into(),
        tags: vec!["live".into()],
        canary_tags: vec!["canary".into()],
        ..Default::default()
    }];
    let job = job("api", JobType::Service, vec![t]);
    let mut a = alloc(&job, 0);
    a.deployment_id = "dep-1".into();
    a.deployment_status = Some(caravan_proto::AllocDeploymentStatus {
        canary: true,
        ..Default::default()
    });
    fake.push(&node_id, vec![a.clone()], vec![job.clone()]);
    let id = format!("_nomad-task-{}-api-api-", a.id);
    until("registered as a canary", WAIT, || {
        registered(&fake, &a.id, &id).is_some_and(|r| r.tags == ["canary"])
    })
    .await;

    let mut promoted = a.clone();
    promoted.deployment_status.as_mut().unwrap().canary = false;
    promoted.alloc_modify_revision += 1;
    fake.push(&node_id, vec![promoted], vec![job]);
    until("its tags once promoted", WAIT, || {
        registered(&fake, &a.id, &id).is_some_and(|r| r.tags == ["live"])
    })
    .await;
    stop(client, shutdown).await;
    stop_fake.cancel();
}

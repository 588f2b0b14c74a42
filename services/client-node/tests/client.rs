//! The client node against a fake api-gateway: registration and heartbeats,
//! allocs pushed → tasks run → batched status updates, restart policy,
//! leader tasks, failover, retries, and logs over the node's own API.

// Helpers outside #[test] functions may unwrap too: a failure is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use caravan_proto::client_node_service_client::ClientNodeServiceClient;
use caravan_proto::{AllocClientStatus, JobType, ReadLogsRequest};
use common::*;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn registers_heartbeats_and_runs_pushed_allocs_with_batched_updates() {
    let stop_fake = CancellationToken::new();
    let fake = FakeGateway::new(Duration::from_millis(600));
    let addr = fake.serve(stop_fake.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let client = start(config(addr, dir.path()), shutdown.clone())
        .await
        .unwrap();
    let node_id = client.ready.node_ids[0].clone();

    until("registration", WAIT, || {
        fake.seen.lock().registrations.len() == 1
    })
    .await;
    let node = fake.seen.lock().registrations[0].clone();
    assert_eq!(node.id, node_id);
    assert_eq!(node.name, "test-node");
    assert_eq!(node.http_addr, client.ready.advertised);
    assert_eq!(node.resources.as_ref().unwrap().cpu_mhz, 4000);
    assert_eq!(node.attributes["driver.raw_exec"], "1");
    assert!(node.drivers["mock"].healthy);
    assert_eq!(
        node.computed_class,
        caravan_scheduler::compute_node_class(&node)
    );
    // TTL 600 ms: a heartbeat about every 300 ms.
    until("three heartbeats", WAIT, || {
        fake.seen
            .lock()
            .heartbeats
            .get(&node_id)
            .copied()
            .unwrap_or(0)
            >= 3
    })
    .await;

    let job = job(
        "batchy",
        JobType::Batch,
        vec![task("work", "mock", vec![("run_for", s("300ms"))])],
    );
    let allocs: Vec<_> = (0..30).map(|i| alloc(&job, i)).collect();
    fake.push(&node_id, allocs.clone(), vec![job.clone()]);
    until("all allocs complete", WAIT, || {
        allocs
            .iter()
            .all(|a| fake.status(&a.id) == Some(AllocClientStatus::Complete))
    })
    .await;
    {
        let seen = fake.seen.lock();
        let updates: usize = seen.update_calls.iter().map(|c| c.updates.len()).sum();
        assert!(
            seen.update_calls.len() < updates / 5,
            "{} calls for {updates} updates: not batched",
            seen.update_calls.len()
        );
        assert!(seen.update_calls.iter().all(|c| c.node_id == node_id));
        let a = &seen.latest[&allocs[0].id];
        let work = &a.task_states["work"];
        assert_eq!(work.state, "dead");
        assert!(!work.failed);
        let kinds: Vec<&str> = work.events.iter().map(|e| e.r#type.as_str()).collect();
        assert_eq!(
            kinds,
            vec!["Received", "Task Setup", "Started", "Terminated"]
        );
    }
    stop(client, shutdown).await;
    stop_fake.cancel();
}

#[tokio::test]
async fn failing_tasks_restart_per_policy_then_fail_the_alloc() {
    let stop_fake = CancellationToken::new();
    let fake = FakeGateway::new(Duration::from_secs(5));
    let addr = fake.serve(stop_fake.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let client = start(config(addr, dir.path()), shutdown.clone())
        .await
        .unwrap();
    let node_id = client.ready.node_ids[0].clone();
    let job = job(
        "flaky",
        JobType::Service,
        vec![task(
            "web",
            "mock",
            vec![("run_for", s("50ms")), ("exit_code", n(3.0))],
        )],
    );
    let a = alloc(&job, 0);
    fake.push(&node_id, vec![a.clone()], vec![job]);
    until("alloc failed", WAIT, || {
        fake.status(&a.id) == Some(AllocClientStatus::Failed)
    })
    .await;
    let u = fake.update(&a.id).unwrap();
    let web = &u.task_states["web"];
    assert!(web.failed);
    assert_eq!(web.restarts, 2);
    let last = web.events.last().unwrap();
    assert_eq!(last.r#type, "Not Restarting");
    assert!(last.fails_task);
    assert!(
        web.events
            .iter()
            .any(|e| e.r#type == "Terminated" && e.exit_code == 3)
    );
    stop(client, shutdown).await;
    stop_fake.cancel();
}

#[tokio::test]
async fn leader_exit_stops_the_other_tasks_and_a_failure_kills_siblings() {
    let stop_fake = CancellationToken::new();
    let fake = FakeGateway::new(Duration::from_secs(5));
    let addr = fake.serve(stop_fake.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let client = start(config(addr, dir.path()), shutdown.clone())
        .await
        .unwrap();
    let node_id = client.ready.node_ids[0].clone();

    let mut leader = task("main", "mock", vec![("run_for", s("200ms"))]);
    leader.leader = true;
    let side = task("side", "mock", vec![("run_for", s("1h"))]);
    let led = job("led", JobType::Batch, vec![leader, side.clone()]);
    let a = alloc(&led, 0);

    let broken = task(
        "broken",
        "mock",
        vec![("start_error", s("image not found"))],
    );
    let failing = job("failing", JobType::Batch, vec![broken, side]);
    let b = alloc(&failing, 0);

    fake.push(&node_id, vec![a.clone(), b.clone()], vec![led, failing]);
    until("led alloc complete", WAIT, || {
        fake.status(&a.id) == Some(AllocClientStatus::Complete)
    })
    .await;
    let u = fake.update(&a.id).unwrap();
    let kinds: Vec<&str> = u.task_states["side"]
        .events
        .iter()
        .map(|e| e.r#type.as_str())
        .collect();
    assert!(kinds.contains(&"Leader Task Dead"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"Killed"));

    until("failing alloc failed", WAIT, || {
        fake.status(&b.id) == Some(AllocClientStatus::Failed)
            && fake.update(&b.id).unwrap().task_states["side"].state == "dead"
    })
    .await;
    let u = fake.update(&b.id).unwrap();
    assert!(
        u.task_states["side"]
            .events
            .iter()
            .any(|e| e.r#type == "Sibling Task Failed")
    );
    assert!(!u.task_states["side"].failed);
    assert!(u.task_states["broken"].failed);
    stop(client, shutdown).await;
    stop_fake.cancel();
}

#[tokio::test]
async fn raw_exec_task_runs_logs_are_served_and_stop_kills_it() {
    let stop_fake = CancellationToken::new();
    let fake = FakeGateway::new(Duration::from_secs(5));
    let addr = fake.serve(stop_fake.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let client = start(config(addr, dir.path()), shutdown.clone())
        .await
        .unwrap();
    let node_id = client.ready.node_ids[0].clone();

    let mut t = sh_task(
        "web",
        "echo \"hello from $NOMAD_ALLOC_NAME in ${NOMAD_DC}\"; echo $$ > $NOMAD_ALLOC_DIR/pid; \
         trap 'echo bye; exit 0' TERM; while true; do sleep 0.05; done",
    );
    t.kill_timeout_ns = 3_000_000_000;
    let job = job("web", JobType::Service, vec![t]);
    let a = alloc(&job, 0);
    fake.push(&node_id, vec![a.clone()], vec![job.clone()]);
    until("alloc running", WAIT, || {
        fake.status(&a.id) == Some(AllocClientStatus::Running)
    })
    .await;

    let alloc_dir = dir.path().join("allocs").join(&a.id);
    let log = alloc_dir.join("alloc/logs/web.stdout.0");
    until("output in the log file", WAIT, || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("hello"))
    })
    .await;
    assert!(alloc_dir.join("web/local").is_dir());
    assert!(alloc_dir.join("web/secrets").is_dir());

    let mut logs = ClientNodeServiceClient::connect(format!("http://{}", client.local_addr))
        .await
        .unwrap();
    let mut stream = logs
        .read_logs(ReadLogsRequest {
            alloc_id: a.id.clone(),
            task: "web".into(),
            stream: "stdout".into(),
            follow: false,
            offset: 0,
            from_end: false,
        })
        .await
        .unwrap()
        .into_inner();
    let mut text = Vec::new();
    while let Some(chunk) = stream.message().await.unwrap() {
        text.extend(chunk.data);
    }
    assert_eq!(
        String::from_utf8(text).unwrap().trim(),
        "hello from web.web[0] in dc1"
    );
    let bad = logs
        .read_logs(ReadLogsRequest {
            alloc_id: a.id.clone(),
            task: "web".into(),
            stream: "stdin".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), tonic::Code::InvalidArgument);
    assert!(bad.message().contains("stream"));
    let missing = logs
        .read_logs(ReadLogsRequest {
            alloc_id: "nope".into(),
            task: "web".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), tonic::Code::NotFound);

    let pid: i32 = std::fs::read_to_string(alloc_dir.join("alloc/pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(caravan_client_node::proc_stat(pid).is_some_and(|s| s.alive()));
    fake.push(&node_id, vec![stopped(a.clone())], vec![]);
    until("alloc complete after stop", WAIT, || {
        fake.status(&a.id) == Some(AllocClientStatus::Complete)
    })
    .await;
    assert!(!caravan_client_node::proc_stat(pid).is_some_and(|s| s.alive()));
    let u = fake.update(&a.id).unwrap();
    let kinds: Vec<&str> = u.task_states["web"]
        .events
        .iter()
        .map(|e| e.r#type.as_str())
        .collect();
    assert_eq!(
        &kinds[kinds.len() - 3..],
        &["Killing", "Terminated", "Killed"]
    );
    assert!(std::fs::read_to_string(&log).unwrap().contains("bye"));

    // Gone from the set: the alloc dir goes too.
    fake.push(&node_id, vec![], vec![]);
    until("alloc dir removed", WAIT, || !alloc_dir.exists()).await;
    stop(client, shutdown).await;
    stop_fake.cancel();
}

#[tokio::test]
async fn dispatch_payload_lands_in_the_task_dir() {
    let stop_fake = CancellationToken::new();
    let fake = FakeGateway::new(Duration::from_secs(5));
    let addr = fake.serve(stop_fake.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let client = start(config(addr, dir.path()), shutdown.clone())
        .await
        .unwrap();
    let node_id = client.ready.node_ids[0].clone();
    let mut t = sh_task("read", "cat $NOMAD_TASK_DIR/in/payload.txt");
    t.dispatch_payload_file = "in/payload.txt".into();
    let mut job = job("disp", JobType::Batch, vec![t]);
    job.payload = b"the payload".to_vec();
    let a = alloc(&job, 0);
    fake.push(&node_id, vec![a.clone()], vec![job]);
    until("alloc complete", WAIT, || {
        fake.status(&a.id) == Some(AllocClientStatus::Complete)
    })
    .await;
    let out = std::fs::read_to_string(
        dir.path()
            .join("allocs")
            .join(&a.id)
            .join("alloc/logs/read.stdout.0"),
    )
    .unwrap();
    assert_eq!(out, "the payload");
    stop(client, shutdown).await;
    stop_fake.cancel();
}

#[tokio::test]
async fn registers_again_when_forgotten_and_fails_over_between_gateways() {
    let stop_fake = CancellationToken::new();
    let fake = FakeGateway::new(Duration::from_millis(400));
    let addr = fake.serve(stop_fake.clone()).await;
    // The first address refuses connections.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let mut conf = config(addr, dir.path());
    conf.servers = vec![dead.to_string(), addr.to_string()];
    let shutdown = CancellationToken::new();
    let client = start(conf, shutdown.clone()).await.unwrap();
    let node_id = client.ready.node_ids[0].clone();
    until("registration through the second gateway", WAIT, || {
        fake.seen.lock().registrations.len() == 1
    })
    .await;
    until("a heartbeat", WAIT, || {
        fake.seen.lock().heartbeats.contains_key(&node_id)
    })
    .await;
    fake.seen.lock().forgotten.insert(node_id.clone());
    until("registered again", WAIT, || {
        fake.seen.lock().registrations.len() == 2
    })
    .await;
    assert_eq!(
        fake.seen.lock().registrations[1].id,
        node_id,
        "same node id"
    );
    stop(client, shutdown).await;
    stop_fake.cancel();
}

/// A node whose alloc stream breaks and is opened again on a gateway whose
/// cache lags behind the one it came from must not take that gateway's
/// older whole set for the truth: it would stop the allocs placed since (and
/// report them complete while the servers still want them running). It asks
/// for a view at least as new as what it acts on.
#[tokio::test]
async fn a_stream_opened_again_never_takes_an_older_whole_set() {
    let stop_fake = CancellationToken::new();
    let fake = FakeGateway::new(Duration::from_secs(5));
    let addr = fake.serve(stop_fake.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let client = start(config(addr, dir.path()), shutdown.clone())
        .await
        .unwrap();
    let node_id = client.ready.node_ids[0].clone();
    let job = job(
        "web",
        JobType::Service,
        vec![task("t", "mock", vec![("run_for", s("1h"))])],
    );
    let a = alloc(&job, 0);
    let placed_at = fake.push(&node_id, vec![a.clone()], vec![job.clone()]);
    until("the alloc runs", WAIT, || {
        fake.status(&a.id) == Some(AllocClientStatus::Running)
    })
    .await;
    // The gateway goes away; the next one's view is from before the placement.
    fake.end_streams_with(
        &node_id,
        caravan_proto::NodeAllocations {
            revision: placed_at - 1,
            full: true,
            ..Default::default()
        },
    );
    until("the stream opened again", WAIT, || {
        fake.seen.lock().watch_min_revisions.len() >= 2
    })
    .await;
    assert!(
        fake.seen.lock().watch_min_revisions[1] >= placed_at,
        "{:?}",
        fake.seen.lock().watch_min_revisions
    );
    // The view catches up, with a new placement the node acts on.
    let b = alloc(&job, 1);
    fake.push(&node_id, vec![a.clone(), b.clone()], vec![job]);
    until("the new alloc runs", WAIT, || {
        fake.status(&b.id) == Some(AllocClientStatus::Running)
    })
    .await;
    let history = fake.seen.lock().history[&a.id].clone();
    assert!(
        !history.contains(&AllocClientStatus::Complete),
        "the alloc was stopped by an older set: {history:?}"
    );
    assert_eq!(fake.status(&a.id), Some(AllocClientStatus::Running));
    stop(client, shutdown).await;
    stop_fake.cancel();
}

#[tokio::test]
async fn status_updates_survive_gateway_errors_without_going_backwards() {
    let stop_fake = CancellationToken::new();
    let fake = FakeGateway::new(Duration::from_secs(5));
    let addr = fake.serve(stop_fake.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let client = start(config(addr, dir.path()), shutdown.clone())
        .await
        .unwrap();
    let node_id = client.ready.node_ids[0].clone();
    until("registration", WAIT, || {
        fake.seen.lock().registrations.len() == 1
    })
    .await;
    fake.seen.lock().fail_updates = 4;
    let job = job(
        "quick",
        JobType::Batch,
        vec![task("t", "mock", vec![("run_for", s("100ms"))])],
    );
    let a = alloc(&job, 0);
    fake.push(&node_id, vec![a.clone()], vec![job]);
    until("alloc complete", WAIT, || {
        fake.status(&a.id) == Some(AllocClientStatus::Complete)
    })
    .await;
    assert_eq!(fake.seen.lock().fail_updates, 0, "the outage was hit");
    // Give any stale retry a chance to arrive; the newest state must stay.
    // The window covers the reporter's next rounds: it sends what is pending
    // one batch after another, so a stale state still queued behind the
    // delivered "complete" would go out within its interval and the 100 ms
    // retry backoff (status_reporter.rs), well inside 500 ms.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let history = fake.seen.lock().history[&a.id].clone();
    assert_eq!(
        history.last(),
        Some(&AllocClientStatus::Complete),
        "{history:?}"
    );
    let complete_at = history
        .iter()
        .position(|s| *s == AllocClientStatus::Complete)
        .unwrap();
    assert!(
        history[complete_at..]
            .iter()
            .all(|s| *s == AllocClientStatus::Complete),
        "{history:?}"
    );
    stop(client, shutdown).await;
    stop_fake.cancel();
}

#[tokio::test]
async fn allocs_missing_a_driver_or_stopped_before_start_are_settled() {
    let stop_fake = CancellationToken::new();
    let fake = FakeGateway::new(Duration::from_secs(5));
    let addr = fake.serve(stop_fake.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let client = start(config(addr, dir.path()), shutdown.clone())
        .await
        .unwrap();
    let node_id = client.ready.node_ids[0].clone();
    let job_a = job(
        "dockery",
        JobType::Service,
        vec![task("t", "docker", vec![])],
    );
    let a = alloc(&job_a, 0);
    let job_b = job(
        "never",
        JobType::Service,
        vec![task("t", "mock", vec![("run_for", s("1h"))])],
    );
    let b = stopped(alloc(&job_b, 0));
    fake.push(&node_id, vec![a.clone(), b.clone()], vec![job_a, job_b]);
    until("both settled", WAIT, || {
        fake.status(&a.id) == Some(AllocClientStatus::Failed)
            && fake.status(&b.id) == Some(AllocClientStatus::Complete)
    })
    .await;
    let u = fake.update(&a.id).unwrap();
    assert!(
        u.task_states["t"]
            .events
            .last()
            .unwrap()
            .message
            .contains("missing driver")
    );
    stop(client, shutdown).await;
    stop_fake.cancel();
}

#[tokio::test]
async fn lifecycle_hooks_run_in_order_and_sidecars_stop_with_the_main_task() {
    let stop_fake = CancellationToken::new();
    let fake = FakeGateway::new(Duration::from_secs(5));
    let addr = fake.serve(stop_fake.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let client = start(config(addr, dir.path()), shutdown.clone())
        .await
        .unwrap();
    let node_id = client.ready.node_ids[0].clone();
    let hook = |mut t: caravan_proto::Task, hook: &str, sidecar: bool| {
        t.lifecycle = Some(caravan_proto::TaskLifecycle {
            hook: hook.into(),
            sidecar,
        });
        t
    };
    let log = "$NOMAD_ALLOC_DIR/order";
    let tasks = vec![
        hook(
            sh_task("init", &format!("sleep 0.2; echo init >> {log}")),
            "prestart",
            false,
        ),
        hook(
            sh_task(
                "side",
                &format!("echo side >> {log}; trap 'exit 0' TERM; while true; do sleep 0.05; done"),
            ),
            "prestart",
            true,
        ),
        sh_task("main", &format!("echo main >> {log}; sleep 0.2")),
        hook(
            sh_task("post", &format!("echo post >> {log}")),
            "poststop",
            false,
        ),
    ];
    let job = job("hooks", JobType::Batch, tasks);
    let a = alloc(&job, 0);
    fake.push(&node_id, vec![a.clone()], vec![job]);
    until("alloc complete", WAIT, || {
        fake.status(&a.id) == Some(AllocClientStatus::Complete)
    })
    .await;
    let order =
        std::fs::read_to_string(dir.path().join("allocs").join(&a.id).join("alloc/order")).unwrap();
    let lines: Vec<&str> = order.lines().collect();
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert_eq!(lines[2..], ["main", "post"], "{lines:?}");
    let u = fake.update(&a.id).unwrap();
    assert!(
        u.task_states["side"]
            .events
            .iter()
            .any(|e| e.r#type == "Main Tasks Dead")
    );
    assert!(
        u.task_states
            .values()
            .all(|s| s.state == "dead" && !s.failed)
    );
    stop(client, shutdown).await;
    stop_fake.cancel();
}

#[tokio::test]
async fn deployment_health_is_decided_by_the_client() {
    let stop_fake = CancellationToken::new();
    let fake = FakeGateway::new(Duration::from_secs(5));
    let addr = fake.serve(stop_fake.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let client = start(config(addr, dir.path()), shutdown.clone())
        .await
        .unwrap();
    let node_id = client.ready.node_ids[0].clone();
    let update = caravan_proto::UpdateStrategy {
        max_parallel: 1,
        health_check: "task_states".into(),
        min_healthy_time_ns: 300_000_000,
        healthy_deadline_ns: 5_000_000_000,
        ..Default::default()
    };
    let mut good = job(
        "good",
        JobType::Service,
        vec![task("web", "mock", vec![("run_for", s("1h"))])],
    );
    good.task_groups[0].update = Some(update.clone());
    let mut a = alloc(&good, 0);
    a.deployment_id = "dep-1".into();
    a.deployment_status = Some(caravan_proto::AllocDeploymentStatus {
        canary: true,
        ..Default::default()
    });
    let mut bad = job(
        "bad",
        JobType::Service,
        vec![task("web", "mock", vec![("start_error", s("nope"))])],
    );
    bad.task_groups[0].update = Some(update);
    let mut b = alloc(&bad, 0);
    b.deployment_id = "dep-2".into();
    fake.push(&node_id, vec![a.clone(), b.clone()], vec![good, bad]);
    let health = |id: &str| {
        fake.update(id)
            .and_then(|u| u.deployment_status)
            .and_then(|d| d.healthy)
    };
    until("both verdicts", WAIT, || {
        health(&a.id).is_some() && health(&b.id).is_some()
    })
    .await;
    assert_eq!(health(&a.id), Some(true));
    assert_eq!(health(&b.id), Some(false));
    let d = fake.update(&a.id).unwrap().deployment_status.unwrap();
    assert!(d.canary, "the canary flag is kept");
    assert!(d.timestamp_unix_ns > 0);
    stop(client, shutdown).await;
    stop_fake.cancel();
}

#[tokio::test]
async fn task_logs_rotate_keeping_max_files_per_stream() {
    let stop_fake = CancellationToken::new();
    let fake = FakeGateway::new(Duration::from_secs(5));
    let addr = fake.serve(stop_fake.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let client = start(config(addr, dir.path()), shutdown.clone())
        .await
        .unwrap();
    let node_id = client.ready.node_ids[0].clone();
    // 3.5 MB on each stream, more than 2 files × 1 MB.
    let mut t = sh_task(
        "chatty",
        "head -c 3500000 /dev/zero | tr '\\0' o; head -c 3500000 /dev/zero | tr '\\0' e >&2",
    );
    t.log_config = Some(caravan_proto::LogConfig {
        max_files: 2,
        max_file_size_mb: 1,
        disabled: false,
    });
    let job = job("chatty", JobType::Batch, vec![t]);
    let a = alloc(&job, 0);
    fake.push(&node_id, vec![a.clone()], vec![job]);
    until("alloc complete", WAIT, || {
        fake.status(&a.id) == Some(AllocClientStatus::Complete)
    })
    .await;
    let logs = dir.path().join("allocs").join(&a.id).join("alloc/logs");
    for stream in ["stdout", "stderr"] {
        let mut files: Vec<(String, u64)> = std::fs::read_dir(&logs)
            .unwrap()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("chatty.{stream}."))
            })
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    e.metadata().unwrap().len(),
                )
            })
            .collect();
        files.sort();
        // 3.5 MB in 1 MiB files: indices 0..=3, the newest two kept.
        assert_eq!(
            files.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            vec![
                format!("chatty.{stream}.2").as_str(),
                format!("chatty.{stream}.3").as_str()
            ],
            "{files:?}"
        );
        assert_eq!(files[0].1, 1024 * 1024, "a full file: {files:?}");
        assert_eq!(files[1].1, 3_500_000 - 3 * 1024 * 1024, "{files:?}");
    }
    // The logs API reads the kept files in order.
    let mut api = ClientNodeServiceClient::connect(format!("http://{}", client.local_addr))
        .await
        .unwrap();
    let mut stream = api
        .read_logs(ReadLogsRequest {
            alloc_id: a.id.clone(),
            task: "chatty".into(),
            stream: "stderr".into(),
            follow: false,
            offset: 0,
            from_end: false,
        })
        .await
        .unwrap()
        .into_inner();
    let mut total = 0;
    let mut files = Vec::new();
    while let Some(chunk) = stream.message().await.unwrap() {
        assert!(chunk.data.iter().all(|b| *b == b'e'));
        total += chunk.data.len();
        if files.last() != Some(&chunk.file) {
            files.push(chunk.file.clone());
        }
    }
    assert_eq!(total, 3_500_000 - 2 * 1024 * 1024);
    assert_eq!(
        files,
        vec!["alloc/logs/chatty.stderr.2", "alloc/logs/chatty.stderr.3"]
    );
    stop(client, shutdown).await;
    stop_fake.cancel();
}

//! `simulate = N`: many cheap virtual nodes in one process, each registering,
//! heartbeating and running its allocs with the mock driver.

// Helpers outside #[test] functions may unwrap too: a failure is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashSet;
use std::time::Duration;

use caravan_proto::{AllocClientStatus, JobType};
use common::*;
use tokio_util::sync::CancellationToken;

fn threads() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulate_200_registers_200_nodes_that_run_allocs() {
    let stop_fake = CancellationToken::new();
    let fake = FakeGateway::new(Duration::from_secs(2));
    let addr = fake.serve(stop_fake.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let mut conf = config(addr, dir.path());
    conf.simulate = 200;
    conf.simulate_nodes_per_channel = 50;
    let shutdown = CancellationToken::new();
    let client = start(conf, shutdown.clone()).await.unwrap();
    assert_eq!(client.ready.node_ids.len(), 200);

    until("200 registrations", Duration::from_secs(15), || {
        fake.seen.lock().registrations.len() >= 200
    })
    .await;
    let nodes = fake.seen.lock().registrations.clone();
    let ids: HashSet<&str> = nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids.len(), 200, "distinct node ids");
    let names: HashSet<String> = nodes.iter().map(|n| n.name.clone()).collect();
    let want: HashSet<String> = (0..200).map(|i| format!("sim-{i}")).collect();
    assert_eq!(names, want);
    assert!(
        nodes
            .iter()
            .all(|n| n.computed_class == nodes[0].computed_class)
    );
    assert!(
        nodes
            .iter()
            .all(|n| n.resources.as_ref().unwrap().cpu_mhz == 16_000)
    );
    assert!(
        threads() < 64,
        "{} threads: nodes must not cost threads",
        threads()
    );

    until(
        "heartbeats from every node",
        Duration::from_secs(15),
        || fake.seen.lock().heartbeats.len() >= 200,
    )
    .await;

    // Any driver runs as mock, forever unless run_for says otherwise.
    let job = job(
        "web",
        JobType::Service,
        vec![sh_task("web", "this never runs on a simulated node")],
    );
    let mut placed = Vec::new();
    for (i, node) in client.ready.node_ids.iter().take(20).enumerate() {
        let a = alloc(&job, i as u32);
        fake.push(node, vec![a.clone()], vec![job.clone()]);
        placed.push((node.clone(), a));
    }
    until("20 allocs running", Duration::from_secs(10), || {
        placed
            .iter()
            .all(|(_, a)| fake.status(&a.id) == Some(AllocClientStatus::Running))
    })
    .await;
    for (node, a) in &placed {
        let calls = fake.seen.lock().update_calls.clone();
        assert!(
            calls
                .iter()
                .filter(|c| c.updates.iter().any(|u| u.alloc_id == a.id))
                .all(|c| &c.node_id == node),
            "each node reports its own allocs"
        );
    }
    for (node, a) in &placed {
        fake.push(node, vec![stopped(a.clone())], vec![]);
    }
    until("20 allocs complete", Duration::from_secs(10), || {
        placed
            .iter()
            .all(|(_, a)| fake.status(&a.id) == Some(AllocClientStatus::Complete))
    })
    .await;
    stop(client, shutdown).await;
    stop_fake.cancel();
}

#[tokio::test]
async fn simulated_node_ids_survive_a_restart() {
    let stop_fake = CancellationToken::new();
    let fake = FakeGateway::new(Duration::from_secs(5));
    let addr = fake.serve(stop_fake.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let mut conf = config(addr, dir.path());
    conf.simulate = 3;
    let shutdown = CancellationToken::new();
    let first = start(conf.clone(), shutdown.clone()).await.unwrap();
    let ids = first.ready.node_ids.clone();
    stop(first, shutdown).await;
    let shutdown = CancellationToken::new();
    let second = start(conf, shutdown.clone()).await.unwrap();
    assert_eq!(second.ready.node_ids, ids);
    stop(second, shutdown).await;
    stop_fake.cancel();
}

/// The node API serves simulated allocs too: a restart runs the mock task
/// again in place, a running alloc is not collected, a finished one is.
#[tokio::test]
async fn simulated_allocs_restart_and_are_collected() {
    use caravan_proto::client_node_service_client::ClientNodeServiceClient;
    use caravan_proto::{GcAllocRequest, GcNodeRequest, RestartAllocRequest, SignalAllocRequest};

    let stop_fake = CancellationToken::new();
    let fake = FakeGateway::new(Duration::from_secs(5));
    let addr = fake.serve(stop_fake.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let mut conf = config(addr, dir.path());
    conf.simulate = 2;
    let shutdown = CancellationToken::new();
    let client = start(conf, shutdown.clone()).await.unwrap();
    let node = client.ready.node_ids[1].clone();
    let job = job("web", JobType::Service, vec![sh_task("web", "mock")]);
    let a = alloc(&job, 0);
    fake.push(&node, vec![a.clone()], vec![job.clone()]);
    until("the alloc runs", Duration::from_secs(10), || {
        fake.status(&a.id) == Some(AllocClientStatus::Running)
    })
    .await;

    let mut api = ClientNodeServiceClient::connect(format!("http://{}", client.ready.advertised))
        .await
        .unwrap();
    let restart = RestartAllocRequest {
        alloc_id: a.id.clone(),
        ..Default::default()
    };
    api.restart_alloc(restart).await.unwrap();
    until("the restart is reported", Duration::from_secs(10), || {
        fake.seen.lock().latest.get(&a.id).is_some_and(|u| {
            u.task_states
                .get("web")
                .is_some_and(|t| t.restarts == 1 && t.state == "running")
        })
    })
    .await;
    let bad = SignalAllocRequest {
        alloc_id: a.id.clone(),
        signal: "SIGNOPE".into(),
        task: String::new(),
    };
    let e = api.signal_alloc(bad).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(e.message().contains("invalid signal"), "{e:?}");
    let gc = GcAllocRequest {
        alloc_id: a.id.clone(),
    };
    let e = api.gc_alloc(gc.clone()).await.unwrap_err();
    assert!(e.message().contains("not eligible for GC"), "{e:?}");

    fake.push(&node, vec![stopped(a.clone())], vec![]);
    until("the alloc completes", Duration::from_secs(10), || {
        fake.status(&a.id) == Some(AllocClientStatus::Complete)
    })
    .await;
    let collected = api
        .gc_node(GcNodeRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(collected.alloc_ids, vec![a.id.clone()]);
    let e = api.gc_alloc(gc).await.unwrap_err();
    assert!(e.message().contains("not eligible for GC"), "{e:?}");
    stop(client, shutdown).await;
    stop_fake.cancel();
}

/// A simulated alloc registers its services in the update that reports it
/// running (what the C1M benchmark measures), runs no checks, and
/// deregisters them in the update that reports it stopping; a restart
/// through the node's API (which wakes a parked alloc) re-registers the
/// restarted task's service.
#[tokio::test]
async fn simulated_allocs_register_their_services_in_the_running_update() {
    use caravan_proto::client_node_service_client::ClientNodeServiceClient;
    use caravan_proto::{RestartAllocRequest, Service, ServiceCheck};

    let stop_fake = CancellationToken::new();
    let fake = FakeGateway::new(Duration::from_secs(5));
    let addr = fake.serve(stop_fake.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let mut conf = config(addr, dir.path());
    conf.simulate = 1;
    let shutdown = CancellationToken::new();
    let client = start(conf, shutdown.clone()).await.unwrap();
    let node = client.ready.node_ids[0].clone();
    let mut t = sh_task("web", "mock");
    t.services = vec![Service {
        name: "web".into(),
        task_name: "web".into(),
        checks: vec![ServiceCheck {
            name: "alive".into(),
            r#type: "tcp".into(),
            interval_ns: 10_000_000,
            timeout_ns: 10_000_000,
            ..Default::default()
        }],
        ..Default::default()
    }];
    let mut job = job("shop", JobType::Service, vec![t]);
    job.task_groups[0].services = vec![Service {
        name: "shop".into(),
        ..Default::default()
    }];
    let a = alloc(&job, 0);
    fake.push(&node, vec![a.clone()], vec![job.clone()]);
    until("the alloc runs", Duration::from_secs(10), || {
        fake.status(&a.id) == Some(AllocClientStatus::Running)
    })
    .await;
    let all = || {
        fake.seen
            .lock()
            .update_calls
            .iter()
            .flat_map(|c| c.updates.clone())
            .filter(|u| u.alloc_id == a.id)
            .collect::<Vec<_>>()
    };
    let task_id = format!("_nomad-task-{}-web-web-", a.id);
    let group_id = format!("_nomad-task-{}-group-shop-shop-", a.id);
    let running = all()
        .into_iter()
        .find(|u| u.client_status() == AllocClientStatus::Running)
        .unwrap();
    let mut ids: Vec<&str> = running.registered.iter().map(|r| r.id.as_str()).collect();
    ids.sort_unstable();
    let mut want = vec![group_id.as_str(), task_id.as_str()];
    want.sort_unstable();
    assert_eq!(
        ids, want,
        "registered with the running state, in one update"
    );
    let web = running.registered.iter().find(|r| r.id == task_id).unwrap();
    assert_eq!(web.checks[0].status, "pending", "no check runs here");
    assert_eq!(web.node_id, node);

    let mut api = ClientNodeServiceClient::connect(format!("http://{}", client.ready.advertised))
        .await
        .unwrap();
    let restart = RestartAllocRequest {
        alloc_id: a.id.clone(),
        ..Default::default()
    };
    api.restart_alloc(restart).await.unwrap();
    until("the restart is reported", Duration::from_secs(10), || {
        fake.seen.lock().latest.get(&a.id).is_some_and(|u| {
            u.task_states
                .get("web")
                .is_some_and(|t| t.restarts == 1 && t.state == "running")
        })
    })
    .await;
    let regs = |id: &str| {
        all()
            .iter()
            .filter(|u| u.registered.iter().any(|r| r.id == id))
            .count()
    };
    until(
        "the task's service registered again",
        Duration::from_secs(10),
        || regs(&task_id) >= 2,
    )
    .await;
    assert_eq!(regs(&group_id), 1, "the group's service stays as it was");

    fake.push(&node, vec![stopped(a.clone())], vec![]);
    until("the alloc completes", Duration::from_secs(10), || {
        fake.status(&a.id) == Some(AllocClientStatus::Complete)
    })
    .await;
    let gone: Vec<String> = all()
        .iter()
        .flat_map(|u| u.deregistered.iter().map(|r| r.id.clone()))
        .collect();
    assert!(gone.contains(&group_id), "{gone:?}");
    assert!(gone.contains(&task_id), "{gone:?}");
    stop(client, shutdown).await;
    stop_fake.cancel();
}

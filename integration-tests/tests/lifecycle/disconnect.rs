//! Disconnected clients with the real binaries: a client node frozen
//! (SIGSTOP, as when cut off from every gateway) past its heartbeat TTL
//! goes `disconnected`, its allocations `unknown` with their names kept,
//! and a replacement runs on the other node; resumed, its client reports
//! again and the group's `reconcile` strategy keeps one copy. Frozen past
//! `lost_after`, its allocations are lost and the node goes down.

use caravan_integration_tests::jobs;
use caravan_integration_tests::{Cluster, Progress, wait_for};
use caravan_model::AllocExt;
use caravan_proto::{AllocClientStatus, AllocDesiredStatus, Allocation, NodeStatus};
use nix::sys::signal::Signal;
use serde_json::json;

use crate::{
    Reaper, SECOND_NS, STEP, describe, pid_dir, raw_exec_cluster, register, set, sleeper_script,
    wait_allocs, wait_running_version,
};

/// Waits until the node `id` has `status`.
async fn wait_node(c: &Cluster, id: &str, status: NodeStatus) {
    let state = c.state.clone();
    wait_for(&format!("node {id} to be {status:?}"), STEP, async || {
        let nodes = state.nodes().await?;
        Ok(match nodes.iter().find(|n| n.id == id) {
            Some(n) if n.status() == status => Progress::Done(()),
            other => Progress::Waiting(format!("{:?}", other.map(|n| n.status()))),
        })
    })
    .await
    .unwrap();
}

/// A two-node cluster running `job_id` (2 allocs, one per node) whose group
/// has `disconnect`; returns the cluster, node ids, and the alloc on the
/// first node.
async fn running_with(
    name: &str,
    job_id: &str,
    disconnect: serde_json::Value,
) -> (Cluster, Vec<String>, Allocation, Reaper) {
    let a = format!("{name}-a");
    let b = format!("{name}-b");
    let (c, nodes) = raw_exec_cluster(name, &[&a, &b]).await;
    let pids = pid_dir(&c);
    let reaper = Reaper(pids.clone());
    let http = c.http().unwrap();
    let mut job = jobs::service_job(job_id, 2, jobs::raw_exec_task(&sleeper_script(&pids, "up")));
    set(
        &mut job,
        "/Job/TaskGroups/0/Update",
        json!({"MaxParallel": 0}),
    );
    set(&mut job, "/Job/TaskGroups/0/Disconnect", disconnect);
    register(&http, &job).await;
    let before = wait_running_version(&c, job_id, 2, 0).await;
    let on_a: Vec<Allocation> = before
        .iter()
        .filter(|x| x.node_id == nodes[0])
        .cloned()
        .collect();
    assert_eq!(on_a.len(), 1, "one alloc per node: {}", describe(&before));
    (c, nodes, on_a[0].clone(), reaper)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_node_is_disconnected_its_alloc_unknown_and_replaced_then_reconciled() {
    const JOB: &str = "roamer";
    let (mut c, nodes, orig, _reaper) = running_with(
        "disc",
        JOB,
        json!({"LostAfter": 120 * SECOND_NS, "Reconcile": "keep_original"}),
    )
    .await;

    c.signal_client("disc-a", Signal::SIGSTOP).unwrap();
    wait_node(&c, &nodes[0], NodeStatus::Disconnected).await;
    let orig_id = orig.id.clone();
    let allocs = wait_allocs(&c, "the alloc unknown and replaced", JOB, |allocs| {
        let unknown = allocs
            .iter()
            .any(|a| a.id == orig_id && a.client_status() == AllocClientStatus::Unknown);
        let replaced = allocs.iter().any(|a| {
            a.previous_allocation == orig_id
                && a.client_status() == AllocClientStatus::Running
                && a.is_live()
        });
        unknown && replaced
    })
    .await;
    let unknown = allocs.iter().find(|a| a.id == orig_id).unwrap();
    assert_eq!(
        unknown.desired_status(),
        AllocDesiredStatus::Run,
        "not stopped"
    );
    assert_ne!(unknown.unknown_since_unix_ns, 0);
    let repl = allocs
        .iter()
        .find(|a| a.previous_allocation == orig_id)
        .unwrap()
        .clone();
    assert_eq!(repl.name, orig.name, "the replacement keeps the name");
    assert_eq!(repl.node_id, nodes[1]);

    // Back: its client reports the alloc running again; keep_original stops
    // the replacement, and the original is recorded as reconnected.
    c.signal_client("disc-a", Signal::SIGCONT).unwrap();
    wait_node(&c, &nodes[0], NodeStatus::Ready).await;
    let repl_id = repl.id.clone();
    let allocs = wait_allocs(
        &c,
        "the replacement stopped, the original kept",
        JOB,
        |allocs| {
            let kept = allocs.iter().any(|a| {
                a.id == orig_id
                    && a.is_live()
                    && a.client_status() == AllocClientStatus::Running
                    && a.unknown_since_unix_ns == 0
            });
            let stopped = allocs
                .iter()
                .any(|a| a.id == repl_id && a.desired_status() == AllocDesiredStatus::Stop);
            kept && stopped
        },
    )
    .await;
    let live: Vec<&Allocation> = allocs.iter().filter(|a| a.is_live()).collect();
    assert_eq!(live.len(), 2, "{}", describe(&allocs));
    let mut names: Vec<&str> = live.iter().map(|a| a.name.as_str()).collect();
    names.sort();
    names.dedup();
    assert_eq!(
        names.len(),
        2,
        "no duplicate live names: {}",
        describe(&allocs)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_frozen_past_lost_after_loses_its_alloc_and_goes_down() {
    const JOB: &str = "wanderer";
    let (mut c, nodes, orig, _reaper) =
        running_with("lost", JOB, json!({"LostAfter": 6 * SECOND_NS})).await;

    c.signal_client("lost-a", Signal::SIGSTOP).unwrap();
    wait_node(&c, &nodes[0], NodeStatus::Disconnected).await;
    let orig_id = orig.id.clone();
    wait_allocs(&c, "the alloc unknown", JOB, |allocs| {
        allocs
            .iter()
            .any(|a| a.id == orig_id && a.client_status() == AllocClientStatus::Unknown)
    })
    .await;
    let allocs = wait_allocs(&c, "the alloc lost past lost_after", JOB, |allocs| {
        allocs.iter().any(|a| {
            a.id == orig_id
                && a.client_status() == AllocClientStatus::Lost
                && a.desired_status() == AllocDesiredStatus::Stop
        })
    })
    .await;
    let live: Vec<&Allocation> = allocs.iter().filter(|a| a.is_live()).collect();
    assert_eq!(live.len(), 2, "{}", describe(&allocs));
    assert!(
        live.iter().all(|a| a.node_id == nodes[1]),
        "{}",
        describe(&allocs)
    );
    wait_node(&c, &nodes[0], NodeStatus::Down).await;
    c.signal_client("lost-a", Signal::SIGCONT).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cut_off_from_every_gateway_stops_its_tasks_after_stop_on_client_after() {
    use caravan_integration_tests::process::process_alive;
    const JOB: &str = "hermit";
    let (mut c, _nodes) = raw_exec_cluster("cutoff", &["cutoff-a"]).await;
    let pids = pid_dir(&c);
    let _reaper = Reaper(pids.clone());
    let http = c.http().unwrap();
    let mut job = jobs::service_job(JOB, 1, jobs::raw_exec_task(&sleeper_script(&pids, "up")));
    set(
        &mut job,
        "/Job/TaskGroups/0/Disconnect",
        json!({"StopOnClientAfter": 3 * SECOND_NS}),
    );
    register(&http, &job).await;
    let running = wait_running_version(&c, JOB, 1, 0).await;
    let pid_file = pids.join(format!("{}.pid", running[0].id));
    let pid: i32 = wait_for("the task's pid file", STEP, async || {
        Ok(match std::fs::read_to_string(&pid_file) {
            Ok(s) if !s.trim().is_empty() => Progress::Done(s.trim().parse::<i32>()?),
            _ => Progress::Waiting(format!("{} not written", pid_file.display())),
        })
    })
    .await
    .unwrap();
    assert!(process_alive(pid));

    // The only gateway freezes: the client reaches no server any more.
    let frozen = std::time::Instant::now();
    c.signal("api-gateway-1", Signal::SIGSTOP).unwrap();
    let stopped = wait_for("the task stopped by its client", STEP, async || {
        Ok(if process_alive(pid) {
            Progress::Waiting(format!("pid {pid} still runs"))
        } else {
            Progress::Done(frozen.elapsed())
        })
    })
    .await;
    c.signal("api-gateway-1", Signal::SIGCONT).unwrap();
    let took = stopped.unwrap();
    assert!(
        took.as_millis() >= 1_500,
        "stopped {took:?} after the cut, before stop_on_client_after"
    );
}

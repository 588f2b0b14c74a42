//! Scenario 5: a client node killed outright goes down after its heartbeat
//! TTL and grace; its allocs are lost and replaced on the other node.

use std::time::Instant;

use caravan_integration_tests::jobs;
use caravan_integration_tests::{Progress, wait_for};
use caravan_model::AllocExt;
use caravan_proto::{AllocClientStatus, AllocDesiredStatus, NodeStatus};
use serde_json::json;

use crate::{
    Reaper, STEP, pid_dir, raw_exec_cluster, register, set, sleeper_script, wait_allocs,
    wait_running_version,
};

const JOB: &str = "survivor";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_node_goes_down_and_its_allocs_move_to_the_other_node() {
    let (mut c, nodes) = raw_exec_cluster("node-loss", &["loss-a", "loss-b"]).await;
    let pids_dir = pid_dir(&c);
    let _reaper = Reaper(pids_dir.clone());
    let http = c.http().unwrap();
    let mut job = jobs::service_job(
        JOB,
        2,
        jobs::raw_exec_task(&sleeper_script(&pids_dir, "up")),
    );
    set(
        &mut job,
        "/Job/TaskGroups/0/Update",
        json!({"MaxParallel": 0}),
    );
    register(&http, &job).await;
    let before = wait_running_version(&c, JOB, 2, 0).await;
    let on_a: Vec<String> = before
        .iter()
        .filter(|a| a.node_id == nodes[0])
        .map(|a| a.id.clone())
        .collect();
    assert_eq!(
        on_a.len(),
        1,
        "one alloc per node: {}",
        crate::describe(&before)
    );

    c.crash_client("loss-a").unwrap();
    let killed = Instant::now();
    let state = c.state.clone();
    let down_node = nodes[0].clone();
    wait_for("node loss-a to be down", STEP, async || {
        let nodes = state.nodes().await?;
        let n = nodes.iter().find(|n| n.id == down_node);
        Ok(match n {
            Some(n) if n.status() == NodeStatus::Down => Progress::Done(()),
            other => Progress::Waiting(format!("{:?}", other.map(|n| n.status()))),
        })
    })
    .await
    .unwrap();
    let took = killed.elapsed();
    // The harness's gateway: a 2 s heartbeat TTL and 2 s grace.
    assert!(
        took.as_millis() >= 2_000,
        "node down {took:?} after the kill, before its TTL"
    );

    let lost_id = on_a[0].clone();
    let allocs = wait_allocs(&c, "the lost alloc replaced on loss-b", JOB, |allocs| {
        let lost = allocs.iter().find(|a| a.id == lost_id);
        lost.is_some_and(|l| l.client_status() == AllocClientStatus::Lost)
            && allocs
                .iter()
                .filter(|a| a.is_live() && a.client_status() == AllocClientStatus::Running)
                .count()
                == 2
    })
    .await;
    let lost = allocs.iter().find(|a| a.id == lost_id).unwrap();
    assert_eq!(lost.desired_status(), AllocDesiredStatus::Stop, "{lost:?}");
    let replacement = allocs
        .iter()
        .find(|a| a.previous_allocation == lost_id)
        .unwrap_or_else(|| panic!("no replacement of {lost_id}: {}", crate::describe(&allocs)));
    assert_eq!(replacement.node_id, nodes[1]);
    assert_eq!(replacement.name, lost.name);
    for a in allocs.iter().filter(|a| a.is_live()) {
        assert_eq!(a.node_id, nodes[1], "{}", crate::describe(&allocs));
    }
}

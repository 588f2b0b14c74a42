//! Scenario 6: draining a node migrates its allocs at most
//! migrate.max_parallel at a time while it is ineligible, and a drain whose
//! deadline passes stops what is left.

use std::time::{Duration, Instant};

use caravan_integration_tests::jobs;
use caravan_integration_tests::{Cluster, Progress, wait_for};
use caravan_model::AllocExt;
use caravan_proto::{AllocClientStatus, Allocation, Node, SchedulingEligibility};
use serde_json::json;

use crate::{
    Reaper, SECOND_NS, STEP, job_allocs, pid_dir, raw_exec_cluster, register, set, sleeper_script,
    wait_running_version,
};

/// Runs a count-`count` job with the given migrate block on node 0 alone,
/// then starts node 1; returns the cluster and both node ids.
async fn job_on_one_node(
    name: &str,
    job_id: &str,
    count: i64,
    migrate: serde_json::Value,
) -> (Cluster, Vec<String>, Reaper) {
    let (mut c, mut nodes) = raw_exec_cluster(name, &[&format!("{name}-a")]).await;
    let pids_dir = pid_dir(&c);
    let reaper = Reaper(pids_dir.clone());
    let http = c.http().unwrap();
    let mut job = jobs::service_job(
        job_id,
        count,
        jobs::raw_exec_task(&sleeper_script(&pids_dir, "hi")),
    );
    set(
        &mut job,
        "/Job/TaskGroups/0/Update",
        json!({"MaxParallel": 0}),
    );
    set(&mut job, "/Job/TaskGroups/0/Migrate", migrate);
    register(&http, &job).await;
    wait_running_version(&c, job_id, count as usize, 0).await;
    nodes.push(
        c.start_client(&format!("{name}-b"), &[("drivers", "raw_exec")])
            .await
            .unwrap(),
    );
    (c, nodes, reaper)
}

async fn node(c: &Cluster, id: &str) -> Node {
    c.state
        .nodes()
        .await
        .unwrap()
        .into_iter()
        .find(|n| n.id == id)
        .unwrap()
}

async fn start_drain(c: &Cluster, node_id: &str, deadline: Duration) {
    let reply = c
        .http()
        .unwrap()
        .put_json(
            &format!("/v1/node/{node_id}/drain"),
            &json!({
                "DrainSpec": {"Deadline": deadline.as_nanos() as i64, "IgnoreSystemJobs": false},
                "MarkEligible": false,
            }),
        )
        .await
        .unwrap();
    reply.ok_json().unwrap();
}

/// Waits until the node's drain is over: no drain strategy, last drain
/// complete.
async fn wait_drain_done(c: &Cluster, node_id: &str, within: Duration) -> Node {
    let state = c.state.clone();
    wait_for("the drain to complete", within, async || {
        let nodes = state.nodes().await?;
        let n = nodes.into_iter().find(|n| n.id == node_id);
        Ok(match n {
            Some(n) if n.drain_strategy.is_none() => Progress::Done(n),
            other => Progress::Waiting(format!(
                "{:?}",
                other.map(|n| (n.drain_strategy, n.last_drain))
            )),
        })
    })
    .await
    .unwrap()
}

fn live_on(allocs: &[Allocation], node_id: &str) -> usize {
    allocs
        .iter()
        .filter(|a| a.is_live() && a.node_id == node_id)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_migrates_one_alloc_at_a_time_and_completes() {
    const JOB: &str = "drained";
    let (c, nodes, _reaper) = job_on_one_node(
        "drain",
        JOB,
        3,
        json!({"MaxParallel": 1, "HealthCheck": "task_states", "MinHealthyTime": SECOND_NS, "HealthyDeadline": 20 * SECOND_NS}),
    )
    .await;
    start_drain(&c, &nodes[0], Duration::from_secs(60)).await;
    let drained = node(&c, &nodes[0]).await;
    assert_eq!(
        drained.scheduling_eligibility(),
        SchedulingEligibility::Ineligible,
        "a draining node is ineligible"
    );
    assert!(drained.drain_strategy.is_some());

    // While the drain runs, at most one alloc is on its way: stopped on the
    // draining node without a running, healthy replacement yet.
    let state = c.state.clone();
    let (a, b) = (nodes[0].clone(), nodes[1].clone());
    let mut most_in_flight = 0;
    let allocs = wait_for("every alloc to move to the second node", STEP, async || {
        let allocs = job_allocs(&state, JOB).await?;
        let settled = allocs
            .iter()
            .filter(|x| {
                x.is_live()
                    && x.node_id == b
                    && x.client_status() == AllocClientStatus::Running
                    && x.deployment_status
                        .as_ref()
                        .is_none_or(|d| d.healthy != Some(false))
            })
            .count();
        let in_flight = 3usize.saturating_sub(live_on(&allocs, &a) + settled);
        most_in_flight = most_in_flight.max(in_flight);
        Ok(if live_on(&allocs, &a) == 0 && settled == 3 {
            Progress::Done(allocs)
        } else {
            Progress::Waiting(crate::describe(&allocs))
        })
    })
    .await
    .unwrap();
    assert!(
        most_in_flight <= 1,
        "{most_in_flight} allocs migrating at once"
    );

    // The replacements came one at a time: each after the one before had
    // been running for the migrate min_healthy_time.
    let mut placed: Vec<&Allocation> = allocs.iter().filter(|x| x.node_id == b).collect();
    placed.sort_by_key(|x| x.create_time_unix_ns);
    assert_eq!(placed.len(), 3, "{}", crate::describe(&allocs));
    for pair in placed.windows(2) {
        assert!(
            pair[1].create_time_unix_ns - pair[0].create_time_unix_ns >= SECOND_NS,
            "replacements {} and {} placed {} ms apart",
            pair[0].name,
            pair[1].name,
            (pair[1].create_time_unix_ns - pair[0].create_time_unix_ns) / 1_000_000
        );
    }
    for old in allocs.iter().filter(|x| x.node_id == a) {
        assert_eq!(
            old.desired_description, "alloc is being migrated",
            "{old:?}"
        );
        assert!(placed.iter().any(|r| r.previous_allocation == old.id));
    }

    let done = wait_drain_done(&c, &nodes[0], STEP).await;
    assert_eq!(
        done.scheduling_eligibility(),
        SchedulingEligibility::Ineligible
    );
    assert!(done.last_drain.is_some(), "{done:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_deadline_stops_the_allocs_left_on_the_node() {
    const JOB: &str = "deadlined";
    // Replacements take 30 s to count as healthy, so only the deadline can
    // finish this drain.
    let (c, nodes, _reaper) = job_on_one_node(
        "deadline",
        JOB,
        3,
        json!({"MaxParallel": 1, "HealthCheck": "task_states", "MinHealthyTime": 30 * SECOND_NS, "HealthyDeadline": 60 * SECOND_NS}),
    )
    .await;
    let started = Instant::now();
    start_drain(&c, &nodes[0], Duration::from_secs(3)).await;
    wait_drain_done(&c, &nodes[0], STEP).await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(3),
        "drain done after {took:?}, before the deadline"
    );
    let state = c.state.clone();
    let a = nodes[0].clone();
    let allocs = wait_for(
        "nothing live left on the drained node, three running on the other",
        STEP,
        async || {
            let allocs = job_allocs(&state, JOB).await?;
            let running_b = allocs
                .iter()
                .filter(|x| {
                    x.is_live() && x.node_id != a && x.client_status() == AllocClientStatus::Running
                })
                .count();
            Ok(if live_on(&allocs, &a) == 0 && running_b == 3 {
                Progress::Done(allocs)
            } else {
                Progress::Waiting(crate::describe(&allocs))
            })
        },
    )
    .await
    .unwrap();
    assert!(
        allocs
            .iter()
            .filter(|x| x.node_id == a)
            .all(|x| !x.is_live())
    );
}

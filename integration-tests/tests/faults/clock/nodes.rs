//! Clock steps on a gateway and on a client node: heartbeats, registrations,
//! restarts and deployment health.

use caravan_integration_tests::state::alloc_histogram;
use caravan_integration_tests::{Progress, Service, jobs, wait_for};
use caravan_model::AllocExt;
use caravan_proto::AllocClientStatus;
use serde_json::json;

use super::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_clock_steps_keep_node_heartbeats_and_registrations() {
    for round in 0..crate::rounds() {
        gateway_round(round).await;
    }
}

async fn gateway_round(round: usize) {
    let (mut c, mut clock, _nodes) = cluster_with_stepped(
        &format!("clock-gateway-{round}"),
        Service::Gateway,
        &["cg-a", "cg-b"],
    )
    .await;
    let http = c.http().unwrap();
    let terms = leader_terms(&c).await;
    let watch = NodeWatch::start(c.state.clone());
    let mut offset = 0;
    for (i, by) in [STEP_SECS, -STEP_SECS, -STEP_SECS, STEP_SECS]
        .into_iter()
        .enumerate()
    {
        step(&mut clock, by);
        offset += by;
        let p = probe(&c, &format!("probe-{i}"), None).await;
        assert_reads("the gateway's", p.gateway, offset, &p);
        // Jobs registered through the stepped gateway are placed and run.
        let id = format!("web-{i}");
        register(&http, &jobs::service_job(&id, 2, jobs::mock_task(20, 16))).await;
        wait_running(&c, &id, 2).await;
        // Nodes heartbeat to the stepped gateway for several TTLs: a
        // heartbeat timed by its wall clock would let them expire. Only
        // waiting says nothing expired.
        tokio::time::sleep(HOLD).await;
    }
    for i in 0..4 {
        let id = format!("web-{i}");
        let allocs = job_allocs(&c.state, &id).await.unwrap();
        assert_eq!(allocs.len(), 2, "{id}: {:?}", alloc_histogram(&allocs));
        assert!(
            allocs
                .iter()
                .all(|a| a.is_live() && a.client_status() == AllocClientStatus::Running),
            "{id}: {:?}",
            alloc_histogram(&allocs)
        );
    }
    watch.check();
    check_invariants(&mut c, &terms).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_node_clock_steps_keep_heartbeats_restarts_and_health() {
    for round in 0..crate::rounds() {
        client_round(round).await;
    }
}

async fn client_round(round: usize) {
    const STEPPED: &str = "cc-stepped";
    let (mut c, mut clock, _nodes) = cluster_with_stepped(
        &format!("clock-client-{round}"),
        Service::ClientNode,
        &[STEPPED, "cc-other"],
    )
    .await;
    let http = c.http().unwrap();
    let terms = leader_terms(&c).await;
    let watch = NodeWatch::start(c.state.clone());

    // A task that exits every 2 s and is restarted after 1 s, on the
    // stepped node: its restart window is monotonic, so the steps neither
    // fail it nor stall it.
    let mut flapping = jobs::service_job(
        "flapping",
        1,
        json!({
            "Name": "t",
            "Driver": "mock",
            "Config": {"run_for": "2s", "exit_code": 1},
            "Resources": {"CPU": 10, "MemoryMB": 16},
        }),
    );
    pin_to(&mut flapping, STEPPED);
    set(
        &mut flapping,
        "/Job/TaskGroups/0/RestartPolicy",
        json!({"Attempts": 1000, "Interval": 3600 * SECOND_NS, "Delay": SECOND_NS, "Mode": "fail"}),
    );
    set(
        &mut flapping,
        "/Job/TaskGroups/0/Update",
        json!({"MaxParallel": 0}),
    );
    register(&http, &flapping).await;
    wait_running(&c, "flapping", 1).await;

    let mut offset = 0;
    let mut restarts = 0;
    for (i, by) in [STEP_SECS, -STEP_SECS, -STEP_SECS, STEP_SECS]
        .into_iter()
        .enumerate()
    {
        step(&mut clock, by);
        offset += by;
        let p = probe(&c, &format!("probe-{i}"), Some(STEPPED)).await;
        assert_reads("the stepped client's", p.client, offset, &p);
        assert_reads("the gateway's", p.gateway, 0, &p);
        // A rolling deployment on the stepped node turns healthy: its
        // min_healthy_time is timed on the client's monotonic clock.
        let id = format!("web-{i}");
        let mut web = jobs::service_job(&id, 2, jobs::mock_task(20, 16));
        pin_to(&mut web, STEPPED);
        set(
            &mut web,
            "/Job/TaskGroups/0/Update",
            json!({
                "MaxParallel": 1,
                "HealthCheck": "task_states",
                "MinHealthyTime": SECOND_NS,
                "HealthyDeadline": 60 * SECOND_NS,
                "ProgressDeadline": 120 * SECOND_NS,
            }),
        );
        register(&http, &web).await;
        let state = c.state.clone();
        let id_ = id.clone();
        wait_for(
            &format!("the deployment of {id} to succeed"),
            WAIT,
            async || {
                let allocs = job_allocs(&state, &id_).await?;
                let healthy = allocs
                    .iter()
                    .filter(|a| {
                        a.is_live()
                            && a.deployment_status.as_ref().and_then(|d| d.healthy) == Some(true)
                    })
                    .count();
                Ok(if healthy == 2 {
                    Progress::Done(())
                } else {
                    Progress::Waiting(format!("{:?}", alloc_histogram(&allocs)))
                })
            },
        )
        .await
        .unwrap();
        // The stepped node heartbeats on for several TTLs, and the flapping
        // task keeps restarting: only waiting says both went on.
        tokio::time::sleep(HOLD).await;
        let allocs = job_allocs(&c.state, "flapping").await.unwrap();
        assert_eq!(allocs.len(), 1, "{:?}", alloc_histogram(&allocs));
        let now = allocs[0].task_states.get("t").map_or(0, |t| t.restarts);
        assert!(
            now > restarts,
            "the flapping task stopped restarting at {offset} s: {now} restarts"
        );
        assert!(
            allocs[0].is_live() && allocs[0].client_status() != AllocClientStatus::Failed,
            "the flapping task failed at {offset} s: {:?}",
            allocs[0].task_states
        );
        restarts = now;
    }
    http.delete("/v1/job/flapping")
        .await
        .unwrap()
        .ok_json()
        .unwrap();
    watch.check();
    check_invariants(&mut c, &terms).await;
}

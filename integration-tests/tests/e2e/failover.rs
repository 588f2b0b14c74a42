//! Scenario 4: a burst of 200 job registrations while the eval-broker leader
//! and then the plan-applier leader are killed with SIGKILL. The standbys
//! take over and the end state in etcd is exact: every eval finished, no
//! node over-committed, no allocation duplicated or lost.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use caravan_integration_tests::state::{
    alloc_histogram, duplicated_allocs, eval_histogram, evals_settled, failed_with_follow_up,
    live_per_job, overcommitted_nodes,
};
use caravan_integration_tests::{Cluster, Progress, Service, jobs, wait_for};
use caravan_model::AllocExt;
use caravan_proto::{AllocClientStatus, EvalStatus};

/// Jobs that fit: 195 × 3 allocs × 25 MHz fill 91% of the nodes' CPU.
const FITTING_JOBS: usize = 195;
const FITTING_COUNT: usize = 3;
/// Jobs asking for more CPU than any node has.
const OVERSIZED_JOBS: usize = 5;
const NODES: u32 = 8;

fn job_body(i: usize) -> serde_json::Value {
    if i < FITTING_JOBS {
        jobs::service_job(
            &format!("fit-{i:03}"),
            FITTING_COUNT as i64,
            jobs::mock_task(25, 32),
        )
    } else {
        jobs::service_job(&format!("huge-{i:03}"), 1, jobs::mock_task(3000, 32))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leaders_killed_during_a_burst_lose_and_duplicate_nothing() {
    let mut c = Cluster::new("failover-burst").await.unwrap();
    c.start_gateway(&[]).await.unwrap();
    for _ in 0..2 {
        c.start_broker(&[]).await.unwrap();
        c.start_applier(&[]).await.unwrap();
        c.start_worker(&[]).await.unwrap();
    }
    let broker = c.wait_leader(Service::EvalBroker).await.unwrap();
    let applier = c.wait_leader(Service::PlanApplier).await.unwrap();
    c.start_simulated_clients(
        NODES,
        &[
            ("simulate_resources.cpu_mhz", "2000"),
            ("simulate_resources.memory_mb", "8192"),
        ],
    )
    .await
    .unwrap();

    let http = c.http().unwrap();
    let registered = Arc::new(AtomicUsize::new(0));
    let burst = {
        let registered = registered.clone();
        tokio::spawn(async move {
            let next = Arc::new(AtomicUsize::new(0));
            let mut senders = Vec::new();
            for _ in 0..16 {
                let (http, next, registered) = (http.clone(), next.clone(), registered.clone());
                senders.push(tokio::spawn(async move {
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        if i >= FITTING_JOBS + OVERSIZED_JOBS {
                            return anyhow::Ok(());
                        }
                        http.put_json("/v1/jobs", &job_body(i)).await?.ok_json()?;
                        registered.fetch_add(1, Ordering::SeqCst);
                    }
                }));
            }
            for s in senders {
                s.await??;
            }
            anyhow::Ok(())
        })
    };

    let until = async |n: usize| {
        wait_for(
            &format!("{n} registrations"),
            Duration::from_secs(60),
            async || {
                let done = registered.load(Ordering::SeqCst);
                Ok(if done >= n {
                    Progress::Done(())
                } else {
                    Progress::Waiting(format!("{done} registered"))
                })
            },
        )
        .await
        .unwrap()
    };
    until(60).await;
    let killed_broker = c.crash(Service::EvalBroker, &broker).unwrap();
    until(130).await;
    let killed_applier = c.crash(Service::PlanApplier, &applier).unwrap();
    burst.await.unwrap().unwrap();

    let new_broker = c
        .wait_leader_other_than(Service::EvalBroker, Some(&broker))
        .await
        .unwrap();
    let new_applier = c
        .wait_leader_other_than(Service::PlanApplier, Some(&applier))
        .await
        .unwrap();
    eprintln!(
        "killed {killed_broker} ({broker}) and {killed_applier} ({applier}); leaders now {new_broker} and {new_applier}"
    );

    let state = c.state.clone();
    let (evals, allocs, nodes) = wait_for(
        "every eval settled and every fitting alloc running",
        Duration::from_secs(120),
        async || {
            let evals = state.evals().await?;
            let allocs = state.allocs().await?;
            let live = allocs.iter().filter(|a| a.is_live()).count();
            let running = allocs
                .iter()
                .filter(|a| a.is_live() && a.client_status() == AllocClientStatus::Running)
                .count();
            let want = FITTING_JOBS * FITTING_COUNT;
            Ok(
                if evals_settled(&evals) && running == want && live == want {
                    Progress::Done((evals, allocs, state.nodes().await?))
                } else {
                    Progress::Waiting(format!(
                        "evals {:?}; allocs {:?}; {running} of {want} running",
                        eval_histogram(&evals),
                        alloc_histogram(&allocs)
                    ))
                },
            )
        },
    )
    .await
    .unwrap();

    let over = overcommitted_nodes(&nodes, &allocs);
    assert!(over.is_empty(), "over-committed: {over:#?}");
    let dups = duplicated_allocs(&allocs);
    assert!(dups.is_empty(), "duplicated: {dups:#?}");
    let live = live_per_job(&allocs);
    for i in 0..FITTING_JOBS + OVERSIZED_JOBS {
        let id = job_body(i)["Job"]["ID"].as_str().unwrap().to_string();
        let want = if i < FITTING_JOBS { FITTING_COUNT } else { 0 };
        assert_eq!(
            live.get(&id).copied().unwrap_or(0),
            want,
            "live allocs of {id}"
        );
    }

    let mut blocked_jobs: BTreeMap<&str, usize> = BTreeMap::new();
    for e in &evals {
        match e.status() {
            EvalStatus::Complete => {}
            EvalStatus::Failed if failed_with_follow_up(e, &evals) => {}
            EvalStatus::Blocked => *blocked_jobs.entry(e.job_id.as_str()).or_default() += 1,
            other => panic!(
                "eval {} of {} ({}) ended {other:?}: {}; all: {:?}",
                e.id,
                e.job_id,
                e.triggered_by,
                e.status_description,
                eval_histogram(&evals)
            ),
        }
    }
    let oversized: Vec<&str> = blocked_jobs.keys().copied().collect();
    assert_eq!(oversized.len(), OVERSIZED_JOBS, "blocked: {blocked_jobs:?}");
    assert!(
        oversized.iter().all(|j| j.starts_with("huge-")),
        "{blocked_jobs:?}"
    );
    assert!(
        blocked_jobs.values().all(|n| *n == 1),
        "one blocked eval per job: {blocked_jobs:?}"
    );
    let register_evals = evals
        .iter()
        .filter(|e| e.triggered_by == "job-register")
        .count();
    assert_eq!(
        register_evals,
        FITTING_JOBS + OVERSIZED_JOBS,
        "{:?}",
        eval_histogram(&evals)
    );
    let exited = c.exited();
    assert!(
        exited.is_empty(),
        "only the killed leaders are gone: {exited:?}"
    );
}

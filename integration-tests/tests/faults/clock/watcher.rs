//! Clock steps on the deployment-watcher leader: progress deadlines.

use std::time::Duration;

use caravan_integration_tests::{Progress, Service, jobs, wait_for};
use caravan_model::now_unix_ns;
use serde_json::json;

use super::harness::*;

/// The progress deadline the deployment-watcher fails a deployment at.
const PROGRESS_DEADLINE: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_watcher_clock_steps_keep_progress_deadlines() {
    for round in 0..crate::rounds() {
        watcher_round(round).await;
    }
}

async fn watcher_round(round: usize) {
    let (mut c, mut clock, _nodes) = cluster_with_stepped(
        &format!("clock-watcher-{round}"),
        Service::DeploymentWatcher,
        &["cw-a"],
    )
    .await;
    let http = c.http().unwrap();
    let state = c.state.clone();
    let terms = leader_terms(&c).await;
    let watch = NodeWatch::start(state.clone());

    // Two allocs on distinct hosts and one node: the first turns healthy,
    // the second is never placed, so only the progress deadline ends the
    // deployment, 20 s after the first turned healthy.
    let mut stuck = jobs::service_job("stuck", 2, jobs::mock_task(10, 16));
    set(
        &mut stuck,
        "/Job/Constraints",
        json!([{"Operand": "distinct_hosts", "RTarget": "true"}]),
    );
    rolling(&mut stuck, Duration::from_secs(1), PROGRESS_DEADLINE);
    register(&http, &stuck).await;
    let cutoff = wait_for("the stuck deployment's progress cutoff", WAIT, async || {
        let ds = deployments(&state, "stuck").await;
        let d = ds.last();
        let cutoff = d
            .and_then(|d| d.task_groups.get("g"))
            .filter(|g| g.healthy_allocs == 1)
            .map(|g| g.require_progress_by_unix_ns);
        Ok(match cutoff {
            Some(by) if by > 0 => Progress::Done(by),
            _ => Progress::Waiting(format!(
                "{:?}",
                d.map(|d| (d.status(), d.task_groups.clone()))
            )),
        })
    })
    .await
    .unwrap();

    // +5 minutes puts the cutoff minutes behind the watcher's clock: the
    // deployment runs on. Only waiting says it was not failed.
    step(&mut clock, STEP_SECS);
    assert_reads(
        "the watcher's",
        watcher_reads(&c, "probe-ahead").await,
        STEP_SECS,
        &"probe-ahead",
    );
    let until = cutoff - 4 * SECOND_NS;
    while now_unix_ns() < until {
        let d = deployments(&state, "stuck").await.pop().unwrap();
        assert_eq!(
            d.status(),
            caravan_proto::DeploymentStatus::Running,
            "the deployment ended {} s before its cutoff: {}",
            (cutoff - now_unix_ns()) / SECOND_NS,
            d.status_description
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // −5 minutes twice puts the cutoff minutes ahead of the watcher's clock:
    // the deployment fails on time all the same.
    step(&mut clock, -STEP_SECS);
    step(&mut clock, -STEP_SECS);
    let failed = wait_for(
        "the stuck deployment to fail at its progress deadline",
        WAIT,
        async || {
            let d = deployments(&state, "stuck").await.pop().unwrap();
            Ok(if d.status() == caravan_proto::DeploymentStatus::Failed {
                Progress::Done((d, now_unix_ns()))
            } else {
                Progress::Waiting(format!("{:?} {}", d.status(), d.status_description))
            })
        },
    )
    .await
    .unwrap();
    let (d, seen) = failed;
    assert_eq!(d.status_description, "Failed due to progress deadline");
    assert!(
        seen >= cutoff,
        "the deployment failed {} ms before its progress cutoff",
        (cutoff - seen) / 1_000_000
    );
    let late = (seen - cutoff) / 1_000_000;
    assert!(
        late < 10_000,
        "the deployment failed {late} ms after its progress cutoff"
    );
    assert_reads(
        "the watcher's",
        offset_secs(d.modify_time_unix_ns),
        -STEP_SECS,
        &d.status_description,
    );
    eprintln!(
        "clock steps on the deployment-watcher leader, round {round}: progress deadline \
         enforced {late} ms after the cutoff (seen by polling every 100 ms)"
    );
    step(&mut clock, STEP_SECS);
    assert_reads(
        "the watcher's",
        watcher_reads(&c, "probe-returned").await,
        0,
        &"probe-returned",
    );
    watch.check();
    check_invariants(&mut c, &terms).await;
}

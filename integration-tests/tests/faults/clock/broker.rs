//! Clock steps on the eval-broker leader: drain deadlines, delayed evals,
//! periodic launches and node-down detection.

use std::time::{Duration, Instant};

use caravan_integration_tests::state::alloc_histogram;
use caravan_integration_tests::{Progress, Service, jobs, wait_for};
use caravan_model::now_unix_ns;
use caravan_proto::EvalStatus;
use serde_json::json;

use super::harness::*;

/// How long the drained job's replacements take to count as healthy: only
/// the drain's deadline can finish the drain before that.
const MIN_HEALTHY: Duration = Duration::from_secs(60);
/// The drain's force deadline.
const DRAIN_DEADLINE: Duration = Duration::from_secs(30);
/// The failing job's reschedule delay.
const RESCHEDULE_DELAY: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_leader_clock_steps_keep_drain_deadlines_delayed_evals_launches_and_heartbeats() {
    for round in 0..crate::rounds() {
        broker_round(round).await;
    }
}

async fn broker_round(round: usize) {
    let (mut c, mut clock, mut nodes) = cluster_with_stepped(
        &format!("clock-broker-{round}"),
        Service::EvalBroker,
        &["cb-a"],
    )
    .await;
    let http = c.http().unwrap();
    let state = c.state.clone();

    // Three allocs on node a, then node b to drain them to.
    let mut drained = jobs::service_job("drained", 3, jobs::mock_task(20, 16));
    set(
        &mut drained,
        "/Job/TaskGroups/0/Update",
        json!({"MaxParallel": 0}),
    );
    set(
        &mut drained,
        "/Job/TaskGroups/0/Migrate",
        json!({
            "MaxParallel": 1,
            "HealthCheck": "task_states",
            "MinHealthyTime": MIN_HEALTHY.as_nanos() as i64,
            "HealthyDeadline": 2 * MIN_HEALTHY.as_nanos() as i64,
        }),
    );
    register(&http, &drained).await;
    wait_running(&c, "drained", 3).await;
    nodes.push(c.start_client("cb-b", &[]).await.unwrap());
    let terms = leader_terms(&c).await;
    let watch = NodeWatch::start(state.clone());

    register(&http, &ticker("tick")).await;
    wait_launch_after(&state, "tick", 0).await;

    // A task that fails after a second, rescheduled after a delay: its
    // follow-up eval waits in the broker's delay queue through the steps.
    let mut failing = batch_job("resched", json!({"run_for": "1s", "exit_code": 1}));
    pin_to(&mut failing, "cb-b");
    set(
        &mut failing,
        "/Job/TaskGroups/0/RestartPolicy",
        json!({"Attempts": 0, "Interval": 60 * SECOND_NS, "Delay": SECOND_NS, "Mode": "fail"}),
    );
    set(
        &mut failing,
        "/Job/TaskGroups/0/ReschedulePolicy",
        json!({
            "Attempts": 1,
            "Interval": 3600 * SECOND_NS,
            "Delay": RESCHEDULE_DELAY.as_nanos() as i64,
            "DelayFunction": "constant",
            "Unlimited": false,
        }),
    );
    register(&http, &failing).await;
    let delayed = wait_for("the reschedule's delayed eval", WAIT, async || {
        let evals = state.evals().await?;
        Ok(
            match evals.into_iter().find(|e| {
                e.job_id == "resched"
                    && e.wait_until_unix_ns > 0
                    && e.status() == EvalStatus::Pending
            }) {
                Some(e) => Progress::Done(e),
                None => Progress::Waiting("no delayed eval yet".into()),
            },
        )
    })
    .await
    .unwrap();
    let delayed_watch = EvalWatch::start(state.clone(), delayed.id.clone());

    // The drain, seen by the broker before the first step: its node-drain
    // evals are processed.
    let drain_started = Instant::now();
    let reply = http
        .put_json(
            &format!("/v1/node/{}/drain", nodes[0]),
            &json!({
                "DrainSpec": {"Deadline": DRAIN_DEADLINE.as_nanos() as i64, "IgnoreSystemJobs": false},
                "MarkEligible": false,
            }),
        )
        .await
        .unwrap();
    let drain_evals: Vec<String> = reply.ok_json().unwrap()["EvalIDs"]
        .as_array()
        .map(|ids| {
            ids.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    wait_for("the drain's evals to be processed", WAIT, async || {
        let evals = state.evals().await?;
        let open: Vec<&str> = evals
            .iter()
            .filter(|e| drain_evals.contains(&e.id) && e.status() == EvalStatus::Pending)
            .map(|e| e.id.as_str())
            .collect();
        Ok(if open.is_empty() {
            Progress::Done(())
        } else {
            Progress::Waiting(format!("pending {open:?}"))
        })
    })
    .await
    .unwrap();

    // +5 minutes: the ticker makes one catch-up launch for the runs the
    // step skipped, not one per skipped run; the drain is not forced.
    let before_forward = launches(&state, "tick").await;
    let stepped_at = now_unix_ns() / SECOND_NS;
    step(&mut clock, STEP_SECS);
    let forward = Instant::now();
    let p = probe(&c, "probe-ahead", None).await;
    assert_reads("the gateway's", p.gateway, 0, &p);
    assert_reads("the broker's", broker_reads(&c).await, STEP_SECS, &p);
    let ahead = wait_launch_after(&state, "tick", stepped_at + STEP_SECS - 5).await;
    let caught_up = ahead.len() - before_forward.len();
    assert!(
        caught_up <= 3,
        "{caught_up} launches right after a 5-minute step: the skipped runs were replayed: {ahead:?}"
    );
    // The drain's deadline is still 20 s away: a deadline judged by the
    // wall clock would be forced within the enforcer's 5 s idle. Only
    // waiting says it was not.
    tokio::time::sleep(HOLD.saturating_sub(forward.elapsed())).await;

    // −5 minutes, twice: the clock is behind the last launch, so the ticker
    // waits for it rather than launching a run it made already.
    step(&mut clock, -STEP_SECS);
    let p = probe(&c, "probe-back", None).await;
    assert_reads("the broker's", broker_reads(&c).await, 0, &p);
    // Taken once the step took effect, with a probe's time to settle.
    let before_back = launches(&state, "tick").await;
    step(&mut clock, -STEP_SECS);
    let p = probe(&c, "probe-behind", None).await;
    assert_reads("the broker's", broker_reads(&c).await, -STEP_SECS, &p);

    // The drain's deadline falls on time, by the monotonic clock: neither
    // forced at the first step nor held five minutes by the last.
    let a = nodes[0].clone();
    let done_after = wait_for(
        "the drain to complete at its deadline",
        DRAIN_DEADLINE + WAIT,
        async || {
            let node = state.nodes().await?.into_iter().find(|n| n.id == a);
            Ok(match node {
                Some(n) if n.drain_strategy.is_none() => Progress::Done(drain_started.elapsed()),
                other => Progress::Waiting(format!("{:?}", other.map(|n| n.drain_strategy))),
            })
        },
    )
    .await
    .unwrap();
    assert!(
        done_after >= DRAIN_DEADLINE,
        "the drain finished after {done_after:?}, before its {DRAIN_DEADLINE:?} deadline"
    );
    assert!(
        done_after < DRAIN_DEADLINE + Duration::from_secs(20),
        "the drain finished after {done_after:?}, long past its {DRAIN_DEADLINE:?} deadline"
    );

    // The delayed eval left the queue no earlier than it was due.
    let left = wait_for("the delayed eval to be processed", WAIT, async || {
        Ok(match delayed_watch.left_pending() {
            Some(at) => Progress::Done(at),
            None => Progress::Waiting("still pending".into()),
        })
    })
    .await
    .unwrap();
    assert!(
        left >= delayed.wait_until_unix_ns - SECOND_NS / 2,
        "the delayed eval was processed {} ms before it was due",
        (delayed.wait_until_unix_ns - left) / 1_000_000
    );
    assert!(
        left <= delayed.wait_until_unix_ns + 20 * SECOND_NS,
        "the delayed eval was processed {} s after it was due",
        (left - delayed.wait_until_unix_ns) / SECOND_NS
    );
    eprintln!(
        "clock steps on the broker leader, round {round}: drain forced {:.1} s after it began \
         (deadline {} s); delayed eval processed {} ms after it was due; {caught_up} launches \
         right after the +5 min step",
        done_after.as_secs_f64(),
        DRAIN_DEADLINE.as_secs(),
        (left - delayed.wait_until_unix_ns) / 1_000_000
    );
    let before_return = launches(&state, "tick").await;
    assert_eq!(
        before_back, before_return,
        "the ticker launched while the clock was behind its last launch"
    );

    // +5 minutes, twice: launches resume once the clock passes the last one.
    step(&mut clock, STEP_SECS);
    let p = probe(&c, "probe-returned", None).await;
    assert_reads("the broker's", broker_reads(&c).await, 0, &p);
    step(&mut clock, STEP_SECS);
    let p = probe(&c, "probe-ahead-again", None).await;
    assert_reads("the broker's", broker_reads(&c).await, STEP_SECS, &p);
    let last = before_return.iter().map(|(at, _)| *at).max().unwrap_or(0);
    let resumed = wait_launch_after(&state, "tick", last).await;
    http.delete("/v1/job/tick")
        .await
        .unwrap()
        .ok_json()
        .unwrap();
    let times: Vec<i64> = resumed.iter().map(|(at, _)| *at).collect();
    assert!(
        times.windows(2).all(|w| w[0] < w[1]),
        "a launch time made twice or out of order: {times:?}"
    );

    // The failed task's replacement ran once; every probe ran once.
    let replaced = job_allocs(&state, "resched").await.unwrap();
    assert_eq!(replaced.len(), 2, "{:?}", alloc_histogram(&replaced));
    for id in [
        "probe-ahead",
        "probe-back",
        "probe-behind",
        "probe-returned",
        "probe-ahead-again",
    ] {
        let allocs = job_allocs(&state, id).await.unwrap();
        assert_eq!(allocs.len(), 1, "{id}: {:?}", alloc_histogram(&allocs));
    }
    watch.check();
    check_invariants(&mut c, &terms).await;
}

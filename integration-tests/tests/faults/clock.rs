//! Clock jumps: one service process's wall clock steps ±5 minutes, as an
//! NTP step moves it, while its monotonic clock, etcd and every other
//! process keep the real time ([`SteppedClock`]). Leases and heartbeat TTLs
//! are etcd's (timed by etcd), queue timers and restart windows are
//! monotonic, and the times stored in objects are wall-clock times: each
//! test walks one process through +5, −5, −5 and +5 minutes and checks that
//! no node is marked down, no deadline or delayed eval fires minutes early
//! or late, no periodic launch is made twice or lost, no eval is lost, no
//! leader loses its term, and the chaos run's invariants hold.
//!
//! Each phase opens with a probe job whose stored times show the step took
//! effect in the stepped process (and that evals are still processed), so a
//! test cannot pass on a clock that never moved.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use caravan_integration_tests::clock::SteppedClock;
use caravan_integration_tests::state::{
    alloc_histogram, duplicated_allocs, eval_histogram, evals_settled, overcommitted_nodes,
};
use caravan_integration_tests::{
    Cluster, ClusterState, HttpApi, Progress, Service, jobs, wait_for,
};
use caravan_model::{AllocExt, now_unix_ns};
use caravan_proto::{AllocClientStatus, Allocation, EvalStatus, Job, NodeStatus};
use parking_lot::Mutex;
use serde_json::{Value, json};

/// One step: five minutes.
const STEP_SECS: i64 = 300;
const SECOND_NS: i64 = 1_000_000_000;
/// How long a single wait of these tests may take on a loaded machine.
const WAIT: Duration = Duration::from_secs(60);
/// How far a probe's reading may be from the offset it expects: the stored
/// times are a few seconds old when read.
const PROBE_SLACK_SECS: i64 = 15;
/// How long each phase holds its offset: longer than a heartbeat TTL of the
/// test timings (2 s + 2 s grace), so a node whose heartbeats a step broke
/// would be marked down within it.
const HOLD: Duration = Duration::from_secs(8);

/// Sets the value at a JSON pointer whose parent exists.
fn set(job: &mut Value, pointer: &str, value: Value) {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    job.pointer_mut(parent)
        .and_then(Value::as_object_mut)
        .unwrap_or_else(|| panic!("no object at {parent}"))
        .insert(key.to_string(), value);
}

/// A batch job of one `mock` task with `config`.
fn batch_job(id: &str, config: Value) -> Value {
    let mut job = jobs::service_job(
        id,
        1,
        json!({
            "Name": "t",
            "Driver": "mock",
            "Config": config,
            "Resources": {"CPU": 10, "MemoryMB": 16},
        }),
    );
    set(&mut job, "/Job/Type", json!("batch"));
    job
}

/// Keeps `job`'s allocations on the node named `node`.
fn pin_to(job: &mut Value, node: &str) {
    set(
        job,
        "/Job/Constraints",
        json!([{"LTarget": "${node.unique.name}", "RTarget": node, "Operand": "="}]),
    );
}

/// Registers `job` through `PUT /v1/jobs`; returns the answer.
async fn register(http: &HttpApi, job: &Value) -> Value {
    let reply = http.put_json("/v1/jobs", job).await.unwrap();
    reply.ok_json().unwrap()
}

async fn job_allocs(state: &ClusterState, job_id: &str) -> anyhow::Result<Vec<Allocation>> {
    let mut allocs: Vec<Allocation> = state
        .allocs()
        .await?
        .into_iter()
        .filter(|a| a.job_id == job_id)
        .collect();
    allocs.sort_by_key(|a| a.create_revision);
    Ok(allocs)
}

/// Waits until `job_id` has `count` allocations running.
async fn wait_running(c: &Cluster, job_id: &str, count: usize) -> Vec<Allocation> {
    let state = c.state.clone();
    wait_for(
        &format!("{count} allocs of {job_id} running"),
        WAIT,
        async || {
            let allocs = job_allocs(&state, job_id).await?;
            let running: Vec<Allocation> = allocs
                .iter()
                .filter(|a| a.is_live() && a.client_status() == AllocClientStatus::Running)
                .cloned()
                .collect();
            Ok(if running.len() == count {
                Progress::Done(running)
            } else {
                Progress::Waiting(format!("{:?}", alloc_histogram(&allocs)))
            })
        },
    )
    .await
    .unwrap()
}

/// The seconds from now back to `unix_ns` by the real clock (negative for a
/// time in the past), rounded.
fn offset_secs(unix_ns: i64) -> i64 {
    (unix_ns - now_unix_ns()) / SECOND_NS
}

/// What a probe job's stored times say of the clocks, as offsets from the
/// real time in seconds: the job's submit time is the gateway's, its
/// task's start the client's.
#[derive(Debug)]
struct Probe {
    gateway: i64,
    client: i64,
}

/// Runs a batch job whose task exits at once (on the node named `node`
/// when given) to completion; returns what its times say of the clocks.
async fn probe(c: &Cluster, id: &str, node: Option<&str>) -> Probe {
    let mut job = batch_job(id, json!({}));
    if let Some(node) = node {
        pin_to(&mut job, node);
    }
    let eval_id = jobs::eval_id(&register(&c.http().unwrap(), &job).await).unwrap();
    let state = c.state.clone();
    let (_, alloc) = wait_for(&format!("probe {id} to run"), WAIT, async || {
        let eval = state.evals().await?.into_iter().find(|e| e.id == eval_id);
        let allocs = job_allocs(&state, id).await?;
        Ok(match (eval, allocs.as_slice()) {
            (Some(e), [a])
                if e.status() == EvalStatus::Complete
                    && a.client_status() == AllocClientStatus::Complete =>
            {
                Progress::Done((e, a.clone()))
            }
            (e, _) => Progress::Waiting(format!(
                "eval {:?}, allocs {:?}",
                e.map(|e| e.status()),
                alloc_histogram(&allocs)
            )),
        })
    })
    .await
    .unwrap();
    let job: Job = state
        .jobs()
        .await
        .unwrap()
        .into_iter()
        .find(|j| j.id == id)
        .unwrap();
    let started = alloc
        .task_states
        .get("t")
        .map(|t| t.started_at_unix_ns)
        .unwrap_or_else(|| panic!("probe {id} has no task state: {alloc:?}"));
    Probe {
        gateway: offset_secs(job.submit_time_unix_ns),
        client: offset_secs(started),
    }
}

fn assert_reads(what: &str, read: i64, offset: i64, probe: &impl std::fmt::Debug) {
    assert!(
        (read - offset).abs() <= PROBE_SLACK_SECS,
        "{what} clock reads {read} s from the real time, expected {offset} s: {probe:?}"
    );
}

/// The periodic parent whose forced launches read the broker's clock: it
/// launches once a year by itself.
const CLOCK_PROBE: &str = "clock-probe";

/// What the broker leader's clock reads, as an offset from the real time in
/// seconds: a forced launch of [`CLOCK_PROBE`] is named for the broker's
/// time of launch. Registers the parent the first time.
async fn broker_reads(c: &Cluster) -> i64 {
    let http = c.http().unwrap();
    let state = c.state.clone();
    if !state
        .jobs()
        .await
        .unwrap()
        .iter()
        .any(|j| j.id == CLOCK_PROBE)
    {
        let mut parent = batch_job(CLOCK_PROBE, json!({}));
        set(
            &mut parent,
            "/Job/Periodic",
            json!({"Enabled": true, "Spec": "0 0 0 1 1 * *", "SpecType": "cron"}),
        );
        register(&http, &parent).await;
    }
    let before = launches(&state, CLOCK_PROBE).await.len();
    // Each forced launch is named by the second it was made in.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let reply = http
        .put_json(&format!("/v1/job/{CLOCK_PROBE}/periodic/force"), &json!({}))
        .await
        .unwrap();
    reply.ok_json().unwrap();
    let asked = now_unix_ns() / SECOND_NS;
    let all = wait_for("the forced launch to be stored", WAIT, async || {
        let all = launches(&state, CLOCK_PROBE).await;
        Ok(if all.len() > before {
            Progress::Done(all)
        } else {
            Progress::Waiting(format!("launches {all:?}"))
        })
    })
    .await
    .unwrap();
    let (at, _) = all.last().copied().unwrap();
    at - asked
}

/// Steps `clock` by `secs`; the process reads the new offset from its next
/// wall-clock read on, which the probe after each step checks.
fn step(clock: &mut SteppedClock, secs: i64) {
    clock.step(secs).unwrap();
}

/// Starts the control plane and real client nodes named `clients`, with
/// the process of `stepped` on a [`SteppedClock`] (for client nodes: the
/// first one named). Returns the cluster, the clock and the node ids.
async fn cluster_with_stepped(
    name: &str,
    stepped: Service,
    clients: &[&str],
) -> (Cluster, SteppedClock, Vec<String>) {
    let mut c = Cluster::new(name).await.unwrap();
    let clock = SteppedClock::new(c.dir(), stepped.name()).unwrap();
    for service in [
        Service::Gateway,
        Service::EvalBroker,
        Service::PlanApplier,
        Service::SchedulerWorker,
        Service::DeploymentWatcher,
    ] {
        if service == stepped {
            c.env_for_next_start(clock.env());
        }
        match service {
            Service::Gateway => drop(c.start_gateway(&[]).await.unwrap()),
            Service::EvalBroker => drop(c.start_broker(&[]).await.unwrap()),
            Service::PlanApplier => drop(c.start_applier(&[]).await.unwrap()),
            Service::SchedulerWorker => drop(c.start_worker(&[]).await.unwrap()),
            _ => drop(c.start_deployment_watcher(&[]).await.unwrap()),
        }
    }
    for service in [
        Service::EvalBroker,
        Service::PlanApplier,
        Service::DeploymentWatcher,
    ] {
        c.wait_leader(service).await.unwrap();
    }
    let mut ids = Vec::new();
    for (i, node) in clients.iter().enumerate() {
        if i == 0 && stepped == Service::ClientNode {
            c.env_for_next_start(clock.env());
        }
        ids.push(c.start_client(node, &[]).await.unwrap());
    }
    (c, clock, ids)
}

/// The leader of `service` and its term (the leader key's create revision,
/// the fencing token of its writes).
async fn leader_term(c: &Cluster, service: Service) -> (String, i64) {
    let election = caravan_store::election_name(c.prefix(), service.name());
    let leader = c
        .state
        .store()
        .leader(election.as_bytes())
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{} has no leader", service.name()));
    (
        String::from_utf8_lossy(&leader.value).into_owned(),
        leader.create_revision,
    )
}

/// The leader terms of the leader-elected services.
async fn leader_terms(c: &Cluster) -> BTreeMap<&'static str, (String, i64)> {
    let mut terms = BTreeMap::new();
    for service in [
        Service::EvalBroker,
        Service::PlanApplier,
        Service::DeploymentWatcher,
    ] {
        terms.insert(service.name(), leader_term(c, service).await);
    }
    terms
}

/// Samples every node's status in the background for as long as it lives,
/// noting each sample in which one was not ready: a node marked down (or
/// disconnected) by a clock step.
struct NodeWatch {
    not_ready: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl NodeWatch {
    fn start(state: ClusterState) -> NodeWatch {
        let not_ready = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&not_ready);
        let started = Instant::now();
        let task = tokio::spawn(async move {
            loop {
                if let Ok(nodes) = state.nodes().await {
                    for n in nodes.iter().filter(|n| n.status() != NodeStatus::Ready) {
                        seen.lock().push(format!(
                            "{} {:?} at {:?}",
                            n.name,
                            n.status(),
                            started.elapsed()
                        ));
                    }
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        });
        NodeWatch { not_ready, task }
    }

    /// Stops sampling; fails if a node was ever not ready.
    fn check(self) {
        self.task.abort();
        let seen = self.not_ready.lock();
        assert!(
            seen.is_empty(),
            "nodes not ready during the steps: {seen:?}"
        );
    }
}

/// The invariants every fault checks at the end of a round: every eval
/// settled, no node over-committed, no duplicate live name, no process
/// exited on its own, and the leaders of the round's start still in the
/// same term.
async fn check_invariants(c: &mut Cluster, terms: &BTreeMap<&'static str, (String, i64)>) {
    let state = c.state.clone();
    wait_for("every eval to settle", WAIT, async || {
        let evals = state.evals().await?;
        Ok(if evals_settled(&evals) {
            Progress::Done(())
        } else {
            Progress::Waiting(format!("{:?}", eval_histogram(&evals)))
        })
    })
    .await
    .unwrap();
    let nodes = state.nodes().await.unwrap();
    let allocs = state.allocs().await.unwrap();
    assert_eq!(overcommitted_nodes(&nodes, &allocs), Vec::<String>::new());
    assert_eq!(duplicated_allocs(&allocs), Vec::<String>::new());
    assert_eq!(
        c.exited(),
        Vec::<String>::new(),
        "a process died on its own"
    );
    assert_eq!(
        &leader_terms(c).await,
        terms,
        "a leader lost its term during the clock steps"
    );
}

/// The periodic children of `parent` as (launch time, create revision),
/// oldest first.
async fn launches(state: &ClusterState, parent: &str) -> Vec<(i64, i64)> {
    let prefix = format!("{parent}/periodic-");
    let mut out: Vec<(i64, i64)> = state
        .jobs()
        .await
        .unwrap()
        .into_iter()
        .filter(|j| j.parent_id == parent)
        .map(|j| {
            let at =
                j.id.strip_prefix(&prefix)
                    .and_then(|t| t.parse().ok())
                    .unwrap_or_else(|| panic!("child named {}", j.id));
            (at, j.create_revision)
        })
        .collect();
    out.sort_by_key(|(_, revision)| *revision);
    out
}

/// Waits until `parent` has a child launched for a time after `after`
/// (Unix seconds); returns every launch so far.
async fn wait_launch_after(state: &ClusterState, parent: &str, after: i64) -> Vec<(i64, i64)> {
    wait_for(
        &format!("a launch of {parent} after {after}"),
        WAIT,
        async || {
            let all = launches(state, parent).await;
            Ok(if all.iter().any(|(at, _)| *at > after) {
                Progress::Done(all)
            } else {
                Progress::Waiting(format!("launches {all:?}"))
            })
        },
    )
    .await
    .unwrap()
}

/// The first real time (Unix ns) at which the eval `id` was seen past
/// pending, sampled in the background.
struct EvalWatch {
    left_pending: Arc<Mutex<Option<i64>>>,
    task: tokio::task::JoinHandle<()>,
}

impl EvalWatch {
    fn start(state: ClusterState, id: String) -> EvalWatch {
        let left_pending = Arc::new(Mutex::new(None));
        let seen = Arc::clone(&left_pending);
        let task = tokio::spawn(async move {
            loop {
                if let Ok(evals) = state.evals().await
                    && let Some(e) = evals.iter().find(|e| e.id == id)
                    && e.status() != EvalStatus::Pending
                {
                    *seen.lock() = Some(now_unix_ns());
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        EvalWatch { left_pending, task }
    }

    fn left_pending(&self) -> Option<i64> {
        *self.left_pending.lock()
    }
}

impl Drop for EvalWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A periodic batch job launching every 5 s, its task exiting at once.
fn ticker(id: &str) -> Value {
    let mut job = batch_job(id, json!({}));
    set(
        &mut job,
        "/Job/Periodic",
        json!({"Enabled": true, "Spec": "*/5 * * * * * *", "SpecType": "cron"}),
    );
    job
}

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

/// Every deployment of `job_id`, oldest first.
async fn deployments(state: &ClusterState, job_id: &str) -> Vec<caravan_proto::Deployment> {
    let mut out: Vec<caravan_proto::Deployment> = state
        .list(caravan_state::Kind::Deployments)
        .await
        .unwrap()
        .into_iter()
        .filter(|d: &caravan_proto::Deployment| d.job_id == job_id)
        .collect();
    out.sort_by_key(|d| d.create_revision);
    out
}

/// The update block of the deployment tests: one at a time, healthy after
/// `min_healthy`, failed when no progress is made for `progress`.
fn rolling(job: &mut Value, min_healthy: Duration, progress: Duration) {
    set(
        job,
        "/Job/TaskGroups/0/Update",
        json!({
            "MaxParallel": 1,
            "HealthCheck": "task_states",
            "MinHealthyTime": min_healthy.as_nanos() as i64,
            "HealthyDeadline": (progress / 2).as_nanos() as i64,
            "ProgressDeadline": progress.as_nanos() as i64,
        }),
    );
}

/// What the deployment-watcher leader's clock reads, as an offset from the
/// real time in seconds: a one-alloc rolling deployment of `id` succeeds,
/// and the watcher stamps its last write with its clock. Its progress
/// deadline (10 min) outlasts a 5 min step: a deployment the watcher first
/// sees while its clock is ahead has that much less time (docs/benchmarks.md,
/// "Clock jumps").
async fn watcher_reads(c: &Cluster, id: &str) -> i64 {
    let mut job = jobs::service_job(id, 1, jobs::mock_task(10, 16));
    rolling(&mut job, Duration::from_secs(1), Duration::from_secs(600));
    register(&c.http().unwrap(), &job).await;
    let state = c.state.clone();
    let done = wait_for(
        &format!("the deployment of {id} to succeed"),
        WAIT,
        async || {
            let ds = deployments(&state, id).await;
            Ok(match ds.last() {
                Some(d) if d.status() == caravan_proto::DeploymentStatus::Successful => {
                    Progress::Done(d.clone())
                }
                other => Progress::Waiting(format!(
                    "{:?}",
                    other.map(|d| (d.status(), d.status_description.clone()))
                )),
            })
        },
    )
    .await
    .unwrap();
    offset_secs(done.modify_time_unix_ns)
}

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
         enforced {late} ms after the cutoff (seen by polling every 250 ms)"
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

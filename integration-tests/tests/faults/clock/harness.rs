//! What the clock-jump tests share: a cluster with one process on a stepped
//! clock, probes that read each process's clock back from what it stored,
//! background watches of nodes and evals, and the invariants of a round.

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
pub(super) const STEP_SECS: i64 = 300;
pub(super) const SECOND_NS: i64 = 1_000_000_000;
/// How long a single wait of these tests may take on a loaded machine.
pub(super) const WAIT: Duration = Duration::from_secs(60);
/// How far a probe's reading may be from the offset it expects: the stored
/// times are a few seconds old when read.
pub(super) const PROBE_SLACK_SECS: i64 = 15;
/// How long each phase holds its offset: longer than a heartbeat TTL of the
/// test timings (2 s + 2 s grace), so a node whose heartbeats a step broke
/// would be marked down within it.
pub(super) const HOLD: Duration = Duration::from_secs(8);

/// Sets the value at a JSON pointer whose parent exists.
pub(super) fn set(job: &mut Value, pointer: &str, value: Value) {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    job.pointer_mut(parent)
        .and_then(Value::as_object_mut)
        .unwrap_or_else(|| panic!("no object at {parent}"))
        .insert(key.to_string(), value);
}

/// A batch job of one `mock` task with `config`.
pub(super) fn batch_job(id: &str, config: Value) -> Value {
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
pub(super) fn pin_to(job: &mut Value, node: &str) {
    set(
        job,
        "/Job/Constraints",
        json!([{"LTarget": "${node.unique.name}", "RTarget": node, "Operand": "="}]),
    );
}

/// Registers `job` through `PUT /v1/jobs`; returns the answer.
pub(super) async fn register(http: &HttpApi, job: &Value) -> Value {
    let reply = http.put_json("/v1/jobs", job).await.unwrap();
    reply.ok_json().unwrap()
}

pub(super) async fn job_allocs(
    state: &ClusterState,
    job_id: &str,
) -> anyhow::Result<Vec<Allocation>> {
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
pub(super) async fn wait_running(c: &Cluster, job_id: &str, count: usize) -> Vec<Allocation> {
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
pub(super) fn offset_secs(unix_ns: i64) -> i64 {
    (unix_ns - now_unix_ns()) / SECOND_NS
}

/// What a probe job's stored times say of the clocks, as offsets from the
/// real time in seconds: the job's submit time is the gateway's, its
/// task's start the client's.
#[derive(Debug)]
pub(super) struct Probe {
    pub(super) gateway: i64,
    pub(super) client: i64,
}

/// Runs a batch job whose task exits at once (on the node named `node`
/// when given) to completion; returns what its times say of the clocks.
pub(super) async fn probe(c: &Cluster, id: &str, node: Option<&str>) -> Probe {
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

pub(super) fn assert_reads(what: &str, read: i64, offset: i64, probe: &impl std::fmt::Debug) {
    assert!(
        (read - offset).abs() <= PROBE_SLACK_SECS,
        "{what} clock reads {read} s from the real time, expected {offset} s: {probe:?}"
    );
}

/// The periodic parent whose forced launches read the broker's clock: it
/// launches once a year by itself.
pub(super) const CLOCK_PROBE: &str = "clock-probe";

/// What the broker leader's clock reads, as an offset from the real time in
/// seconds: a forced launch of [`CLOCK_PROBE`] is named for the broker's
/// time of launch. Registers the parent the first time.
pub(super) async fn broker_reads(c: &Cluster) -> i64 {
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
pub(super) fn step(clock: &mut SteppedClock, secs: i64) {
    clock.step(secs).unwrap();
}

/// Starts the control plane and real client nodes named `clients`, with
/// the process of `stepped` on a [`SteppedClock`] (for client nodes: the
/// first one named). Returns the cluster, the clock and the node ids.
pub(super) async fn cluster_with_stepped(
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
pub(super) async fn leader_term(c: &Cluster, service: Service) -> (String, i64) {
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
pub(super) async fn leader_terms(c: &Cluster) -> BTreeMap<&'static str, (String, i64)> {
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
pub(super) struct NodeWatch {
    not_ready: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl NodeWatch {
    pub(super) fn start(state: ClusterState) -> NodeWatch {
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
    pub(super) fn check(self) {
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
pub(super) async fn check_invariants(
    c: &mut Cluster,
    terms: &BTreeMap<&'static str, (String, i64)>,
) {
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
pub(super) async fn launches(state: &ClusterState, parent: &str) -> Vec<(i64, i64)> {
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
pub(super) async fn wait_launch_after(
    state: &ClusterState,
    parent: &str,
    after: i64,
) -> Vec<(i64, i64)> {
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
pub(super) struct EvalWatch {
    left_pending: Arc<Mutex<Option<i64>>>,
    task: tokio::task::JoinHandle<()>,
}

impl EvalWatch {
    pub(super) fn start(state: ClusterState, id: String) -> EvalWatch {
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

    pub(super) fn left_pending(&self) -> Option<i64> {
        *self.left_pending.lock()
    }
}

impl Drop for EvalWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A periodic batch job launching every 5 s, its task exiting at once.
pub(super) fn ticker(id: &str) -> Value {
    let mut job = batch_job(id, json!({}));
    set(
        &mut job,
        "/Job/Periodic",
        json!({"Enabled": true, "Spec": "*/5 * * * * * *", "SpecType": "cron"}),
    );
    job
}

/// Every deployment of `job_id`, oldest first.
pub(super) async fn deployments(
    state: &ClusterState,
    job_id: &str,
) -> Vec<caravan_proto::Deployment> {
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
pub(super) fn rolling(job: &mut Value, min_healthy: Duration, progress: Duration) {
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
pub(super) async fn watcher_reads(c: &Cluster, id: &str) -> i64 {
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

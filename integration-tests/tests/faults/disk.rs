//! A frozen or slow disk under one etcd member. The services run on a
//! three-member etcd whose data dirs sit on FUSE disks of their own
//! (`bindfs`, see `FuseDisk`); the disk frozen is member 0's, the member
//! every service's store talks to first, so the services meet the fault
//! head on rather than only through raft. Each round starts afresh (etcd,
//! services, simulated nodes) and, under a trickle of job registrations
//! (one every 500 ms, from 2 s before the fault until the thaw), freezes
//! that disk for [`FREEZE`] with member 0 a follower, or with it the raft
//! leader, or slows the leader's disk for as long (frozen and answering in
//! turn). Then it checks the promises: every registration answered within
//! the gateway's own bound ([`REGISTER_BOUND`]), with success or a clear
//! error; no service process died; jobs registered during the fault were
//! placed before the thaw (the services' watches leave the stuck member);
//! the frozen member answers again and everything converges within
//! [`CONVERGED`] of the thaw; no lost evaluation, no over-committed node,
//! no duplicate live name. What each round measured is printed
//! (`--nocapture`) for `docs/benchmarks.md`.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use caravan_integration_tests::batch_once;
use caravan_integration_tests::state::{
    duplicated_allocs, eval_histogram, evals_settled, overcommitted_nodes,
};
use caravan_integration_tests::{
    Cluster, ClusterState, EtcdCluster, EtcdClusterOptions, HttpApi, Progress, Service, jobs,
    wait_for,
};
use caravan_model::AllocExt;
use caravan_proto::{AllocClientStatus, JobType};
use caravan_store::EtcdStore;
use tokio::task::JoinSet;

use crate::rounds;

/// How long the disk stays frozen (or slow).
const FREEZE: Duration = Duration::from_secs(15);
/// How often a job is registered while the trickle runs.
const TRICKLE_EVERY: Duration = Duration::from_millis(500);
/// How long the trickle runs before the fault.
const TRICKLE_MARGIN: Duration = Duration::from_secs(2);
/// The gateway's own bound on a registration. A store request gives the
/// member it is pinned to the store's request timeout (10 s by default)
/// and a write that went unanswered is not resent, so the job-write group
/// in flight ends within 10 s; a registration queued behind it, whose own
/// write then fails on the same member, goes the read-first way on the
/// next member (the frozen one left), which answers at once. Two request
/// timeouts and a margin for a loaded machine.
const REGISTER_BOUND: Duration = Duration::from_secs(25);
/// How long after the thaw the cluster has to converge: the frozen member
/// answering again, every eval settled and every job registered running.
const CONVERGED: Duration = Duration::from_secs(30);
/// The member whose disk is frozen: every store pins the first endpoint.
const FROZEN: usize = 0;
/// Simulated client nodes.
const NODES: u32 = 3;

/// Which disk a round freezes, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// Member 0's disk frozen while it is a follower.
    FrozenFollower,
    /// Member 0's disk frozen while it is the raft leader.
    FrozenLeader,
    /// Member 0's disk slow (frozen 300 ms, answering 100 ms, in turn)
    /// while it is the raft leader.
    SlowLeader,
}

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::FrozenFollower => "frozen-follower",
            Fault::FrozenLeader => "frozen-leader",
            Fault::SlowLeader => "slow-leader",
        }
    }
}

/// One registration of the trickle.
#[derive(Debug)]
struct Registration {
    job: String,
    /// When it was sent.
    sent: Instant,
    /// How long the gateway took to answer.
    took: Duration,
    /// `Ok` or the gateway's error (or the client's, for no answer).
    result: Result<(), String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_follower_disk_breaks_no_promise() {
    for round in 0..rounds() {
        run_round(Fault::FrozenFollower, round).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_leader_disk_breaks_no_promise() {
    for round in 0..rounds() {
        run_round(Fault::FrozenLeader, round).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slow_leader_disk_breaks_no_promise() {
    for round in 0..rounds() {
        run_round(Fault::SlowLeader, round).await;
    }
}

async fn run_round(fault: Fault, round: usize) {
    let name = format!("disk-{}-{round}", fault.name());
    let mut etcd = EtcdCluster::start_with(
        3,
        EtcdClusterOptions {
            fuse_disks: true,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    // Member 0 in the role the fault wants, before any service pins it.
    match fault {
        Fault::FrozenFollower => etcd.move_leader(1).await.unwrap(),
        Fault::FrozenLeader | Fault::SlowLeader => etcd.move_leader(FROZEN).await.unwrap(),
    }
    let mut c = Cluster::on_etcd(&name, etcd.endpoints(), true)
        .await
        .unwrap();
    c.start_control_plane().await.unwrap();
    c.start_simulated_clients(NODES, &[]).await.unwrap();
    let http = c.http().unwrap();
    let warm = format!("{name}-warm");
    register(&http, &warm).await.unwrap();
    wait_converged(&c, Instant::now())
        .await
        .unwrap_or_else(|err| panic!("{name} before the fault: {err}\n{}", c.logs()));

    // What the cluster did during the fault, read through a member whose
    // disk answers (the harness's own store pins member 0, as the services'
    // do).
    let healthy_member = EtcdStore::connect(&[etcd.endpoints()[1].as_str()])
        .await
        .unwrap();
    let side = ClusterState::new(Arc::new(healthy_member), c.state.keys().clone());
    let trickle = Trickle::start(http.clone(), name.clone());
    // The trickle's pace is the property: registrations before the fault.
    tokio::time::sleep(TRICKLE_MARGIN).await;
    let batch = batch_once::register(&http, "disk", 3).await.unwrap();
    match fault {
        Fault::FrozenFollower | Fault::FrozenLeader => etcd.freeze_disk(FROZEN).unwrap(),
        Fault::SlowLeader => etcd
            .slow_disk(
                FROZEN,
                Duration::from_millis(300),
                Duration::from_millis(100),
            )
            .unwrap(),
    }
    let faulted = Instant::now();
    // The fault lasts a fixed time by design; meanwhile, when each job is
    // first seen running.
    let mut first_running: HashMap<String, Instant> = HashMap::new();
    while faulted.elapsed() < FREEZE {
        for job in running_jobs(&side).await.unwrap() {
            first_running.entry(job).or_insert_with(Instant::now);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let during = c.exited();
    etcd.thaw_disk(FROZEN).unwrap();
    let thawed = Instant::now();
    // The trickle ends with the fault; the frozen member answering again
    // is timed meanwhile.
    let (registrations, member_back) =
        tokio::join!(trickle.finish(), wait_member_healthy(&etcd, FROZEN, thawed));
    let member_back = member_back.unwrap_or_else(|err| panic!("{name}: {err}\n{}", etcd.logs(30)));
    assert!(
        during.is_empty(),
        "{name}: processes died during the fault: {during:?}\n{}",
        c.logs()
    );
    let converged = wait_converged(&c, thawed)
        .await
        .unwrap_or_else(|err| panic!("{name} after the thaw: {err}\n{}", c.logs()));

    let report = Report::of(&registrations, faulted);
    // From registration to running, for the jobs registered during the
    // fault that ran before the thaw.
    let mut placed_during: Vec<Duration> = registrations
        .iter()
        .filter(|r| r.sent >= faulted && r.result.is_ok())
        .filter_map(|r| first_running.get(&r.job).map(|at| *at - r.sent))
        .collect();
    placed_during.sort();
    let median = placed_during
        .get(placed_during.len() / 2)
        .copied()
        .unwrap_or_default();
    let slowest = placed_during.last().copied().unwrap_or_default();
    eprintln!(
        "{name}: {report}; {} of them running before the thaw, registered to running \
         {median:.1?} median, {slowest:.1?} at most; member {FROZEN} healthy \
         {member_back:.1?} and every job running {converged:.1?} after the thaw",
        placed_during.len()
    );
    // The services carry on through the other members: jobs registered
    // while the disk is frozen are placed before it thaws.
    assert!(
        !placed_during.is_empty(),
        "{name}: nothing registered during the fault ran before the thaw\n{}",
        c.logs()
    );
    let unclear: Vec<&Registration> = registrations
        .iter()
        .filter(|r| r.took > REGISTER_BOUND || r.result.as_ref().is_err_and(|e| !clear(e)))
        .collect();
    assert!(
        unclear.is_empty(),
        "{name}: registrations that hung past {REGISTER_BOUND:?} or failed without a clear \
         error: {unclear:#?}\n{}",
        c.logs()
    );
    assert!(
        registrations.iter().any(|r| r.result.is_ok()),
        "{name}: no registration succeeded: {registrations:#?}"
    );
    check_invariants(&mut c, &mut etcd, &name).await;
    batch_once::assert_ran_once(&c.state, &batch, CONVERGED).await;
    c.shutdown();
}

/// Registers a one-alloc service job named `id`.
async fn register(http: &HttpApi, id: &str) -> Result<(), String> {
    let job = jobs::service_job(id, 1, jobs::mock_task(20, 32));
    match http.put_json("/v1/jobs", &job).await {
        Ok(reply) => reply.ok_json().map(|_| ()).map_err(|e| e.to_string()),
        Err(err) => Err(format!("no answer: {err:#}")),
    }
}

/// Whether a failed registration's error says what happened: the gateway's
/// own refusal (HTTP 503 for a store that did not answer, 409 for a write
/// that lost a race), with a message. No answer at all is not clear.
fn clear(error: &str) -> bool {
    let refusal = ["HTTP 503: ", "HTTP 409: "]
        .iter()
        .find_map(|status| error.strip_prefix(status));
    refusal.is_some_and(|message| !message.trim().is_empty())
}

/// Job registrations sent every [`TRICKLE_EVERY`], each on its own task,
/// so one that waits does not hold back the next.
struct Trickle {
    stop: tokio::sync::watch::Sender<bool>,
    sender: tokio::task::JoinHandle<Vec<Registration>>,
}

impl Trickle {
    fn start(http: HttpApi, name: String) -> Trickle {
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let sender = tokio::spawn(async move {
            let mut sent = JoinSet::new();
            let mut ticks = tokio::time::interval(TRICKLE_EVERY);
            for i in 0.. {
                tokio::select! {
                    _ = ticks.tick() => {}
                    _ = stopped.changed() => break,
                }
                let http = http.clone();
                let job = format!("{name}-{i}");
                sent.spawn(async move {
                    let at = Instant::now();
                    let result = register(&http, &job).await;
                    Registration {
                        job,
                        sent: at,
                        took: at.elapsed(),
                        result,
                    }
                });
            }
            let mut done = Vec::new();
            while let Some(registration) = sent.join_next().await {
                done.extend(registration.ok());
            }
            done.sort_by_key(|r| r.sent);
            done
        });
        Trickle { stop, sender }
    }

    /// Stops sending and waits for every registration's answer.
    async fn finish(self) -> Vec<Registration> {
        let _ = self.stop.send(true);
        self.sender.await.unwrap()
    }
}

/// What the trickle saw, for the round's line.
struct Report {
    sent: usize,
    failed: usize,
    /// The slowest answer to a registration sent before the fault, and to
    /// one sent during it.
    slowest: [Duration; 2],
    /// Registrations sent during the fault.
    during: usize,
    errors: Vec<String>,
}

impl Report {
    fn of(registrations: &[Registration], faulted: Instant) -> Report {
        let mut slowest = [Duration::ZERO; 2];
        for r in registrations {
            let phase = usize::from(r.sent >= faulted);
            slowest[phase] = slowest[phase].max(r.took);
        }
        let mut errors: Vec<String> = registrations
            .iter()
            .filter_map(|r| r.result.as_ref().err())
            .map(|e| e.chars().take(160).collect())
            .collect();
        errors.sort();
        errors.dedup();
        Report {
            sent: registrations.len(),
            failed: registrations.iter().filter(|r| r.result.is_err()).count(),
            slowest,
            during: registrations.iter().filter(|r| r.sent >= faulted).count(),
            errors,
        }
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [before, during] = self.slowest;
        write!(
            f,
            "{} registrations, {} failed, slowest answer {before:.1?} (sent before the fault) \
             and {during:.1?} (sent during it); errors {:?}; {} sent during the fault",
            self.sent, self.failed, self.errors, self.during
        )
    }
}

/// Waits until etcd member `i` reports itself healthy (its `/health`
/// makes a read through raft, which a frozen disk holds); how long after
/// `since` it did.
async fn wait_member_healthy(
    etcd: &EtcdCluster,
    i: usize,
    since: Instant,
) -> anyhow::Result<Duration> {
    let endpoint = etcd.endpoints()[i].clone();
    let addr = endpoint
        .trim_start_matches("http://")
        .parse()
        .map_err(|e| anyhow::anyhow!("{endpoint}: {e}"))?;
    let api = HttpApi::new(addr);
    wait_for(&format!("etcd member {i} healthy"), CONVERGED, async || {
        let reply = tokio::time::timeout(Duration::from_secs(3), api.get("/health")).await;
        Ok(match reply {
            Ok(Ok(reply)) if reply.text().contains(r#""health":"true""#) => Progress::Done(()),
            Ok(Ok(reply)) => Progress::Waiting(format!("HTTP {}: {}", reply.status, reply.text())),
            Ok(Err(err)) => Progress::Waiting(err.to_string()),
            Err(_) => Progress::Waiting("no answer within 3 s".into()),
        })
    })
    .await?;
    Ok(since.elapsed())
}

/// Waits until every eval is settled and every job in etcd has its one
/// alloc running at its version; how long after `since` that held.
async fn wait_converged(c: &Cluster, since: Instant) -> anyhow::Result<Duration> {
    let state = c.state.clone();
    wait_for("the cluster to converge", CONVERGED, async || {
        let evals = state.evals().await?;
        if !evals_settled(&evals) {
            return Ok(Progress::Waiting(format!(
                "evals {:?}",
                eval_histogram(&evals)
            )));
        }
        let jobs = state.jobs().await?;
        let allocs = state.allocs().await?;
        let waiting: Vec<&str> = jobs
            .iter()
            // Batch work ends; `batch_once` checks it ran once.
            .filter(|job| job.r#type() != JobType::Batch)
            .filter(|job| {
                let running = allocs
                    .iter()
                    .filter(|a| a.job_id == job.id && a.is_live())
                    .filter(|a| a.client_status() == AllocClientStatus::Running)
                    .filter(|a| a.job_version == job.version)
                    .count();
                running != 1
            })
            .map(|job| job.id.as_str())
            .collect();
        Ok(if waiting.is_empty() {
            Progress::Done(since.elapsed())
        } else {
            Progress::Waiting(format!("{} jobs not running: {waiting:?}", waiting.len()))
        })
    })
    .await
}

/// The jobs with an alloc running.
async fn running_jobs(state: &ClusterState) -> anyhow::Result<BTreeSet<String>> {
    let allocs = state.allocs().await?;
    Ok(allocs
        .iter()
        .filter(|a| a.is_live() && a.client_status() == AllocClientStatus::Running)
        .map(|a| a.job_id.clone())
        .collect())
}

/// The chaos run's invariants on what etcd holds, and no process (service
/// or etcd member) dead on its own.
async fn check_invariants(c: &mut Cluster, etcd: &mut EtcdCluster, name: &str) {
    let evals = c.state.evals().await.unwrap();
    let allocs = c.state.allocs().await.unwrap();
    let nodes = c.state.nodes().await.unwrap();
    assert!(
        evals_settled(&evals),
        "{name}: lost evals: {:?}",
        eval_histogram(&evals)
    );
    let over = overcommitted_nodes(&nodes, &allocs);
    assert!(over.is_empty(), "{name}: over-committed: {over:?}");
    let dups = duplicated_allocs(&allocs);
    assert!(dups.is_empty(), "{name}: duplicate live names: {dups:?}");
    let exited = c.exited();
    assert!(exited.is_empty(), "{name}: {exited:?}\n{}", c.logs());
    for i in 0..etcd.len() {
        assert!(
            etcd.is_up(i),
            "{name}: etcd member {i} is down\n{}",
            etcd.logs(30)
        );
    }
    for service in [
        Service::EvalBroker,
        Service::PlanApplier,
        Service::DeploymentWatcher,
    ] {
        c.wait_leader(service)
            .await
            .unwrap_or_else(|err| panic!("{name}: {err}\n{}", c.logs()));
    }
}

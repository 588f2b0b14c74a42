//! Every service binary exits within 10 s of SIGTERM, whether etcd answers
//! or not. Each test starts a private etcd (so it can take it away) and the
//! service with its default timings, next to the peers that keep calls in
//! flight to or from it, then measures three stops of a fresh instance:
//! etcd up; etcd paused (SIGSTOP, as behind a partition: requests hang until
//! their timeouts); and etcd killed (connections refused). A stop passes
//! when the process exited by itself within the limit, and not through the
//! runtime's shutdown deadline (which would mean something hung until it).
//!
//! Needs the service binaries (`cargo build --workspace --bins`) and `etcd`
//! on `PATH`; not `CARAVAN_TEST_ETCD`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::process::ExitStatus;
use std::time::Duration;

use caravan_integration_tests::{Cluster, EtcdProcess, HttpApi, Progress, Service, wait_for};

/// The longest a service may take to exit after SIGTERM.
const LIMIT: Duration = Duration::from_secs(10);
/// How long past the limit a stop is still waited for, to report how slow
/// a failing one was.
const OVERTIME: Duration = Duration::from_secs(25);
/// How long etcd is away before the SIGTERM, so calls are in flight and
/// retries under way.
const OUTAGE: Duration = Duration::from_secs(3);
/// How long a service may take to be up (a leader's predecessor may hold
/// the leader key until its lease lapses).
const UP_TIMEOUT: Duration = Duration::from_secs(60);
/// Gateway settings that make client nodes heartbeat every second or so, so
/// that a heartbeat is in flight (waiting on etcd) when the SIGTERM comes.
const FREQUENT_HEARTBEATS: &[(&str, &str)] = &[
    ("min_heartbeat_ttl_ms", "2000"),
    ("heartbeat_grace_ms", "2000"),
];
/// The exit code of a service whose shutdown deadline passed
/// (`caravan_runtime::shutdown::DEADLINE_EXIT_CODE`).
const DEADLINE_EXIT_CODE: i32 = 124;

/// What etcd does while the service stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Etcd {
    Up,
    Paused,
    Killed,
}

/// One measured stop.
#[derive(Debug)]
struct Stop {
    etcd: Etcd,
    /// How long it took and how it exited; `None` when it had to be killed.
    exited: Option<(Duration, ExitStatus)>,
}

impl Stop {
    fn passed(&self) -> bool {
        matches!(self.exited, Some((took, status))
            if took < LIMIT && status.code() != Some(DEADLINE_EXIT_CODE))
    }

    fn describe(&self) -> String {
        match self.exited {
            Some((took, status)) => format!("etcd {:?}: {took:.2?} ({status})", self.etcd),
            None => format!(
                "etcd {:?}: still running after {:?}, killed",
                self.etcd,
                LIMIT + OVERTIME
            ),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_gateway_exits_within_10_s() {
    check(Service::Gateway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eval_broker_exits_within_10_s() {
    check(Service::EvalBroker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_applier_exits_within_10_s() {
    check(Service::PlanApplier).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduler_worker_exits_within_10_s() {
    check(Service::SchedulerWorker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_watcher_exits_within_10_s() {
    check(Service::DeploymentWatcher).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_node_exits_within_10_s() {
    check(Service::ClientNode).await;
}

/// Starts `service` three times on a private etcd and stops it with etcd
/// up, paused and killed; asserts every stop.
async fn check(service: Service) {
    let mut etcd = EtcdProcess::start().await.unwrap();
    let name = format!("shutdown-{}", service.name());
    let mut c = Cluster::on_etcd(&name, vec![etcd.endpoint().to_string()], false)
        .await
        .unwrap();
    start_peers(&mut c, service).await;
    let mut stops = Vec::new();
    for (round, outage) in [Etcd::Up, Etcd::Paused, Etcd::Killed]
        .into_iter()
        .enumerate()
    {
        let process = start_up(&mut c, service, round).await;
        // Something in flight at the gateway: a blocking query that would
        // wait a minute.
        let query = (service == Service::Gateway).then(|| {
            let api = HttpApi::new(c.gateways().last().expect("a gateway").http);
            tokio::spawn(async move { api.get("/v1/jobs?index=999999999&wait=60s").await })
        });
        match outage {
            Etcd::Up => {}
            Etcd::Paused => etcd.pause(),
            Etcd::Killed => etcd.kill(),
        }
        if outage != Etcd::Up {
            tokio::time::sleep(OUTAGE).await;
        }
        let exited = c.terminate(&process, LIMIT + OVERTIME).unwrap();
        if outage == Etcd::Paused {
            etcd.resume();
        }
        if let Some(query) = query {
            query.abort();
        }
        let stop = Stop {
            etcd: outage,
            exited,
        };
        eprintln!("{process}: {}", stop.describe());
        stops.push(stop);
    }
    let report: Vec<String> = stops.iter().map(Stop::describe).collect();
    assert!(
        stops.iter().all(Stop::passed),
        "{} did not exit within {LIMIT:?} of SIGTERM by itself: {report:?}\n{}",
        service.name(),
        c.logs()
    );
}

/// Starts the peers that call `service` or that it calls, once: the
/// gateways a client node talks to, a worker long-polling the broker, the
/// broker and applier a worker talks to. (The gateway gets a client node of
/// its own each round, see [`start_up`].)
async fn start_peers(c: &mut Cluster, service: Service) {
    match service {
        Service::EvalBroker => {
            c.start_worker(&[]).await.unwrap();
        }
        Service::SchedulerWorker => {
            let broker = c.start_broker(&[]).await.unwrap();
            let applier = c.start_applier(&[]).await.unwrap();
            wait_leading(c, Service::EvalBroker, broker).await;
            wait_leading(c, Service::PlanApplier, applier).await;
        }
        Service::ClientNode => {
            // Two, as deployed: a node fails over from one to the other.
            c.start_gateway(FREQUENT_HEARTBEATS).await.unwrap();
            c.start_gateway(FREQUENT_HEARTBEATS).await.unwrap();
        }
        Service::Gateway | Service::PlanApplier | Service::DeploymentWatcher => {}
    }
}

/// Starts a fresh instance of `service` and waits until it is up: serving
/// (and, for the gateway, with a client node heartbeating it), leading, or
/// registered. Returns its process name.
async fn start_up(c: &mut Cluster, service: Service, round: usize) -> String {
    match service {
        Service::Gateway => {
            c.start_gateway(FREQUENT_HEARTBEATS).await.unwrap();
            c.start_client(&format!("gateway-peer-{round}"), &[])
                .await
                .unwrap();
            newest(c, service)
        }
        Service::EvalBroker | Service::PlanApplier | Service::DeploymentWatcher => {
            let addr = match service {
                Service::EvalBroker => c.start_broker(&[]).await,
                Service::PlanApplier => c.start_applier(&[]).await,
                _ => c.start_deployment_watcher(&[]).await,
            }
            .unwrap();
            wait_leading(c, service, addr).await;
            newest(c, service)
        }
        Service::SchedulerWorker => {
            c.start_worker(&[]).await.unwrap();
            newest(c, service)
        }
        Service::ClientNode => {
            c.start_client(&format!("node-{round}"), &[]).await.unwrap();
            newest(c, service)
        }
    }
}

/// The name of the newest process of `service`.
fn newest(c: &Cluster, service: Service) -> String {
    c.processes()
        .into_iter()
        .rev()
        .map(|(name, _)| name)
        .find(|name| name.starts_with(service.name()))
        .expect("a process of the service")
}

/// Waits until the replica of `service` at `addr` leads (its predecessor's
/// key may linger until its lease lapses after a stop on a paused etcd).
async fn wait_leading(c: &Cluster, service: Service, addr: SocketAddr) {
    let state = c.state.clone();
    let want = addr.to_string();
    wait_for(
        &format!("{} at {want} to lead", service.name()),
        UP_TIMEOUT,
        async || {
            Ok(match state.leader(service.name()).await? {
                Some(leader) if leader == want => Progress::Done(()),
                other => Progress::Waiting(format!("leader {other:?}")),
            })
        },
    )
    .await
    .unwrap();
}

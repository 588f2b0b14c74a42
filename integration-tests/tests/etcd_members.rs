//! Caravan on a three-member etcd cluster of its own, losing members: with
//! a quorum up, one member down (a follower, then the leader) takes no
//! service down and jobs keep being placed; a member cut off from its
//! leader ends its watches instead of keeping them silent, and the gateway's
//! leader headers say so; a frozen eval-broker leader is abandoned.
//!
//! Needs the service binaries (`cargo build --workspace --bins`) and `etcd`
//! on `PATH`; not `CARAVAN_TEST_ETCD`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use caravan_integration_tests::{Cluster, EtcdCluster, HttpApi, Progress, Service, jobs, wait_for};
use caravan_model::AllocExt;
use caravan_proto::AllocClientStatus;
use caravan_state::{Informer, InformerConfig, Keyspace};
use caravan_store::{EtcdStore, Store};
use futures::StreamExt;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// How long a job may take to be placed and running.
const PLACED: Duration = Duration::from_secs(60);
/// How long a member without a leader may keep a watch open: etcd notices
/// a lost leader within a few election timeouts (1 s each by default).
const LEADER_LOSS_NOTICED: Duration = Duration::from_secs(20);

/// Registers a one-alloc job named `id` and waits until its alloc runs.
async fn place(c: &Cluster, http: &HttpApi, id: &str) {
    http.put_json(
        "/v1/jobs",
        &jobs::service_job(id, 1, jobs::mock_task(20, 32)),
    )
    .await
    .unwrap()
    .ok_json()
    .unwrap_or_else(|err| panic!("registering {id}: {err}"));
    let state = c.state.clone();
    wait_for(&format!("job {id} running"), PLACED, async || {
        let allocs = state.allocs().await?;
        let running = allocs
            .iter()
            .filter(|a| a.job_id == id && a.is_live())
            .filter(|a| a.client_status() == AllocClientStatus::Running)
            .count();
        Ok(if running == 1 {
            Progress::Done(())
        } else {
            Progress::Waiting(format!("{running} allocs of {id} running"))
        })
    })
    .await
    .unwrap_or_else(|err| panic!("{err}\n{}", c.logs()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_member_down_takes_no_service_down() {
    let mut etcd = EtcdCluster::start(3).await.unwrap();
    let mut c = Cluster::on_etcd("etcd-member-down", etcd.endpoints(), true)
        .await
        .unwrap();
    c.start_control_plane().await.unwrap();
    c.start_simulated_clients(2, &[]).await.unwrap();
    let http = c.http().unwrap();
    place(&c, &http, "before").await;
    for round in ["follower", "leader"] {
        let leader = etcd.leader().await.unwrap();
        let down = if round == "leader" {
            leader
        } else {
            (leader + 1) % 3
        };
        etcd.kill(down).unwrap();
        place(&c, &http, &format!("{round}-down")).await;
        // Services started meanwhile, given every endpoint, come up too.
        c.start_broker(&[]).await.unwrap();
        c.start_gateway(&[]).await.unwrap();
        place(&c, &http, &format!("{round}-down-after-starts")).await;
        let exited = c.exited();
        assert!(
            exited.is_empty(),
            "with the {round} down: {exited:?}\n{}",
            c.logs()
        );
        etcd.restart(down).await.unwrap();
        place(&c, &http, &format!("{round}-back")).await;
    }
    let exited = c.exited();
    assert!(exited.is_empty(), "{exited:?}\n{}", c.logs());
    c.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_on_a_member_without_leader_ends() {
    let mut etcd = EtcdCluster::start(3).await.unwrap();
    let endpoints = etcd.endpoints();
    let leader = etcd.leader().await.unwrap();
    let alone = (leader + 1) % 3;
    let store = EtcdStore::connect(&[endpoints[alone].as_str()])
        .await
        .unwrap();
    let mut watch = store.watch(b"/etcd-members/", 0).await.unwrap();
    for other in (0..3).filter(|&i| i != alone) {
        etcd.kill(other).unwrap();
    }
    match tokio::time::timeout(LEADER_LOSS_NOTICED, watch.stream.next()).await {
        Ok(Some(Err(err))) => eprintln!("the watch ended: {err}"),
        Ok(other) => panic!("expected the watch to fail, got {other:?}"),
        Err(_) => panic!("the watch stayed open {LEADER_LOSS_NOTICED:?} without a leader"),
    }
    // Once the cluster has a leader again, a cache over every member
    // follows it.
    for other in (0..3).filter(|&i| i != alone) {
        etcd.restart(other).await.unwrap();
    }
    let store: Arc<dyn Store> = Arc::new(EtcdStore::connect(&endpoints).await.unwrap());
    let keys = Keyspace::new("/etcd-members");
    let informer = Informer::start(Arc::clone(&store), keys.clone(), InformerConfig::default())
        .await
        .unwrap();
    let rev = store.put(&keys.node("n1"), b"", 0).await.unwrap();
    informer
        .wait_for_revision(rev, Duration::from_secs(10))
        .await
        .unwrap();
}

/// The gateway's `X-Nomad-KnownLeader` and `X-Nomad-LastContact` follow
/// etcd: true and small with a quorum, false and growing without one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_headers_follow_the_store() {
    let mut etcd = EtcdCluster::start(3).await.unwrap();
    let mut c = Cluster::on_etcd("etcd-leader-headers", etcd.endpoints(), true)
        .await
        .unwrap();
    c.start_gateway(&[]).await.unwrap();
    let http = c.http().unwrap();
    let headers = async || -> anyhow::Result<(String, u64)> {
        let reply = http.get("/v1/jobs").await?;
        let known = reply.header("X-Nomad-KnownLeader").unwrap_or_default();
        let contact = reply
            .header("X-Nomad-LastContact")
            .unwrap_or_default()
            .parse()?;
        Ok((known.to_string(), contact))
    };
    let (known, contact) = headers().await.unwrap();
    assert_eq!(known, "true");
    assert!(contact < 5_000, "{contact} ms");
    let leader = etcd.leader().await.unwrap();
    for member in (0..3).filter(|&i| i != leader) {
        etcd.kill(member).unwrap();
    }
    let contact = wait_for(
        "the gateway to lose its leader",
        LEADER_LOSS_NOTICED,
        async || {
            Ok(match headers().await? {
                (known, contact) if known == "false" => Progress::Done(contact),
                other => Progress::Waiting(format!("{other:?}")),
            })
        },
    )
    .await
    .unwrap();
    assert!(contact >= 5_000, "{contact} ms");
    for member in (0..3).filter(|&i| i != leader) {
        etcd.restart(member).await.unwrap();
    }
    wait_for(
        "the gateway to know a leader again",
        LEADER_LOSS_NOTICED,
        async || {
            Ok(match headers().await? {
                (known, _) if known == "true" => Progress::Done(()),
                other => Progress::Waiting(format!("{other:?}")),
            })
        },
    )
    .await
    .unwrap();
    c.shutdown();
}

/// A SIGSTOPped eval-broker leader stops renewing its lease: the standby
/// takes over within the TTL (2 s in tests) and a margin, and workers and
/// gateways follow it, so jobs are still placed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_broker_leader_is_abandoned() {
    let etcd = EtcdCluster::start(3).await.unwrap();
    let mut c = Cluster::on_etcd("etcd-frozen-broker", etcd.endpoints(), true)
        .await
        .unwrap();
    c.start_control_plane().await.unwrap();
    c.start_broker(&[]).await.unwrap();
    c.start_simulated_clients(1, &[]).await.unwrap();
    let http = c.http().unwrap();
    place(&c, &http, "before").await;
    let old = c.wait_leader(Service::EvalBroker).await.unwrap();
    let name = c
        .grpc_addrs()
        .into_iter()
        .find(|(_, addr)| addr.to_string() == old)
        .map(|(name, _)| name)
        .unwrap();
    let frozen = c
        .processes()
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, pid)| pid)
        .unwrap();
    let frozen = Pid::from_raw(i32::try_from(frozen).unwrap());
    kill(frozen, Signal::SIGSTOP).unwrap();
    let started = tokio::time::Instant::now();
    let new = c
        .wait_leader_other_than(Service::EvalBroker, Some(&old))
        .await
        .unwrap();
    let took = started.elapsed();
    place(&c, &http, "after-freeze").await;
    let placed = started.elapsed();
    kill(frozen, Signal::SIGCONT).unwrap();
    eprintln!("leader {old} frozen; {new} led after {took:?}, a job placed after {placed:?}");
    assert!(took < Duration::from_secs(2 + 5), "{took:?}");
    c.shutdown();
}

//! The node-facing API: registration, heartbeats keeping the heartbeat
//! lease, re-registration, expiry, and refused nodes.

use std::time::Duration;

use caravan_proto::node_client_service_client::NodeClientServiceClient;
use caravan_proto::{HeartbeatRequest, NodeStatus, RegisterNodeRequest, RegisterNodeResponse};
use caravan_testkit::wait::holds_within;
use tonic::Code;
use tonic::transport::Channel;

use crate::common::{Backend, TestGateway, node_secret};
use crate::fixtures::node;

type Client = NodeClientServiceClient<Channel>;

/// A gateway granting one-second heartbeat TTLs, and a node client of it.
async fn short_ttl_gateway(backend: Backend, name: &str) -> (TestGateway, Client) {
    let store = backend.store().await;
    let gw = TestGateway::start_with(store, name, |c| {
        c.min_heartbeat_ttl_ms = 1_000;
        c.heartbeat_grace_ms = 1_000;
    })
    .await;
    let client = NodeClientServiceClient::new(gw.channel().await);
    (gw, client)
}

async fn register_n1(client: &mut Client) -> RegisterNodeResponse {
    client
        .register_node(RegisterNodeRequest {
            node: Some(node("n1")),
            secret_id: node_secret("n1"),
        })
        .await
        .unwrap()
        .into_inner()
}

async fn heartbeat(client: &mut Client, node_id: &str) -> Result<(), Code> {
    client
        .heartbeat(HeartbeatRequest {
            node_id: node_id.into(),
            secret_id: node_secret(node_id),
        })
        .await
        .map(drop)
        .map_err(|status| status.code())
}

/// The lease n1's heartbeat key is attached to, if the key exists.
async fn heartbeat_lease(gw: &TestGateway) -> Option<i64> {
    let kv = gw.store.get(&gw.keys.heartbeat("n1")).await.unwrap()?;
    Some(kv.lease)
}

pub async fn registration_grants_the_configured_heartbeat_ttl(backend: Backend) {
    let (gw, mut client) = short_ttl_gateway(backend, "grpc-node-ttl").await;
    let r = register_n1(&mut client).await;
    let ttl = Duration::from_nanos(r.heartbeat_ttl_ns as u64);
    assert!(
        ttl >= Duration::from_secs(1) && ttl < Duration::from_secs(2),
        "{ttl:?}"
    );
    gw.stop().await;
}

pub async fn a_registered_node_is_ready_with_a_computed_class(backend: Backend) {
    let (gw, mut client) = short_ttl_gateway(backend, "grpc-node-ready").await;
    register_n1(&mut client).await;
    let stored = gw.node("n1").await.unwrap();
    assert_eq!(stored.status(), NodeStatus::Ready);
    assert!(!stored.computed_class.is_empty());
    gw.stop().await;
}

pub async fn the_heartbeat_key_rides_the_nodes_lease(backend: Backend) {
    let (gw, mut client) = short_ttl_gateway(backend, "grpc-node-lease").await;
    register_n1(&mut client).await;
    let stored = gw.node("n1").await.unwrap();
    let lease = heartbeat_lease(&gw).await.unwrap();
    assert_eq!(lease, stored.heartbeat_lease_id);
    assert_ne!(lease, 0);
    gw.stop().await;
}

pub async fn heartbeats_keep_the_lease_past_its_ttl(backend: Backend) {
    let (gw, mut client) = short_ttl_gateway(backend, "grpc-node-heartbeats").await;
    register_n1(&mut client).await;
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(600)).await;
        heartbeat(&mut client, "n1").await.unwrap();
    }
    assert!(heartbeat_lease(&gw).await.is_some());
    gw.stop().await;
}

pub async fn re_registration_moves_the_heartbeat_key_to_a_new_lease(backend: Backend) {
    let (gw, mut client) = short_ttl_gateway(backend, "grpc-node-reregister").await;
    register_n1(&mut client).await;
    let stored = gw.node("n1").await.unwrap();
    register_n1(&mut client).await;
    let again = gw.node("n1").await.unwrap();
    assert_ne!(again.heartbeat_lease_id, stored.heartbeat_lease_id);
    assert_eq!(
        heartbeat_lease(&gw).await.unwrap(),
        again.heartbeat_lease_id
    );
    gw.stop().await;
}

pub async fn silence_expires_the_heartbeat_key_and_later_heartbeats_are_not_found(
    backend: Backend,
) {
    let (gw, mut client) = short_ttl_gateway(backend, "grpc-node-expiry").await;
    register_n1(&mut client).await;
    // Silence: the lease expires and takes the heartbeat key with it.
    let gone = holds_within(Duration::from_secs(10), || async {
        heartbeat_lease(&gw).await.is_none()
    })
    .await;
    assert!(gone, "heartbeat key outlived its lease");
    assert_eq!(heartbeat(&mut client, "n1").await, Err(Code::NotFound));
    gw.stop().await;
}

pub async fn a_heartbeat_from_an_unknown_node_is_not_found(backend: Backend) {
    let (gw, mut client) = short_ttl_gateway(backend, "grpc-node-unknown").await;
    assert_eq!(heartbeat(&mut client, "nobody").await, Err(Code::NotFound));
    gw.stop().await;
}

pub async fn a_node_without_datacenter_is_invalid(backend: Backend) {
    let (gw, mut client) = short_ttl_gateway(backend, "grpc-node-invalid").await;
    let err = client
        .register_node(RegisterNodeRequest {
            node: Some(caravan_proto::Node {
                datacenter: String::new(),
                ..node("n2")
            }),
            secret_id: node_secret("n2"),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().starts_with("node.datacenter"),
        "{}",
        err.message()
    );
    gw.stop().await;
}

/// A node whose pool has more system jobs than one transaction holds still
/// registers: its transaction carries what fits, and the node owes the rest
/// through a fan-out the eval broker finishes. (The embedded store here
/// caps transactions at 8 operations, as etcd caps them at 128 by default.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_registers_when_its_system_jobs_outnumber_one_transaction() {
    use caravan_proto::JobType;
    use caravan_proto::job_service_client::JobServiceClient;
    use caravan_store::{MemStore, MemStoreConfig, Store};

    let store: std::sync::Arc<dyn Store> =
        std::sync::Arc::new(MemStore::with_config(MemStoreConfig {
            max_txn_ops: 8,
            ..Default::default()
        }));
    let gw = TestGateway::start_with(store, "fan-out-register", |c| c.max_txn_ops = 8).await;
    let mut jobs = JobServiceClient::new(gw.channel().await);
    for i in 0..10 {
        let mut system = crate::fixtures::job(&format!("sys-{i}"), 1);
        system.set_type(JobType::System);
        jobs.register_job(crate::fixtures::register(system))
            .await
            .unwrap();
    }
    let before = gw.evals().await.len();
    let mut client = NodeClientServiceClient::new(gw.channel().await);
    register_n1(&mut client).await;

    let n1 = gw.node("n1").await.expect("registered");
    assert_eq!(n1.status(), NodeStatus::Ready);
    let [owed] = n1.pending_fan_outs.as_slice() else {
        panic!("one fan-out owes the rest: {:?}", n1.pending_fan_outs);
    };
    assert_eq!(owed.triggered_by, "node-update");
    assert!(!owed.node_down && !owed.only_placed);
    let written: Vec<_> = gw
        .evals()
        .await
        .into_iter()
        .filter(|e| e.node_id == "n1")
        .collect();
    assert_eq!(gw.evals().await.len() - before, written.len());
    assert_eq!(
        written.len(),
        6,
        "what fits next to the node and its heartbeat"
    );
    for e in &written {
        assert_eq!(
            e.id,
            caravan_model::fan_out_eval_id(&owed.id, &e.namespace, &e.job_id),
            "ids derive from the fan-out, so finishing it can't double one"
        );
    }
    gw.stop().await;
}

/// A gateway on an embedded store capping transactions at 8 operations,
/// with node n1 registered and ten jobs from `make_job`, plus a node
/// service client.
async fn small_txn_gateway(
    name: &str,
    make_job: impl Fn(usize) -> caravan_proto::Job,
) -> (
    TestGateway,
    caravan_proto::node_service_client::NodeServiceClient<Channel>,
) {
    use caravan_proto::job_service_client::JobServiceClient;
    use caravan_store::{MemStore, MemStoreConfig, Store};

    let store: std::sync::Arc<dyn Store> =
        std::sync::Arc::new(MemStore::with_config(MemStoreConfig {
            max_txn_ops: 8,
            ..Default::default()
        }));
    let gw = TestGateway::start_with(store, name, |c| c.max_txn_ops = 8).await;
    let channel = gw.channel().await;
    register_n1(&mut NodeClientServiceClient::new(channel.clone())).await;
    let mut jobs = JobServiceClient::new(channel.clone());
    for i in 0..10 {
        jobs.register_job(crate::fixtures::register(make_job(i)))
            .await
            .unwrap();
    }
    let nodes = caravan_proto::node_service_client::NodeServiceClient::new(channel);
    (gw, nodes)
}

/// The evals written for n1's single fan-out, checked to derive from it.
async fn fan_out_of_n1(gw: &TestGateway, trigger: &str) -> (caravan_proto::NodeFanOut, usize) {
    let n1 = gw.node("n1").await.expect("registered");
    let [owed] = n1.pending_fan_outs.as_slice() else {
        panic!("one fan-out owes the rest: {:?}", n1.pending_fan_outs);
    };
    assert_eq!(owed.triggered_by, trigger);
    let written = gw
        .evals()
        .await
        .into_iter()
        .filter(|e| e.id == caravan_model::fan_out_eval_id(&owed.id, &e.namespace, &e.job_id))
        .count();
    (owed.clone(), written)
}

/// A node turning eligible owes every system job of its pool an eval; with
/// more than one transaction holds, the change commits with what fits and
/// the node carries a fan-out for the rest, as at registration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_turning_eligible_owes_what_does_not_fit_through_a_fan_out() {
    use caravan_proto::{JobType, SchedulingEligibility, UpdateEligibilityRequest};

    let (gw, mut nodes) = small_txn_gateway("fan-out-eligible", |i| {
        let mut system = crate::fixtures::job(&format!("sys-{i}"), 1);
        system.set_type(JobType::System);
        system
    })
    .await;
    for eligibility in [
        SchedulingEligibility::Ineligible,
        SchedulingEligibility::Eligible,
    ] {
        nodes
            .update_eligibility(UpdateEligibilityRequest {
                node_id: "n1".into(),
                eligibility: eligibility as i32,
            })
            .await
            .unwrap();
    }

    let (owed, written) = fan_out_of_n1(&gw, "node-update").await;
    assert!(!owed.node_down && !owed.only_placed, "{owed:?}");
    assert_eq!(written, 7, "what fits next to the node");
    gw.stop().await;
}

/// A drain owes every job with an allocation on the node an eval; with
/// more than one transaction holds, the drain commits with what fits and
/// the node carries a fan-out for the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_owes_what_does_not_fit_through_a_fan_out() {
    use caravan_proto::{DrainStrategy, UpdateDrainRequest};

    let (gw, mut nodes) = small_txn_gateway("fan-out-drain", |i| {
        crate::fixtures::job(&format!("web-{i}"), 1)
    })
    .await;
    let allocs = (0..10)
        .map(|i| crate::fixtures::placed(&format!("a{i}"), "n1", &format!("web-{i}")))
        .collect();
    crate::fixtures::store_running_on(&gw, &nodes, "n1", allocs).await;
    let reply = nodes
        .update_drain(UpdateDrainRequest {
            node_id: "n1".into(),
            drain_strategy: Some(DrainStrategy {
                deadline_ns: 3_600_000_000_000,
                ..Default::default()
            }),
            mark_eligible: false,
        })
        .await
        .unwrap()
        .into_inner();

    let (owed, written) = fan_out_of_n1(&gw, "node-drain").await;
    assert!(owed.only_placed && !owed.node_down, "{owed:?}");
    assert_eq!(written, 7, "what fits next to the node");
    assert_eq!(reply.eval_ids.len(), 10, "the reply names every eval owed");
    gw.stop().await;
}

//! Simulated client nodes (the load tests' thousands of nodes in one
//! process) against a real gateway: each registers with a secret of its own,
//! runs and reports what is placed on it, and a restart on the same data
//! dir comes back as the same nodes with the same secrets.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use caravan_client_node::{ClientConfig, ClientNodeService};
use caravan_proto::{AllocClientStatus, AllocDesiredStatus, Allocation, Node, NodeStatus};
use caravan_runtime::service::{NoStore, Running};
use caravan_state::{Kind, encode};
use caravan_testkit::wait::eventually_some;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::common::{Backend, TestGateway};

const NODES: u32 = 3;
const WAIT: Duration = Duration::from_secs(30);

async fn start_simulation(
    gw: &TestGateway,
    dir: &Path,
    shutdown: CancellationToken,
) -> Running<ClientNodeService> {
    let config = ClientConfig {
        servers: vec![gw.bound.grpc.to_string()],
        grpc_addr: "127.0.0.1:0".into(),
        data_dir: dir.to_path_buf(),
        simulate: NODES,
        ..Default::default()
    };
    caravan_runtime::service::start(ClientNodeService, config, NoStore, shutdown)
        .await
        .expect("the simulated nodes start")
}

/// The stored nodes once all are ready, by id.
async fn ready_nodes(gw: &TestGateway) -> Vec<Node> {
    eventually_some("every simulated node is ready", WAIT, || async {
        let mut nodes: Vec<Node> = gw.objects(gw.keys.prefix_of(Kind::Nodes)).await;
        nodes.sort_by(|a, b| a.id.cmp(&b.id));
        (nodes.len() == NODES as usize && nodes.iter().all(|n| n.status() == NodeStatus::Ready))
            .then_some(nodes)
    })
    .await
}

fn batch_job() -> Vec<u8> {
    serde_json::to_vec(&json!({"Job": {
        "ID": "sim",
        "Type": "batch",
        "TaskGroups": [{"Name": "sim", "Count": 1, "Tasks": [{
            "Name": "work",
            "Driver": "mock",
            "Config": {"run_for": "10ms"},
            "Resources": {"CPU": 100, "MemoryMB": 32}
        }]}]
    }}))
    .unwrap()
}

pub async fn simulated_nodes_register_run_and_restart_with_their_own_secrets(backend: Backend) {
    let gw = TestGateway::start(backend, "simulated-nodes").await;
    let dir = tempfile::tempdir().unwrap();
    let first_run = gw.shutdown.child_token();
    let client = start_simulation(&gw, dir.path(), first_run.clone()).await;
    let nodes = ready_nodes(&gw).await;
    let hashes: std::collections::BTreeSet<&str> =
        nodes.iter().map(|n| n.secret_hash.as_str()).collect();
    assert_eq!(hashes.len(), NODES as usize, "one secret per node");
    assert!(!hashes.contains(""), "every node recorded its secret");

    // What is placed on a simulated node is streamed to it and its report
    // accepted: both calls carried the node's secret.
    let r = gw.http("PUT", "/v1/jobs", &batch_job()).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let mut alloc = Allocation {
        id: "5eed0000-0000-4000-8000-000000000001".into(),
        name: "sim.sim[0]".into(),
        namespace: "default".into(),
        job_id: "sim".into(),
        task_group: "sim".into(),
        node_id: nodes[1].id.clone(),
        ..Default::default()
    };
    alloc.set_desired_status(AllocDesiredStatus::Run);
    alloc.set_client_status(AllocClientStatus::Pending);
    gw.store
        .put(&gw.keys.alloc(&alloc.id), &encode(&alloc), 0)
        .await
        .unwrap();
    eventually_some("the simulated node completes its alloc", WAIT, || async {
        let stored: Vec<Allocation> = gw.allocs().await;
        stored
            .iter()
            .any(|a| a.client_status() == AllocClientStatus::Complete)
            .then_some(())
    })
    .await;

    // Stopped and started again on the same data dir: the same nodes
    // register again (a new lease each) with the secrets they recorded.
    let leases: Vec<i64> = nodes.iter().map(|n| n.heartbeat_lease_id).collect();
    first_run.cancel();
    let _ = tokio::time::timeout(WAIT, client.stopped()).await;
    let again = start_simulation(&gw, dir.path(), gw.shutdown.child_token()).await;
    let renewed = eventually_some("every node registered again", WAIT, || async {
        let nodes = ready_nodes(&gw).await;
        nodes
            .iter()
            .zip(&leases)
            .all(|(n, old)| n.heartbeat_lease_id != *old)
            .then_some(nodes)
    })
    .await;
    for (before, after) in nodes.iter().zip(&renewed) {
        assert_eq!(before.id, after.id);
        assert_eq!(before.secret_hash, after.secret_hash);
    }
    gw.shutdown.cancel();
    let _ = tokio::time::timeout(WAIT, again.stopped()).await;
}

caravan_testkit::backend_cases!(backend => crate::simulated_nodes;
    simulated_nodes_register_run_and_restart_with_their_own_secrets
);

//! Nomad JSON jobs, client nodes and placed allocations the HTTP cases share.

use std::time::Duration;

use caravan_proto::node_client_service_client::NodeClientServiceClient;
use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, Allocation, DriverInfo, Node, NodeResources,
    RegisterNodeRequest,
};
use caravan_state::encode;
use caravan_testkit::wait::holds_within;
use serde_json::{Value, json};

use crate::common::TestGateway;

/// A Nomad JSON registration of a service job with one `mock` task.
pub fn nomad_job(id: &str, count: i64) -> Value {
    json!({
        "Job": {
            "ID": id,
            "Name": id,
            "Type": "service",
            "Datacenters": ["dc1"],
            "TaskGroups": [{
                "Name": "web",
                "Count": count,
                "Tasks": [{
                    "Name": "app",
                    "Driver": "mock",
                    "Config": {"run_for": "10s"},
                    "Resources": {"CPU": 100, "MemoryMB": 64}
                }]
            }]
        }
    })
}

/// `v` as a request body.
pub fn body(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

/// A ready client node in dc1 that can run the `mock` driver.
pub fn client_node(id: &str, http_addr: &str) -> Node {
    let mut node = Node {
        id: id.into(),
        name: format!("node-{id}"),
        datacenter: "dc1".into(),
        http_addr: http_addr.into(),
        resources: Some(NodeResources {
            cpu_mhz: 4000,
            memory_mb: 8192,
            disk_mb: 100_000,
            ..Default::default()
        }),
        ..Default::default()
    };
    node.attributes.insert("driver.mock".into(), "1".into());
    node.attributes.insert("kernel.name".into(), "linux".into());
    node.drivers.insert(
        "mock".into(),
        DriverInfo {
            detected: true,
            healthy: true,
            ..Default::default()
        },
    );
    node
}

/// Registers `node` over the node-facing gRPC API.
pub async fn register_node(gw: &TestGateway, node: Node) {
    NodeClientServiceClient::new(gw.channel().await)
        .register_node(RegisterNodeRequest {
            secret_id: crate::common::node_secret(&node.id),
            node: Some(node),
        })
        .await
        .unwrap();
}

/// A running allocation of job `web` on `node_id`.
pub fn placed(id: &str, node_id: &str) -> Allocation {
    let mut a = Allocation {
        id: id.into(),
        name: "web.web[0]".into(),
        namespace: "default".into(),
        job_id: "web".into(),
        task_group: "web".into(),
        node_id: node_id.into(),
        ..Default::default()
    };
    a.set_desired_status(AllocDesiredStatus::Run);
    a.set_client_status(AllocClientStatus::Running);
    a
}

/// Node `n1` (serving HTTP at `http_addr`) running alloc `a1` of job `web`,
/// as the plan applier would have written it; returns once the gateway
/// serves `a1`.
pub async fn node_running_web(gw: &TestGateway, http_addr: &str) {
    register_node(gw, client_node("n1", http_addr)).await;
    gw.http("PUT", "/v1/jobs", &body(&nomad_job("web", 1)))
        .await;
    gw.store
        .put(&gw.keys.alloc("a1"), &encode(&placed("a1", "n1")), 0)
        .await
        .unwrap();
    let seen = holds_within(Duration::from_secs(5), || async {
        gw.http("GET", "/v1/allocation/a1", b"").await.status == 200
    })
    .await;
    assert!(seen, "the gateway never served alloc a1");
}

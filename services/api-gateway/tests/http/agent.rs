//! The gateway describing itself: leader, agent, members and metrics.

use serde_json::json;

use crate::common::{Backend, TestGateway};
use crate::fixtures::{client_node, register_node};

pub async fn the_leader_is_the_gateways_grpc_address(backend: Backend) {
    let gw = TestGateway::start(backend, "http-leader").await;
    let leader = gw.http("GET", "/v1/status/leader", b"").await.json();
    assert_eq!(leader, json!(gw.bound.grpc.to_string()));
    gw.stop().await;
}

pub async fn the_agent_reports_itself_alive(backend: Backend) {
    let gw = TestGateway::start(backend, "http-agent-self").await;
    let me = gw.http("GET", "/v1/agent/self", b"").await.json();
    assert_eq!(me["member"]["Status"], "alive");
    gw.stop().await;
}

pub async fn the_agent_has_one_member(backend: Backend) {
    let gw = TestGateway::start(backend, "http-agent-members").await;
    let members = gw.http("GET", "/v1/agent/members", b"").await.json();
    assert_eq!(members["Members"].as_array().unwrap().len(), 1);
    gw.stop().await;
}

pub async fn json_metrics_count_registered_nodes(backend: Backend) {
    let gw = TestGateway::start(backend, "http-metrics").await;
    register_node(&gw, client_node("n1", "")).await;
    let m = gw.http("GET", "/v1/metrics", b"").await.json();
    let nodes = m["Gauges"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["Name"] == "caravan.api_gateway.nodes")
        .unwrap();
    assert_eq!(nodes["Value"], 1.0);
    gw.stop().await;
}

pub async fn prometheus_metrics_count_registered_nodes(backend: Backend) {
    let gw = TestGateway::start(backend, "http-metrics-prom").await;
    register_node(&gw, client_node("n1", "")).await;
    let prom = gw.http("GET", "/v1/metrics?format=prometheus", b"").await;
    assert!(
        prom.text().contains("caravan_api_gateway_nodes 1"),
        "{}",
        prom.text()
    );
    gw.stop().await;
}

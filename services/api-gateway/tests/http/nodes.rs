//! Nodes over HTTP: the node list, a node's allocations, eligibility, drains,
//! forced evaluation and purges.

use serde_json::{Value, json};

use crate::common::{Backend, TestGateway};
use crate::fixtures::{body, client_node, node_running_web, register_node};

const HOUR_NS: i64 = 3_600_000_000_000;

/// Sets `n1`'s eligibility and returns the answer's status.
async fn set_eligibility(gw: &TestGateway, eligibility: &str) -> u16 {
    gw.http(
        "POST",
        "/v1/node/n1/eligibility",
        &body(&json!({ "Eligibility": eligibility })),
    )
    .await
    .status
}

/// Starts an hour-long drain of `n1`, which runs job `web`, and returns the
/// answer's JSON.
async fn drain_n1(gw: &TestGateway) -> Value {
    node_running_web(gw, "").await;
    let r = gw
        .http(
            "POST",
            "/v1/node/n1/drain",
            &body(&json!({"DrainSpec": {"Deadline": HOUR_NS, "IgnoreSystemJobs": false}})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

pub async fn nodes_list_with_their_status_and_resources(backend: Backend) {
    let gw = TestGateway::start(backend, "http-nodes").await;
    register_node(&gw, client_node("n1", "")).await;
    let nodes = gw.http("GET", "/v1/nodes?resources=true", b"").await.json();
    assert_eq!(nodes[0]["ID"], "n1");
    assert_eq!(nodes[0]["Status"], "ready");
    assert_eq!(nodes[0]["NodeResources"]["Cpu"]["CpuShares"], 4000);
    gw.stop().await;
}

pub async fn node_stubs_add_resources_and_os_only_when_asked(backend: Backend) {
    let gw = TestGateway::start(backend, "http-nodes-fields").await;
    let mut node = client_node("n1", "");
    node.attributes.insert("os.name".into(), "ubuntu".into());
    node.attributes.insert("os.version".into(), "24.04".into());
    register_node(&gw, node).await;
    let plain = gw.http("GET", "/v1/nodes", b"").await.json();
    assert!(plain[0].get("Attributes").is_none());
    assert!(plain[0].get("NodeResources").is_none());
    assert_eq!(plain[0]["Drain"], false);
    let os = gw.http("GET", "/v1/nodes?os=True", b"").await.json();
    assert_eq!(os[0]["Attributes"], json!({"os.name": "ubuntu"}));
    assert!(os[0].get("NodeResources").is_none());
    let res = gw.http("GET", "/v1/nodes?resources=1", b"").await.json();
    assert_eq!(res[0]["NodeResources"]["Memory"]["MemoryMB"], 8192);
    assert!(res[0]["ReservedResources"].is_object());
    assert!(res[0].get("Attributes").is_none());
    gw.stop().await;
}

pub async fn a_nodes_allocations_embed_their_job(backend: Backend) {
    let gw = TestGateway::start(backend, "http-node-allocs").await;
    node_running_web(&gw, "").await;
    let allocs = gw.http("GET", "/v1/node/n1/allocations", b"").await.json();
    assert_eq!(allocs[0]["ID"], "a1");
    assert_eq!(allocs[0]["Job"]["ID"], "web");
    gw.stop().await;
}

pub async fn an_unknown_eligibility_is_400(backend: Backend) {
    let gw = TestGateway::start(backend, "http-node-eligibility-bad").await;
    register_node(&gw, client_node("n1", "")).await;
    assert_eq!(set_eligibility(&gw, "maybe").await, 400);
    gw.stop().await;
}

pub async fn a_node_marked_ineligible_reads_back_ineligible(backend: Backend) {
    let gw = TestGateway::start(backend, "http-node-ineligible").await;
    register_node(&gw, client_node("n1", "")).await;
    assert_eq!(set_eligibility(&gw, "ineligible").await, 200);
    let node = gw.http("GET", "/v1/node/n1", b"").await.json();
    assert_eq!(node["SchedulingEligibility"], "ineligible");
    gw.stop().await;
}

pub async fn a_drain_evaluates_each_job_on_the_node(backend: Backend) {
    let gw = TestGateway::start(backend, "http-drain-evals").await;
    let drain = drain_n1(&gw).await;
    assert_eq!(
        drain["EvalIDs"].as_array().unwrap().len(),
        1,
        "one job on the node"
    );
    let evals = gw.evals().await;
    assert!(
        evals
            .iter()
            .any(|e| e.triggered_by == "node-drain" && e.node_id == "n1")
    );
    gw.stop().await;
}

pub async fn a_drained_node_reads_back_ineligible_with_its_deadline(backend: Backend) {
    let gw = TestGateway::start(backend, "http-drain-read").await;
    drain_n1(&gw).await;
    let node = gw.http("GET", "/v1/node/n1", b"").await.json();
    assert_eq!(node["SchedulingEligibility"], "ineligible");
    assert_eq!(node["Drain"], true);
    assert_eq!(node["DrainStrategy"]["DrainSpec"]["Deadline"], HOUR_NS);
    let stored = gw.node("n1").await.unwrap();
    let d = stored.drain_strategy.unwrap();
    assert_eq!(d.force_deadline_unix_ns - d.started_at_unix_ns, HOUR_NS);
    gw.stop().await;
}

pub async fn a_draining_node_cannot_be_made_eligible(backend: Backend) {
    let gw = TestGateway::start(backend, "http-drain-eligible").await;
    drain_n1(&gw).await;
    assert_eq!(set_eligibility(&gw, "eligible").await, 400);
    gw.stop().await;
}

pub async fn cancelling_a_drain_with_mark_eligible_records_it_canceled(backend: Backend) {
    let gw = TestGateway::start(backend, "http-drain-cancel").await;
    drain_n1(&gw).await;
    let r = gw
        .http(
            "POST",
            "/v1/node/n1/drain",
            &body(&json!({"DrainSpec": null, "MarkEligible": true})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let read = gw.http("GET", "/v1/node/n1", b"").await.json();
    assert_eq!(read["Drain"], false);
    let node = gw.node("n1").await.unwrap();
    assert!(node.drain_strategy.is_none());
    assert_eq!(node.last_drain.unwrap().status, "canceled");
    gw.stop().await;
}

pub async fn reading_an_unknown_node_is_404(backend: Backend) {
    let gw = TestGateway::start(backend, "http-node-404").await;
    assert_eq!(gw.http("GET", "/v1/node/zzz", b"").await.status, 404);
    gw.stop().await;
}

pub async fn a_node_can_be_evaluated_on_demand(backend: Backend) {
    let gw = TestGateway::start(backend, "http-node-evaluate").await;
    register_node(&gw, client_node("n1", "")).await;
    let r = gw.http("POST", "/v1/node/n1/evaluate", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    gw.stop().await;
}

pub async fn purging_a_node_removes_it_and_its_heartbeat(backend: Backend) {
    let gw = TestGateway::start(backend, "http-node-purge").await;
    register_node(&gw, client_node("n1", "")).await;
    let r = gw.http("POST", "/v1/node/n1/purge", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(gw.node("n1").await.is_none());
    assert!(
        gw.store
            .get(&gw.keys.heartbeat("n1"))
            .await
            .unwrap()
            .is_none()
    );
    gw.stop().await;
}

pub async fn purging_a_purged_node_is_404(backend: Backend) {
    let gw = TestGateway::start(backend, "http-node-purge-404").await;
    register_node(&gw, client_node("n1", "")).await;
    let r = gw.http("POST", "/v1/node/n1/purge", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(gw.http("POST", "/v1/node/n1/purge", b"").await.status, 404);
    gw.stop().await;
}

//! Allocations over HTTP: the stub list, one whole allocation and stopping
//! an allocation.

use caravan_proto::{AllocMetric, Allocation};
use caravan_state::encode;

use crate::common::{Backend, TestGateway};
use crate::fixtures::{node_running_web, placed};

pub async fn allocations_list_as_stubs_with_client_status_and_job_type(backend: Backend) {
    let gw = TestGateway::start(backend, "http-allocs").await;
    node_running_web(&gw, "").await;
    let stub = gw.http("GET", "/v1/allocations", b"").await.json();
    assert_eq!(stub[0]["ClientStatus"], "running");
    assert_eq!(stub[0]["JobType"], "service");
    gw.stop().await;
}

pub async fn stopping_an_allocation_migrates_it_with_an_alloc_stop_eval(backend: Backend) {
    let gw = TestGateway::start(backend, "http-alloc-stop").await;
    node_running_web(&gw, "").await;
    let r = gw.http("POST", "/v1/allocation/a1/stop", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let eval_id = r.json()["EvalID"].as_str().unwrap().to_string();
    let allocs: Vec<Allocation> = gw.allocs().await;
    assert_eq!(allocs[0].desired_transition.unwrap().migrate, Some(true));
    let stop_eval = gw
        .evals()
        .await
        .into_iter()
        .find(|e| e.id == eval_id)
        .unwrap();
    assert_eq!(stop_eval.triggered_by, "alloc-stop");
    gw.stop().await;
}

pub async fn stopping_an_unknown_allocation_is_404(backend: Backend) {
    let gw = TestGateway::start(backend, "http-alloc-stop-404").await;
    assert_eq!(
        gw.http("POST", "/v1/allocation/zzz/stop", b"").await.status,
        404
    );
    gw.stop().await;
}

/// The cache keeps no placement metrics; the answers that show whole
/// allocations still carry them, with an index that covers the allocation.
pub async fn a_whole_allocation_carries_its_placement_metrics(backend: Backend) {
    let gw = TestGateway::start(backend, "http-alloc-metrics").await;
    node_running_web(&gw, "").await;
    let mut a1 = placed("a1", "n1");
    a1.metrics = Some(Box::new(AllocMetric {
        nodes_evaluated: 7,
        ..Default::default()
    }));
    let rev = gw
        .store
        .put(&gw.keys.alloc("a1"), &encode(&a1), 0)
        .await
        .unwrap();
    let r = gw
        .http("GET", &format!("/v1/allocation/a1?index={}", rev - 1), b"")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["Metrics"]["NodesEvaluated"], 7, "{}", r.text());
    let index: i64 = r.header("X-Nomad-Index").unwrap().parse().unwrap();
    assert!(
        index >= rev,
        "index {index} older than the allocation ({rev})"
    );
    let on_node = gw.http("GET", "/v1/node/n1/allocations", b"").await.json();
    assert_eq!(on_node[0]["Metrics"]["NodesEvaluated"], 7, "{on_node}");
    let listed = gw.http("GET", "/v1/allocations", b"").await.json();
    assert_eq!(listed[0]["ID"], "a1", "stubs list it, without metrics");
    gw.stop().await;
}

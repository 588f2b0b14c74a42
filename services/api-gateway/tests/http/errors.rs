//! Bad input: every refused registration or query is a 400 that says what is
//! wrong and writes nothing.

use serde_json::json;

use crate::common::{Backend, TestGateway};
use crate::fixtures::{body, nomad_job};

/// Registers `payload` and checks it is a 400 mentioning `needle` that
/// leaves the store empty.
async fn refused_naming(backend: Backend, name: &str, payload: &[u8], needle: &str) {
    let gw = TestGateway::start(backend, name).await;
    let r = gw.http("PUT", "/v1/jobs", payload).await;
    assert_eq!(r.status, 400, "{name}: {}", r.text());
    assert!(
        r.text().to_lowercase().contains(&needle.to_lowercase()),
        "{name}: {:?} does not mention {needle}",
        r.text()
    );
    assert_eq!(gw.key_count().await, 0, "nothing may be written");
    gw.stop().await;
}

pub async fn malformed_json_is_400_and_writes_nothing(backend: Backend) {
    refused_naming(backend, "http-bad-json", b"{\"Job\": {\"ID\": ", "JSON").await;
}

pub async fn a_task_without_driver_is_400_and_writes_nothing(backend: Backend) {
    let mut no_driver = nomad_job("web", 1);
    no_driver["Job"]["TaskGroups"][0]["Tasks"][0]
        .as_object_mut()
        .unwrap()
        .remove("Driver");
    refused_naming(backend, "http-bad-driver", &body(&no_driver), "driver").await;
}

pub async fn a_negative_count_is_400_and_writes_nothing(backend: Backend) {
    let payload = body(&nomad_job("web", -1));
    refused_naming(backend, "http-bad-count", &payload, "count").await;
}

pub async fn a_bad_constraint_regexp_is_400_and_writes_nothing(backend: Backend) {
    let mut bad_regexp = nomad_job("web", 1);
    bad_regexp["Job"]["Constraints"] =
        json!([{"LTarget": "${attr.kernel.name}", "RTarget": "[linux", "Operand": "regexp"}]);
    let payload = body(&bad_regexp);
    refused_naming(backend, "http-bad-regexp", &payload, "regular expression").await;
}

pub async fn zero_cpu_is_400_and_writes_nothing(backend: Backend) {
    let mut cpu_zero = nomad_job("web", 1);
    cpu_zero["Job"]["TaskGroups"][0]["Tasks"][0]["Resources"]["CPU"] = json!(0);
    refused_naming(backend, "http-bad-cpu", &body(&cpu_zero), "cpu").await;
}

pub async fn a_body_without_job_is_400_and_writes_nothing(backend: Backend) {
    refused_naming(backend, "http-bad-no-job", b"{\"Jobs\": {}}", "Job").await;
}

pub async fn a_10mb_job_is_refused_before_parsing_and_writes_nothing(backend: Backend) {
    let gw = TestGateway::start(backend, "http-bad-huge").await;
    let mut huge = nomad_job("web", 1);
    huge["Job"]["Meta"] = json!({"blob": "x".repeat(10 * 1024 * 1024)});
    let r = gw.http("PUT", "/v1/jobs", &body(&huge)).await;
    assert!(
        r.status == 400 || r.status == 413,
        "{}: {}",
        r.status,
        r.text()
    );
    assert_eq!(gw.key_count().await, 0, "nothing may be written");
    gw.stop().await;
}

pub async fn a_non_numeric_index_is_400(backend: Backend) {
    let gw = TestGateway::start(backend, "http-bad-index").await;
    let r = gw.http("GET", "/v1/jobs?index=abc", b"").await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("index"));
    assert_eq!(gw.key_count().await, 0);
    gw.stop().await;
}

pub async fn an_unparseable_wait_is_400(backend: Backend) {
    let gw = TestGateway::start(backend, "http-bad-wait").await;
    let r = gw.http("GET", "/v1/jobs?wait=forever", b"").await;
    assert_eq!(r.status, 400);
    assert_eq!(gw.key_count().await, 0);
    gw.stop().await;
}

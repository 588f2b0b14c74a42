//! Jobs in and out in Nomad JSON: registration, reads, lists, evaluations,
//! versions, summaries and purges.

use serde_json::{Value, json};

use crate::common::{Backend, TestGateway};
use crate::fixtures::{body, nomad_job};

/// Registers job `web` with two instances and returns the answer's JSON.
async fn register_web(gw: &TestGateway) -> Value {
    let r = gw
        .http("PUT", "/v1/jobs", &body(&nomad_job("web", 2)))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

pub async fn registering_a_job_answers_its_eval_and_modify_index(backend: Backend) {
    let gw = TestGateway::start(backend, "http-register").await;
    let r = gw
        .http("PUT", "/v1/jobs", &body(&nomad_job("web", 2)))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let reg = r.json();
    assert!(!reg["EvalID"].as_str().unwrap().is_empty());
    assert!(reg["JobModifyIndex"].as_u64().unwrap() > 0);
    assert!(r.header("X-Nomad-Index").is_some());
    gw.stop().await;
}

pub async fn a_registered_job_reads_back_in_nomad_json(backend: Backend) {
    let gw = TestGateway::start(backend, "http-read-back").await;
    let reg = register_web(&gw).await;
    let r = gw.http("GET", "/v1/job/web", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("X-Nomad-KnownLeader"), Some("true"));
    let job = r.json();
    assert_eq!(job["ID"], "web");
    assert_eq!(job["Type"], "service");
    assert_eq!(job["Version"], 0);
    assert_eq!(job["Status"], "pending");
    assert_eq!(job["TaskGroups"][0]["Count"], 2);
    assert_eq!(job["TaskGroups"][0]["Tasks"][0]["Driver"], "mock");
    assert_eq!(job["JobModifyIndex"], reg["JobModifyIndex"]);
    assert!(job["CreateIndex"].as_u64().unwrap() > 0);
    gw.stop().await;
}

pub async fn the_job_list_filters_by_prefix_and_carries_summaries(backend: Backend) {
    let gw = TestGateway::start(backend, "http-list").await;
    register_web(&gw).await;
    let list = gw.http("GET", "/v1/jobs?prefix=we", b"").await.json();
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["ID"], "web");
    assert_eq!(list[0]["JobSummary"]["Summary"]["web"]["Running"], 0);
    assert_eq!(
        gw.http("GET", "/v1/jobs?prefix=zz", b"").await.json(),
        json!([])
    );
    gw.stop().await;
}

pub async fn a_registered_job_has_a_pending_job_register_eval(backend: Backend) {
    let gw = TestGateway::start(backend, "http-job-evals").await;
    let reg = register_web(&gw).await;
    let eval_id = reg["EvalID"].as_str().unwrap().to_string();
    let evals = gw.http("GET", "/v1/job/web/evaluations", b"").await.json();
    assert_eq!(evals[0]["ID"], eval_id.as_str());
    assert_eq!(evals[0]["Status"], "pending");
    assert_eq!(evals[0]["TriggeredBy"], "job-register");
    let eval = gw
        .http("GET", &format!("/v1/evaluation/{eval_id}"), b"")
        .await;
    assert_eq!(eval.json()["JobID"], "web");
    gw.stop().await;
}

pub async fn a_new_job_has_no_allocations(backend: Backend) {
    let gw = TestGateway::start(backend, "http-job-allocs").await;
    register_web(&gw).await;
    assert_eq!(
        gw.http("GET", "/v1/job/web/allocations", b"").await.json(),
        json!([])
    );
    gw.stop().await;
}

pub async fn a_new_job_lists_version_zero(backend: Backend) {
    let gw = TestGateway::start(backend, "http-job-versions").await;
    register_web(&gw).await;
    let versions = gw.http("GET", "/v1/job/web/versions", b"").await.json();
    assert_eq!(versions["Versions"][0]["Version"], 0);
    gw.stop().await;
}

pub async fn a_job_summary_names_its_job(backend: Backend) {
    let gw = TestGateway::start(backend, "http-job-summary").await;
    register_web(&gw).await;
    let summary = gw.http("GET", "/v1/job/web/summary", b"").await.json();
    assert_eq!(summary["JobID"], "web");
    gw.stop().await;
}

pub async fn a_job_posted_under_another_jobs_path_is_400(backend: Backend) {
    let gw = TestGateway::start(backend, "http-job-path").await;
    register_web(&gw).await;
    // The path must name the body's job.
    let r = gw
        .http("POST", "/v1/job/other", &body(&nomad_job("web", 1)))
        .await;
    assert_eq!(r.status, 400, "{}", r.text());
    gw.stop().await;
}

pub async fn reading_an_unknown_job_is_404(backend: Backend) {
    let gw = TestGateway::start(backend, "http-job-404").await;
    let r = gw.http("GET", "/v1/job/nope", b"").await;
    assert_eq!(r.status, 404);
    gw.stop().await;
}

pub async fn purging_a_job_answers_an_eval_and_removes_it(backend: Backend) {
    let gw = TestGateway::start(backend, "http-job-purge").await;
    register_web(&gw).await;
    let r = gw.http("DELETE", "/v1/job/web?purge=true", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(!r.json()["EvalID"].as_str().unwrap().is_empty());
    assert!(gw.job("web").await.is_none());
    gw.stop().await;
}

pub async fn stopping_an_unknown_job_answers_no_eval(backend: Backend) {
    let gw = TestGateway::start(backend, "http-job-stop-unknown").await;
    // Nomad answers 200 with no evaluation: there is nothing to stop.
    let r = gw.http("DELETE", "/v1/job/nope?purge=true", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["EvalID"], "");
    assert!(gw.evals().await.is_empty());
    gw.stop().await;
}

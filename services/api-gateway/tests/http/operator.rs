//! The operator's scheduler configuration: defaults, validation,
//! check-and-set writes and refusing registrations.

use serde_json::{Value, json};

use crate::common::{Backend, TestGateway};
use crate::fixtures::{body, nomad_job};

/// Writes the scheduler configuration `config` if its index is still `cas`,
/// and returns the answer's JSON.
async fn set_config_cas(gw: &TestGateway, cas: u64, config: &Value) -> Value {
    let r = gw
        .http(
            "PUT",
            &format!("/v1/operator/scheduler/configuration?cas={cas}"),
            &body(config),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

/// Switches to spread and rejects job registrations.
async fn spread_and_reject_jobs(gw: &TestGateway) {
    let r = set_config_cas(
        gw,
        0,
        &json!({"SchedulerAlgorithm": "spread", "RejectJobRegistration": true}),
    )
    .await;
    assert_eq!(r["Updated"], true, "{r}");
}

async fn scheduler_config(gw: &TestGateway) -> Value {
    gw.http("GET", "/v1/operator/scheduler/configuration", b"")
        .await
        .json()
}

pub async fn the_default_scheduler_config_binpacks_and_preempts_system_jobs(backend: Backend) {
    let gw = TestGateway::start(backend, "http-operator-default").await;
    let conf = scheduler_config(&gw).await;
    assert_eq!(conf["SchedulerConfig"]["SchedulerAlgorithm"], "binpack");
    assert_eq!(
        conf["SchedulerConfig"]["PreemptionConfig"]["SystemSchedulerEnabled"],
        true
    );
    gw.stop().await;
}

pub async fn an_unknown_scheduler_algorithm_is_400(backend: Backend) {
    let gw = TestGateway::start(backend, "http-operator-bad").await;
    let r = gw
        .http(
            "PUT",
            "/v1/operator/scheduler/configuration",
            &body(&json!({"SchedulerAlgorithm": "fastest"})),
        )
        .await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("SchedulerAlgorithm"));
    gw.stop().await;
}

pub async fn a_check_and_set_config_write_applies_once(backend: Backend) {
    let gw = TestGateway::start(backend, "http-operator-cas").await;
    spread_and_reject_jobs(&gw).await;
    let r = set_config_cas(&gw, 0, &json!({"SchedulerAlgorithm": "binpack"})).await;
    assert_eq!(r["Updated"], false, "the check-and-set lost");
    let conf = scheduler_config(&gw).await;
    assert_eq!(conf["SchedulerConfig"]["SchedulerAlgorithm"], "spread");
    gw.stop().await;
}

pub async fn reject_job_registration_refuses_new_jobs_with_403(backend: Backend) {
    let gw = TestGateway::start(backend, "http-operator-reject").await;
    spread_and_reject_jobs(&gw).await;
    let r = gw
        .http("PUT", "/v1/jobs", &body(&nomad_job("web", 1)))
        .await;
    assert_eq!(r.status, 403, "registration is refused: {}", r.text());
    assert!(gw.job("web").await.is_none());
    gw.stop().await;
}

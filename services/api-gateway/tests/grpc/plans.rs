//! Validation and plans over gRPC: they answer what is wrong or what would
//! happen, and write nothing.

use caravan_proto::job_service_client::JobServiceClient;
use caravan_proto::{PlanJobRequest, PlanJobResponse, ValidateJobRequest, ValidateJobResponse};

use crate::common::{Backend, TestGateway};
use crate::fixtures::job;

/// Validates job `web` with `count` instances and checks nothing was written.
async fn validate(backend: Backend, name: &str, count: i32) -> ValidateJobResponse {
    let gw = TestGateway::start(backend, name).await;
    let mut jobs = JobServiceClient::new(gw.channel().await);
    let answer = jobs
        .validate_job(ValidateJobRequest {
            job: Some(job("web", count)),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(gw.key_count().await, 0);
    gw.stop().await;
    answer
}

pub async fn validation_names_a_bad_count_and_writes_nothing(backend: Backend) {
    let invalid = validate(backend, "grpc-validate-bad", -3).await;
    assert!(
        invalid.errors.iter().any(|e| e.contains("count")),
        "{invalid:?}"
    );
}

pub async fn validation_of_a_good_job_has_no_errors_and_writes_nothing(backend: Backend) {
    let valid = validate(backend, "grpc-validate-ok", 3).await;
    assert!(valid.errors.is_empty(), "{valid:?}");
}

/// Plans job `web` with three instances and its diff, with no node to run it.
async fn plan_web(gw: &TestGateway) -> PlanJobResponse {
    let mut jobs = JobServiceClient::new(gw.channel().await);
    jobs.plan_job(PlanJobRequest {
        job: Some(job("web", 3)),
        diff: true,
    })
    .await
    .unwrap()
    .into_inner()
}

pub async fn a_plan_without_nodes_reports_the_failed_group_and_its_diff(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-plan").await;
    // No node can run it: the plan says why.
    let plan = plan_web(&gw).await;
    assert!(plan.failed_tg_allocs.contains_key("web"), "{plan:?}");
    assert!(plan.diff.contains("web"), "{}", plan.diff);
    gw.stop().await;
}

pub async fn a_plan_writes_nothing(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-plan-writes").await;
    plan_web(&gw).await;
    assert_eq!(gw.key_count().await, 0);
    gw.stop().await;
}

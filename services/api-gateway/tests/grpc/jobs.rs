//! Job writes over gRPC: registration writes the job, its version and an
//! eval; versions are kept and listed; enforced revisions; deregistration
//! and purges.

use caravan_proto::job_service_client::JobServiceClient;
use caravan_proto::{
    DeregisterJobRequest, DeregisterJobResponse, EvalStatus, Job, ListJobVersionsRequest,
    RegisterJobRequest, RegisterJobResponse,
};
use tonic::Code;
use tonic::transport::Channel;

use crate::common::{Backend, TestGateway};
use crate::fixtures::{job, register};

type Jobs = JobServiceClient<Channel>;

/// Registers job `web` with two instances.
async fn register_web(jobs: &mut Jobs) -> RegisterJobResponse {
    jobs.register_job(register(job("web", 2)))
        .await
        .unwrap()
        .into_inner()
}

/// Registers job `web` with 2, 3, … 9 instances: versions 0 to 7.
async fn register_eight_versions(jobs: &mut Jobs) {
    for count in 2..10 {
        jobs.register_job(register(job("web", count)))
            .await
            .unwrap();
    }
}

/// Registers job `api` with enforced revision 0 and returns the answer.
async fn register_api_enforced(jobs: &mut Jobs) -> RegisterJobResponse {
    jobs.register_job(RegisterJobRequest {
        job: Some(job("api", 1)),
        enforce_revision: true,
        job_modify_revision: 0,
        ..Default::default()
    })
    .await
    .unwrap()
    .into_inner()
}

/// Registers job `api` twice with enforced revisions (versions 0 and 1).
async fn register_api_twice(jobs: &mut Jobs) {
    let first = register_api_enforced(jobs).await;
    jobs.register_job(RegisterJobRequest {
        job: Some(job("api", 2)),
        enforce_revision: true,
        job_modify_revision: first.job_modify_revision,
        ..Default::default()
    })
    .await
    .unwrap();
}

async fn deregister_api(jobs: &mut Jobs, purge: bool) -> Result<DeregisterJobResponse, Code> {
    jobs.deregister_job(DeregisterJobRequest {
        namespace: String::new(),
        job_id: "api".into(),
        purge,
    })
    .await
    .map(tonic::Response::into_inner)
    .map_err(|status| status.code())
}

pub async fn registering_a_job_stores_it_as_version_zero(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-register").await;
    let mut jobs = JobServiceClient::new(gw.channel().await);
    let r = register_web(&mut jobs).await;
    assert_eq!(r.eval_create_revision, r.job_modify_revision);
    let stored = gw.job("web").await.unwrap();
    assert_eq!(stored.version, 0);
    assert_eq!(stored.job_modify_revision, r.job_modify_revision);
    assert_eq!(stored.task_groups[0].count, 2);
    let versions: Vec<Job> = gw.objects(gw.keys.job_versions_of("default", "web")).await;
    assert_eq!(versions.len(), 1);
    gw.stop().await;
}

pub async fn registering_a_job_writes_a_pending_job_register_eval(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-register-eval").await;
    let mut jobs = JobServiceClient::new(gw.channel().await);
    let r = register_web(&mut jobs).await;
    assert!(!r.eval_id.is_empty());
    let evals = gw.evals().await;
    assert_eq!(evals.len(), 1);
    let eval = &evals[0];
    assert_eq!(eval.id, r.eval_id);
    assert_eq!(eval.status(), EvalStatus::Pending);
    assert_eq!(eval.triggered_by, "job-register");
    assert_eq!(eval.job_modify_revision, r.job_modify_revision);
    assert_eq!(eval.create_revision, r.eval_create_revision);
    gw.stop().await;
}

pub async fn the_same_spec_again_keeps_the_version_and_adds_an_eval(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-register-again").await;
    let mut jobs = JobServiceClient::new(gw.channel().await);
    let r = register_web(&mut jobs).await;
    let again = register_web(&mut jobs).await;
    assert_eq!(again.job_modify_revision, r.job_modify_revision);
    assert_eq!(gw.job("web").await.unwrap().version, 0);
    assert_eq!(gw.evals().await.len(), 2);
    gw.stop().await;
}

pub async fn each_new_spec_is_a_new_version_and_six_are_kept(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-versions-kept").await;
    let mut jobs = JobServiceClient::new(gw.channel().await);
    register_eight_versions(&mut jobs).await;
    let stored = gw.job("web").await.unwrap();
    assert_eq!(stored.version, 7);
    let versions: Vec<Job> = gw.objects(gw.keys.job_versions_of("default", "web")).await;
    let kept: Vec<u64> = versions.iter().map(|j| j.version).collect();
    assert_eq!(kept, vec![2, 3, 4, 5, 6, 7]);
    gw.stop().await;
}

pub async fn kept_versions_are_listed_newest_first(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-versions-listed").await;
    let mut jobs = JobServiceClient::new(gw.channel().await);
    register_eight_versions(&mut jobs).await;
    // The cache serves the versions newest first.
    let listed = jobs
        .list_job_versions(ListJobVersionsRequest {
            job_id: "web".into(),
            options: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.versions[0].version, 7);
    assert_eq!(listed.versions.len(), 6);
    gw.stop().await;
}

pub async fn an_enforced_register_with_a_stale_revision_fails_its_precondition(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-enforce-stale").await;
    let mut jobs = JobServiceClient::new(gw.channel().await);
    let first = register_api_enforced(&mut jobs).await;
    let err = jobs
        .register_job(RegisterJobRequest {
            job: Some(job("api", 2)),
            enforce_revision: true,
            job_modify_revision: first.job_modify_revision + 100,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    gw.stop().await;
}

pub async fn an_enforced_register_with_the_current_revision_is_a_new_version(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-enforce-current").await;
    let mut jobs = JobServiceClient::new(gw.channel().await);
    register_api_twice(&mut jobs).await;
    assert_eq!(gw.job("api").await.unwrap().version, 1);
    gw.stop().await;
}

pub async fn deregistering_stops_the_job_in_a_new_version_with_an_eval(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-deregister").await;
    let mut jobs = JobServiceClient::new(gw.channel().await);
    register_api_twice(&mut jobs).await;
    let stop = deregister_api(&mut jobs, false).await.unwrap();
    let stored = gw.job("api").await.unwrap();
    assert!(stored.stop);
    assert_eq!(stored.version, 2);
    let evals = gw.evals().await;
    let dereg = evals.iter().find(|e| e.id == stop.eval_id).unwrap();
    assert_eq!(dereg.triggered_by, "job-deregister");
    gw.stop().await;
}

pub async fn purging_removes_the_job_and_its_versions(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-purge").await;
    let mut jobs = JobServiceClient::new(gw.channel().await);
    register_api_twice(&mut jobs).await;
    deregister_api(&mut jobs, false).await.unwrap();
    deregister_api(&mut jobs, true).await.unwrap();
    assert!(gw.job("api").await.is_none());
    let versions: Vec<Job> = gw.objects(gw.keys.job_versions_of("default", "api")).await;
    assert!(versions.is_empty());
    gw.stop().await;
}

pub async fn purging_a_purged_job_is_not_found(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-purge-twice").await;
    let mut jobs = JobServiceClient::new(gw.channel().await);
    register_api_twice(&mut jobs).await;
    deregister_api(&mut jobs, true).await.unwrap();
    assert_eq!(
        deregister_api(&mut jobs, true).await.unwrap_err(),
        Code::NotFound
    );
    gw.stop().await;
}

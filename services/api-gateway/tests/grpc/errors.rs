//! Invalid registrations over gRPC: `InvalidArgument` naming the field, and
//! nothing written.

use caravan_proto::RegisterJobRequest;
use caravan_proto::job_service_client::JobServiceClient;
use tonic::Code;

use crate::common::{Backend, TestGateway};
use crate::fixtures::{job, register};

/// Registers `request` and returns the refusal's message, after checking it
/// is `InvalidArgument` and that nothing was written.
async fn refused(backend: Backend, name: &str, request: RegisterJobRequest) -> String {
    let gw = TestGateway::start(backend, name).await;
    let mut jobs = JobServiceClient::new(gw.channel().await);
    let err = jobs.register_job(request).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(gw.key_count().await, 0);
    gw.stop().await;
    err.message().to_string()
}

pub async fn a_negative_count_is_invalid_and_writes_nothing(backend: Backend) {
    let message = refused(backend, "grpc-invalid-count", register(job("web", -1))).await;
    assert!(message.contains("count"), "{message}");
}

pub async fn zero_cpu_is_invalid_and_writes_nothing(backend: Backend) {
    let mut j = job("web", 1);
    j.task_groups[0].tasks[0]
        .resources
        .as_mut()
        .unwrap()
        .cpu_mhz = 0;
    let message = refused(backend, "grpc-invalid-cpu", register(j)).await;
    assert!(message.to_lowercase().contains("cpu"), "{message}");
}

pub async fn a_request_without_job_is_invalid_and_writes_nothing(backend: Backend) {
    let message = refused(backend, "grpc-invalid-none", RegisterJobRequest::default()).await;
    assert!(message.starts_with("job"), "{message}");
}

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

/// Sends `body` as it is, framed as one gRPC message, to `path`.
async fn send_raw(gw: &TestGateway, path: &'static str, body: &'static [u8]) -> tonic::Status {
    let mut grpc = tonic::client::Grpc::new(gw.channel().await);
    grpc.ready().await.unwrap();
    grpc.unary::<_, caravan_proto::RegisterJobResponse, _>(
        tonic::Request::new(body),
        tonic::codegen::http::uri::PathAndQuery::from_static(path),
        Raw,
    )
    .await
    .unwrap_err()
}

/// Writes a request's bytes as they are; reads answers as a registration's.
struct Raw;

impl tonic::codec::Codec for Raw {
    type Encode = &'static [u8];
    type Decode = caravan_proto::RegisterJobResponse;
    type Encoder = Raw;
    type Decoder = tonic_prost::ProstDecoder<caravan_proto::RegisterJobResponse>;

    fn encoder(&mut self) -> Raw {
        Raw
    }

    fn decoder(&mut self) -> Self::Decoder {
        tonic_prost::ProstDecoder::default()
    }
}

impl tonic::codec::Encoder for Raw {
    type Item = &'static [u8];
    type Error = tonic::Status;

    fn encode(
        &mut self,
        item: &'static [u8],
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        use prost::bytes::BufMut;
        dst.put_slice(item);
        Ok(())
    }
}

pub async fn a_body_that_does_not_decode_is_invalid_and_writes_nothing(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-undecodable").await;
    // Field 1 (the job, length-delimited) claiming 100 bytes where 3 follow.
    let status = send_raw(
        &gw,
        "/caravan.v1.JobService/RegisterJob",
        &[0x0a, 100, 1, 2, 3],
    )
    .await;
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().starts_with("request body"), "{status:?}");
    assert_eq!(gw.key_count().await, 0);
    gw.stop().await;
}

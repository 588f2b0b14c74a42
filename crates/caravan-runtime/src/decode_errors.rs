//! A request body that is not the method's protobuf message is the caller's
//! mistake: tonic answers it INTERNAL (gRPC's convention for a parse error),
//! which reads as a server fault and is retried by clients that retry
//! INTERNAL. This layer answers it INVALID_ARGUMENT instead, naming the body,
//! as every other bad input is answered.

use tonic::codegen::http;
use tower::util::MapResponseLayer;

/// How tonic's protobuf codec begins the message of a request that does not
/// decode (prost's `DecodeError`).
const DECODE_FAILED: &str = "failed to decode Protobuf message";

/// A server layer turning tonic's INTERNAL for an undecodable request body
/// into INVALID_ARGUMENT.
pub type DecodeErrorLayer = MapResponseLayer<fn(Response) -> Response>;

/// The layer.
pub fn layer() -> DecodeErrorLayer {
    MapResponseLayer::new(rewrite as fn(Response) -> Response)
}

/// A server's response.
pub type Response = http::Response<tonic::body::Body>;

/// `response`, or INVALID_ARGUMENT when it is tonic's trailers-only INTERNAL
/// for a request that did not decode.
fn rewrite(response: Response) -> Response {
    match tonic::Status::from_header_map(response.headers()) {
        Some(status)
            if status.code() == tonic::Code::Internal
                && status.message().starts_with(DECODE_FAILED) =>
        {
            tonic::Status::invalid_argument(format!(
                "request body: not a valid message of this method ({})",
                status.message()
            ))
            .into_http()
        }
        _ => response,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn answer(status: tonic::Status) -> Option<tonic::Status> {
        let inner = tower::service_fn(move |_req: http::Request<()>| {
            let status = status.clone();
            async move { Ok::<_, std::convert::Infallible>(status.into_http()) }
        });
        let mut service = tower::Layer::layer(&layer(), inner);
        let response = tower::Service::call(&mut service, http::Request::new(()))
            .await
            .unwrap();
        tonic::Status::from_header_map(response.headers())
    }

    #[tokio::test]
    async fn an_undecodable_body_is_invalid_argument() {
        let status = answer(tonic::Status::internal(
            "failed to decode Protobuf message: invalid wire type: LengthDelimited (expected Varint)",
        ))
        .await
        .unwrap();
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert!(status.message().starts_with("request body: "), "{status:?}");
        assert!(status.message().contains("invalid wire type"), "{status:?}");
    }

    #[tokio::test]
    async fn other_errors_pass_unchanged() {
        let status = answer(tonic::Status::internal("the store failed"))
            .await
            .unwrap();
        assert_eq!(status.code(), tonic::Code::Internal);
        assert_eq!(status.message(), "the store failed");
        let status = answer(tonic::Status::not_found("job x")).await.unwrap();
        assert_eq!(status.code(), tonic::Code::NotFound);
    }
}

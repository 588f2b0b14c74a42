//! A `grpc` check: one call of the standard gRPC health protocol
//! (`grpc.health.v1.Health/Check`, through the `tonic-health` client),
//! passing only when the server answers `SERVING` for the check's service.

use caravan_proto::ServiceCheck;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use super::probe::Observation;
use super::status::Outcome;

/// What a `grpc` check asks.
#[derive(Clone, Debug)]
pub struct GrpcProbe {
    service: String,
}

impl GrpcProbe {
    /// The probe of `check`; `Err` for TLS, which this client does not speak
    /// to checked services.
    pub fn new(check: &ServiceCheck) -> Result<Self, String> {
        if check.grpc_use_tls {
            return Err(format!(
                "check {:?}: grpc_use_tls is not supported by Caravan's client (plaintext gRPC only)",
                check.name
            ));
        }
        Ok(GrpcProbe {
            service: check.grpc_service.clone(),
        })
    }

    /// Asks the server at `addr` (`host:port`) once (the caller bounds how long).
    pub async fn run(&self, addr: &str) -> Observation {
        let failure = |output: String| Observation {
            outcome: Outcome::Failure,
            status_code: 0,
            output,
        };
        let endpoint = match tonic::transport::Endpoint::from_shared(format!("http://{addr}")) {
            Ok(e) => e,
            Err(e) => return failure(format!("grpc {addr}: {e}")),
        };
        let channel = match endpoint.connect().await {
            Ok(c) => c,
            Err(e) => return failure(format!("grpc {addr}: {e}")),
        };
        let request = HealthCheckRequest {
            service: self.service.clone(),
        };
        match HealthClient::new(channel).check(request).await {
            Ok(answer) => {
                let status = answer.into_inner().status();
                let output = format!(
                    "gRPC check {addr}/{}: {}",
                    self.service,
                    status.as_str_name()
                );
                if status == ServingStatus::Serving {
                    Observation {
                        outcome: Outcome::Success,
                        status_code: 0,
                        output,
                    }
                } else {
                    failure(output)
                }
            }
            Err(status) => failure(format!(
                "gRPC check {addr}/{}: {}: {}",
                self.service,
                status.code(),
                status.message()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn serving_passes_and_not_serving_fails() {
        let (reporter, service) = tonic_health::server::health_reporter();
        reporter
            .set_service_status("shop", tonic_health::ServingStatus::Serving)
            .await;
        reporter
            .set_service_status("cart", tonic_health::ServingStatus::NotServing)
            .await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
        );
        let probe = |name: &str| {
            GrpcProbe::new(&ServiceCheck {
                grpc_service: name.into(),
                ..Default::default()
            })
            .unwrap()
        };
        let seen = tokio::time::timeout(Duration::from_secs(10), probe("shop").run(&addr))
            .await
            .unwrap();
        assert_eq!(seen.outcome, Outcome::Success, "{seen:?}");
        let seen = probe("cart").run(&addr).await;
        assert_eq!(seen.outcome, Outcome::Failure);
        assert!(seen.output.contains("NOT_SERVING"), "{seen:?}");
        let seen = probe("nope").run(&addr).await;
        assert_eq!(seen.outcome, Outcome::Failure, "an unknown service");
    }

    #[test]
    fn tls_is_refused_by_name() {
        let err = GrpcProbe::new(&ServiceCheck {
            name: "g".into(),
            grpc_use_tls: true,
            ..Default::default()
        })
        .unwrap_err();
        assert!(err.contains("grpc_use_tls"), "{err}");
    }
}

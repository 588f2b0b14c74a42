//! The channels to the gateway addresses and the one loop every call goes
//! through: the token added, the timeout applied, and the retries that
//! [`crate::retry`] allows, moving on to the next address each time.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};
use tonic::{Request, Response, Status};

use crate::error::{Error, Result};
use crate::retry::{Idempotence, RetryPolicy, may_retry};

/// The metadata the gateway reads the ACL token from (Nomad's header name).
pub const TOKEN_METADATA: &str = "x-nomad-token";

/// The largest message sent or accepted (a list of every allocation of a big
/// cluster).
pub(crate) const MAX_MESSAGE_BYTES: usize = 512 * 1024 * 1024;

/// Puts the ACL token, if any, in every call's `x-nomad-token` metadata.
#[derive(Debug, Clone, Default)]
pub struct TokenHeader(Option<MetadataValue<Ascii>>);

impl Interceptor for TokenHeader {
    fn call(&mut self, mut req: Request<()>) -> std::result::Result<Request<()>, Status> {
        if let Some(token) = &self.0 {
            req.metadata_mut().insert(TOKEN_METADATA, token.clone());
        }
        Ok(req)
    }
}

/// A channel to one gateway that sends the client's token with every call:
/// what the generated `caravan_client::proto::*_client` types take.
pub type GrpcChannel = InterceptedService<Channel, TokenHeader>;

/// One gateway address and its lazily connected channel.
#[derive(Debug)]
struct Gateway {
    address: String,
    channel: GrpcChannel,
}

/// The gateways of a client and how calls are made to them.
#[derive(Debug)]
pub(crate) struct Transport {
    gateways: Vec<Gateway>,
    timeout: Duration,
    retry: RetryPolicy,
    /// The gateway that answered last; calls start there.
    current: AtomicUsize,
}

impl Transport {
    /// Channels to `addresses` (`host:port` or `http://host:port`), none
    /// connected yet.
    pub(crate) fn new(
        addresses: &[String],
        token: Option<&str>,
        timeout: Duration,
        retry: RetryPolicy,
        tls: Option<&ClientTlsConfig>,
    ) -> Result<Transport> {
        if addresses.is_empty() {
            return Err(Error::Config("no api-gateway address given".into()));
        }
        // The channels' connection tasks are spawned on the current runtime.
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(Error::Config(
                "a client must be built inside a Tokio runtime".into(),
            ));
        }
        let header = token
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(|t| {
                t.parse::<MetadataValue<Ascii>>()
                    .map_err(|_| Error::InvalidToken)
            })
            .transpose()?;
        let gateways = addresses
            .iter()
            .map(|address| {
                let channel = lazy_channel(address, tls)?;
                Ok(Gateway {
                    address: address.clone(),
                    channel: InterceptedService::new(channel, TokenHeader(header.clone())),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Transport {
            gateways,
            timeout,
            retry: retry_at_least_once(retry),
            current: AtomicUsize::new(0),
        })
    }

    /// The address calls go to first.
    pub(crate) fn address(&self) -> &str {
        &self.current_gateway().address
    }

    /// The channel calls go to first.
    pub(crate) fn channel(&self) -> GrpcChannel {
        self.current_gateway().channel.clone()
    }

    /// The longest a unary call may take.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// How calls are retried.
    pub(crate) fn retry_policy(&self) -> RetryPolicy {
        self.retry
    }

    fn current_gateway(&self) -> &Gateway {
        let i = self.current.load(Ordering::Relaxed) % self.gateways.len();
        &self.gateways[i]
    }

    /// Sends `request` through `call` (a generated client's method on the
    /// channel it is given), within `timeout`, retrying over the addresses
    /// as `idempotence` allows.
    pub(crate) async fn call<Req, Resp, F, Fut>(
        &self,
        idempotence: Idempotence,
        timeout: Duration,
        request: Req,
        call: F,
    ) -> Result<Resp>
    where
        Req: Clone,
        F: Fn(GrpcChannel, Request<Req>) -> Fut,
        Fut: Future<Output = std::result::Result<Response<Resp>, Status>>,
    {
        let n = self.gateways.len();
        let mut last = None;
        for round in 0..self.retry.rounds {
            if round > 0 {
                tokio::time::sleep(self.retry.backoff(round - 1)).await;
            }
            let start = self.current.load(Ordering::Relaxed);
            for step in 0..n {
                let i = (start + step) % n;
                let gateway = &self.gateways[i];
                // The deadline is kept here rather than sent as grpc-timeout,
                // which tonic enforces as CANCELLED, not DEADLINE_EXCEEDED.
                let req = Request::new(request.clone());
                let answer = tokio::time::timeout(timeout, call(gateway.channel.clone(), req))
                    .await
                    .unwrap_or_else(|_| {
                        Err(Status::deadline_exceeded(format!(
                            "no answer from {} within {timeout:?}",
                            gateway.address
                        )))
                    });
                match answer {
                    Ok(resp) => {
                        self.current.store(i, Ordering::Relaxed);
                        return Ok(resp.into_inner());
                    }
                    Err(status) if may_retry(idempotence, &status) => {
                        last = Some(Error::from_status(&status, &gateway.address));
                    }
                    Err(status) => return Err(Error::from_status(&status, &gateway.address)),
                }
            }
        }
        Err(last.unwrap_or_else(|| Error::Config("no api-gateway address given".into())))
    }
}

fn retry_at_least_once(mut retry: RetryPolicy) -> RetryPolicy {
    retry.rounds = retry.rounds.max(1);
    retry
}

/// A channel to `address` that connects on first use (and reconnects after
/// a failure), so a client can be built before its gateway is up; over TLS
/// when `tls` is given, whatever scheme the address names.
fn lazy_channel(address: &str, tls: Option<&ClientTlsConfig>) -> Result<Channel> {
    let invalid = |reason: String| Error::InvalidAddress {
        address: address.to_string(),
        reason,
    };
    let authority = address.split_once("://").map_or(address, |(_, rest)| rest);
    let uri = match (tls, address.starts_with("https://")) {
        (Some(_), _) => format!("https://{authority}"),
        (None, true) => {
            return Err(invalid(
                "an https:// address needs the client's TLS files (ClientBuilder::tls)".into(),
            ));
        }
        (None, false) => format!("http://{authority}"),
    };
    let mut endpoint = Endpoint::from_shared(uri).map_err(|e| invalid(e.to_string()))?;
    if let Some(tls) = tls {
        endpoint = endpoint
            .tls_config(tls.clone())
            .map_err(|e| invalid(format!("TLS: {e}")))?;
    }
    Ok(endpoint
        .connect_timeout(Duration::from_secs(3))
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(20))
        .keep_alive_while_idle(true)
        .connect_lazy())
}

#[cfg(test)]
mod tests {
    use caravan_proto::LeadersRequest;
    use caravan_proto::status_service_client::StatusServiceClient;

    use super::*;

    /// A loopback port nothing listens on.
    fn closed_port() -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("local addr");
        drop(listener);
        addr.to_string()
    }

    fn transport(addresses: &[String], rounds: u32) -> Transport {
        let retry = RetryPolicy {
            rounds,
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(10),
        };
        Transport::new(
            addresses,
            Some("s3cret"),
            Duration::from_secs(5),
            retry,
            None,
        )
        .expect("transport")
    }

    #[test]
    fn a_client_needs_a_runtime() {
        let a = vec!["127.0.0.1:1".to_string()];
        let t = Transport::new(
            &a,
            None,
            Duration::from_secs(1),
            RetryPolicy::default(),
            None,
        );
        assert!(matches!(t, Err(Error::Config(_))));
    }

    #[tokio::test]
    async fn tls_files_that_do_not_parse_are_refused_up_front() {
        let built = crate::Client::builder()
            .address("https://127.0.0.1:1")
            .tls(b"not a CA", b"not a certificate", b"not a key")
            .build();
        match built {
            Err(Error::InvalidAddress { reason, .. }) => {
                assert!(reason.starts_with("TLS: "), "{reason}");
            }
            other => panic!("built with junk TLS files: {other:?}"),
        }
    }

    #[tokio::test]
    async fn bad_addresses_and_tokens_are_refused_up_front() {
        let cfg = |a: &[&str], token| {
            let a: Vec<String> = a.iter().map(|s| s.to_string()).collect();
            Transport::new(
                &a,
                token,
                Duration::from_secs(1),
                RetryPolicy::default(),
                None,
            )
        };
        assert!(matches!(cfg(&[], None), Err(Error::Config(_))));
        assert!(matches!(
            cfg(&["https://x:1"], None),
            Err(Error::InvalidAddress { .. })
        ));
        assert!(matches!(
            cfg(&["http://[::1:1"], None),
            Err(Error::InvalidAddress { .. })
        ));
        let bad_token = cfg(&["127.0.0.1:1"], Some("bad\ntoken"));
        assert!(
            matches!(bad_token, Err(Error::InvalidToken)),
            "{bad_token:?}"
        );
        let t = cfg(&["127.0.0.1:1", "http://127.0.0.1:2"], Some("  ")).expect("valid");
        assert_eq!(t.address(), "127.0.0.1:1");
    }

    #[tokio::test]
    async fn a_refused_connection_is_unreachable_and_tried_on_every_address() {
        let addresses = vec![closed_port(), closed_port()];
        let t = transport(&addresses, 2);
        let tries = AtomicUsize::new(0);
        let err = t
            .call(
                Idempotence::Once,
                t.timeout(),
                LeadersRequest {},
                |ch, req| {
                    tries.fetch_add(1, Ordering::Relaxed);
                    async move { StatusServiceClient::new(ch).leaders(req).await }
                },
            )
            .await
            .expect_err("nothing listens");
        // Refused before it was sent, so even a write goes to every address
        // in every round.
        assert_eq!(tries.load(Ordering::Relaxed), 4);
        match err {
            Error::Unreachable { address, reason } => {
                assert!(addresses.contains(&address), "{address}");
                assert!(reason.to_lowercase().contains("refused"), "{reason}");
            }
            other => panic!("not Unreachable: {other:?}"),
        }
    }
}

//! gRPC serving and calling: a server with tracing spans that continue the
//! caller's trace, the standard health and reflection services every service
//! serves beside its own, a graceful stop on shutdown bounded by a drain
//! period, and a client interceptor that passes the current trace on. With
//! `[tls]` enabled servers require a client certificate whose role the
//! called service allows, and channels dial with TLS.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use futures::future::BoxFuture;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::codegen::http;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint, Server};
use tonic_health::ServingStatus;
use tower::layer::util::{Identity, Stack};

/// How long requests in flight at shutdown may take to finish before the
/// server is dropped with them. A handler waiting on an unreachable etcd
/// would otherwise hold the process for the store's request timeout (10 s),
/// and a stream that ignores the shutdown token for ever.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(3);

/// A Caravan server's layers, outermost first: the role check, the answer
/// INVALID_ARGUMENT to a body that does not decode, the traffic counters
/// (calls the role check refused are not counted), over the routes.
pub type Layers = Stack<
    crate::traffic::TrafficLayer,
    Stack<crate::decode_errors::DecodeErrorLayer, Stack<crate::tls::RoleCheckLayer, Identity>>,
>;

/// A router of a server built by [`server`].
pub type Router = tonic::transport::server::Router<Layers>;

/// A server builder with Caravan's settings: one span per request named after
/// the gRPC method, continuing the caller's trace; with the process's TLS
/// (see [`crate::tls::install`]) it requires client certificates and checks
/// their roles; a request body that does not decode is answered
/// INVALID_ARGUMENT ([`crate::decode_errors`]); every call and its bytes are
/// counted by method ([`crate::traffic`]).
pub fn server() -> Server<Layers> {
    // TLS is not tonic's here: [`serve`] accepts through the process's own
    // acceptor, whose certificate reloads.
    let tls = crate::tls::current();
    Server::builder()
        .tcp_nodelay(true)
        .http2_keepalive_interval(Some(Duration::from_secs(20)))
        // Windows sized for alloc sets and plans of thousands of allocations,
        // which the defaults (64 KiB) would send a round trip at a time.
        .initial_connection_window_size(Some(CONNECTION_WINDOW))
        .initial_stream_window_size(Some(STREAM_WINDOW))
        // Callers whose deadline passes reset their streams; under load many
        // can do so before the server accepts them, and at h2's default limit
        // (20) the whole connection, with every node multiplexed on it, goes.
        .http2_max_pending_accept_reset_streams(Some(MAX_PENDING_RESETS))
        .trace_fn(request_span)
        .layer(crate::tls::RoleCheckLayer::new(tls.map(|t| t.region())))
        .layer(crate::decode_errors::layer())
        .layer(crate::traffic::TrafficLayer)
}

/// HTTP/2 flow-control window of a whole connection, in bytes.
const CONNECTION_WINDOW: u32 = 8 * 1024 * 1024;
/// HTTP/2 flow-control window of one stream, in bytes.
const STREAM_WINDOW: u32 = 2 * 1024 * 1024;
/// Streams a peer may reset before the server has accepted them.
const MAX_PENDING_RESETS: usize = 4096;

fn request_span(req: &http::Request<()>) -> tracing::Span {
    let span = tracing::info_span!("grpc", method = %req.uri().path());
    crate::trace::follow_headers(&span, req.headers());
    span
}

/// A router already serving the standard gRPC health service, reporting
/// each of `services` (fully qualified gRPC names) as serving, and server
/// reflection (v1, and v1alpha for older tools) listing them with itself
/// and health, so `grpcurl list` and `grpc.health.v1.Health/Check` work
/// against every service. The caller adds the services named.
pub async fn router(services: &[&str]) -> Result<Router, tonic_reflection::server::Error> {
    let (reporter, health) = tonic_health::server::health_reporter();
    for service in services {
        reporter
            .set_service_status(*service, ServingStatus::Serving)
            .await;
    }
    let reflection_v1 = reflection(services).build_v1()?;
    let reflection_v1alpha = reflection(services).build_v1alpha()?;
    Ok(server()
        .add_service(health)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha))
}

/// The gRPC name of the standard health service.
pub const HEALTH_SERVICE: &str = "grpc.health.v1.Health";
/// The gRPC name of server reflection (v1).
pub const REFLECTION_SERVICE: &str = "grpc.reflection.v1.ServerReflection";

/// A reflection builder over Caravan's and the health service's
/// descriptors, listing `services`, health and reflection itself.
fn reflection<'b>(services: &[&str]) -> tonic_reflection::server::Builder<'b> {
    let builder = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(caravan_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .with_service_name(HEALTH_SERVICE)
        .with_service_name(REFLECTION_SERVICE);
    services
        .iter()
        .fold(builder, |b, service| b.with_service_name(*service))
}

/// Binds `addr` (port 0 picks a free port) for a plaintext listener
/// (`/metrics`) and returns it with its real address; says so loudly when
/// it can be reached from beyond this machine.
pub async fn bind(addr: &str) -> std::io::Result<(TcpListener, SocketAddr)> {
    bind_with(addr, Some("")).await
}

/// [`bind`] for the HTTP API, which is plaintext unless `tls.http` is set
/// (see [`crate::tls::https`]).
pub async fn bind_http(addr: &str) -> std::io::Result<(TcpListener, SocketAddr)> {
    let plaintext = crate::tls::https().is_none();
    bind_with(
        addr,
        plaintext.then_some("set tls.http (with [tls]'s files) or "),
    )
    .await
}

/// Binds `addr`; `plaintext` (when the listener has no TLS) is how to turn
/// TLS on, ending in "or ", or empty when it cannot be, for the warning
/// when it can be reached from beyond this machine.
async fn bind_with(
    addr: &str,
    plaintext: Option<&str>,
) -> std::io::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    if let Some(remedy) = plaintext
        && exposed(local)
    {
        tracing::warn!(
            addr = %local,
            "listening beyond loopback without TLS: anyone who can reach this address \
             can call it unauthenticated and read its traffic; {remedy}bind 127.0.0.1 \
             unless the network around it is trusted"
        );
    }
    Ok((listener, local))
}

/// Whether a listener on `local` can be reached from beyond this machine
/// (a plaintext listener says so at start when it is).
pub fn exposed(local: SocketAddr) -> bool {
    !local.ip().is_loopback()
}

/// Binds a service's configured `grpc_addr`, with an error that names the
/// config key.
pub async fn listen(grpc_addr: &str) -> anyhow::Result<TcpListener> {
    let plaintext = crate::tls::current().is_none();
    let (listener, _) = bind_with(grpc_addr, plaintext.then_some("enable [tls] or "))
        .await
        .with_context(|| format!("grpc_addr: cannot listen on {grpc_addr}"))?;
    Ok(listener)
}

/// The address a replica campaigns with and names itself by: `configured`
/// when set, else the bound `local` one, with loopback standing in for
/// "every interface".
pub fn advertise_addr(configured: &str, local: SocketAddr) -> String {
    if !configured.is_empty() {
        return configured.to_string();
    }
    if local.ip().is_unspecified() {
        let loopback = if local.is_ipv4() {
            "127.0.0.1"
        } else {
            "[::1]"
        };
        return format!("{loopback}:{}", local.port());
    }
    local.to_string()
}

/// Serves `router` on `listener` until `shutdown` is cancelled, then stops
/// accepting and gives in-flight requests [`DRAIN_TIMEOUT`] to finish. With
/// the process's TLS it accepts through [`crate::tls::TlsIncoming`]: each
/// new connection gets the certificate current at its handshake.
pub async fn serve(
    router: Router,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), tonic::transport::Error> {
    let local = listener
        .local_addr()
        .map_or_else(|_| "?".to_string(), |a| a.to_string());
    let stop = shutdown.clone().cancelled_owned();
    let serving: BoxFuture<'_, _> = match crate::tls::current() {
        Some(tls) => {
            let incoming = crate::tls::TlsIncoming::new(listener, tls.server_config());
            Box::pin(router.serve_with_incoming_shutdown(incoming.into_stream(), stop))
        }
        None => {
            let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
            Box::pin(router.serve_with_incoming_shutdown(incoming, stop))
        }
    };
    crate::shutdown::within_grace(
        &format!("gRPC server on {local}"),
        serving,
        &shutdown,
        DRAIN_TIMEOUT,
    )
    .await
    // Cut short: the requests left are dropped with the runtime.
    .unwrap_or(Ok(()))
}

/// A lazily connecting channel to a server (a control-plane service) at
/// `addr` (`host:port` or a URL) with Caravan's timeouts; over TLS with the
/// process's identity when `[tls]` is enabled, whatever scheme `addr` names.
pub fn channel(addr: &str) -> Result<Channel, tonic::transport::Error> {
    channel_to(addr, crate::tls::Role::Server)
}

/// [`channel`] to a peer of `role`: with TLS its certificate must name it
/// (the gateway dials client nodes, whose certificates name `client`).
pub fn channel_to(addr: &str, role: crate::tls::Role) -> Result<Channel, tonic::transport::Error> {
    let endpoint = endpoint(addr)?
        .connect_timeout(Duration::from_secs(3))
        .tcp_nodelay(true)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .initial_stream_window_size(STREAM_WINDOW)
        .http2_keep_alive_interval(Duration::from_secs(20))
        .keep_alive_while_idle(true);
    Ok(match crate::tls::current() {
        Some(tls) => endpoint.connect_with_connector_lazy(tls.connector(role)),
        None => endpoint.connect_lazy(),
    })
}

/// An endpoint for `addr` (`host:port` or a URL). Always `http://`: with
/// TLS the process's connector ([`crate::tls::Tls::connector`]) does the
/// handshake, which tonic would otherwise try to do again.
pub fn endpoint(addr: &str) -> Result<Endpoint, tonic::transport::Error> {
    let authority = addr.split_once("://").map_or(addr, |(_, rest)| rest);
    Endpoint::from_shared(format!("http://{authority}"))
}

/// Client interceptor that carries the current span's trace to the callee.
pub fn propagate_trace(mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
    crate::trace::inject(req.metadata_mut());
    Ok(req)
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_loopback_listeners_are_private() {
        for private in ["127.0.0.1:4650", "[::1]:4650"] {
            assert!(!exposed(private.parse().unwrap()), "{private}");
        }
        for public in ["0.0.0.0:4650", "[::]:4650", "10.1.2.3:4650"] {
            assert!(exposed(public.parse().unwrap()), "{public}");
        }
    }

    use super::*;

    #[test]
    fn advertise_defaults_to_the_bound_address() {
        let any: SocketAddr = "0.0.0.0:4650".parse().unwrap();
        assert_eq!(advertise_addr("", any), "127.0.0.1:4650");
        let any6: SocketAddr = "[::]:4650".parse().unwrap();
        assert_eq!(advertise_addr("", any6), "[::1]:4650");
        let lo: SocketAddr = "10.1.2.3:99".parse().unwrap();
        assert_eq!(advertise_addr("", lo), "10.1.2.3:99");
        assert_eq!(advertise_addr("broker:4650", lo), "broker:4650");
    }

    #[tokio::test]
    async fn a_bad_grpc_addr_names_the_key() {
        let listener = listen("127.0.0.1:0").await.unwrap();
        assert_ne!(listener.local_addr().unwrap().port(), 0);
        let err = listen("not-an-address").await.unwrap_err();
        assert!(format!("{err:#}").starts_with("grpc_addr: cannot listen on not-an-address"));
    }

    #[tokio::test]
    async fn the_router_serves_health_and_reflection_of_its_services() {
        use tonic_health::pb::health_check_response::ServingStatus;
        use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
        use tonic_reflection::pb::v1::ServerReflectionRequest;
        use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
        use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
        use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

        const PROBE: &str = "caravan.v1.EvalBrokerService";
        let (listener, local) = bind("127.0.0.1:0").await.unwrap();
        let stop = CancellationToken::new();
        let router = router(&[PROBE]).await.unwrap();
        let serving = tokio::spawn(serve(router, listener, stop.clone()));
        let channel = channel(&local.to_string()).unwrap();
        let reply = HealthClient::new(channel.clone())
            .check(HealthCheckRequest {
                service: PROBE.to_string(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(reply.status(), ServingStatus::Serving);

        let request = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        };
        let mut replies = ServerReflectionClient::new(channel)
            .server_reflection_info(futures::stream::iter([request]))
            .await
            .unwrap()
            .into_inner();
        let Some(MessageResponse::ListServicesResponse(list)) =
            replies.message().await.unwrap().unwrap().message_response
        else {
            panic!("not a list of services");
        };
        let mut names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
        names.sort();
        assert_eq!(names, [PROBE, HEALTH_SERVICE, REFLECTION_SERVICE]);
        stop.cancel();
        serving.await.unwrap().unwrap();
    }
}

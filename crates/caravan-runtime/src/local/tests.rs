use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use caravan_store::{MemStore, Store};
use tokio_util::sync::CancellationToken;
use tonic::Code;
use tonic_health::ServingStatus;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

use super::*;
use crate::leader::{LeaderChannel, serve_as_leader};

/// The health service, reporting `service` as serving.
async fn health(
    service: &str,
) -> tonic_health::pb::health_server::HealthServer<impl tonic_health::pb::health_server::Health> {
    let (reporter, server) = tonic_health::server::health_reporter();
    reporter
        .set_service_status(service, ServingStatus::Serving)
        .await;
    server
}

fn check(service: &str) -> HealthCheckRequest {
    HealthCheckRequest {
        service: service.into(),
    }
}

/// Campaigns as the leader of `service` under `/local` at `address` until
/// the returned token is cancelled; returns once it leads.
async fn lead(
    store: &Arc<dyn Store>,
    service: &'static str,
    address: &'static str,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let stop = CancellationToken::new();
    let terms = Arc::new(AtomicUsize::new(0));
    let leading = {
        let (store, stop, terms) = (store.clone(), stop.clone(), terms.clone());
        tokio::spawn(async move {
            serve_as_leader(
                store,
                "/local",
                service,
                address,
                Duration::from_secs(5),
                stop,
                |_l, stop| {
                    let terms = terms.clone();
                    async move {
                        terms.fetch_add(1, Ordering::SeqCst);
                        stop.cancelled().await;
                    }
                },
            )
            .await
        })
    };
    tokio::time::timeout(Duration::from_secs(2), async {
        while terms.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("leads");
    (stop, leading)
}

#[tokio::test]
async fn a_leader_of_this_process_is_called_without_the_network() {
    enable();
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    // No listener at this address: only the direct path can answer.
    let address = "local-test-leader:1";
    let registered = register(address, health("caravan.v1.Probe").await).expect("enabled");
    let (stop, leading) = lead(&store, "probe", address).await;

    let channel = LeaderChannel::new(store.clone(), "/local", "probe");
    let transport = channel.channel().await.expect("leader known");
    assert!(transport.is_local(), "{transport:?}");
    let answer = HealthClient::new(transport)
        .check(check("caravan.v1.Probe"))
        .await
        .expect("answered in process")
        .into_inner();
    assert_eq!(answer.status(), ServingStatus::Serving.into());
    let counted = LOCAL_CALLS
        .with_label_values(&["/grpc.health.v1.Health/Check"])
        .get();
    assert!(counted >= 1, "direct calls are counted: {counted}");
    // The service's own refusals come back as they would over the wire.
    let unknown = HealthClient::new(channel.channel().await.unwrap())
        .check(check("caravan.v1.Nothing"))
        .await
        .expect_err("not served");
    assert_eq!(unknown.code(), Code::NotFound, "{unknown:?}");

    // Once the service is gone, a fresh lookup dials the address instead.
    drop(registered);
    channel.on_error(&tonic::Status::unavailable("gone"));
    let remote = channel.channel().await.expect("leader still named");
    assert!(!remote.is_local());

    stop.cancel();
    leading.await.unwrap();
}

#[tokio::test]
async fn a_direct_call_keeps_the_callers_deadline() {
    let never = tower::service_fn(|_req: http::Request<Body>| async {
        std::future::pending::<Result<http::Response<Body>, Infallible>>().await
    });
    let transport = Transport::Local(BoxCloneSyncService::new(never));
    let mut request = tonic::Request::new(check(""));
    request.set_timeout(Duration::from_millis(50));
    let started = tokio::time::Instant::now();
    let status = HealthClient::new(transport)
        .check(request)
        .await
        .expect_err("no answer");
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn a_newer_registration_outlives_the_one_it_replaced() {
    enable();
    let address = "local-test-replaced:1";
    let first = register(address, health("a").await).expect("enabled");
    let second = register(address, health("b").await).expect("enabled");
    drop(first);
    let service = lookup(address).expect("the second stays");
    let answer = HealthClient::new(Transport::Local(service))
        .check(check("b"))
        .await
        .expect("the second answers");
    assert_eq!(answer.into_inner().status(), ServingStatus::Serving.into());
    drop(second);
    assert!(lookup(address).is_none());
}

#[test]
fn grpc_timeouts_are_read_in_every_unit() {
    let header = |v: &str| {
        let mut h = http::HeaderMap::new();
        h.insert("grpc-timeout", v.parse().unwrap());
        grpc_timeout(&h)
    };
    assert_eq!(header("2H"), Some(Duration::from_secs(7200)));
    assert_eq!(header("3M"), Some(Duration::from_secs(180)));
    assert_eq!(header("5S"), Some(Duration::from_secs(5)));
    assert_eq!(header("250m"), Some(Duration::from_millis(250)));
    assert_eq!(header("7u"), Some(Duration::from_micros(7)));
    assert_eq!(header("9n"), Some(Duration::from_nanos(9)));
    assert_eq!(header("9x"), None);
    assert_eq!(header("m"), None);
    assert_eq!(grpc_timeout(&http::HeaderMap::new()), None);
}

/// A handler as the tests register one.
type AddOne = Arc<dyn Fn(u32) -> u32 + Send + Sync>;

/// A handler a service registered beside it: found by its type through the
/// leader's channel, called with the request as it stands, counted, and held
/// to the caller's deadline; a type it is not, or a remote leader, finds none.
#[tokio::test]
async fn a_registered_handler_is_called_with_the_request_as_it_stands() {
    enable();
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let address = "local-test-handler:1";
    let add_one: AddOne = Arc::new(|n| n + 1);
    let registered = register(address, health("").await)
        .expect("enabled")
        .with_handler(add_one);
    assert!(handler::<Arc<String>>(address).is_none(), "not that type");
    let (stop, leading) = lead(&store, "handler", address).await;
    let channel = LeaderChannel::new(store, "/local", "handler");
    assert!(
        channel.local_handler::<AddOne>().is_none(),
        "not resolved yet"
    );
    assert!(channel.channel().await.expect("leader known").is_local());
    let found = channel
        .local_handler::<AddOne>()
        .expect("the leader's handler");
    let before = LOCAL_CALLS.with_label_values(&["/test.Handler/Add"]).get();
    let answer = call_handler("/test.Handler/Add", Duration::from_secs(1), async {
        Ok::<_, tonic::Status>(found(41))
    })
    .await
    .expect("answered");
    assert_eq!(answer, 42);
    assert_eq!(
        LOCAL_CALLS.with_label_values(&["/test.Handler/Add"]).get(),
        before + 1
    );
    let late = call_handler(
        "/test.Handler/Add",
        Duration::from_millis(20),
        std::future::pending::<Result<u32, tonic::Status>>(),
    )
    .await
    .expect_err("no answer");
    assert_eq!(late.code(), Code::DeadlineExceeded, "{late:?}");
    drop(registered);
    assert!(handler::<AddOne>(address).is_none());
    stop.cancel();
    leading.await.unwrap();
}

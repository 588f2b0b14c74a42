//! The HTTP API on threads of its own (`caravan-http`): an operator's
//! request is answered while every worker of the gateway's main runtime is
//! taken (a burst of alloc streams, cache updates and status writes).

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::{Backend, TestGateway, http_from_elsewhere, saturate_runtime};
use crate::fixtures::{body, nomad_job};

/// With every worker of the gateway's runtime spinning, a job list is
/// answered; on etcd, where the gateway runs as its process does (job
/// writes on a lane of their own), so is a registration, after at most the
/// settle wait (the cache it waits for follows the store on the main
/// runtime), and once the burst ends the job reads back as soon as the
/// cache has caught up. On the embedded store the registration commits on
/// the main runtime, so it waits for the burst.
pub async fn http_is_answered_while_the_gateway_runtime_is_busy(backend: Backend) {
    let gw = TestGateway::start_like_a_process(backend, "http-busy-runtime", |_| {}).await;
    let addr = gw.bound.http;
    assert_eq!(gw.http("GET", "/v1/jobs", b"").await.status, 200);

    let busy = saturate_runtime();
    let listed = http_from_elsewhere(addr, "GET", "/v1/jobs", Vec::new())
        .recv_timeout(Duration::from_secs(5));
    let registered = match backend {
        Backend::Etcd => Some(
            http_from_elsewhere(addr, "PUT", "/v1/jobs", body(&nomad_job("busy", 1)))
                .recv_timeout(Duration::from_secs(5))
                .map(|r| (r.status, r.text())),
        ),
        Backend::Mem => None,
    };
    busy.store(false, Ordering::Relaxed);

    let listed = listed.expect("no job list within 5 s while the runtime was busy");
    assert_eq!(listed.status, 200, "{}", listed.text());
    if let Some(registered) = registered {
        let (status, text) =
            registered.expect("no registration within 5 s while the runtime was busy");
        assert_eq!(status, 200, "{text}");
        // Answered once the settle wait gave up, the write may not be in
        // the cache yet; it is once the cache has caught up.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let read = loop {
            let read = gw.http("GET", "/v1/job/busy", b"").await;
            if read.status != 404 || tokio::time::Instant::now() > deadline {
                break read;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(read.status, 200, "{}", read.text());
        assert_eq!(read.json()["ID"], "busy");
    }
    gw.stop().await;
}

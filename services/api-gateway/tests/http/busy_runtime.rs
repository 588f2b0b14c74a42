//! The HTTP API on threads of its own (`caravan-http`): an operator's
//! request is answered while every worker of the gateway's main runtime is
//! taken (a burst of alloc streams, cache updates and status writes).

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::{Backend, TestGateway, http_from_elsewhere, saturate_runtime};
use crate::fixtures::{body, nomad_job};

/// With every worker of the gateway's runtime spinning, a job list is
/// answered; on etcd, where the gateway runs as its process does (job
/// writes and the watch cache on lanes of their own), so is a registration,
/// and the job reads back at once. On the embedded store the registration
/// commits on the main runtime, so it waits for the burst.
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
    let read_back = registered.as_ref().map(|_| {
        http_from_elsewhere(addr, "GET", "/v1/job/busy", Vec::new())
            .recv_timeout(Duration::from_secs(5))
            .map(|r| r.status)
    });
    busy.store(false, Ordering::Relaxed);

    let listed = listed.expect("no job list within 5 s while the runtime was busy");
    assert_eq!(listed.status, 200, "{}", listed.text());
    if let Some(registered) = registered {
        let (status, text) =
            registered.expect("no registration within 5 s while the runtime was busy");
        assert_eq!(status, 200, "{text}");
    }
    if let Some(read_back) = read_back {
        assert_eq!(
            read_back.expect("no job read within 5 s while the runtime was busy"),
            200,
            "a registered job reads back from the same gateway"
        );
    }
    gw.stop().await;
}

//! Blocking queries over HTTP: `index` and `wait` hold a list until it
//! changes or the wait runs out.

use std::time::Duration;

use crate::common::{self, Backend, TestGateway};
use crate::fixtures::{body, nomad_job};

/// Registers job `web` and returns the job list's `X-Nomad-Index`.
async fn jobs_index_after_one_job(gw: &TestGateway) -> u64 {
    gw.http("PUT", "/v1/jobs", &body(&nomad_job("web", 1)))
        .await;
    let first = gw.http("GET", "/v1/jobs", b"").await;
    first.header("X-Nomad-Index").unwrap().parse().unwrap()
}

pub async fn an_idle_blocking_query_waits_out_its_wait_and_keeps_the_index(backend: Backend) {
    let gw = TestGateway::start(backend, "http-blocking-idle").await;
    let index = jobs_index_after_one_job(&gw).await;
    let started = tokio::time::Instant::now();
    let idle = gw
        .http("GET", &format!("/v1/jobs?index={index}&wait=300ms"), b"")
        .await;
    assert!(started.elapsed() >= Duration::from_millis(290));
    assert_eq!(idle.header("X-Nomad-Index").unwrap(), index.to_string());
    gw.stop().await;
}

pub async fn a_new_job_wakes_a_blocking_query_with_a_higher_index(backend: Backend) {
    let gw = TestGateway::start(backend, "http-blocking-wake").await;
    let index = jobs_index_after_one_job(&gw).await;
    let addr = gw.bound.http;
    let waiter = tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        let r = common::http(
            addr,
            "GET",
            &format!("/v1/jobs?index={index}&wait=30s"),
            b"",
        )
        .await;
        (r, started.elapsed())
    });
    // The write comes once the query waits: it must wake it, not meet it.
    gw.wait_blocked(1).await;
    assert!(!waiter.is_finished(), "the query waits for a change");
    gw.http("PUT", "/v1/jobs", &body(&nomad_job("api", 1)))
        .await;
    let (r, waited) = waiter.await.unwrap();
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    let new_index: u64 = r.header("X-Nomad-Index").unwrap().parse().unwrap();
    assert!(new_index > index);
    assert_eq!(r.json().as_array().unwrap().len(), 2);
    gw.stop().await;
}

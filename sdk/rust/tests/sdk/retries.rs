//! What the client retries: reads ride out a gateway that comes up late;
//! a write moves past an address that refuses connections; a write is not
//! sent twice when the gateway failed after taking it.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use caravan_cli::DevCluster;
use caravan_client::{Client, Error, RetryPolicy};

use crate::common::{WAIT, options, service_job};

/// A loopback port nothing listens on (for now).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_read_waits_for_a_gateway_that_comes_up_late() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let client = Client::builder()
        .address(format!("127.0.0.1:{port}"))
        .retry(RetryPolicy {
            rounds: 60,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(500),
        })
        .connect()
        .await
        .unwrap();
    // Nothing listens yet: with no retries the read fails unsent.
    let once = Client::builder()
        .address(format!("127.0.0.1:{port}"))
        .retry(RetryPolicy::none())
        .build()
        .unwrap();
    let err = once.jobs().list("").await.unwrap_err();
    assert!(matches!(err, Error::Unreachable { .. }), "{err:?}");

    let start = Instant::now();
    let options = caravan_cli::DevOptions {
        grpc_port: port,
        ..options(dir.path())
    };
    let starting = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        DevCluster::start(options)
            .await
            .expect("dev cluster starts")
    });
    let jobs = client.jobs().list("").await.unwrap();
    assert!(jobs.is_empty());
    assert!(
        start.elapsed() >= Duration::from_secs(1),
        "answered before the gateway was up"
    );
    let cluster = starting.await.unwrap();
    cluster.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_write_moves_past_a_refusing_address_but_is_not_sent_twice() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = crate::common::cluster(dir.path()).await;
    let dead = format!("127.0.0.1:{}", free_port());
    let client = Client::builder()
        .addresses([dead.clone(), cluster.address()])
        .build()
        .unwrap();
    assert_eq!(client.address(), dead);
    // The first address refuses the connection: the registration was never
    // sent, so it goes to the next address.
    let registered = client.jobs().register(service_job("web", 1)).await.unwrap();
    assert_eq!(
        client.address(),
        cluster.address(),
        "the live gateway is kept"
    );
    client
        .evals()
        .wait(&registered.eval_id, WAIT)
        .await
        .unwrap();
    assert_eq!(client.jobs().evaluations("web").await.unwrap().len(), 1);

    // An address that accepts the connection and then says nothing: after
    // the timeout the client cannot tell whether a write was applied, so it
    // does not send it on to the next address.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = silent.local_addr().unwrap();
    let accepted = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((conn, _)) = silent.accept().await {
            held.push(conn);
        }
    });
    let client = Client::builder()
        .addresses([silent_addr.to_string(), cluster.address()])
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let err = client
        .jobs()
        .register(service_job("api", 1))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(tonic::Code::DeadlineExceeded), "{err:?}");
    let reader = Client::connect(cluster.address()).await.unwrap();
    assert!(reader.jobs().get("api").await.unwrap_err().is_not_found());
    accepted.abort();
    cluster.stop().await.unwrap();
}

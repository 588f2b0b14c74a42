//! The conformance suite against a real etcd, named by `CARAVAN_TEST_ETCD`
//! (`scripts/test` starts one). Without it every test here fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod conformance;
mod frozen_member;
mod leadership;

use std::sync::Arc;

use caravan_store::{EtcdStore, Store};

async fn store() -> Arc<dyn Store> {
    let endpoints = caravan_testkit::etcd_endpoints();
    match EtcdStore::connect(&endpoints).await {
        Ok(store) => Arc::new(store),
        Err(err) => panic!("cannot reach the test etcd at {endpoints:?}: {err}"),
    }
}

conformance::all_cases!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    store
);
leadership::leadership_cases!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    store
);

/// A wrong endpoint fails within the connect timeout instead of hanging.
#[tokio::test]
async fn connecting_to_nothing_fails_fast() {
    let mut config = caravan_store::EtcdConfig::new(&["http://127.0.0.1:1"]);
    config.connect_timeout = std::time::Duration::from_millis(500);
    let started = tokio::time::Instant::now();
    match EtcdStore::connect_with(config).await {
        Err(caravan_store::StoreError::Unavailable(_)) => {}
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
}

/// A lease renewed over a kept-open stream and then revoked by another
/// client is reported gone on the next renewal.
/// A member that accepts connections and never answers (frozen, or cut off
/// mid-connection) costs its own timeout only: the members after it still
/// get theirs, so connecting and requests go on through them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_never_answers_does_not_use_up_the_others_time() {
    let hung = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hung_at = format!("http://{}", hung.local_addr().unwrap());
    // Connections are accepted and held, and nothing is ever said on them.
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((conn, _)) = hung.accept().await {
            held.push(conn);
        }
    });
    let mut endpoints = vec![hung_at];
    endpoints.extend(caravan_testkit::etcd_endpoints());
    let mut config = caravan_store::EtcdConfig::new(&endpoints);
    config.connect_timeout = std::time::Duration::from_millis(1500);
    config.request_timeout = std::time::Duration::from_millis(1500);
    let store = EtcdStore::connect_with(config)
        .await
        .expect("connected through the member that answers");
    store
        .current_revision()
        .await
        .expect("requests go to the member that answers");
    holder.abort();
}

/// A watch its watcher gives up for lagging the store leaves its member:
/// the store moves on to the next, so the watch opened again is elsewhere;
/// giving up a watch on a member already left moves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_watch_leaves_its_member() {
    // The test etcd twice: two members to move between.
    let endpoint = caravan_testkit::etcd_endpoints()[0].clone();
    let store = EtcdStore::connect(&[endpoint.clone(), endpoint])
        .await
        .unwrap();
    let prefix = caravan_testkit::unique_prefix("abandoned-watch");
    let first = store.watch(prefix.as_bytes(), 0).await.unwrap();
    assert_eq!(store.failovers(), 0);
    first.progress.abandon("silent in this test");
    assert_eq!(store.failovers(), 1, "the store left the watch's member");
    first.progress.abandon("silent in this test");
    assert_eq!(store.failovers(), 1, "that member was left already");
    let second = store.watch(prefix.as_bytes(), 0).await.unwrap();
    second.progress.request_progress().await.unwrap();
}

#[tokio::test]
async fn renewal_stream_notices_a_revoke_by_another_client() {
    let ours = store().await;
    let theirs = store().await;
    let lease = ours.lease_grant(30).await.unwrap();
    ours.lease_keep_alive(lease.id).await.unwrap();
    ours.lease_keep_alive(lease.id).await.unwrap();
    theirs.lease_revoke(lease.id).await.unwrap();
    match ours.lease_keep_alive(lease.id).await {
        Err(caravan_store::StoreError::LeaseNotFound(id)) => assert_eq!(id, lease.id),
        other => panic!("expected LeaseNotFound, got {other:?}"),
    }
}

/// The member list is etcd's own: the test etcd is among the members, by the
/// client URL it advertises.
#[tokio::test]
async fn members_are_the_etcd_clusters() {
    let endpoints = caravan_testkit::etcd_endpoints();
    let members = store().await.members().await.unwrap();
    assert!(
        members
            .iter()
            .any(|m| m.client_urls.iter().any(|u| endpoints.contains(u))),
        "{members:?} vs {endpoints:?}"
    );
}

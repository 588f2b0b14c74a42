//! The watcher's service tests against a real etcd, named by
//! `CARAVAN_TEST_ETCD` (`scripts/test` starts one). Without it every test
//! here fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cases;

use std::sync::Arc;

use caravan_store::{EtcdStore, Store};

async fn store() -> Arc<dyn Store> {
    let endpoints = caravan_testkit::etcd_endpoints();
    match EtcdStore::connect(&endpoints).await {
        Ok(store) => Arc::new(store),
        Err(err) => panic!("cannot reach the test etcd at {endpoints:?}: {err}"),
    }
}

cases::watcher_cases!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    store
);

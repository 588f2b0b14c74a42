//! The watcher's service tests on the embedded store.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cases;

use std::sync::Arc;

use caravan_store::{MemStore, Store};

async fn store() -> Arc<dyn Store> {
    Arc::new(MemStore::new())
}

cases::watcher_cases!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    store
);

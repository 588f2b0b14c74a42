//! The conformance suite against the embedded store, on a paused clock so
//! lease expiry takes no wall time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod conformance;
mod leadership;

use std::sync::Arc;

use caravan_store::{MemStore, Store};

async fn store() -> Arc<dyn Store> {
    Arc::new(MemStore::new())
}

conformance::all_cases!(
    #[tokio::test(start_paused = true)]
    store
);
leadership::leadership_cases!(
    #[tokio::test(start_paused = true)]
    store
);

/// The embedded store is a cluster of one member, without addresses.
#[tokio::test]
async fn the_embedded_store_is_one_member() {
    let members = store().await.members().await.unwrap();
    assert_eq!(members.len(), 1);
    assert!(members[0].leader && members[0].client_urls.is_empty());
}

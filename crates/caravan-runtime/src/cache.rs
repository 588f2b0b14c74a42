//! The watch cache a service keeps of the store: loaded before it serves,
//! stopped once nothing holds it any more.

use std::sync::Arc;

use anyhow::Context;
use caravan_state::{AllocDetail, Informer, InformerConfig, Keyspace};
use caravan_store::Store;

/// Loads a watch cache of everything under `prefix`, keeping allocations in
/// their lean copy: for the services that only read allocations (a rewrite
/// reads the store first).
pub async fn start_lean(store: &Arc<dyn Store>, prefix: &str) -> anyhow::Result<Arc<Informer>> {
    let informer = Informer::start(
        Arc::clone(store),
        Keyspace::new(prefix),
        InformerConfig {
            alloc_detail: AllocDetail::Scheduling,
            ..InformerConfig::default()
        },
    )
    .await
    .context("starting the watch cache")?;
    Ok(Arc::new(informer))
}

/// Stops `cache` when this is the last handle on it; otherwise it runs
/// until the others drop it.
pub async fn stop(cache: Arc<Informer>) {
    if let Ok(informer) = Arc::try_unwrap(cache) {
        informer.shutdown().await;
    }
}

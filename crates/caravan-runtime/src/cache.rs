//! The watch cache a service keeps of the store: loaded before it serves,
//! stopped once nothing holds it any more, and shared by every service of
//! one process that follows the same prefix on the same store connection
//! (`caravan server`, `caravan dev`): one watch and one decode of each
//! change instead of one per service.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Weak};

use anyhow::Context;
use caravan_state::{AllocDetail, Informer, InformerConfig, Keyspace};
use caravan_store::Store;
use parking_lot::Mutex;

/// Which lean caches can be shared: one store connection (by address; a
/// live cache holds its store, so the address is not reused meanwhile) and
/// one prefix.
type Key = (usize, String);

/// One shared cache, behind a lock that makes a second service starting on
/// the same key wait for the first one's list instead of listing again.
type Slot = Arc<tokio::sync::Mutex<Weak<Informer>>>;

/// The lean caches of this process.
static LEAN: LazyLock<Mutex<HashMap<Key, Slot>>> = LazyLock::new(Default::default);

/// Loads a watch cache of everything under `prefix`, keeping allocations in
/// their lean copy: for the services that only read allocations (a rewrite
/// reads the store first). A service of this process that already follows
/// `prefix` on this `store` shares its cache.
pub async fn start_lean(store: &Arc<dyn Store>, prefix: &str) -> anyhow::Result<Arc<Informer>> {
    let keyspace = Keyspace::new(prefix);
    let key = (
        Arc::as_ptr(store).cast::<()>() as usize,
        keyspace.prefix().to_string(),
    );
    let slot = {
        let mut lean = LEAN.lock();
        // A slot only the map holds, unlocked, whose cache has ended.
        lean.retain(|_, slot| {
            Arc::strong_count(slot) > 1 || slot.try_lock().map_or(true, |s| s.strong_count() > 0)
        });
        Arc::clone(lean.entry(key).or_default())
    };
    let mut slot = slot.lock().await;
    if let Some(shared) = slot.upgrade() {
        return Ok(shared);
    }
    let informer = Informer::start(Arc::clone(store), keyspace, lean_config())
        .await
        .context("starting the watch cache")?;
    let informer = Arc::new(informer);
    *slot = Arc::downgrade(&informer);
    Ok(informer)
}

/// The lean cache's configuration: allocations as scheduling reads them
/// (no placement metrics, task states only once finished or stopping).
pub fn lean_config() -> InformerConfig {
    InformerConfig {
        alloc_detail: AllocDetail::Scheduling,
        ..InformerConfig::default()
    }
}

/// Stops `cache` when this is the last handle on it; otherwise it runs
/// until the others drop it.
pub async fn stop(cache: Arc<Informer>) {
    if let Ok(informer) = Arc::try_unwrap(cache) {
        informer.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use caravan_store::MemStore;

    use super::*;

    #[tokio::test]
    async fn services_on_one_connection_and_prefix_share_one_cache() {
        let store: Arc<dyn Store> = Arc::new(MemStore::new());
        let other: Arc<dyn Store> = Arc::new(MemStore::new());
        let (a, b) = tokio::join!(start_lean(&store, "/p/"), start_lean(&store, "/p/"));
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(Arc::ptr_eq(&a, &b), "started together, listed once");
        let elsewhere = start_lean(&store, "/q/").await.unwrap();
        assert!(!Arc::ptr_eq(&a, &elsewhere), "another prefix");
        let apart = start_lean(&other, "/p/").await.unwrap();
        assert!(!Arc::ptr_eq(&a, &apart), "another connection");

        stop(a).await;
        let c = start_lean(&store, "/p/").await.unwrap();
        assert!(
            Arc::ptr_eq(&b, &c),
            "one stop leaves it to the other holder"
        );
        let weak = Arc::downgrade(&b);
        stop(b).await;
        stop(c).await;
        assert!(weak.upgrade().is_none(), "the last stop ends it");
        let fresh = start_lean(&store, "/p/").await.unwrap();
        assert_eq!(Arc::strong_count(&fresh), 1, "a new cache once all stopped");
    }
}

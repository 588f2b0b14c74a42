//! Conformance of leases: grant, renew, TTLs, revoke and expiry, and the keys
//! that go with them.

use std::sync::Arc;
use std::time::Duration;

use caravan_store::{EventKind, Store, StoreError};

use super::{key, next_events};

pub async fn grant_keepalive_ttl_revoke(store: Arc<dyn Store>, _prefix: String) {
    let lease = store.lease_grant(30).await.unwrap();
    assert!(lease.id > 0);
    assert_eq!(lease.ttl_secs, 30);
    let left = store.lease_time_to_live(lease.id).await.unwrap().unwrap();
    assert!((28..=30).contains(&left), "{left}s left");
    assert_eq!(store.lease_keep_alive(lease.id).await.unwrap(), 30);
    assert_eq!(store.lease_keep_alive(lease.id).await.unwrap(), 30);

    store.lease_revoke(lease.id).await.unwrap();
    assert_eq!(store.lease_time_to_live(lease.id).await.unwrap(), None);
    match store.lease_keep_alive(lease.id).await {
        Err(StoreError::LeaseNotFound(id)) => assert_eq!(id, lease.id),
        other => panic!("keepalive of a revoked lease: {other:?}"),
    }
    match store.lease_revoke(lease.id).await {
        Err(StoreError::LeaseNotFound(id)) => assert_eq!(id, lease.id),
        other => panic!("revoking twice: {other:?}"),
    }
    let other = store.lease_grant(30).await.unwrap();
    assert_ne!(other.id, lease.id);
    store.lease_revoke(other.id).await.unwrap();
}

pub async fn short_ttl_is_raised_not_refused(store: Arc<dyn Store>, _prefix: String) {
    // etcd raises TTLs below its minimum (2 s by default) instead of failing.
    for asked in [1, 0] {
        let lease = store.lease_grant(asked).await.unwrap();
        assert!(lease.ttl_secs >= 1, "asked {asked}, got {}", lease.ttl_secs);
        store.lease_revoke(lease.id).await.unwrap();
    }
    assert!(matches!(
        store.lease_grant(9_000_000_001).await,
        Err(StoreError::InvalidArgument(_))
    ));
}

pub async fn expiry_deletes_attached_keys(store: Arc<dyn Store>, prefix: String) {
    let lease = store.lease_grant(1).await.unwrap();
    let (a, b) = (key(&prefix, "a"), key(&prefix, "b"));
    store.put(&a, b"1", lease.id).await.unwrap();
    store.put(&b, b"1", lease.id).await.unwrap();
    store.put(&key(&prefix, "plain"), b"1", 0).await.unwrap();
    assert_eq!(store.get(&a).await.unwrap().unwrap().lease, lease.id);
    let mut watch = store.watch(prefix.as_bytes(), 0).await.unwrap();

    let batch = next_events(&mut watch).await;
    let deletes: Vec<_> = batch
        .events
        .iter()
        .map(|e| (e.kind, e.kv.key.clone()))
        .collect();
    assert_eq!(
        deletes,
        [
            (EventKind::Delete, a.clone()),
            (EventKind::Delete, b.clone())
        ],
        "both keys go in one revision when the lease expires"
    );
    assert_eq!(
        batch.events[0].kv.mod_revision,
        batch.events[1].kv.mod_revision
    );
    assert_eq!(store.get(&a).await.unwrap(), None);
    assert!(store.get(&key(&prefix, "plain")).await.unwrap().is_some());
    assert_eq!(store.lease_time_to_live(lease.id).await.unwrap(), None);
    assert!(matches!(
        store.lease_keep_alive(lease.id).await,
        Err(StoreError::LeaseNotFound(_))
    ));
}

pub async fn revoke_deletes_keys_in_one_revision(store: Arc<dyn Store>, prefix: String) {
    let lease = store.lease_grant(30).await.unwrap();
    for name in ["b", "a", "c"] {
        store
            .put(&key(&prefix, name), b"1", lease.id)
            .await
            .unwrap();
    }
    let mut watch = store.watch(prefix.as_bytes(), 0).await.unwrap();
    store.lease_revoke(lease.id).await.unwrap();
    let batch = next_events(&mut watch).await;
    assert_eq!(batch.events.len(), 3);
    let rev = batch.events[0].kv.mod_revision;
    assert!(
        batch
            .events
            .iter()
            .all(|e| e.kind == EventKind::Delete && e.kv.mod_revision == rev)
    );
    let left = store
        .range(caravan_store::Range::prefix(prefix.clone()))
        .await
        .unwrap();
    assert_eq!(left.count, 0);
}

pub async fn keepalive_keeps_keys_past_ttl(store: Arc<dyn Store>, prefix: String) {
    let lease = store.lease_grant(2).await.unwrap();
    let k = key(&prefix, "heartbeat");
    store.put(&k, b"", lease.id).await.unwrap();
    let ttl = Duration::from_secs(u64::try_from(lease.ttl_secs).unwrap());
    let until = tokio::time::Instant::now() + ttl * 2;
    while tokio::time::Instant::now() < until {
        tokio::time::sleep(ttl / 4).await;
        store.lease_keep_alive(lease.id).await.unwrap();
    }
    assert!(
        store.get(&k).await.unwrap().is_some(),
        "renewed leases keep their keys"
    );
    store.lease_revoke(lease.id).await.unwrap();
    assert_eq!(store.get(&k).await.unwrap(), None);
}

pub async fn put_with_unknown_lease_fails(store: Arc<dyn Store>, prefix: String) {
    let lease = store.lease_grant(30).await.unwrap();
    store.lease_revoke(lease.id).await.unwrap();
    let k = key(&prefix, "k");
    match store.put(&k, b"v", lease.id).await {
        Err(StoreError::LeaseNotFound(id)) => assert_eq!(id, lease.id),
        other => panic!("put on a revoked lease: {other:?}"),
    }
    assert_eq!(store.get(&k).await.unwrap(), None);
}

pub async fn reput_without_lease_detaches(store: Arc<dyn Store>, prefix: String) {
    let lease = store.lease_grant(30).await.unwrap();
    let k = key(&prefix, "k");
    store.put(&k, b"leased", lease.id).await.unwrap();
    store.put(&k, b"free", 0).await.unwrap();
    assert_eq!(store.get(&k).await.unwrap().unwrap().lease, 0);
    store.lease_revoke(lease.id).await.unwrap();
    let kv = store.get(&k).await.unwrap().unwrap();
    assert_eq!(kv.value, b"free", "a key put without the lease outlives it");
}

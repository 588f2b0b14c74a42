//! Behaviour of the embedded store that the conformance suite cannot reach
//! on etcd: its bounded history, slow watchers, batch sizes and abandoned
//! campaigns.

use std::time::Duration;

use futures::StreamExt;

use super::{MemStore, MemStoreConfig};
use crate::{Op, Range, Store, StoreError, Txn};

fn with_history(history_revisions: i64) -> MemStore {
    MemStore::with_config(MemStoreConfig {
        history_revisions,
        ..MemStoreConfig::default()
    })
}

#[tokio::test]
async fn history_is_bounded_to_the_configured_revisions() {
    let store = with_history(5);
    let first = store.put(b"k", b"0", 0).await.unwrap();
    for i in 1..20 {
        store.put(b"k", i.to_string().as_bytes(), 0).await.unwrap();
    }
    let current = store.current_revision().await.unwrap();
    assert_eq!(store.compact_revision(), current - 5);
    assert!(matches!(
        store.range(Range::key("k").at_revision(first)).await,
        Err(StoreError::Compacted { .. })
    ));
    let kept = store
        .range(Range::key("k").at_revision(current - 5))
        .await
        .unwrap();
    assert_eq!(kept.kvs[0].value, b"14");
    let mut watch = store.watch(b"k", current - 5).await.unwrap();
    let batch = watch.stream.next().await.unwrap().unwrap();
    assert_eq!(
        batch.events.len(),
        6,
        "revisions current-5..=current replay"
    );
}

#[tokio::test]
async fn a_slow_watcher_never_blocks_writers_and_learns_it_fell_behind() {
    let store = with_history(10);
    let mut watch = store.watch(b"k", 0).await.unwrap();
    for i in 0..100 {
        store.put(b"k", i.to_string().as_bytes(), 0).await.unwrap();
    }
    match watch.stream.next().await {
        Some(Err(StoreError::Compacted { .. })) => {}
        other => panic!("expected Compacted, got {other:?}"),
    }
    assert!(watch.stream.next().await.is_none());
}

#[tokio::test]
async fn a_large_transaction_arrives_whole() {
    let store = MemStore::new();
    let mut watch = store.watch(b"big/", 0).await.unwrap();
    let mut txn = Txn::new();
    for i in 0..3000 {
        txn = txn.and_then(Op::put(format!("big/{i:05}"), "v"));
    }
    let res = store.txn(txn).await.unwrap();
    store.put(b"big/after", b"v", 0).await.unwrap();
    let batch = watch.stream.next().await.unwrap().unwrap();
    assert_eq!(batch.events.len(), 3000, "one revision is never split");
    assert_eq!(batch.revision, res.revision, "nor joined past the cap");
    let next = watch.stream.next().await.unwrap().unwrap();
    assert_eq!(next.events.len(), 1);
}

#[tokio::test]
async fn an_abandoned_campaign_withdraws_its_key() {
    let store = MemStore::new();
    let (a, b) = (
        store.lease_grant(30).await.unwrap(),
        store.lease_grant(30).await.unwrap(),
    );
    store.campaign(b"svc", b"a", a.id).await.unwrap();
    let waiting = {
        let store = store.clone();
        tokio::spawn(async move { store.campaign(b"svc", b"b", b.id).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let candidates = store.range(Range::prefix("svc/")).await.unwrap();
    assert_eq!(candidates.count, 2);
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    let candidates = store.range(Range::prefix("svc/")).await.unwrap();
    assert_eq!(candidates.count, 1, "the waiting candidate's key is gone");
    assert_eq!(candidates.kvs[0].value, b"a");
}

#[tokio::test(start_paused = true)]
async fn leases_expire_on_the_tokio_clock_without_any_call() {
    let store = MemStore::new();
    let lease = store.lease_grant(5).await.unwrap();
    store.put(b"hb/1", b"", lease.id).await.unwrap();
    let mut watch = store.watch(b"hb/", 0).await.unwrap();
    let before = tokio::time::Instant::now();
    let batch = watch.stream.next().await.unwrap().unwrap();
    assert_eq!(batch.events[0].kind, crate::EventKind::Delete);
    assert_eq!(before.elapsed(), Duration::from_secs(5));
}

//! Conformance of watches: order, batching by revision, replay from a past
//! revision, compaction, prefixes and progress notifications.

use std::sync::Arc;

use caravan_store::{EventKind, Op, Range, Store, StoreError, Txn, WatchBatch};

use super::{PATIENCE, assert_quiet, key, next_batch, next_events, retry_if_compacted};

/// Gathers batches until `n` events arrived.
async fn events(watch: &mut caravan_store::Watch, n: usize) -> Vec<WatchBatch> {
    let mut batches = Vec::new();
    let mut seen = 0;
    while seen < n {
        let batch = next_events(watch).await;
        seen += batch.events.len();
        batches.push(batch);
    }
    assert_eq!(seen, n, "more events than expected");
    batches
}

pub async fn delivers_puts_and_deletes_in_order(store: Arc<dyn Store>, prefix: String) {
    let mut watch = store.watch(prefix.as_bytes(), 0).await.unwrap();
    let (a, b) = (key(&prefix, "a"), key(&prefix, "b"));
    let r1 = store.put(&a, b"1", 0).await.unwrap();
    let r2 = store.put(&b, b"1", 0).await.unwrap();
    let r3 = store.put(&a, b"2", 0).await.unwrap();
    let r4 = store.delete(Range::key(a.clone())).await.unwrap().revision;

    let batches = events(&mut watch, 4).await;
    let seen: Vec<_> = batches.iter().flat_map(|b| b.events.clone()).collect();
    let summary: Vec<_> = seen
        .iter()
        .map(|e| (e.kind, e.kv.key.clone(), e.kv.mod_revision))
        .collect();
    assert_eq!(
        summary,
        [
            (EventKind::Put, a.clone(), r1),
            (EventKind::Put, b.clone(), r2),
            (EventKind::Put, a.clone(), r3),
            (EventKind::Delete, a.clone(), r4),
        ]
    );
    assert_eq!(seen[0].kv.value, b"1");
    assert_eq!((seen[0].kv.create_revision, seen[0].kv.version), (r1, 1));
    assert_eq!((seen[2].kv.create_revision, seen[2].kv.version), (r1, 2));
    let delete = &seen[3].kv;
    assert!(delete.value.is_empty());
    assert_eq!((delete.create_revision, delete.version), (0, 0));
    for batch in &batches {
        let last = batch.events.last().unwrap().kv.mod_revision;
        assert!(
            batch.revision >= last,
            "a batch never claims less than it holds"
        );
    }
}

pub async fn txn_events_come_in_one_batch(store: Arc<dyn Store>, prefix: String) {
    let old = key(&prefix, "old");
    store.put(&old, b"x", 0).await.unwrap();
    let mut watch = store.watch(prefix.as_bytes(), 0).await.unwrap();
    let txn = Txn::new()
        .and_then(Op::put(key(&prefix, "z"), "1"))
        .and_then(Op::delete(old.clone()))
        .and_then(Op::put(key(&prefix, "a"), "1"));
    let res = store.txn(txn).await.unwrap();
    let batch = next_events(&mut watch).await;
    let summary: Vec<_> = batch
        .events
        .iter()
        .map(|e| (e.kind, e.kv.key.clone(), e.kv.mod_revision))
        .collect();
    assert_eq!(
        summary,
        [
            (EventKind::Put, key(&prefix, "z"), res.revision),
            (EventKind::Delete, old, res.revision),
            (EventKind::Put, key(&prefix, "a"), res.revision),
        ],
        "one batch, in the transaction's order"
    );
    assert!(batch.revision >= res.revision);
}

pub async fn from_past_revision(store: Arc<dyn Store>, prefix: String) {
    retry_if_compacted(|| async {
        let r1 = store.put(&key(&prefix, "a"), b"1", 0).await.unwrap();
        let r2 = store.put(&key(&prefix, "b"), b"1", 0).await.unwrap();
        let r3 = store
            .delete(Range::key(key(&prefix, "a")))
            .await
            .unwrap()
            .revision;
        let mut watch = store.watch(prefix.as_bytes(), r2).await?;
        let mut seen = Vec::new();
        while seen.len() < 2 {
            let batch = next_batch(&mut watch).await?;
            seen.extend(
                batch
                    .events
                    .into_iter()
                    .map(|e| (e.kind, e.kv.mod_revision)),
            );
        }
        assert!(r1 < r2);
        assert_eq!(seen, [(EventKind::Put, r2), (EventKind::Delete, r3)]);
        let r4 = store.put(&key(&prefix, "c"), b"1", 0).await.unwrap();
        let live = next_events(&mut watch).await;
        assert_eq!(live.events[0].kv.mod_revision, r4, "then it goes on live");
        Ok(())
    })
    .await;
}

pub async fn from_compacted_revision_fails(store: Arc<dyn Store>, prefix: String) {
    let k = key(&prefix, "k");
    let r1 = store.put(&k, b"1", 0).await.unwrap();
    let r2 = store.put(&k, b"2", 0).await.unwrap();
    match store.compact(r2).await {
        Ok(()) | Err(StoreError::Compacted { .. }) => {}
        Err(err) => panic!("compact failed: {err}"),
    }
    let mut watch = store.watch(prefix.as_bytes(), r1).await.unwrap();
    match next_batch(&mut watch).await {
        Err(StoreError::Compacted {
            requested,
            compact_revision,
        }) => {
            assert_eq!(requested, r1);
            assert!(compact_revision >= r2);
        }
        other => panic!("expected Compacted first, got {other:?}"),
    }
    let end = tokio::time::timeout(PATIENCE, futures::StreamExt::next(&mut watch.stream)).await;
    assert!(matches!(end, Ok(None)), "the stream ends after the error");
}

pub async fn sees_only_its_prefix(store: Arc<dyn Store>, prefix: String) {
    let dir = format!("{prefix}dir/");
    let mut watch = store.watch(dir.as_bytes(), 0).await.unwrap();
    store.put(&key(&prefix, "dir"), b"x", 0).await.unwrap();
    store.put(&key(&prefix, "dirx"), b"x", 0).await.unwrap();
    store.put(&key(&prefix, "other"), b"x", 0).await.unwrap();
    let mine = store.put(&key(&dir, "a"), b"x", 0).await.unwrap();
    let batch = next_events(&mut watch).await;
    assert_eq!(batch.events.len(), 1);
    assert_eq!(batch.events[0].kv.key, key(&dir, "a"));
    assert_eq!(batch.events[0].kv.mod_revision, mine);
    assert_quiet(&mut watch).await;
}

pub async fn progress_follows_earlier_events(store: Arc<dyn Store>, prefix: String) {
    let mut watch = store.watch(prefix.as_bytes(), 0).await.unwrap();
    let r1 = store.put(&key(&prefix, "a"), b"1", 0).await.unwrap();
    let r2 = store.put(&key(&prefix, "b"), b"1", 0).await.unwrap();
    watch.progress.request_progress().await.unwrap();
    let mut seen = Vec::new();
    let progress = loop {
        let batch = next_batch(&mut watch).await.unwrap();
        if batch.events.is_empty() {
            break batch;
        }
        seen.extend(batch.events.iter().map(|e| e.kv.mod_revision));
    };
    assert_eq!(
        seen,
        [r1, r2],
        "every earlier event comes before the progress"
    );
    assert!(progress.revision >= r2);
}

pub async fn progress_on_idle_watch(store: Arc<dyn Store>, prefix: String) {
    let before = store.current_revision().await.unwrap();
    let mut watch = store.watch(prefix.as_bytes(), 0).await.unwrap();
    for _ in 0..2 {
        watch.progress.request_progress().await.unwrap();
        let batch = next_batch(&mut watch).await.unwrap();
        assert!(batch.events.is_empty());
        assert!(batch.revision >= before);
    }
    assert_quiet(&mut watch).await;
}

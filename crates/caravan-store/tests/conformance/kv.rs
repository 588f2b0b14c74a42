//! Conformance of plain reads and writes: revisions, ranges, past reads and
//! compaction.

use std::sync::Arc;

use caravan_store::{Range, Store, StoreError};

use super::{key, retry_if_compacted, without_concurrent_writes};

pub async fn put_get_delete(store: Arc<dyn Store>, prefix: String) {
    let k = key(&prefix, "a");
    assert_eq!(store.get(&k).await.unwrap(), None);

    let r1 = store.put(&k, b"one", 0).await.unwrap();
    let kv = store.get(&k).await.unwrap().unwrap();
    assert_eq!(kv.key, k);
    assert_eq!(kv.value, b"one");
    assert_eq!(kv.create_revision, r1);
    assert_eq!(kv.mod_revision, r1);
    assert_eq!(kv.version, 1);
    assert_eq!(kv.lease, 0);

    let r2 = store.put(&k, b"two", 0).await.unwrap();
    assert!(r2 > r1);
    let kv = store.get(&k).await.unwrap().unwrap();
    assert_eq!(kv.value, b"two");
    assert_eq!(
        kv.create_revision, r1,
        "an update keeps the create revision"
    );
    assert_eq!(kv.mod_revision, r2);
    assert_eq!(kv.version, 2);

    let del = store.delete(Range::key(k.clone())).await.unwrap();
    assert_eq!(del.deleted, 1);
    assert!(del.revision > r2);
    assert_eq!(store.get(&k).await.unwrap(), None);

    let r4 = store.put(&k, b"three", 0).await.unwrap();
    let kv = store.get(&k).await.unwrap().unwrap();
    assert_eq!(kv.create_revision, r4, "a re-created key starts over");
    assert_eq!(kv.version, 1);
}

pub async fn delete_of_nothing_is_no_revision(store: Arc<dyn Store>, prefix: String) {
    let k = key(&prefix, "never-written");
    let (before, del) =
        without_concurrent_writes(&store, || store.delete(Range::key(k.clone()))).await;
    let del = del.unwrap();
    assert_eq!(del.deleted, 0);
    assert_eq!(del.revision, before);
}

pub async fn range_prefix_limit_count_keys_only(store: Arc<dyn Store>, prefix: String) {
    let dir = format!("{prefix}dir/");
    for name in ["c", "a", "e", "b", "d"] {
        store
            .put(&key(&dir, name), name.as_bytes(), 0)
            .await
            .unwrap();
    }
    // Siblings that share the prefix's text but not its directory.
    store.put(&key(&prefix, "dir"), b"x", 0).await.unwrap();
    store.put(&key(&prefix, "dirx"), b"x", 0).await.unwrap();

    let all = store.range(Range::prefix(dir.clone())).await.unwrap();
    let names: Vec<_> = all.kvs.iter().map(|kv| kv.value.clone()).collect();
    assert_eq!(names, [b"a", b"b", b"c", b"d", b"e"], "key order");
    assert_eq!(all.count, 5);
    assert!(!all.more);
    assert!(all.revision >= all.kvs.iter().map(|kv| kv.mod_revision).max().unwrap());

    let page = store
        .range(Range::prefix(dir.clone()).with_limit(2))
        .await
        .unwrap();
    assert_eq!(page.kvs.len(), 2);
    assert_eq!(page.kvs[0].key, key(&dir, "a"));
    assert_eq!(page.kvs[1].key, key(&dir, "b"));
    assert!(page.more);
    assert_eq!(page.count, 5, "count ignores the limit");

    let exact = store
        .range(Range::prefix(dir.clone()).with_limit(5))
        .await
        .unwrap();
    assert_eq!(exact.kvs.len(), 5);
    assert!(!exact.more);

    let keys = store
        .range(Range::prefix(dir.clone()).keys_only())
        .await
        .unwrap();
    assert_eq!(keys.kvs.len(), 5);
    assert!(keys.kvs.iter().all(|kv| kv.value.is_empty()));
    assert!(
        keys.kvs
            .iter()
            .all(|kv| kv.version == 1 && kv.mod_revision > 0)
    );

    let empty = store
        .range(Range::prefix(format!("{prefix}nothing/")))
        .await
        .unwrap();
    assert!(empty.kvs.is_empty());
    assert_eq!(empty.count, 0);
}

pub async fn range_between_and_single_key(store: Arc<dyn Store>, prefix: String) {
    for name in ["a", "b", "c", "d"] {
        store.put(&key(&prefix, name), b"v", 0).await.unwrap();
    }
    let mid = store
        .range(Range::between(key(&prefix, "b"), key(&prefix, "d")))
        .await
        .unwrap();
    let got: Vec<_> = mid.kvs.iter().map(|kv| kv.key.clone()).collect();
    assert_eq!(
        got,
        [key(&prefix, "b"), key(&prefix, "c")],
        "end is exclusive"
    );

    let one = store.range(Range::key(key(&prefix, "c"))).await.unwrap();
    assert_eq!(one.kvs.len(), 1);
    assert_eq!(one.count, 1);
    let none = store.range(Range::key(key(&prefix, "cc"))).await.unwrap();
    assert_eq!(none.count, 0);
}

pub async fn range_at_past_revision(store: Arc<dyn Store>, prefix: String) {
    let k = key(&prefix, "k");
    retry_if_compacted(|| async {
        let r1 = store.put(&k, b"v1", 0).await.unwrap();
        let r2 = store.put(&k, b"v2", 0).await.unwrap();
        let r3 = store.delete(Range::key(k.clone())).await.unwrap().revision;

        let at1 = store.range(Range::key(k.clone()).at_revision(r1)).await?;
        assert_eq!(at1.kvs[0].value, b"v1");
        assert_eq!(at1.kvs[0].mod_revision, r1);
        let at2 = store.range(Range::key(k.clone()).at_revision(r2)).await?;
        assert_eq!(at2.kvs[0].value, b"v2");
        assert_eq!(at2.kvs[0].version, 2);
        let at3 = store.range(Range::key(k.clone()).at_revision(r3)).await?;
        assert!(at3.kvs.is_empty(), "deleted at r3");
        let before = store
            .range(Range::prefix(prefix.clone()).at_revision(r1 - 1))
            .await?;
        assert_eq!(before.count, 0, "nothing existed before r1");
        Ok(())
    })
    .await;
}

pub async fn range_at_future_revision(store: Arc<dyn Store>, prefix: String) {
    let current = store.current_revision().await.unwrap();
    let ahead = current + 1_000_000;
    match store
        .range(Range::prefix(prefix.clone()).at_revision(ahead))
        .await
    {
        Err(StoreError::FutureRevision {
            requested,
            current: now,
        }) => {
            assert_eq!(requested, ahead);
            assert!(now >= current, "the error names the current revision");
        }
        other => panic!("expected FutureRevision, got {other:?}"),
    }
}

pub async fn compaction_fails_old_reads(store: Arc<dyn Store>, prefix: String) {
    let k = key(&prefix, "k");
    let r1 = store.put(&k, b"v1", 0).await.unwrap();
    let r2 = store.put(&k, b"v2", 0).await.unwrap();
    // Compacting only up to this test's own last write; a concurrent test may
    // have compacted further already, which serves the test just as well.
    match store.compact(r2).await {
        Ok(()) | Err(StoreError::Compacted { .. }) => {}
        Err(err) => panic!("compact failed: {err}"),
    }
    match store.range(Range::key(k.clone()).at_revision(r1)).await {
        Err(StoreError::Compacted { requested, .. }) => assert_eq!(requested, r1),
        other => panic!("expected Compacted, got {other:?}"),
    }
    match store.compact(r1).await {
        Err(StoreError::Compacted { .. }) => {}
        other => panic!("compacting again below the compaction point: {other:?}"),
    }
    let current = store.current_revision().await.unwrap();
    match store.compact(current + 1_000_000).await {
        Err(StoreError::FutureRevision { .. }) => {}
        other => panic!("compacting the future: {other:?}"),
    }
    let latest = store.get(&k).await.unwrap().unwrap();
    assert_eq!(latest.value, b"v2", "compaction keeps the latest state");
    assert_eq!(latest.version, 2);
    assert_eq!(latest.create_revision, r1);
}

pub async fn empty_key_is_refused(store: Arc<dyn Store>, _prefix: String) {
    assert!(matches!(
        store.put(b"", b"v", 0).await,
        Err(StoreError::InvalidArgument(_))
    ));
    assert!(matches!(
        store.range(Range::key(Vec::new())).await,
        Err(StoreError::InvalidArgument(_))
    ));
}

pub async fn too_large_request_is_refused(store: Arc<dyn Store>, prefix: String) {
    // Caravan's etcd accepts requests up to 32 MiB (--max-request-bytes).
    let k = key(&prefix, "huge");
    let value = vec![b'x'; 33 * 1024 * 1024];
    match store.put(&k, &value, 0).await {
        Err(StoreError::InvalidArgument(_)) => {}
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    assert_eq!(store.get(&k).await.unwrap(), None);
}

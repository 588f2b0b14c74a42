//! Conformance of transactions: one revision for all writes, every kind of
//! compare, both branches, reads inside a transaction, and refusals.

use std::sync::Arc;

use caravan_store::{Compare, CompareOp, Op, OpResult, Range, Store, StoreError, Txn, TxnResult};

use super::{key, without_concurrent_writes};

fn get_result(res: &TxnResult, i: usize) -> &caravan_store::RangeResult {
    match &res.results[i] {
        OpResult::Get(range) => range,
        other => panic!("op {i} is not a get: {other:?}"),
    }
}

pub async fn writes_share_one_revision(store: Arc<dyn Store>, prefix: String) {
    store.put(&key(&prefix, "old"), b"x", 0).await.unwrap();
    let txn = Txn::new()
        .and_then(Op::put(key(&prefix, "a"), "1"))
        .and_then(Op::put(key(&prefix, "b"), "2"))
        .and_then(Op::delete(key(&prefix, "old")))
        .and_then(Op::put(key(&prefix, "c"), "3"));
    let res = store.txn(txn).await.unwrap();
    assert!(res.succeeded);
    assert_eq!(
        res.results,
        [
            OpResult::Put,
            OpResult::Put,
            OpResult::Delete(1),
            OpResult::Put
        ]
    );
    for name in ["a", "b", "c"] {
        let kv = store.get(&key(&prefix, name)).await.unwrap().unwrap();
        assert_eq!(kv.mod_revision, res.revision, "{name}");
        assert_eq!(kv.create_revision, res.revision, "{name}");
    }
    assert_eq!(store.get(&key(&prefix, "old")).await.unwrap(), None);
}

pub async fn read_only_txn_is_no_revision(store: Arc<dyn Store>, prefix: String) {
    let k = key(&prefix, "k");
    store.put(&k, b"v", 0).await.unwrap();
    let txn = Txn::new()
        .when(Compare::present(k.clone()))
        .and_then(Op::get(k.clone()))
        .and_then(Op::delete(key(&prefix, "missing")));
    let (before, res) = without_concurrent_writes(&store, || store.txn(txn.clone())).await;
    let res = res.unwrap();
    assert!(res.succeeded);
    assert_eq!(res.revision, before, "no write, no new revision");
    assert_eq!(get_result(&res, 0).kvs[0].value, b"v");
    assert_eq!(res.results[1], OpResult::Delete(0));
}

pub async fn compare_value(store: Arc<dyn Store>, prefix: String) {
    let k = key(&prefix, "k");
    store.put(&k, b"m", 0).await.unwrap();
    let holds = |op, value: &'static str| {
        let store = store.clone();
        let k = k.clone();
        async move {
            let txn = Txn::new().when(Compare::value(k, op, value));
            store.txn(txn).await.unwrap().succeeded
        }
    };
    assert!(holds(CompareOp::Equal, "m").await);
    assert!(!holds(CompareOp::Equal, "n").await);
    assert!(holds(CompareOp::NotEqual, "n").await);
    assert!(!holds(CompareOp::NotEqual, "m").await);
    assert!(holds(CompareOp::Less, "n").await, "m < n, bytewise");
    assert!(!holds(CompareOp::Less, "m").await);
    assert!(holds(CompareOp::Greater, "l").await);
    assert!(holds(CompareOp::Greater, "").await);

    // etcd: any value compare on a missing key fails, even NotEqual.
    let missing = key(&prefix, "missing");
    for op in [CompareOp::Equal, CompareOp::NotEqual, CompareOp::Greater] {
        let txn = Txn::new().when(Compare::value(missing.clone(), op, "x"));
        assert!(!store.txn(txn).await.unwrap().succeeded, "{op:?}");
    }
}

pub async fn compare_mod_revision(store: Arc<dyn Store>, prefix: String) {
    let k = key(&prefix, "k");
    let r1 = store.put(&k, b"v1", 0).await.unwrap();
    let guarded = |rev| {
        Txn::new()
            .when(Compare::mod_revision(k.clone(), CompareOp::Equal, rev))
            .and_then(Op::put(k.clone(), "v2"))
    };
    let ok = store.txn(guarded(r1)).await.unwrap();
    assert!(ok.succeeded);
    let stale = store.txn(guarded(r1)).await.unwrap();
    assert!(!stale.succeeded, "the first write moved the mod revision");
    assert!(stale.results.is_empty());
    let kv = store.get(&k).await.unwrap().unwrap();
    assert_eq!(kv.mod_revision, ok.revision);
    assert_eq!(kv.value, b"v2");

    let newer = Txn::new().when(Compare::mod_revision(k.clone(), CompareOp::Greater, r1));
    assert!(store.txn(newer).await.unwrap().succeeded);
    let older = Txn::new().when(Compare::mod_revision(k.clone(), CompareOp::Less, r1));
    assert!(!store.txn(older).await.unwrap().succeeded);
    let absent = Txn::new().when(Compare::mod_revision(
        key(&prefix, "missing"),
        CompareOp::Equal,
        0,
    ));
    assert!(
        store.txn(absent).await.unwrap().succeeded,
        "a missing key has 0"
    );
}

pub async fn compare_create_revision_and_absence(store: Arc<dyn Store>, prefix: String) {
    let k = key(&prefix, "k");
    let create = Txn::new()
        .when(Compare::absent(k.clone()))
        .and_then(Op::put(k.clone(), "first"))
        .or_else(Op::get(k.clone()));
    let first = store.txn(create.clone()).await.unwrap();
    assert!(first.succeeded);
    let second = store.txn(create).await.unwrap();
    assert!(!second.succeeded, "the key exists now");
    let existing = &get_result(&second, 0).kvs[0];
    assert_eq!(existing.value, b"first");
    assert_eq!(existing.create_revision, first.revision);

    store.put(&k, b"again", 0).await.unwrap();
    let fenced = Txn::new()
        .when(Compare::create_revision(
            k.clone(),
            CompareOp::Equal,
            first.revision,
        ))
        .and_then(Op::put(key(&prefix, "fenced"), "yes"));
    assert!(
        store.txn(fenced.clone()).await.unwrap().succeeded,
        "an update keeps the create revision"
    );
    store.delete(Range::key(k.clone())).await.unwrap();
    store.put(&k, b"reborn", 0).await.unwrap();
    assert!(
        !store.txn(fenced).await.unwrap().succeeded,
        "a re-created key has a new create revision"
    );
    let present = Txn::new().when(Compare::present(k.clone()));
    assert!(store.txn(present).await.unwrap().succeeded);
}

pub async fn compare_version(store: Arc<dyn Store>, prefix: String) {
    let k = key(&prefix, "k");
    let at = |op, version| Txn::new().when(Compare::version(k.clone(), op, version));
    assert!(store.txn(at(CompareOp::Equal, 0)).await.unwrap().succeeded);
    store.put(&k, b"1", 0).await.unwrap();
    store.put(&k, b"2", 0).await.unwrap();
    assert!(store.txn(at(CompareOp::Equal, 2)).await.unwrap().succeeded);
    assert!(
        store
            .txn(at(CompareOp::Greater, 1))
            .await
            .unwrap()
            .succeeded
    );
    assert!(store.txn(at(CompareOp::Less, 3)).await.unwrap().succeeded);
    assert!(
        !store
            .txn(at(CompareOp::NotEqual, 2))
            .await
            .unwrap()
            .succeeded
    );
}

pub async fn failure_branch_runs_its_ops(store: Arc<dyn Store>, prefix: String) {
    let k = key(&prefix, "k");
    store.put(&k, b"actual", 0).await.unwrap();
    let txn = Txn::new()
        .when(Compare::value(k.clone(), CompareOp::Equal, "expected"))
        .when(Compare::present(k.clone()))
        .and_then(Op::put(key(&prefix, "success"), "1"))
        .or_else(Op::put(key(&prefix, "failure"), "1"))
        .or_else(Op::Get(Range::prefix(prefix.clone())));
    let res = store.txn(txn).await.unwrap();
    assert!(!res.succeeded, "one failing compare fails them all");
    assert_eq!(res.results.len(), 2);
    assert_eq!(res.results[0], OpResult::Put);
    let seen = get_result(&res, 1);
    let keys: Vec<_> = seen.kvs.iter().map(|kv| kv.key.clone()).collect();
    assert_eq!(keys, [key(&prefix, "failure"), k.clone()]);
    assert_eq!(seen.kvs[0].mod_revision, res.revision);
    assert_eq!(store.get(&key(&prefix, "success")).await.unwrap(), None);
}

pub async fn get_sees_earlier_write_of_same_txn(store: Arc<dyn Store>, prefix: String) {
    let k = key(&prefix, "k");
    store.put(&k, b"before", 0).await.unwrap();
    let txn = Txn::new()
        .and_then(Op::get(k.clone()))
        .and_then(Op::put(k.clone(), "after"))
        .and_then(Op::get(k.clone()));
    let res = store.txn(txn).await.unwrap();
    assert_eq!(get_result(&res, 0).kvs[0].value, b"before");
    let after = &get_result(&res, 2).kvs[0];
    assert_eq!(after.value, b"after");
    assert_eq!(after.mod_revision, res.revision);
}

pub async fn duplicate_key_is_refused(store: Arc<dyn Store>, prefix: String) {
    let k = key(&prefix, "k");
    let twice = Txn::new()
        .and_then(Op::put(k.clone(), "1"))
        .and_then(Op::put(k.clone(), "2"));
    assert!(matches!(
        store.txn(twice).await,
        Err(StoreError::InvalidArgument(_))
    ));
    let put_and_delete = Txn::new()
        .and_then(Op::put(k.clone(), "1"))
        .and_then(Op::Delete(Range::prefix(prefix.clone())));
    assert!(matches!(
        store.txn(put_and_delete).await,
        Err(StoreError::InvalidArgument(_))
    ));
    assert_eq!(store.get(&k).await.unwrap(), None, "nothing was written");
}

pub async fn too_many_ops_is_refused(store: Arc<dyn Store>, prefix: String) {
    // Caravan's etcd runs with --max-txn-ops 10000, as the embedded store.
    let mut txn = Txn::new();
    for i in 0..10_001 {
        txn = txn.and_then(Op::get(key(&prefix, &i.to_string())));
    }
    assert!(matches!(
        store.txn(txn).await,
        Err(StoreError::InvalidArgument(_))
    ));
}

pub async fn unknown_lease_fails_whole_txn(store: Arc<dyn Store>, prefix: String) {
    let lease = store.lease_grant(30).await.unwrap();
    store.lease_revoke(lease.id).await.unwrap();
    let txn = Txn::new()
        .and_then(Op::put(key(&prefix, "plain"), "1"))
        .and_then(Op::put_with_lease(key(&prefix, "leased"), "1", lease.id));
    match store.txn(txn).await {
        Err(StoreError::LeaseNotFound(id)) => assert_eq!(id, lease.id),
        other => panic!("expected LeaseNotFound, got {other:?}"),
    }
    assert_eq!(store.get(&key(&prefix, "plain")).await.unwrap(), None);
}

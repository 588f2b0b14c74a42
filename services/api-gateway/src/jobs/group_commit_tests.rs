use caravan_store::{Compare, MemStore, OpResult};

use super::*;

fn create(key: &str) -> Txn {
    Txn::new()
        .when(Compare::absent(key.as_bytes().to_vec()))
        .and_then(Op::put(key.as_bytes().to_vec(), b"v".to_vec()))
        .and_then(Op::put(format!("{key}/eval").into_bytes(), b"e".to_vec()))
}

type Answer = oneshot::Receiver<Result<TxnResult, StoreError>>;

fn pending(txn: Txn) -> (Pending, Answer) {
    let (respond, answer) = oneshot::channel();
    (Pending { txn, respond }, answer)
}

async fn value(store: &MemStore, key: &str) -> Option<Vec<u8>> {
    store.get(key.as_bytes()).await.unwrap().map(|kv| kv.value)
}

/// Commits registrations of a, b and c as one group; their answers.
async fn commit_abc(store: &MemStore) -> [Answer; 3] {
    let (a, answer_a) = pending(create("a"));
    let (b, answer_b) = pending(create("b"));
    let (c, answer_c) = pending(create("c"));
    let mut group = Group::new(a);
    assert!(group.add(b, 128).is_ok());
    assert!(group.add(c, 128).is_ok());
    group.commit(store).await;
    [answer_a, answer_b, answer_c]
}

#[tokio::test]
async fn disjoint_writes_commit_in_one_transaction_each_with_its_own_results() {
    let store = MemStore::new();
    let before = store.current_revision().await.unwrap();
    let answers = commit_abc(&store).await;

    let after = store.current_revision().await.unwrap();
    assert_eq!(after, before + 1, "one transaction for the three writes");
    for answer in answers {
        let result = answer.await.unwrap().unwrap();
        assert!(result.succeeded);
        assert_eq!(result.revision, after);
        assert_eq!(result.results, vec![OpResult::Put, OpResult::Put]);
    }
    assert_eq!(value(&store, "b/eval").await.as_deref(), Some(&b"e"[..]));
}

#[tokio::test]
async fn a_guard_that_fails_fails_only_its_own_write() {
    let store = MemStore::new();
    store.put(b"b", b"old", 0).await.unwrap();
    let [answer_a, answer_b, answer_c] = commit_abc(&store).await;

    assert!(answer_a.await.unwrap().unwrap().succeeded);
    assert!(
        !answer_b.await.unwrap().unwrap().succeeded,
        "b existed: its guard fails as it would alone"
    );
    assert!(answer_c.await.unwrap().unwrap().succeeded);
    assert_eq!(value(&store, "b").await.as_deref(), Some(&b"old"[..]));
    assert_eq!(value(&store, "b/eval").await, None, "nothing of b written");
    assert!(value(&store, "c/eval").await.is_some());
}

#[test]
fn writes_sharing_a_key_or_over_the_limits_start_a_new_group() {
    let (a, _ra) = pending(create("a"));
    let mut group = Group::new(a);
    let (again, _r) = pending(create("a"));
    assert!(group.add(again, 128).is_err(), "the same job twice");
    let (b, _rb) = pending(create("b"));
    assert!(group.add(b, 5).is_err(), "3 + 3 ops over a limit of 5");
    let (ranged, _r) = pending(Txn::new().and_then(Op::Delete(Range::prefix(b"c/".to_vec()))));
    assert!(
        group.add(ranged, 128).is_err(),
        "a range may hold others' keys"
    );
    let (mut failing, _r) = pending(create("d"));
    failing.txn.failure.push(Op::Get(Range::key(b"d".to_vec())));
    assert!(
        group.add(failing, 128).is_err(),
        "a failure branch runs alone"
    );
    let (big, _r) = pending(Txn::new().and_then(Op::put(b"e".to_vec(), vec![0; MAX_GROUP_BYTES])));
    assert!(group.add(big, 128).is_err(), "over the group's bytes");
    let (b, _rb) = pending(create("b"));
    assert!(group.add(b, 128).is_ok());
    assert_eq!(group.members.len(), 2);

    // A write that cannot share, first in its group, keeps it to itself.
    for alone in [
        Txn::new().and_then(Op::Delete(Range::prefix(b"c/".to_vec()))),
        Txn {
            failure: vec![Op::Get(Range::key(b"d".to_vec()))],
            ..create("d")
        },
    ] {
        let (first, _r) = pending(alone);
        let mut group = Group::new(first);
        let (other, _r) = pending(create("e"));
        assert!(group.add(other, 128).is_err());
    }
}

#[tokio::test]
async fn the_committer_answers_every_caller_as_the_store_would() {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let shutdown = CancellationToken::new();
    let commits = GroupCommit::start(store.clone(), 128, shutdown.clone());
    let calls = (0..40).map(|i| {
        let commits = commits.clone();
        // Job 7 twice: exactly one of its registrations may win.
        let key = if i == 39 {
            "job-7".to_string()
        } else {
            format!("job-{i}")
        };
        tokio::spawn(async move { commits.txn(create(&key)).await })
    });
    let mut won = 0;
    for call in calls {
        if call.await.unwrap().unwrap().succeeded {
            won += 1;
        }
    }
    assert_eq!(won, 39, "every job once, job 7 only once");
    let listed = store
        .range(Range::prefix(b"job-".to_vec()))
        .await
        .unwrap()
        .kvs
        .len();
    assert_eq!(listed, 78, "a job and its eval for each of 39 jobs");
    shutdown.cancel();
}

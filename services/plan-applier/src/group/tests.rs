use caravan_store::{Compare, MemStore, Store};

use super::*;
use crate::fixtures::leader;

const LIMITS: Limits = Limits {
    max_ops: 128,
    max_bytes: 1 << 20,
};

/// Creates `key` if it does not exist yet.
fn create(key: &str, value: &str) -> Txn {
    Txn::new()
        .when(Compare::absent(key))
        .and_then(Op::put(key, value))
}

fn member(txn: Txn) -> (Submitted, oneshot::Receiver<Answer>) {
    let (reply, answer) = oneshot::channel();
    (Submitted { txn, reply }, answer)
}

/// A group of `txns`, and where each one's answer arrives.
fn group_of(txns: Vec<Txn>) -> (Group, Vec<oneshot::Receiver<Answer>>) {
    let mut answers = Vec::new();
    let mut group: Option<Group> = None;
    for txn in txns {
        let (s, a) = member(txn);
        answers.push(a);
        match group.as_mut() {
            None => group = Some(Group::new(s)),
            Some(g) => {
                assert!(g.admits(&s.txn, LIMITS), "{:?}", s.txn);
                g.push(s);
            }
        }
    }
    (group.expect("at least one transaction"), answers)
}

async fn value(store: &Arc<dyn Store>, key: &str) -> Option<Vec<u8>> {
    store.get(key.as_bytes()).await.unwrap().map(|kv| kv.value)
}

#[tokio::test]
async fn disjoint_transactions_commit_as_one_write_each_with_its_own_results() {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let leadership = leader(&store).await;
    let two_puts = create("/t/a", "1").and_then(Op::put("/t/a2", "1"));
    let (group, answers) = group_of(vec![two_puts, create("/t/b", "2"), create("/t/c", "3")]);
    let before = store.current_revision().await.unwrap();
    group.send(&leadership).await;
    let mut revisions = Vec::new();
    for (answer, ops) in answers.into_iter().zip([2, 1, 1]) {
        let res = answer.await.unwrap().unwrap();
        assert!(res.succeeded);
        assert_eq!(
            res.results,
            vec![OpResult::Put; ops],
            "each gets its own op results"
        );
        revisions.push(res.revision);
    }
    assert_eq!(revisions, vec![before + 1; 3], "one write, one revision");
    assert_eq!(store.current_revision().await.unwrap(), before + 1);
    for (key, v) in [("/t/a", "1"), ("/t/a2", "1"), ("/t/b", "2"), ("/t/c", "3")] {
        assert_eq!(value(&store, key).await.as_deref(), Some(v.as_bytes()));
    }
}

#[test]
fn only_transactions_sharing_no_key_and_within_the_limits_go_together() {
    let (group, _answers) = group_of(vec![create("/t/a", "1")]);
    // The same key compared or written by two members would make their
    // outcome depend on their order.
    assert!(!group.admits(&create("/t/a", "2"), LIMITS));
    let reads_a = Txn::new()
        .when(Compare::absent("/t/a"))
        .and_then(Op::put("/t/other", "x"));
    assert!(!group.admits(&reads_a, LIMITS));
    let writes_a = Txn::new()
        .when(Compare::absent("/t/z"))
        .and_then(Op::put("/t/a", "x"));
    assert!(!group.admits(&writes_a, LIMITS));
    // Only puts, and no failure branch: their answers could not be split.
    assert!(!group.admits(&create("/t/d", "1").or_else(Op::get("/t/d")), LIMITS));
    assert!(!group.admits(&Txn::new().and_then(Op::get("/t/e")), LIMITS));
    // Within the store's limits, with room for the fence.
    let tight = Limits {
        max_ops: 2,
        max_bytes: 1 << 20,
    };
    assert!(!group.admits(&create("/t/f", "1"), tight));
    let small = Limits {
        max_ops: 128,
        max_bytes: 9,
    };
    assert!(!group.admits(&create("/t/g", "1"), small));
    assert!(group.admits(&create("/t/h", "1"), LIMITS));
}

#[test]
fn a_transaction_too_large_for_any_group_goes_alone() {
    assert!(Group::takes(&create("/t/a", "1"), LIMITS));
    let store_limits = Limits {
        max_ops: 10_000,
        max_bytes: 32 << 20,
    };
    let mut many = Txn::new();
    for i in 0..GROUP_MAX_OPS {
        many = many.and_then(Op::put(format!("/t/k{i}"), "v"));
    }
    assert!(
        !Group::takes(&many, store_limits),
        "a plan of many placements"
    );
    let large = create("/t/big", &"x".repeat(GROUP_MAX_BYTES));
    assert!(!Group::takes(&large, store_limits), "a plan of many bytes");
    assert!(!Group::takes(
        &create("/t/d", "1").or_else(Op::get("/t/d")),
        LIMITS
    ));
}

#[tokio::test]
async fn a_failed_compare_sends_each_member_again_alone() {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let leadership = leader(&store).await;
    store.put(b"/t/taken", b"x", 0).await.unwrap();
    let (group, answers) = group_of(vec![
        create("/t/a", "1"),
        create("/t/taken", "2"),
        create("/t/c", "3"),
    ]);
    group.send(&leadership).await;
    let outcomes: Vec<bool> = futures::future::join_all(answers)
        .await
        .into_iter()
        .map(|a| a.unwrap().unwrap().succeeded)
        .collect();
    assert_eq!(outcomes, vec![true, false, true]);
    assert_eq!(value(&store, "/t/a").await.as_deref(), Some(&b"1"[..]));
    assert_eq!(value(&store, "/t/taken").await.as_deref(), Some(&b"x"[..]));
    assert_eq!(value(&store, "/t/c").await.as_deref(), Some(&b"3"[..]));
}

#[tokio::test]
async fn a_deposed_leader_commits_no_member() {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let leadership = leader(&store).await;
    leadership.resign().await.unwrap();
    let (group, answers) = group_of(vec![create("/t/a", "1"), create("/t/b", "2")]);
    group.send(&leadership).await;
    for answer in answers {
        let err = answer.await.unwrap().expect_err("deposed");
        assert!(matches!(err, LeadershipError::Deposed { .. }), "{err}");
    }
    assert_eq!(value(&store, "/t/a").await, None);
    assert_eq!(value(&store, "/t/b").await, None);
}

#[tokio::test]
async fn transactions_submitted_at_once_share_store_writes_and_all_commit() {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let leadership = Arc::new(leader(&store).await);
    let (txns, task) = TxnGroup::start(leadership, LIMITS);
    let before = store.current_revision().await.unwrap();
    let submitted: Vec<_> = (0..50)
        .map(|i| {
            let txns = txns.clone();
            tokio::spawn(async move { txns.txn(create(&format!("/t/k{i}"), "v")).await })
        })
        .collect();
    for s in submitted {
        assert!(s.await.unwrap().unwrap().succeeded);
    }
    for i in 0..50 {
        assert!(value(&store, &format!("/t/k{i}")).await.is_some(), "k{i}");
    }
    let writes = store.current_revision().await.unwrap() - before;
    assert!(
        (1..50).contains(&writes),
        "50 transactions in {writes} store writes"
    );
    drop(txns);
    task.await.unwrap();
}

use crate::error::StoreError;
use crate::leadership::{Leadership, LeadershipError};
use crate::mem::MemStore;
use crate::store::Store;
use crate::types::{Compare, OpResult};

use super::*;

const LIMITS: GroupLimits = GroupLimits {
    max_ops: 128,
    max_bytes: 1 << 20,
};

/// A registration: the job if it is new, and its eval.
fn create(key: &str) -> Txn {
    Txn::new()
        .when(Compare::absent(key.as_bytes().to_vec()))
        .and_then(Op::put(key.as_bytes().to_vec(), b"v".to_vec()))
        .and_then(Op::put(format!("{key}/eval").into_bytes(), b"e".to_vec()))
}

type Answer<E> = oneshot::Receiver<Result<TxnResult, E>>;

fn pending<E>(txn: Txn) -> (Pending<E>, Answer<E>) {
    let (respond, answer) = oneshot::channel();
    (Pending { txn, respond }, answer)
}

/// A group of `txns`, each admitted, and where each one's answer arrives.
fn group_of<E: Clone + Send + 'static>(txns: Vec<Txn>) -> (Group<E>, Vec<Answer<E>>) {
    let mut answers = Vec::new();
    let mut group: Option<Group<E>> = None;
    for txn in txns {
        let keys = shareable(&txn, LIMITS).expect("shareable");
        let (p, answer) = pending(txn);
        answers.push(answer);
        match group.as_mut() {
            None => group = Some(Group::of(p, keys)),
            Some(g) => {
                assert!(g.admits(&p.txn, &keys, LIMITS), "{:?}", p.txn);
                g.push(p, keys);
            }
        }
    }
    (group.expect("at least one transaction"), answers)
}

fn through(store: &Arc<dyn Store>) -> Committer<StoreError> {
    let store = store.clone();
    Arc::new(move |txn| {
        let store = store.clone();
        Box::pin(async move { store.txn(txn).await })
    })
}

fn fenced(leadership: &Arc<Leadership>) -> Committer<LeadershipError> {
    let leadership = leadership.clone();
    Arc::new(move |txn| {
        let leadership = leadership.clone();
        Box::pin(async move { leadership.fenced_txn(txn).await })
    })
}

async fn value(store: &Arc<dyn Store>, key: &str) -> Option<Vec<u8>> {
    store.get(key.as_bytes()).await.unwrap().map(|kv| kv.value)
}

async fn leader(store: &Arc<dyn Store>) -> Arc<Leadership> {
    Arc::new(
        Leadership::campaign(
            store.clone(),
            "/t/leader/test",
            "me:1",
            std::time::Duration::from_secs(10),
        )
        .await
        .unwrap(),
    )
}

#[tokio::test]
async fn disjoint_writes_commit_in_one_transaction_each_with_its_own_results() {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let before = store.current_revision().await.unwrap();
    let read_too = create("d").and_then(Op::get(b"a".to_vec()));
    let (group, answers) = group_of(vec![create("b"), create("c"), read_too]);
    group.send("test", through(&store)).await;

    let after = store.current_revision().await.unwrap();
    assert_eq!(after, before + 1, "one transaction for the three writes");
    for (answer, ops) in answers.into_iter().zip([2, 2, 3]) {
        let result = answer.await.unwrap().unwrap();
        assert!(result.succeeded);
        assert_eq!(result.revision, after);
        assert_eq!(result.results.len(), ops, "each gets its own results");
        assert_eq!(result.results[..2], [OpResult::Put, OpResult::Put]);
    }
    assert_eq!(value(&store, "c/eval").await.as_deref(), Some(&b"e"[..]));
}

#[tokio::test]
async fn a_guard_that_fails_fails_only_its_own_write() {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    store.put(b"b", b"old", 0).await.unwrap();
    let (group, answers) = group_of::<StoreError>(vec![create("a"), create("b"), create("c")]);
    group.send("test", through(&store)).await;
    let outcomes: Vec<bool> = futures::future::join_all(answers)
        .await
        .into_iter()
        .map(|a| a.unwrap().unwrap().succeeded)
        .collect();
    assert_eq!(
        outcomes,
        [true, false, true],
        "b existed: its guard fails as it would alone"
    );
    assert_eq!(value(&store, "b").await.as_deref(), Some(&b"old"[..]));
    assert_eq!(value(&store, "b/eval").await, None, "nothing of b written");
    assert!(value(&store, "c/eval").await.is_some());
}

#[tokio::test]
async fn a_deposed_leader_commits_no_member() {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let leadership = leader(&store).await;
    leadership.resign().await.unwrap();
    let (group, answers) = group_of(vec![create("a"), create("b")]);
    group.send("test", fenced(&leadership)).await;
    for answer in answers {
        let err = answer.await.unwrap().expect_err("deposed");
        assert!(matches!(err, LeadershipError::Deposed { .. }), "{err}");
    }
    assert_eq!(value(&store, "a").await, None);
    assert_eq!(value(&store, "b").await, None);
}

#[test]
fn writes_sharing_a_key_or_over_the_caps_start_a_new_group() {
    let (group, _answers) = group_of::<StoreError>(vec![create("a")]);
    let admits = |txn: &Txn, limits: GroupLimits| {
        shareable(txn, limits).is_some_and(|keys| group.admits(txn, &keys, limits))
    };
    assert!(!admits(&create("a"), LIMITS), "the same job twice");
    let reads_a = Txn::new()
        .when(Compare::absent(b"a".to_vec()))
        .and_then(Op::put(b"x".to_vec(), b"1".to_vec()));
    assert!(!admits(&reads_a, LIMITS), "a key another compares");
    // Two that only compare the same key (registrations into one namespace,
    // guarded on its key) go together.
    let in_ns = |job: &str| {
        Txn::new()
            .when(Compare::absent(job.as_bytes().to_vec()))
            .when(Compare::absent(b"ns".to_vec()))
            .and_then(Op::put(job.as_bytes().to_vec(), b"1".to_vec()))
    };
    let (ns_group, _ns_answers) = group_of::<StoreError>(vec![in_ns("j1")]);
    let ns_keys = shareable(&in_ns("j2"), LIMITS).unwrap();
    assert!(ns_group.admits(&in_ns("j2"), &ns_keys, LIMITS));
    let writes_ns = Txn::new().and_then(Op::put(b"ns".to_vec(), b"x".to_vec()));
    let keys = shareable(&writes_ns, LIMITS).unwrap();
    assert!(
        !ns_group.admits(&writes_ns, &keys, LIMITS),
        "a write of a key another compares"
    );
    let tight = GroupLimits {
        max_ops: 6,
        max_bytes: 1 << 20,
    };
    assert!(
        !admits(&create("b"), tight),
        "3 + 3 ops with one spared for a fence"
    );
    assert!(admits(&create("b"), LIMITS));

    // Alone, at once: what no group can take.
    let ranged = Txn::new().and_then(Op::Delete(Range::prefix(b"c/".to_vec())));
    assert!(
        shareable(&ranged, LIMITS).is_none(),
        "a range may hold others' keys"
    );
    let mut failing = create("d");
    failing.failure.push(Op::Get(Range::key(b"d".to_vec())));
    assert!(
        shareable(&failing, LIMITS).is_none(),
        "a failure branch runs alone"
    );
    let big = Txn::new().and_then(Op::put(b"e".to_vec(), vec![0; GROUP_MAX_BYTES]));
    assert!(shareable(&big, LIMITS).is_none(), "over a group's bytes");
    let store_limits = GroupLimits {
        max_ops: 10_000,
        max_bytes: 32 << 20,
    };
    let mut many = Txn::new();
    for i in 0..GROUP_MAX_OPS {
        many = many.and_then(Op::put(format!("k{i}").into_bytes(), b"v".to_vec()));
    }
    assert!(
        shareable(&many, store_limits).is_none(),
        "a plan of many placements"
    );
}

#[tokio::test]
async fn the_committer_answers_every_caller_as_the_store_would() {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let stop = CancellationToken::new();
    let gone = || StoreError::Unavailable("stopped".into());
    let (commits, task) = GroupCommit::start("test", through(&store), LIMITS, stop.clone(), gone);
    let before = store.current_revision().await.unwrap();
    let calls: Vec<_> = (0..40)
        .map(|i| {
            let commits = commits.clone();
            // Job 7 twice: exactly one of its registrations may win.
            let key = if i == 39 {
                "job-7".to_string()
            } else {
                format!("job-{i}")
            };
            tokio::spawn(async move { commits.txn(create(&key)).await })
        })
        .collect();
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
    let writes = store.current_revision().await.unwrap() - before;
    assert!(
        (1..39).contains(&writes),
        "39 registrations in {writes} writes"
    );
    stop.cancel();
    task.await.unwrap();
    let err = commits.txn(create("late")).await.expect_err("stopped");
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
}

#[tokio::test]
async fn a_fenced_committer_ends_with_its_last_handle() {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let leadership = leader(&store).await;
    let gone = || LeadershipError::Lost("stopped".into());
    let (commits, task) = GroupCommit::start(
        "test",
        fenced(&leadership),
        LIMITS,
        CancellationToken::new(),
        gone,
    );
    assert!(commits.txn(create("a")).await.unwrap().succeeded);
    drop(commits);
    task.await.unwrap();
    assert_eq!(
        Arc::strong_count(&leadership),
        1,
        "no clone outlives the committer"
    );
}

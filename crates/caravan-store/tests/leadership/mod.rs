//! Leadership with fencing, tested on every backend: hand-over on lease loss
//! and on resign, fenced writes of a deposed leader, and the lost signal.
//! Every backend instantiates the whole list through [`leadership_cases!`].

use std::sync::Arc;
use std::time::Duration;

use caravan_store::{
    Compare, CompareOp, Leadership, LeadershipError, Op, OpResult, Range, Store, StoreError, Txn,
    current_leader,
};
use tokio::task::JoinHandle;

/// The lease TTL the tests lead with: etcd's minimum, so hand-overs that
/// wait for it would show.
const TTL: Duration = Duration::from_secs(2);

/// Instantiates every leadership case as a test, as
/// `leadership_cases!(#[test attribute] store_fn)`.
macro_rules! leadership_cases {
    (#[$attr:meta] $backend:ident) => {
        $crate::leadership::leadership_cases!(@cases #[$attr] $backend;
            revoked_lease_hands_over_within_ttl,
            deposed_leader_writes_nothing,
            own_compare_failure_is_not_deposed,
            resign_hands_over_at_once,
            lost_fires_when_lease_is_revoked_behind_its_back,
            lost_fires_when_leader_key_is_deleted,
            current_leader_names_the_address,
            failure_branch_must_not_write,
            dropping_the_handle_gives_up_leadership,
            renewals_keep_leadership_past_ttl,
            waiting_candidate_gives_up_when_its_lease_is_revoked,
            a_silent_leader_whose_lease_lives_on_is_deposed,
            a_live_leader_is_not_deposed_by_waiting_candidates,
            a_silent_leader_is_not_deposed_while_the_store_has_an_alarm,
        );
    };
    (@cases #[$attr:meta] $backend:ident; $($case:ident),* $(,)?) => {
        mod leadership_cases {
            $(
                #[$attr]
                async fn $case() {
                    let store = crate::$backend().await;
                    let prefix = caravan_testkit::unique_prefix(concat!(
                        "leadership/",
                        stringify!($case)
                    ));
                    crate::leadership::$case(store, prefix).await;
                }
            )*
        }
    };
}
pub(crate) use leadership_cases;

const PATIENCE: Duration = Duration::from_secs(10);

fn election(prefix: &str) -> String {
    format!("{prefix}leader/svc")
}

async fn lead(store: &Arc<dyn Store>, prefix: &str, address: &str) -> Leadership {
    tokio::time::timeout(
        PATIENCE,
        Leadership::campaign(store.clone(), &election(prefix), address, TTL),
    )
    .await
    .expect("campaign did not win in time")
    .unwrap()
}

fn spawn_candidate(
    store: &Arc<dyn Store>,
    prefix: &str,
    address: &str,
) -> JoinHandle<Result<Leadership, LeadershipError>> {
    let (store, name, address) = (store.clone(), election(prefix), address.to_string());
    tokio::spawn(async move { Leadership::campaign(store, &name, &address, TTL).await })
}

async fn wins(candidate: JoinHandle<Result<Leadership, LeadershipError>>) -> Leadership {
    tokio::time::timeout(PATIENCE, candidate)
        .await
        .expect("the candidate did not win in time")
        .unwrap()
        .unwrap()
}

async fn assert_waiting(candidate: &JoinHandle<Result<Leadership, LeadershipError>>) {
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!candidate.is_finished(), "a second candidate must wait");
}

fn put(prefix: &str, name: &str, value: &str) -> Txn {
    Txn::new().and_then(Op::put(format!("{prefix}{name}"), value))
}

pub async fn revoked_lease_hands_over_within_ttl(store: Arc<dyn Store>, prefix: String) {
    let first = lead(&store, &prefix, "a:1").await;
    let second = spawn_candidate(&store, &prefix, "b:1");
    assert_waiting(&second).await;
    let revoked = tokio::time::Instant::now();
    store.lease_revoke(first.leader_key().lease).await.unwrap();
    let second = wins(second).await;
    assert!(
        revoked.elapsed() < TTL,
        "hand-over took {:?}",
        revoked.elapsed()
    );
    assert!(second.token().revision > first.token().revision);
    assert_eq!(
        current_leader(store.as_ref(), election(&prefix).as_bytes())
            .await
            .unwrap()
            .as_deref(),
        Some("b:1")
    );
    second.resign().await.unwrap();
}

pub async fn deposed_leader_writes_nothing(store: Arc<dyn Store>, prefix: String) {
    let first = lead(&store, &prefix, "a:1").await;
    first
        .fenced_txn(put(&prefix, "by-first", "1"))
        .await
        .unwrap();
    let second = spawn_candidate(&store, &prefix, "b:1");
    assert_waiting(&second).await;
    // No pause between the revoke and the write: the fence in the
    // transaction must refuse even before the handle notices.
    store.lease_revoke(first.leader_key().lease).await.unwrap();
    match first.fenced_txn(put(&prefix, "stale", "1")).await {
        Err(LeadershipError::Deposed { .. }) => {}
        other => panic!("expected Deposed, got {other:?}"),
    }
    assert!(first.is_lost());
    let second = wins(second).await;

    // Straight to the store with the old token, as a paused process that
    // never heard of its loss would write.
    let mut txn = put(&prefix, "stale", "1");
    txn.compares.push(first.token().compare());
    let res = store.txn(txn).await.unwrap();
    assert!(!res.succeeded, "the old token no longer holds");
    assert_eq!(
        store
            .get(format!("{prefix}stale").as_bytes())
            .await
            .unwrap(),
        None
    );
    let ok = second
        .fenced_txn(put(&prefix, "by-second", "1"))
        .await
        .unwrap();
    assert!(ok.succeeded);
    second.resign().await.unwrap();
}

pub async fn own_compare_failure_is_not_deposed(store: Arc<dyn Store>, prefix: String) {
    let leader = lead(&store, &prefix, "a:1").await;
    let k = format!("{prefix}k");
    store.put(k.as_bytes(), b"actual", 0).await.unwrap();
    let txn = Txn::new()
        .when(Compare::value(k.clone(), CompareOp::Equal, "expected"))
        .and_then(Op::put(k.clone(), "new"))
        .or_else(Op::get(k.clone()));
    let res = leader.fenced_txn(txn).await.unwrap();
    assert!(!res.succeeded);
    assert_eq!(res.results.len(), 1, "the fence's own read is stripped");
    match &res.results[0] {
        OpResult::Get(got) => assert_eq!(got.kvs[0].value, b"actual"),
        other => panic!("expected the caller's get, got {other:?}"),
    }
    assert!(!leader.is_lost());
    let ok = leader.fenced_txn(put(&prefix, "k", "new")).await.unwrap();
    assert!(ok.succeeded);
    assert!(ok.results.iter().all(|r| *r == OpResult::Put));
    leader.resign().await.unwrap();
}

pub async fn resign_hands_over_at_once(store: Arc<dyn Store>, prefix: String) {
    // A long TTL: a hand-over waiting for it would time the test out.
    let first = Leadership::campaign(
        store.clone(),
        &election(&prefix),
        "a:1",
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    let lease = first.leader_key().lease;
    let second = spawn_candidate(&store, &prefix, "b:1");
    assert_waiting(&second).await;
    let resigned = tokio::time::Instant::now();
    first.resign().await.unwrap();
    let second = wins(second).await;
    assert!(
        resigned.elapsed() < Duration::from_secs(2),
        "hand-over took {:?}",
        resigned.elapsed()
    );
    assert_eq!(
        store.lease_time_to_live(lease).await.unwrap(),
        None,
        "resign revokes the lease"
    );
    second.resign().await.unwrap();
    assert_eq!(
        current_leader(store.as_ref(), election(&prefix).as_bytes())
            .await
            .unwrap(),
        None
    );
}

pub async fn lost_fires_when_lease_is_revoked_behind_its_back(
    store: Arc<dyn Store>,
    prefix: String,
) {
    let leader = lead(&store, &prefix, "a:1").await;
    let signal = leader.lost_signal();
    assert!(!leader.is_lost());
    store.lease_revoke(leader.leader_key().lease).await.unwrap();
    tokio::time::timeout(TTL, leader.lost())
        .await
        .expect("lost did not fire within the TTL");
    assert!(leader.is_lost());
    assert!(signal.is_cancelled());
    assert!(leader.lost_reason().is_some());
    assert!(matches!(
        leader.fenced_txn(put(&prefix, "late", "1")).await,
        Err(LeadershipError::Deposed { .. })
    ));
}

pub async fn lost_fires_when_leader_key_is_deleted(store: Arc<dyn Store>, prefix: String) {
    let leader = lead(&store, &prefix, "a:1").await;
    store.delete(Range::key(leader.token().key)).await.unwrap();
    tokio::time::timeout(TTL, leader.lost())
        .await
        .expect("lost did not fire within the TTL");
}

pub async fn current_leader_names_the_address(store: Arc<dyn Store>, prefix: String) {
    let name = election(&prefix);
    assert_eq!(
        current_leader(store.as_ref(), name.as_bytes())
            .await
            .unwrap(),
        None
    );
    let leader = lead(&store, &prefix, "10.1.2.3:7001").await;
    assert_eq!(
        current_leader(store.as_ref(), name.as_bytes())
            .await
            .unwrap()
            .as_deref(),
        Some("10.1.2.3:7001")
    );
    let token = leader.token();
    assert_eq!(
        token.key,
        format!("{name}/{:x}", leader.leader_key().lease).into_bytes()
    );
    let stored = store.get(&token.key).await.unwrap().unwrap();
    assert_eq!(stored.create_revision, token.revision);
    leader.resign().await.unwrap();
}

pub async fn failure_branch_must_not_write(store: Arc<dyn Store>, prefix: String) {
    let leader = lead(&store, &prefix, "a:1").await;
    let txn = Txn::new()
        .when(Compare::absent(format!("{prefix}k")))
        .or_else(Op::put(format!("{prefix}fallback"), "1"));
    assert!(matches!(
        leader.fenced_txn(txn).await,
        Err(LeadershipError::Store(StoreError::InvalidArgument(_)))
    ));
    assert_eq!(
        store
            .get(format!("{prefix}fallback").as_bytes())
            .await
            .unwrap(),
        None
    );
    leader.resign().await.unwrap();
}

pub async fn dropping_the_handle_gives_up_leadership(store: Arc<dyn Store>, prefix: String) {
    let first = Leadership::campaign(
        store.clone(),
        &election(&prefix),
        "a:1",
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    let lease = first.leader_key().lease;
    let second = spawn_candidate(&store, &prefix, "b:1");
    assert_waiting(&second).await;
    drop(first);
    let second = wins(second).await;
    assert_eq!(store.lease_time_to_live(lease).await.unwrap(), None);
    second.resign().await.unwrap();
}

pub async fn renewals_keep_leadership_past_ttl(store: Arc<dyn Store>, prefix: String) {
    let leader = lead(&store, &prefix, "a:1").await;
    tokio::time::sleep(TTL * 2 + TTL / 2).await;
    assert!(!leader.is_lost(), "lost: {:?}", leader.lost_reason());
    let res = leader.fenced_txn(put(&prefix, "still", "1")).await.unwrap();
    assert!(res.succeeded);
    leader.resign().await.unwrap();
}

pub async fn waiting_candidate_gives_up_when_its_lease_is_revoked(
    store: Arc<dyn Store>,
    prefix: String,
) {
    let first = lead(&store, &prefix, "a:1").await;
    let second = spawn_candidate(&store, &prefix, "b:1");
    assert_waiting(&second).await;
    let candidates = store
        .range(Range::prefix(format!("{}/", election(&prefix))))
        .await
        .unwrap();
    let waiting = candidates
        .kvs
        .iter()
        .find(|kv| kv.value == b"b:1")
        .expect("the waiting candidate's key");
    store.lease_revoke(waiting.lease).await.unwrap();
    let outcome = tokio::time::timeout(PATIENCE, second)
        .await
        .expect("the campaign did not give up")
        .unwrap();
    assert!(
        matches!(outcome, Err(LeadershipError::Lost(_))),
        "got {outcome:?}"
    );
    assert!(!first.is_lost());
    first.resign().await.unwrap();
}

/// A leader frozen while its lease lives on (etcd renews every lease to its
/// full TTL when its own leader changes) must not hold the election: a
/// waiting candidate revokes the lease of a leader that stopped marking its
/// key.
pub async fn a_silent_leader_whose_lease_lives_on_is_deposed(
    store: Arc<dyn Store>,
    prefix: String,
) {
    let name = election(&prefix);
    let lease = store.lease_grant(2).await.unwrap();
    let frozen = store
        .campaign(name.as_bytes(), b"frozen:1", lease.id)
        .await
        .unwrap();
    // The lease is kept alive from outside, as etcd's refresh would; the
    // frozen holder never marks its key.
    let renewals = tokio::spawn({
        let store = store.clone();
        async move {
            loop {
                let _renewed = store.lease_keep_alive(lease.id).await;
                tokio::time::sleep(TTL / 4).await;
            }
        }
    });
    let started = tokio::time::Instant::now();
    let candidate = spawn_candidate(&store, &prefix, "b:1");
    let second = wins(candidate).await;
    renewals.abort();
    assert!(
        started.elapsed() < TTL * 3,
        "a silent leader held the election for {:?}",
        started.elapsed()
    );
    assert!(second.token().revision > frozen.create_revision);
    assert_eq!(store.lease_time_to_live(lease.id).await.unwrap(), None);
    second.resign().await.unwrap();
}

/// A leader that keeps marking its key is never deposed, however long a
/// candidate waits.
pub async fn a_live_leader_is_not_deposed_by_waiting_candidates(
    store: Arc<dyn Store>,
    prefix: String,
) {
    let leader = lead(&store, &prefix, "a:1").await;
    let second = spawn_candidate(&store, &prefix, "b:1");
    tokio::time::sleep(TTL * 3).await;
    assert!(!leader.is_lost(), "lost: {:?}", leader.lost_reason());
    assert!(!second.is_finished(), "the candidate must still wait");
    let res = leader.fenced_txn(put(&prefix, "still", "1")).await.unwrap();
    assert!(res.succeeded);
    leader.resign().await.unwrap();
    wins(second).await.resign().await.unwrap();
}

/// A store whose alarm is raised on demand, as a full etcd raises NOSPACE.
struct Alarmed {
    raised: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl caravan_testkit::layered::StoreLayer for Alarmed {
    async fn alarms(
        &self,
        inner: &Arc<dyn Store>,
    ) -> caravan_store::Result<Vec<caravan_store::StoreAlarm>> {
        if self.raised.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(vec![caravan_store::StoreAlarm {
                member_id: 1,
                kind: "NOSPACE".into(),
            }]);
        }
        inner.alarms().await
    }
}

/// While the store has an alarm raised no leader can mark its key (a full
/// etcd refuses the write), and a waiting candidate does not depose it for
/// that: it could not write as leader either. Once the alarm is disarmed a
/// leader that stays silent is deposed as usual.
pub async fn a_silent_leader_is_not_deposed_while_the_store_has_an_alarm(
    store: Arc<dyn Store>,
    prefix: String,
) {
    let alarmed = caravan_testkit::layered::Layered::wrap(
        store.clone(),
        Alarmed {
            raised: true.into(),
        },
    );
    let layered: Arc<dyn Store> = alarmed.clone();
    let name = election(&prefix);
    let lease = store.lease_grant(2).await.unwrap();
    store
        .campaign(name.as_bytes(), b"silent:1", lease.id)
        .await
        .unwrap();
    let renewals = tokio::spawn({
        let store = store.clone();
        async move {
            loop {
                let _renewed = store.lease_keep_alive(lease.id).await;
                tokio::time::sleep(TTL / 4).await;
            }
        }
    });
    let candidate = spawn_candidate(&layered, &prefix, "b:1");
    // Three TTLs without a mark: long enough to be deposed were the store
    // without its alarm (see `a_silent_leader_whose_lease_lives_on_is_deposed`).
    tokio::time::sleep(TTL * 3).await;
    assert!(!candidate.is_finished(), "the silent leader was deposed");
    assert!(store.lease_time_to_live(lease.id).await.unwrap().is_some());
    alarmed
        .raised
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let second = wins(candidate).await;
    renewals.abort();
    second.resign().await.unwrap();
}

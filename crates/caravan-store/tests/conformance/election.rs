//! Conformance of elections: candidate keys, the leader's value, waiting in
//! line, and hand-over on resign and on lease revoke.

use std::sync::Arc;
use std::time::Duration;

use caravan_store::{LeaderKey, Store, StoreError};
use tokio::task::JoinHandle;

use super::PATIENCE;

fn spawn_campaign(
    store: &Arc<dyn Store>,
    name: &str,
    value: &str,
    lease: i64,
) -> JoinHandle<caravan_store::Result<LeaderKey>> {
    let store = store.clone();
    let (name, value) = (name.to_string(), value.to_string());
    tokio::spawn(async move {
        store
            .campaign(name.as_bytes(), value.as_bytes(), lease)
            .await
    })
}

async fn won(campaign: JoinHandle<caravan_store::Result<LeaderKey>>) -> LeaderKey {
    tokio::time::timeout(PATIENCE, campaign)
        .await
        .expect("campaign did not win in time")
        .unwrap()
        .unwrap()
}

async fn assert_still_waiting(campaign: &JoinHandle<caravan_store::Result<LeaderKey>>) {
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!campaign.is_finished(), "the second candidate must wait");
}

pub async fn campaign_and_leader(store: Arc<dyn Store>, prefix: String) {
    let name = format!("{prefix}leader/svc");
    let lease = store.lease_grant(30).await.unwrap();
    let key = store
        .campaign(name.as_bytes(), b"10.0.0.1:7000", lease.id)
        .await
        .unwrap();
    assert_eq!(key.name, name.as_bytes());
    assert_eq!(key.key, format!("{name}/{:x}", lease.id).into_bytes());
    assert_eq!(key.lease, lease.id);
    let stored = store.get(&key.key).await.unwrap().unwrap();
    assert_eq!(stored.create_revision, key.create_revision);
    assert_eq!(
        stored.lease, lease.id,
        "the candidate key rides on the lease"
    );

    let leader = store.leader(name.as_bytes()).await.unwrap().unwrap();
    assert_eq!(leader.value, b"10.0.0.1:7000");
    assert_eq!(leader.key, key.key);
    assert_eq!(leader.create_revision, key.create_revision);
    assert_eq!(leader.lease, lease.id);
    store.lease_revoke(lease.id).await.unwrap();
}

pub async fn no_leader_in_empty_election(store: Arc<dyn Store>, prefix: String) {
    let name = format!("{prefix}leader/nobody");
    assert_eq!(store.leader(name.as_bytes()).await.unwrap(), None);
    // A key that merely shares the name's text is not a candidate.
    store
        .put(format!("{name}x/1").as_bytes(), b"x", 0)
        .await
        .unwrap();
    assert_eq!(store.leader(name.as_bytes()).await.unwrap(), None);
}

pub async fn second_candidate_waits_until_resign(store: Arc<dyn Store>, prefix: String) {
    let name = format!("{prefix}leader/svc");
    let (l1, l2) = (
        store.lease_grant(30).await.unwrap(),
        store.lease_grant(30).await.unwrap(),
    );
    let first = won(spawn_campaign(&store, &name, "first", l1.id)).await;
    let second = spawn_campaign(&store, &name, "second", l2.id);
    assert_still_waiting(&second).await;
    let leader = store.leader(name.as_bytes()).await.unwrap().unwrap();
    assert_eq!(
        leader.value, b"first",
        "the waiting candidate does not lead"
    );

    let resigned_at = tokio::time::Instant::now();
    store.resign(&first).await.unwrap();
    let second = won(second).await;
    assert!(
        resigned_at.elapsed() < Duration::from_secs(5),
        "resign hands over at once, not after a lease TTL"
    );
    assert!(second.create_revision > first.create_revision);
    let leader = store.leader(name.as_bytes()).await.unwrap().unwrap();
    assert_eq!(leader.value, b"second");
    assert_eq!(
        store.get(&first.key).await.unwrap(),
        None,
        "resign deletes the key"
    );
    assert!(
        store.lease_time_to_live(l1.id).await.unwrap().is_some(),
        "resign leaves the lease alone"
    );
    for lease in [l1, l2] {
        store.lease_revoke(lease.id).await.unwrap();
    }
}

pub async fn lease_revoke_hands_over(store: Arc<dyn Store>, prefix: String) {
    let name = format!("{prefix}leader/svc");
    let (l1, l2) = (
        store.lease_grant(30).await.unwrap(),
        store.lease_grant(30).await.unwrap(),
    );
    won(spawn_campaign(&store, &name, "first", l1.id)).await;
    let second = spawn_campaign(&store, &name, "second", l2.id);
    assert_still_waiting(&second).await;
    store.lease_revoke(l1.id).await.unwrap();
    let second = won(second).await;
    assert_eq!(second.lease, l2.id);
    let leader = store.leader(name.as_bytes()).await.unwrap().unwrap();
    assert_eq!(leader.value, b"second");
    store.lease_revoke(l2.id).await.unwrap();
    assert_eq!(store.leader(name.as_bytes()).await.unwrap(), None);
}

pub async fn recampaign_reuses_key(store: Arc<dyn Store>, prefix: String) {
    let name = format!("{prefix}leader/svc");
    let lease = store.lease_grant(30).await.unwrap();
    let first = store
        .campaign(name.as_bytes(), b"addr-1", lease.id)
        .await
        .unwrap();
    let again = store
        .campaign(name.as_bytes(), b"addr-2", lease.id)
        .await
        .unwrap();
    assert_eq!(again.key, first.key);
    assert_eq!(
        again.create_revision, first.create_revision,
        "the same lease keeps its key and its place"
    );
    let leader = store.leader(name.as_bytes()).await.unwrap().unwrap();
    assert_eq!(
        leader.value, b"addr-2",
        "re-campaigning proclaims the new value"
    );
    store.lease_revoke(lease.id).await.unwrap();
}

pub async fn campaign_with_unknown_lease_fails(store: Arc<dyn Store>, prefix: String) {
    let name = format!("{prefix}leader/svc");
    let lease = store.lease_grant(30).await.unwrap();
    store.lease_revoke(lease.id).await.unwrap();
    let res = tokio::time::timeout(PATIENCE, store.campaign(name.as_bytes(), b"addr", lease.id))
        .await
        .expect("a campaign on a dead lease fails at once");
    assert!(
        matches!(res, Err(StoreError::LeaseNotFound(_))),
        "got {res:?}"
    );
    assert_eq!(store.leader(name.as_bytes()).await.unwrap(), None);
}

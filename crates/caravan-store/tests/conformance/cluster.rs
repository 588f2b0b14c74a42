//! Conformance of the member list: the cluster holding the store, ordered by
//! id, with exactly one raft leader that votes.

use std::sync::Arc;

use caravan_store::Store;

pub async fn members_name_one_voting_leader(store: Arc<dyn Store>, _prefix: String) {
    let members = store.members().await.unwrap();
    assert!(!members.is_empty());
    let ids: Vec<u64> = members.iter().map(|m| m.id).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(ids, sorted, "ids ordered and unique");
    assert!(ids.iter().all(|id| *id != 0));
    let leaders: Vec<_> = members.iter().filter(|m| m.leader).collect();
    assert_eq!(leaders.len(), 1, "{members:?}");
    assert!(!leaders[0].learner);
    assert!(members.iter().all(|m| !m.name.is_empty()), "{members:?}");
}

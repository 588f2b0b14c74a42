//! The store conformance suite: backend-neutral test functions, each taking
//! a fresh `Arc<dyn Store>` and a key prefix no other test uses. Every
//! backend instantiates the whole list through [`all_cases!`], so the
//! backends' lists cannot drift apart.

pub mod cluster;
pub mod election;
pub mod kv;
pub mod lease;
pub mod txn;
pub mod watch;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use caravan_store::{Revision, Store, StoreError, Watch, WatchBatch};
use futures::StreamExt;

/// How long a test waits for something that should happen promptly.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// Instantiates every conformance case as a test, as
/// `all_cases!(#[test attribute] store_fn)` where `store_fn` is an async fn
/// at the test crate's root returning a fresh `Arc<dyn Store>`.
macro_rules! all_cases {
    (#[$attr:meta] $backend:ident) => {
        $crate::conformance::all_cases!(@cases #[$attr] $backend;
            kv {
                put_get_delete,
                delete_of_nothing_is_no_revision,
                range_prefix_limit_count_keys_only,
                range_between_and_single_key,
                range_at_past_revision,
                range_at_future_revision,
                compaction_fails_old_reads,
                empty_key_is_refused,
                too_large_request_is_refused,
            }
            txn {
                writes_share_one_revision,
                read_only_txn_is_no_revision,
                compare_value,
                compare_mod_revision,
                compare_create_revision_and_absence,
                compare_version,
                failure_branch_runs_its_ops,
                get_sees_earlier_write_of_same_txn,
                duplicate_key_is_refused,
                too_many_ops_is_refused,
                unknown_lease_fails_whole_txn,
            }
            watch {
                delivers_puts_and_deletes_in_order,
                txn_events_come_in_one_batch,
                from_past_revision,
                from_compacted_revision_fails,
                sees_only_its_prefix,
                progress_follows_earlier_events,
                progress_on_idle_watch,
            }
            lease {
                grant_keepalive_ttl_revoke,
                short_ttl_is_raised_not_refused,
                expiry_deletes_attached_keys,
                revoke_deletes_keys_in_one_revision,
                keepalive_keeps_keys_past_ttl,
                put_with_unknown_lease_fails,
                reput_without_lease_detaches,
            }
            election {
                campaign_and_leader,
                no_leader_in_empty_election,
                second_candidate_waits_until_resign,
                lease_revoke_hands_over,
                recampaign_reuses_key,
                campaign_with_unknown_lease_fails,
            }
            cluster {
                members_name_one_voting_leader,
            }
        );
    };
    (@cases #[$attr:meta] $backend:ident; $($module:ident { $($case:ident),* $(,)? })*) => {
        $(
            mod $module {
                $(
                    #[$attr]
                    async fn $case() {
                        let store = crate::$backend().await;
                        let prefix = caravan_testkit::unique_prefix(concat!(
                            stringify!($module),
                            "/",
                            stringify!($case)
                        ));
                        crate::conformance::$module::$case(store, prefix).await;
                    }
                )*
            }
        )*
    };
}
pub(crate) use all_cases;

/// A key under the test's prefix.
pub fn key(prefix: &str, name: &str) -> Vec<u8> {
    format!("{prefix}{name}").into_bytes()
}

/// The next batch of a watch, failing the test if none comes in time.
pub async fn next_batch(watch: &mut Watch) -> Result<WatchBatch, StoreError> {
    match tokio::time::timeout(PATIENCE, watch.stream.next()).await {
        Ok(Some(item)) => item,
        Ok(None) => panic!("watch ended"),
        Err(_) => panic!("no watch batch within {PATIENCE:?}"),
    }
}

/// The next batch that carries events, skipping progress notifications.
pub async fn next_events(watch: &mut Watch) -> WatchBatch {
    loop {
        let batch = next_batch(watch).await.unwrap();
        if !batch.events.is_empty() {
            return batch;
        }
    }
}

/// Asserts that no batch with events arrives for a little while.
pub async fn assert_quiet(watch: &mut Watch) {
    let quiet = Duration::from_millis(300);
    let deadline = tokio::time::Instant::now() + quiet;
    loop {
        match tokio::time::timeout_at(deadline, watch.stream.next()).await {
            Err(_) => return,
            Ok(Some(Ok(batch))) if batch.events.is_empty() => continue,
            Ok(other) => panic!("expected no events, got {other:?}"),
        }
    }
}

/// Runs `scenario` again when a compaction made by a concurrent test (etcd's
/// compaction is cluster-wide) pulled a past revision from under it.
pub async fn retry_if_compacted<F, Fut>(mut scenario: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), StoreError>>,
{
    for _ in 0..5 {
        match scenario().await {
            Ok(()) => return,
            Err(StoreError::Compacted { .. }) => continue,
            Err(err) => panic!("scenario failed: {err}"),
        }
    }
    panic!("history kept being compacted under the test");
}

/// Runs a call that must not write, between two reads of the revision,
/// until no concurrent writer (other tests share etcd) moved the revision
/// meanwhile; returns the revision and the call's answer.
pub async fn without_concurrent_writes<T, F, Fut>(
    store: &Arc<dyn Store>,
    mut call: F,
) -> (Revision, T)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = T>,
{
    for _ in 0..50 {
        let before = store.current_revision().await.unwrap();
        let answer = call().await;
        let after = store.current_revision().await.unwrap();
        if before == after {
            return (before, answer);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the revision never held still; is the call writing?");
}

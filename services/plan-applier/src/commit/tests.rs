//! Commits against the embedded store: splitting, revisions, conflicts,
//! duplicates, all-at-once and fencing.

use std::sync::Arc;

use caravan_proto::{AllocClientStatus, AllocDesiredStatus, Allocation, Plan};
use caravan_state::{Keyspace, decode, encode};
use caravan_store::{GroupCommit, GroupLimits, Leadership, LeadershipError, MemStore, Store};

use super::batches::batches;
use super::changes::Changes;
use super::*;
use crate::error::ApplierError;
use crate::fixtures::{alloc, leader, node, place, plan, snapshot, snapshot_with_evals, stop};
use crate::mutation::{Change, Target};
use crate::overlay::View;

const PREFIX: &str = "/t";

async fn seed(store: &Arc<dyn Store>, a: &Allocation) -> i64 {
    store
        .put(&Keyspace::new(PREFIX).alloc(&a.id), &encode(a), 0)
        .await
        .unwrap()
}

async fn stored(store: &Arc<dyn Store>, id: &str) -> Option<Allocation> {
    let kv = store.get(&Keyspace::new(PREFIX).alloc(id)).await.unwrap()?;
    Some(decode(&kv).unwrap())
}

/// The group committer of `leadership`'s term.
fn grouped(leadership: Leadership) -> GroupCommit<LeadershipError> {
    let limits = GroupLimits {
        max_ops: 10_000,
        max_bytes: 1 << 20,
    };
    plan_commits(Arc::new(leadership), limits).0
}

fn committer<'a>(
    store: &'a Arc<dyn Store>,
    txns: &'a GroupCommit<LeadershipError>,
    keyspace: &'a Keyspace,
    max_ops: usize,
) -> Committer<'a> {
    Committer {
        store: store.as_ref(),
        txns,
        keyspace,
        max_ops,
        max_bytes: 1 << 20,
        retries: 3,
        now: 1_000,
        marks: PlanMarks::default(),
    }
}

fn accepted(p: &Plan) -> Vec<String> {
    crate::verify::plan_nodes(p)
}

#[test]
fn batches_never_split_a_node_and_put_the_plan_wide_part_first() {
    let snap = snapshot(5, &[node("n1"), node("n2"), node("n3")], &[]);
    let view = View::of(snap);
    let mut p = plan(5);
    for n in ["n1", "n2", "n3"] {
        for i in 0..3 {
            place(&mut p, alloc(&format!("{n}-{i}"), n, 10, 10));
        }
    }
    p.evals.push(caravan_proto::Evaluation {
        id: "pre".into(),
        ..Default::default()
    });
    let changes = plan_changes(&p, &accepted(&p), &view);
    // 2 ops per object: each node part is 6 ops, the eval part 2.
    let b = batches(changes, 12, 1 << 20);
    let shape: Vec<Vec<Option<String>>> = b
        .iter()
        .map(|batch| batch.iter().map(|part| part.node.clone()).collect())
        .collect();
    assert_eq!(
        shape,
        vec![
            vec![None, Some("n1".into())],
            vec![Some("n2".into()), Some("n3".into())],
        ]
    );
    // A part over the budget alone still gets a transaction of its own.
    let changes = plan_changes(&p, &accepted(&p), &view);
    assert_eq!(batches(changes, 4, 1 << 20).len(), 4);
}

#[tokio::test]
async fn a_commit_places_stops_and_resolves_revisions() {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let ks = Keyspace::new(PREFIX);
    let l = grouped(leader(&store).await);
    let old = alloc("old", "n1", 100, 64);
    let seeded = seed(&store, &old).await;
    let mut old_seen = old.clone();
    old_seen.modify_revision = seeded;
    let view = View::of(snapshot(seeded, &[node("n1")], &[old_seen]));
    let mut p = plan(seeded);
    stop(&mut p, "n1", "old");
    let mut new = alloc("new", "n1", 100, 64);
    new.previous_allocation = "old".into();
    new.client_status = 0;
    place(&mut p, new);
    let changes = plan_changes(&p, &accepted(&p), &view);
    let outcome = committer(&store, &l, &ks, 100)
        .commit(&view, changes, false, 1)
        .await;
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert_eq!(outcome.committed, vec!["n1"]);
    assert!(outcome.revision > seeded);
    let new = stored(&store, "new").await.unwrap();
    assert_eq!(new.alloc_modify_revision, outcome.revision);
    assert_eq!(new.client_status(), AllocClientStatus::Pending);
    let old = stored(&store, "old").await.unwrap();
    assert_eq!(old.desired_status(), AllocDesiredStatus::Stop);
    assert_eq!(old.next_allocation, "new");
    assert_eq!(old.alloc_modify_revision, outcome.revision);
    // The overlay layer holds both, settled at the commit's revision.
    assert_eq!(outcome.layer.revision, Some(outcome.revision));
    assert_eq!(
        outcome.layer.allocs["old"].modify_revision,
        outcome.revision
    );
}

#[tokio::test]
async fn a_client_write_in_between_is_re_read_and_kept() {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let ks = Keyspace::new(PREFIX);
    let l = grouped(leader(&store).await);
    let a = alloc("a", "n1", 100, 64);
    let rev = seed(&store, &a).await;
    let mut seen = a.clone();
    seen.modify_revision = rev;
    let view = View::of(snapshot(rev, &[node("n1")], &[seen]));
    // The client reports completion after the view was taken.
    let mut done = a.clone();
    done.set_client_status(AllocClientStatus::Complete);
    seed(&store, &done).await;
    let mut p = plan(rev);
    stop(&mut p, "n1", "a");
    let changes = plan_changes(&p, &accepted(&p), &view);
    let outcome = committer(&store, &l, &ks, 100)
        .commit(&view, changes, false, 1)
        .await;
    assert!(outcome.error.is_none() && outcome.refused.is_empty());
    let a = stored(&store, "a").await.unwrap();
    assert_eq!(a.desired_status(), AllocDesiredStatus::Stop);
    assert_eq!(a.client_status(), AllocClientStatus::Complete);
}

/// A plan that marks an allocation lost writes its client's status key
/// too when its client reported one (the status is the allocation's there),
/// compared on it: a report that lands in between is read again and the
/// mark still holds.
#[tokio::test]
async fn a_lost_mark_follows_a_reported_status_through_a_report_in_between() {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let ks = Keyspace::new(PREFIX);
    let l = grouped(leader(&store).await);
    let a = alloc("a", "n1", 100, 64);
    seed(&store, &a).await;
    let mut running = a.clone();
    running.set_client_status(AllocClientStatus::Running);
    let put_status = |alloc: &Allocation| {
        let store = Arc::clone(&store);
        let (key, value) = (
            ks.alloc_status("a"),
            caravan_state::encode_status(caravan_state::client_part(alloc)),
        );
        async move { store.put(&key, &value, 0).await.unwrap() }
    };
    put_status(&running).await;
    let seen = caravan_state::read_alloc(store.as_ref(), &ks, "a")
        .await
        .unwrap()
        .unwrap();
    assert_ne!(seen.client_modify_revision, 0);
    let view = View::of(snapshot(
        seen.client_modify_revision,
        &[node("n1")],
        &[seen],
    ));
    // The client reports again after the view was taken.
    let mut again = running.clone();
    again.client_description = "still running".into();
    put_status(&again).await;
    let mut p = plan(1);
    stop(&mut p, "n1", "a");
    p.node_update.get_mut("n1").unwrap().allocs[0].client_status = AllocClientStatus::Lost as i32;
    let changes = plan_changes(&p, &accepted(&p), &view);
    let outcome = committer(&store, &l, &ks, 100)
        .commit(&view, changes, false, 1)
        .await;
    assert!(
        outcome.error.is_none() && outcome.refused.is_empty(),
        "{outcome:?}"
    );
    let now = caravan_state::read_alloc(store.as_ref(), &ks, "a")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(now.desired_status(), AllocDesiredStatus::Stop);
    assert_eq!(now.client_status(), AllocClientStatus::Lost);
    assert_eq!(now.client_description, "still running");
    assert_eq!(
        (now.modify_revision, now.client_modify_revision),
        (outcome.revision, outcome.revision)
    );
    assert_eq!(
        outcome.layer.allocs["a"].client_modify_revision,
        outcome.revision
    );
}

#[tokio::test]
async fn a_placement_that_already_exists_refuses_only_its_node() {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let ks = Keyspace::new(PREFIX);
    let l = grouped(leader(&store).await);
    let view = View::of(snapshot(1, &[node("n1"), node("n2")], &[]));
    // Committed by an earlier attempt the view does not show yet.
    seed(&store, &alloc("dup", "n1", 100, 64)).await;
    let mut p = plan(1);
    place(&mut p, alloc("dup", "n1", 100, 64));
    place(&mut p, alloc("fresh", "n2", 100, 64));
    let changes = plan_changes(&p, &accepted(&p), &view);
    let outcome = committer(&store, &l, &ks, 100)
        .commit(&view, changes, false, 1)
        .await;
    assert_eq!(outcome.committed, vec!["n2"]);
    assert!(outcome.refused["n1"].contains("already exists"));
    assert!(stored(&store, "fresh").await.is_some());

    // All at once, the same conflict commits nothing.
    let mut p = plan(1);
    place(&mut p, alloc("dup", "n1", 100, 64));
    place(&mut p, alloc("other", "n2", 100, 64));
    let changes = plan_changes(&p, &accepted(&p), &view);
    let outcome = committer(&store, &l, &ks, 100)
        .commit(&view, changes, true, 2)
        .await;
    assert!(outcome.committed.is_empty());
    assert_eq!(outcome.refused.len(), 2);
    assert!(stored(&store, "other").await.is_none());
}

#[tokio::test]
async fn a_split_commit_uses_one_transaction_per_batch() {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let ks = Keyspace::new(PREFIX);
    let l = grouped(leader(&store).await);
    let nodes: Vec<_> = (0..5).map(|i| node(&format!("n{i}"))).collect();
    let view = View::of(snapshot(1, &nodes, &[]));
    let mut p = plan(1);
    for i in 0..5 {
        for j in 0..2 {
            place(&mut p, alloc(&format!("a{i}{j}"), &format!("n{i}"), 10, 10));
        }
    }
    let before = store.current_revision().await.unwrap();
    let changes = plan_changes(&p, &accepted(&p), &view);
    let outcome = committer(&store, &l, &ks, 8)
        .commit(&view, changes, false, 1)
        .await;
    assert_eq!(outcome.committed.len(), 5);
    // Two nodes (8 ops) per transaction: three transactions.
    assert_eq!(outcome.revision, before + 3);
    let revs: std::collections::BTreeSet<i64> = outcome
        .layer
        .allocs
        .values()
        .map(|a| a.alloc_modify_revision)
        .collect();
    assert_eq!(revs.len(), 3);
    for i in 0..5 {
        let a = stored(&store, &format!("a{i}0")).await.unwrap();
        let b = stored(&store, &format!("a{i}1")).await.unwrap();
        assert_eq!(
            a.modify_revision, b.modify_revision,
            "a node's part is one txn"
        );
    }

    // The same plan all at once does not fit one transaction: refused whole.
    let mut p2 = p.clone();
    for list in p2.node_allocation.values_mut() {
        for a in &mut list.allocs {
            a.id.push('x');
        }
    }
    let changes = plan_changes(&p2, &accepted(&p2), &view);
    let outcome = committer(&store, &l, &ks, 8)
        .commit(&view, changes, true, 2)
        .await;
    assert!(outcome.committed.is_empty());
    assert_eq!(outcome.refused.len(), 5);
    assert!(outcome.refused["n0"].contains("too large"));
}

#[tokio::test]
async fn a_deposed_leader_commits_nothing() {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let ks = Keyspace::new(PREFIX);
    let old = leader(&store).await;
    // Another replica takes over: the old handle's key is gone.
    store
        .delete(caravan_store::Range::key(old.token().key))
        .await
        .unwrap();
    let _new = leader(&store).await;
    let old = grouped(old);
    let view = View::of(snapshot(1, &[node("n1")], &[]));
    let mut p = plan(1);
    place(&mut p, alloc("a", "n1", 10, 10));
    let changes = plan_changes(&p, &accepted(&p), &view);
    let outcome = committer(&store, &old, &ks, 100)
        .commit(&view, changes, false, 1)
        .await;
    assert!(matches!(outcome.error, Some(ApplierError::NotCommitted)));
    assert_eq!(outcome.revision, 0);
    assert!(stored(&store, "a").await.is_none());
}

#[tokio::test]
async fn evictions_of_terminal_allocs_are_dropped() {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let ks = Keyspace::new(PREFIX);
    let l = grouped(leader(&store).await);
    let mut gone = alloc("gone", "n1", 100, 64);
    gone.set_client_status(AllocClientStatus::Complete);
    let live = alloc("live", "n1", 100, 64);
    let rev = seed(&store, &live).await;
    let mut live_seen = live.clone();
    live_seen.modify_revision = rev;
    let view = View::of(snapshot(rev, &[node("n1")], &[gone, live_seen]));
    let mut p = plan(rev);
    for id in ["gone", "live"] {
        p.node_preemptions
            .entry("n1".into())
            .or_default()
            .allocs
            .push(Allocation {
                id: id.into(),
                preempted_by_allocation: "big".into(),
                ..Default::default()
            });
    }
    let changes = plan_changes(&p, &accepted(&p), &view);
    let outcome = committer(&store, &l, &ks, 100)
        .commit(&view, changes, false, 1)
        .await;
    assert!(outcome.skipped_evictions.contains("gone"));
    let live = stored(&store, "live").await.unwrap();
    assert_eq!(live.desired_status(), AllocDesiredStatus::Evict);
    assert_eq!(live.preempted_by_allocation, "big");
}

/// A pending eval `e1` stored under the prefix; returns it as a read would
/// show it (revisions filled).
async fn seed_eval(store: &Arc<dyn Store>) -> caravan_proto::Evaluation {
    let mut e = caravan_proto::Evaluation {
        id: "e1".into(),
        namespace: "default".into(),
        job_id: "web".into(),
        r#type: "service".into(),
        status: caravan_proto::EvalStatus::Pending as i32,
        ..Default::default()
    };
    let rev = store
        .put(&Keyspace::new(PREFIX).eval("e1"), &encode(&e), 0)
        .await
        .unwrap();
    e.create_revision = rev;
    e.modify_revision = rev;
    e
}

async fn stored_eval(store: &Arc<dyn Store>) -> caravan_proto::Evaluation {
    let kv = store
        .get(&Keyspace::new(PREFIX).eval("e1"))
        .await
        .unwrap()
        .unwrap();
    decode(&kv).unwrap()
}

/// `delivered` as the scheduler finishes it.
fn completed(delivered: &caravan_proto::Evaluation) -> caravan_proto::Evaluation {
    let mut e = delivered.clone();
    e.status = caravan_proto::EvalStatus::Complete as i32;
    e.queued_allocations.insert("web".into(), 0);
    e
}

/// The changes of `p` with its completion, as the pipeline hands them on
/// when no node was refused in verification.
fn with_completion(p: &Plan, view: &View) -> Changes {
    let mut changes = plan_changes(p, &accepted(p), view);
    changes.completion = Completion::of(p);
    changes
}

#[tokio::test]
async fn a_full_commit_completes_the_eval_in_its_own_transaction() {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let ks = Keyspace::new(PREFIX);
    let l = grouped(leader(&store).await);
    let delivered = seed_eval(&store).await;
    let rev = delivered.modify_revision;
    let view = View::of(snapshot_with_evals(
        rev,
        &[node("n1"), node("n2")],
        &[],
        std::slice::from_ref(&delivered),
    ));
    let mut p = plan(rev);
    place(&mut p, alloc("a1", "n1", 10, 10));
    place(&mut p, alloc("a2", "n2", 10, 10));
    p.eval_completion = Some(completed(&delivered));
    let before = store.current_revision().await.unwrap();
    let outcome = committer(&store, &l, &ks, 100)
        .commit(&view, with_completion(&p, &view), false, 1)
        .await;
    assert!(outcome.error.is_none() && outcome.refused.is_empty());
    // One write for the placements and the eval's status together.
    assert_eq!(store.current_revision().await.unwrap(), before + 1);
    assert_eq!(outcome.eval_revision, outcome.revision);
    let e = stored_eval(&store).await;
    assert_eq!(e.status(), caravan_proto::EvalStatus::Complete);
    assert_eq!(e.modify_revision, outcome.revision);
    assert_eq!(e.queued_allocations.get("web"), Some(&0));
    assert_eq!(e.modify_time_unix_ns, 1_000, "stamped at commit time");
    assert_eq!(
        stored(&store, "a1").await.unwrap().modify_revision,
        e.modify_revision
    );
}

#[tokio::test]
async fn a_split_commit_completes_the_eval_with_its_last_transaction() {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let ks = Keyspace::new(PREFIX);
    let l = grouped(leader(&store).await);
    let delivered = seed_eval(&store).await;
    let rev = delivered.modify_revision;
    let nodes: Vec<_> = (0..4).map(|i| node(&format!("n{i}"))).collect();
    let view = View::of(snapshot_with_evals(
        rev,
        &nodes,
        &[],
        std::slice::from_ref(&delivered),
    ));
    let mut p = plan(rev);
    for i in 0..4 {
        place(&mut p, alloc(&format!("a{i}"), &format!("n{i}"), 10, 10));
    }
    p.eval_completion = Some(completed(&delivered));
    // Room for one node and the completion per transaction.
    let outcome = committer(&store, &l, &ks, 4)
        .commit(&view, with_completion(&p, &view), false, 1)
        .await;
    assert_eq!(outcome.committed.len(), 4);
    assert_eq!(outcome.eval_revision, outcome.revision, "the last one");
    assert_eq!(
        stored(&store, "a3").await.unwrap().modify_revision,
        outcome.eval_revision
    );
    assert!(stored(&store, "a0").await.unwrap().modify_revision < outcome.eval_revision);
}

#[tokio::test]
async fn a_node_refused_at_commit_leaves_the_eval_to_the_worker() {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let ks = Keyspace::new(PREFIX);
    let l = grouped(leader(&store).await);
    let delivered = seed_eval(&store).await;
    let rev = delivered.modify_revision;
    let view = View::of(snapshot_with_evals(
        rev,
        &[node("n1"), node("n2")],
        &[],
        std::slice::from_ref(&delivered),
    ));
    // Committed by an earlier attempt the view does not show yet.
    seed(&store, &alloc("dup", "n1", 10, 10)).await;
    let mut p = plan(rev);
    place(&mut p, alloc("dup", "n1", 10, 10));
    place(&mut p, alloc("fresh", "n2", 10, 10));
    p.eval_completion = Some(completed(&delivered));
    let outcome = committer(&store, &l, &ks, 100)
        .commit(&view, with_completion(&p, &view), false, 1)
        .await;
    assert_eq!(outcome.committed, vec!["n2"]);
    assert!(outcome.revision > 0);
    assert_eq!(outcome.eval_revision, 0);
    let e = stored_eval(&store).await;
    assert_eq!(e.status(), caravan_proto::EvalStatus::Pending);
    assert_eq!(e.modify_revision, rev);
}

#[tokio::test]
async fn an_eval_written_since_its_delivery_is_not_overwritten() {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let ks = Keyspace::new(PREFIX);
    let l = grouped(leader(&store).await);
    let delivered = seed_eval(&store).await;
    let rev = delivered.modify_revision;
    // The broker failed the eval after the view was taken (the view lags).
    let mut failed = delivered.clone();
    failed.status = caravan_proto::EvalStatus::Failed as i32;
    let failed_at = store
        .put(&ks.eval("e1"), &encode(&failed), 0)
        .await
        .unwrap();
    let view = View::of(snapshot_with_evals(
        rev,
        &[node("n1")],
        &[],
        std::slice::from_ref(&delivered),
    ));
    let mut p = plan(rev);
    place(&mut p, alloc("a1", "n1", 10, 10));
    p.eval_completion = Some(completed(&delivered));
    let outcome = committer(&store, &l, &ks, 100)
        .commit(&view, with_completion(&p, &view), false, 1)
        .await;
    assert!(outcome.error.is_none() && outcome.refused.is_empty());
    assert_eq!(outcome.committed, vec!["n1"], "the placements still commit");
    assert!(stored(&store, "a1").await.is_some());
    assert_eq!(outcome.eval_revision, 0);
    let e = stored_eval(&store).await;
    assert_eq!(e.status(), caravan_proto::EvalStatus::Failed);
    assert_eq!(e.modify_revision, failed_at);
}

#[tokio::test]
async fn a_plan_without_a_completion_leaves_the_eval_alone() {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let ks = Keyspace::new(PREFIX);
    let l = grouped(leader(&store).await);
    let delivered = seed_eval(&store).await;
    let rev = delivered.modify_revision;
    let view = View::of(snapshot_with_evals(
        rev,
        &[node("n1")],
        &[],
        std::slice::from_ref(&delivered),
    ));
    let mut p = plan(rev);
    place(&mut p, alloc("a1", "n1", 10, 10));
    let outcome = committer(&store, &l, &ks, 100)
        .commit(&view, with_completion(&p, &view), false, 1)
        .await;
    assert!(outcome.revision > rev);
    assert_eq!(outcome.eval_revision, 0);
    assert_eq!(stored_eval(&store).await.modify_revision, rev);
}

/// `a` as stored with what only the full value carries: placement metrics
/// and the task states of a running allocation.
fn detailed(mut a: Allocation) -> Allocation {
    a.set_client_status(AllocClientStatus::Running);
    a.metrics = Some(Box::new(caravan_proto::AllocMetric {
        nodes_evaluated: 9,
        ..Default::default()
    }));
    a.task_states.insert(
        "web".into(),
        caravan_proto::TaskState {
            state: "running".into(),
            ..Default::default()
        },
    );
    a
}

/// `a` as the applier's lean cache holds it after it was stored at `rev`.
fn cached(a: &Allocation, rev: i64) -> Allocation {
    let kv = caravan_store::KeyValue {
        key: Keyspace::new(PREFIX).alloc(&a.id),
        value: encode(a),
        create_revision: rev,
        mod_revision: rev,
        version: 1,
        lease: 0,
    };
    caravan_state::decode_alloc(&kv, caravan_state::AllocDetail::Scheduling).unwrap()
}

#[tokio::test]
async fn a_rewrite_keeps_what_the_lean_cache_lacks() {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let ks = Keyspace::new(PREFIX);
    let l = grouped(leader(&store).await);
    let old = detailed(alloc("old", "n1", 100, 64));
    let kept = detailed(alloc("kept", "n1", 100, 64));
    let rev_old = seed(&store, &old).await;
    let rev_kept = seed(&store, &kept).await;
    let lean = [cached(&old, rev_old), cached(&kept, rev_kept)];
    assert!(
        lean.iter()
            .all(|a| a.metrics.is_none() && a.task_states.is_empty())
    );
    let view = View::of(snapshot(rev_kept, &[node("n1")], &lean));
    // Stops `old` for a replacement (a stop and a link), updates `kept` in place.
    let mut p = plan(rev_kept);
    stop(&mut p, "n1", "old");
    let mut next = alloc("new", "n1", 100, 64);
    next.previous_allocation = "old".into();
    place(&mut p, next);
    let mut update = lean[1].clone();
    update.job_version = 2;
    place(&mut p, update);
    let changes = plan_changes(&p, &accepted(&p), &view);
    let outcome = committer(&store, &l, &ks, 100)
        .commit(&view, changes, false, 1)
        .await;
    assert!(
        outcome.error.is_none() && outcome.refused.is_empty(),
        "{outcome:?}"
    );
    let old_now = stored(&store, "old").await.unwrap();
    assert_eq!(old_now.desired_status(), AllocDesiredStatus::Stop);
    assert_eq!(old_now.next_allocation, "new");
    assert_eq!(old_now.metrics, old.metrics, "metrics kept");
    assert_eq!(old_now.task_states, old.task_states, "task states kept");
    let kept_now = stored(&store, "kept").await.unwrap();
    assert_eq!(kept_now.job_version, 2);
    assert_eq!(kept_now.metrics, kept.metrics);
    assert_eq!(kept_now.task_states, kept.task_states);
    // The overlay holds what was written, not the lean copy.
    assert_eq!(outcome.layer.allocs["old"].metrics, old.metrics);
}

/// An allocation updated in place into a new deployment counts among the
/// deployment's placements, beside the one placed new; one that stays in
/// its deployment does not count again.
#[test]
fn an_update_into_a_new_deployment_counts_as_placed() {
    let mut moving = alloc("moving", "n1", 100, 64);
    moving.deployment_id = "d-old".into();
    let mut staying = alloc("staying", "n1", 100, 64);
    staying.deployment_id = "d-new".into();
    let view = View::of(snapshot(
        5,
        &[node("n1")],
        &[moving.clone(), staying.clone()],
    ));
    let mut p = plan(5);
    moving.deployment_id = "d-new".into();
    place(&mut p, moving);
    place(&mut p, staying);
    let mut fresh = alloc("fresh", "n1", 100, 64);
    fresh.deployment_id = "d-new".into();
    place(&mut p, fresh);
    let changes = plan_changes(&p, &accepted(&p), &view);
    let placed: Vec<(String, i32)> = changes
        .nodes
        .iter()
        .flat_map(|part| &part.changes)
        .filter_map(|(target, change)| match (target, change) {
            (Target::Deployment(d), Change::Placed { count, .. }) => Some((d.clone(), *count)),
            _ => None,
        })
        .collect();
    assert_eq!(placed, [("d-new".to_string(), 2)]);
}

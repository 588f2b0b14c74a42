//! Blocked evals: held per job, released when capacity appears for a class
//! they could use.

use std::sync::Arc;
use std::time::Duration;

use caravan_proto::{
    CreateEvalRequest, EvalStatus, Node, NodeStatus, SchedulingEligibility, UpdateEvalRequest,
};
use caravan_state::Keyspace;
use caravan_store::Store;

use super::*;

fn keyspace() -> (String, Keyspace) {
    let prefix = caravan_testkit::unique_prefix("eval-broker-blocked");
    let ks = Keyspace::new(&prefix);
    (prefix, ks)
}

fn ready_node(id: &str, class: &str) -> Node {
    Node {
        id: id.into(),
        name: id.into(),
        datacenter: "dc1".into(),
        computed_class: class.into(),
        status: NodeStatus::Ready as i32,
        scheduling_eligibility: SchedulingEligibility::Eligible as i32,
        ..Default::default()
    }
}

/// Registers a node as the api-gateway does: the node and its heartbeat key
/// on a lease.
async fn register(store: &Arc<dyn Store>, ks: &Keyspace, node: &Node) {
    let lease = store.lease_grant(30).await.expect("lease");
    store
        .put(&ks.heartbeat(&node.id), b"", lease.id)
        .await
        .expect("heartbeat");
    put(store, ks.node(&node.id), node).await;
}

pub async fn a_blocked_eval_unblocks_when_a_node_registers(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let eval = pending_eval("web", "service", 50);
    put_eval(&store, &ks, &eval).await;
    let mut broker = start_leader(store.clone(), &prefix).await;
    let (got, token, wait_revision) = broker.take().await;

    // The scheduler found no room: a blocked eval, then the eval complete.
    let mut blocked = pending_eval("web", "service", 50);
    blocked.status = EvalStatus::Blocked as i32;
    blocked.triggered_by = "queued-allocs".into();
    blocked.previous_eval = got.id.clone();
    blocked.snapshot_revision = wait_revision;
    blocked.class_eligibility.insert("small".into(), false);
    broker
        .client
        .create_eval(CreateEvalRequest {
            eval: Some(blocked.clone()),
            token: token.clone(),
        })
        .await
        .expect("create blocked");
    let mut done = got.clone();
    done.status = EvalStatus::Complete as i32;
    done.blocked_eval = blocked.id.clone();
    broker
        .client
        .update_eval(UpdateEvalRequest {
            eval: Some(done),
            token: token.clone(),
        })
        .await
        .expect("update");
    broker.ack(&got.id, &token).await;
    broker
        .stats_become("the blocked eval to be held", |s| s.total_blocked == 1)
        .await;

    // A node of a class the eval found ineligible changes nothing. Only a
    // wait shows "nothing": an unblock follows the node's write at once, so
    // this covers the broker seeing it and writing.
    register(&store, &ks, &ready_node(&uuid(), "small")).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        read_eval(&store, &ks, &blocked.id)
            .await
            .map(|e| e.status()),
        Some(EvalStatus::Blocked)
    );
    assert!(
        broker
            .dequeue(Duration::from_millis(100))
            .await
            .eval
            .is_none()
    );

    // A node of a class it never saw may fit: unblocked and delivered.
    register(&store, &ks, &ready_node(&uuid(), "large")).await;
    let (unblocked, _, _) = broker.take().await;
    assert_eq!(unblocked.id, blocked.id);
    assert_eq!(unblocked.status(), EvalStatus::Pending);
    assert_eq!(broker.stats().await.total_blocked, 0);
    broker.stop().await;
}

pub async fn a_newer_blocked_eval_cancels_the_older(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let blocked = |job: &str| {
        let mut e = pending_eval(job, "service", 50);
        e.status = EvalStatus::Blocked as i32;
        e.triggered_by = "queued-allocs".into();
        e
    };
    let oldest = blocked("web");
    let middle = blocked("web");
    let other_job = blocked("api");
    put_eval(&store, &ks, &oldest).await;
    put_eval(&store, &ks, &middle).await;
    put_eval(&store, &ks, &other_job).await;
    let mut broker = start_leader(store.clone(), &prefix).await;
    let canceled = eval_becomes(&store, &ks, &oldest.id, "the oldest to be canceled", |e| {
        e.status() == EvalStatus::Canceled
    })
    .await;
    assert!(canceled.status_description.contains("newer blocked"));
    assert_eq!(broker.stats().await.total_blocked, 2);

    let newest = blocked("web");
    put_eval(&store, &ks, &newest).await;
    eval_becomes(
        &store,
        &ks,
        &middle.id,
        "the middle one to be canceled",
        |e| e.status() == EvalStatus::Canceled,
    )
    .await;
    assert_eq!(
        read_eval(&store, &ks, &newest.id).await.map(|e| e.status()),
        Some(EvalStatus::Blocked)
    );
    assert_eq!(
        read_eval(&store, &ks, &other_job.id)
            .await
            .map(|e| e.status()),
        Some(EvalStatus::Blocked)
    );
    assert_eq!(broker.stats().await.total_blocked, 2);
    broker.stop().await;
}

pub async fn a_later_complete_eval_cancels_the_blocked_one(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let mut blocked = pending_eval("web", "service", 50);
    blocked.status = EvalStatus::Blocked as i32;
    blocked.triggered_by = "queued-allocs".into();
    blocked.snapshot_revision = 1;
    put_eval(&store, &ks, &blocked).await;
    let eval = pending_eval("web", "service", 50);
    put_eval(&store, &ks, &eval).await;
    let mut broker = start_leader(store.clone(), &prefix).await;
    assert_eq!(broker.stats().await.total_blocked, 1);

    let (got, token, wait_revision) = broker.take().await;
    let mut done = got.clone();
    done.status = EvalStatus::Complete as i32;
    done.snapshot_revision = wait_revision;
    broker
        .client
        .update_eval(UpdateEvalRequest {
            eval: Some(done),
            token: token.clone(),
        })
        .await
        .expect("update");
    broker.ack(&got.id, &token).await;
    let canceled = eval_becomes(
        &store,
        &ks,
        &blocked.id,
        "the blocked eval to be canceled",
        |e| e.status() == EvalStatus::Canceled,
    )
    .await;
    assert!(canceled.status_description.contains("later evaluation"));
    assert_eq!(broker.stats().await.total_blocked, 0);
    broker.stop().await;
}

pub async fn a_reblocked_eval_waits_for_capacity_again(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let eval = pending_eval("web", "service", 50);
    put_eval(&store, &ks, &eval).await;
    let mut broker = start_leader(store.clone(), &prefix).await;
    let (got, token, wait_revision) = broker.take().await;

    let mut reblock = got.clone();
    reblock.class_eligibility.insert("tiny".into(), false);
    reblock.snapshot_revision = wait_revision;
    let wrong = broker
        .client
        .reblock_eval(caravan_proto::ReblockEvalRequest {
            eval: Some(reblock.clone()),
            token: "stale".into(),
        })
        .await
        .expect_err("a wrong token");
    assert_eq!(wrong.code(), tonic::Code::PermissionDenied);
    broker
        .client
        .reblock_eval(caravan_proto::ReblockEvalRequest {
            eval: Some(reblock),
            token: token.clone(),
        })
        .await
        .expect("reblock");
    let stored = read_eval(&store, &ks, &got.id).await.expect("eval");
    assert_eq!(stored.status(), EvalStatus::Blocked);
    assert_eq!(stored.class_eligibility.get("tiny"), Some(&false));
    broker.ack(&got.id, &token).await;
    broker
        .stats_become("the reblocked eval to be held", |s| {
            s.total_blocked == 1 && s.total_unacked == 0
        })
        .await;
    assert!(
        broker
            .dequeue(Duration::from_millis(200))
            .await
            .eval
            .is_none()
    );

    register(&store, &ks, &ready_node(&uuid(), "roomy")).await;
    let (again, _, _) = broker.take().await;
    assert_eq!(again.id, got.id, "unblocked by the new class");
    broker.stop().await;
}

pub async fn plan_failure_blocks_are_retried_periodically(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let mut stuck = pending_eval("web", "service", 50);
    stuck.status = EvalStatus::Blocked as i32;
    stuck.triggered_by = "max-plan-attempts".into();
    stuck.snapshot_revision = 1;
    let mut waiting = pending_eval("api", "service", 50);
    waiting.status = EvalStatus::Blocked as i32;
    waiting.triggered_by = "queued-allocs".into();
    waiting.snapshot_revision = 1;
    put_eval(&store, &ks, &stuck).await;
    put_eval(&store, &ks, &waiting).await;
    let mut config = fast_config(&prefix);
    config.failed_unblock_interval_ms = 300;
    let mut broker = start(store.clone(), config).await;
    broker.wait_leading().await;
    let (got, _, _) = broker.take().await;
    assert_eq!(got.id, stuck.id);
    assert_eq!(
        read_eval(&store, &ks, &waiting.id)
            .await
            .map(|e| e.status()),
        Some(EvalStatus::Blocked),
        "capacity waits are not retried on a timer"
    );
    broker.stop().await;
}

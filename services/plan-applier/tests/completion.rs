//! A plan carrying its eval's completion over gRPC, against the embedded
//! store and a real etcd: a full commit writes the eval in the plan's own
//! transaction; a refused node, a stale token or an eval changed since its
//! delivery leave the eval as it was.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use caravan_proto::{EvalStatus, Evaluation, Plan};
use caravan_state::{Keyspace, decode, encode};
use caravan_store::Store;
use support::*;
use tonic::Code;

caravan_testkit::backend_cases!(store_and_prefix => crate;
    a_full_commit_writes_the_eval_with_the_allocations,
    a_refused_node_leaves_the_eval_pending,
    a_stale_token_writes_neither_allocations_nor_eval,
    an_eval_changed_since_delivery_keeps_its_change,
    a_completion_of_another_eval_is_refused_by_name,
);

const EVAL: &str = "e1";

/// Stores a pending eval and returns it as delivered (revisions filled).
async fn put_eval(store: &Arc<dyn Store>, prefix: &str) -> Evaluation {
    let mut e = Evaluation {
        id: EVAL.into(),
        namespace: "default".into(),
        job_id: "job".into(),
        r#type: "service".into(),
        priority: 50,
        triggered_by: "job-register".into(),
        status: EvalStatus::Pending as i32,
        ..Default::default()
    };
    let rev = store
        .put(&Keyspace::new(prefix).eval(EVAL), &encode(&e), 0)
        .await
        .unwrap();
    e.create_revision = rev;
    e.modify_revision = rev;
    e
}

async fn get_eval(store: &Arc<dyn Store>, prefix: &str) -> Evaluation {
    let kv = store
        .get(&Keyspace::new(prefix).eval(EVAL))
        .await
        .unwrap()
        .expect("the eval is stored");
    decode(&kv).unwrap()
}

/// A plan of the eval placing `allocs`, completing `delivered` on a full commit.
fn completing(delivered: &Evaluation, token: &str, allocs: Vec<caravan_proto::Allocation>) -> Plan {
    let mut p = plan(EVAL, token, delivered.modify_revision, allocs);
    let mut done = delivered.clone();
    done.status = EvalStatus::Complete as i32;
    done.queued_allocations.insert("web".into(), 0);
    p.eval_completion = Some(done);
    p
}

async fn a_full_commit_writes_the_eval_with_the_allocations(store: Arc<dyn Store>, prefix: String) {
    let broker = start_broker(&store, &prefix).await;
    put_node(&store, &prefix, &node("n1", 4000)).await;
    put_node(&store, &prefix, &node("n2", 4000)).await;
    let delivered = put_eval(&store, &prefix).await;
    let app = start_applier(&store, config(&prefix)).await;
    wait_leading(&app).await;
    broker.broker.grant(EVAL, "t1");
    let mut client = app.client().await;
    let p = completing(
        &delivered,
        "t1",
        vec![alloc("a1", "job", "n1", 100), alloc("a2", "job", "n2", 100)],
    );
    let r = submit(&mut client, p).await.unwrap();
    assert!(r.rejected_nodes.is_empty(), "{r:?}");
    assert_eq!(r.eval_revision, r.alloc_revision, "one transaction");
    let e = get_eval(&store, &prefix).await;
    assert_eq!(e.status(), EvalStatus::Complete);
    assert_eq!(e.modify_revision, r.alloc_revision);
    assert_eq!(e.queued_allocations.get("web"), Some(&0));
    assert_eq!(e.create_revision, delivered.create_revision);
    for a in allocs(&store, &prefix).await {
        assert_eq!(a.modify_revision, e.modify_revision);
    }
    app.shutdown().await;
}

async fn a_refused_node_leaves_the_eval_pending(store: Arc<dyn Store>, prefix: String) {
    let broker = start_broker(&store, &prefix).await;
    put_node(&store, &prefix, &node("n1", 4000)).await;
    put_node(&store, &prefix, &node("n2", 1000)).await;
    let delivered = put_eval(&store, &prefix).await;
    let app = start_applier(&store, config(&prefix)).await;
    wait_leading(&app).await;
    broker.broker.grant(EVAL, "t1");
    let mut client = app.client().await;
    let p = completing(
        &delivered,
        "t1",
        vec![
            alloc("a1", "job", "n1", 100),
            alloc("a2", "job", "n2", 3000),
        ],
    );
    let r = submit(&mut client, p).await.unwrap();
    assert_eq!(r.rejected_nodes, vec!["n2".to_string()]);
    assert!(r.alloc_revision > 0, "n1 commits");
    assert_eq!(r.eval_revision, 0);
    let e = get_eval(&store, &prefix).await;
    assert_eq!(e.status(), EvalStatus::Pending);
    assert_eq!(e.modify_revision, delivered.modify_revision);
    app.shutdown().await;
}

async fn a_stale_token_writes_neither_allocations_nor_eval(store: Arc<dyn Store>, prefix: String) {
    let broker = start_broker(&store, &prefix).await;
    put_node(&store, &prefix, &node("n1", 4000)).await;
    let delivered = put_eval(&store, &prefix).await;
    let app = start_applier(&store, config(&prefix)).await;
    wait_leading(&app).await;
    broker.broker.grant(EVAL, "current");
    let mut client = app.client().await;
    let p = completing(&delivered, "stale", vec![alloc("a1", "job", "n1", 100)]);
    let err = submit(&mut client, p).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(allocs(&store, &prefix).await.is_empty());
    let e = get_eval(&store, &prefix).await;
    assert_eq!(e.status(), EvalStatus::Pending);
    assert_eq!(e.modify_revision, delivered.modify_revision);
    app.shutdown().await;
}

async fn an_eval_changed_since_delivery_keeps_its_change(store: Arc<dyn Store>, prefix: String) {
    let broker = start_broker(&store, &prefix).await;
    put_node(&store, &prefix, &node("n1", 4000)).await;
    let delivered = put_eval(&store, &prefix).await;
    // Written after the delivery (say the broker failed it at the delivery
    // limit and the worker still holds its copy).
    let mut failed = delivered.clone();
    failed.status = EvalStatus::Failed as i32;
    failed.create_revision = 0;
    failed.modify_revision = 0;
    let failed_at = store
        .put(&Keyspace::new(&prefix).eval(EVAL), &encode(&failed), 0)
        .await
        .unwrap();
    let app = start_applier(&store, config(&prefix)).await;
    wait_leading(&app).await;
    broker.broker.grant(EVAL, "t1");
    let mut client = app.client().await;
    let p = completing(&delivered, "t1", vec![alloc("a1", "job", "n1", 100)]);
    let r = submit(&mut client, p).await.unwrap();
    assert!(r.alloc_revision > 0 && r.rejected_nodes.is_empty(), "{r:?}");
    assert_eq!(r.eval_revision, 0);
    let e = get_eval(&store, &prefix).await;
    assert_eq!(e.status(), EvalStatus::Failed);
    assert_eq!(e.modify_revision, failed_at);
    app.shutdown().await;
}

async fn a_completion_of_another_eval_is_refused_by_name(store: Arc<dyn Store>, prefix: String) {
    let broker = start_broker(&store, &prefix).await;
    put_node(&store, &prefix, &node("n1", 4000)).await;
    let delivered = put_eval(&store, &prefix).await;
    let app = start_applier(&store, config(&prefix)).await;
    wait_leading(&app).await;
    broker.broker.grant(EVAL, "t1");
    let mut client = app.client().await;
    let mut p = completing(&delivered, "t1", vec![alloc("a1", "job", "n1", 100)]);
    p.eval_completion.as_mut().unwrap().id = "other".into();
    let err = submit(&mut client, p).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().starts_with("plan.eval_completion.id"),
        "{}",
        err.message()
    );
    assert!(allocs(&store, &prefix).await.is_empty());
    app.shutdown().await;
}

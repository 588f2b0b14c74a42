//! The plan-applier service end to end over gRPC, against the embedded
//! store and a real etcd, with a fake eval broker for token checks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use caravan_model::AllocExt;
use caravan_store::Store;
use support::*;
use tonic::Code;

caravan_testkit::backend_cases!(store_and_prefix => crate;
    two_plans_over_one_node_commit_only_what_fits,
    an_unknown_token_refuses_the_whole_plan,
    a_stale_plan_is_refused_with_a_refresh_revision,
    a_follower_names_the_leader_and_a_deposed_leader_commits_nothing,
    bad_input_names_the_field,
    concurrent_plans_never_over_commit_a_node,
    a_commit_applied_after_its_timeout_never_lands_beside_the_retry,
);

async fn two_plans_over_one_node_commit_only_what_fits(store: Arc<dyn Store>, prefix: String) {
    let broker = start_broker(&store, &prefix).await;
    put_node(&store, &prefix, &node("n1", 4000)).await;
    let rev = put_node(&store, &prefix, &node("n2", 4000)).await;
    let app = start_applier(&store, config(&prefix)).await;
    wait_leading(&app).await;
    broker.broker.grant("e1", "t1");
    broker.broker.grant("e2", "t2");
    let p1 = plan("e1", "t1", rev, vec![alloc("a1", "job1", "n1", 3000)]);
    let p2 = plan(
        "e2",
        "t2",
        rev,
        vec![
            alloc("b1", "job2", "n1", 3000),
            alloc("b2", "job2", "n2", 3000),
        ],
    );
    let (mut c1, mut c2) = (app.client().await, app.client().await);
    // Both in flight at once: the second is verified while the first commits.
    let (r1, r2) = tokio::join!(submit(&mut c1, p1), submit(&mut c2, p2));
    let (r1, r2) = (r1.unwrap(), r2.unwrap());
    let n1_winners = [&r1, &r2]
        .iter()
        .filter(|r| r.node_allocation.contains_key("n1"))
        .count();
    assert_eq!(n1_winners, 1, "exactly one plan gets n1: {r1:?} {r2:?}");
    let loser = if r1.node_allocation.contains_key("n1") {
        &r2
    } else {
        &r1
    };
    assert_eq!(loser.rejected_nodes, vec!["n1".to_string()]);
    assert!(loser.rejection_reasons["n1"].contains("cpu"), "{loser:?}");
    assert!(
        loser.refresh_revision >= r1.alloc_revision.max(r2.alloc_revision)
            || loser.alloc_revision == 0
    );
    assert!(
        r2.node_allocation.contains_key("n2"),
        "the fitting node commits"
    );
    if loser.alloc_revision > 0 {
        assert!(loser.refresh_revision >= loser.alloc_revision);
    }
    let stored = allocs(&store, &prefix).await;
    let on_n1: u32 = stored
        .iter()
        .filter(|a| a.node_id == "n1")
        .map(|a| a.allocated_resources.as_ref().unwrap().tasks["server"].cpu_mhz)
        .sum();
    assert_eq!(on_n1, 3000, "n1 is not over-committed");
    assert_eq!(stored.len(), 2);
    for a in &stored {
        assert!(a.alloc_modify_revision > rev);
        assert_eq!(a.alloc_modify_revision, a.modify_revision);
    }
    app.shutdown().await;
}

async fn an_unknown_token_refuses_the_whole_plan(store: Arc<dyn Store>, prefix: String) {
    let broker = start_broker(&store, &prefix).await;
    let rev = put_node(&store, &prefix, &node("n1", 4000)).await;
    let app = start_applier(&store, config(&prefix)).await;
    wait_leading(&app).await;
    broker.broker.grant("e1", "current");
    let mut client = app.client().await;
    let err = submit(
        &mut client,
        plan("e1", "stale", rev, vec![alloc("a", "job", "n1", 100)]),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(err.message().contains("token"), "{}", err.message());
    assert!(allocs(&store, &prefix).await.is_empty());
    let ok = submit(
        &mut client,
        plan("e1", "current", rev, vec![alloc("a", "job", "n1", 100)]),
    )
    .await
    .unwrap();
    assert!(ok.alloc_revision > rev);
    assert!(broker.broker.log.lock().resets.iter().any(|e| e == "e1"));
    app.shutdown().await;
}

async fn a_stale_plan_is_refused_with_a_refresh_revision(store: Arc<dyn Store>, prefix: String) {
    let broker = start_broker(&store, &prefix).await;
    let rev = put_node(&store, &prefix, &node("n1", 8000)).await;
    let app = start_applier(&store, config(&prefix)).await;
    wait_leading(&app).await;
    broker.broker.grant("e1", "t1");
    broker.broker.grant("e2", "t2");
    let mut client = app.client().await;
    let first = submit(
        &mut client,
        plan("e1", "t1", rev, vec![alloc("a", "web", "n1", 100)]),
    )
    .await
    .unwrap();
    assert!(first.rejected_nodes.is_empty());
    // A second eval of the same job planned on the snapshot before that commit
    // would place the group again: refused as a whole.
    let second = submit(
        &mut client,
        plan("e2", "t2", rev, vec![alloc("b", "web", "n1", 100)]),
    )
    .await
    .unwrap();
    assert_eq!(second.alloc_revision, 0);
    assert!(second.node_allocation.is_empty());
    assert_eq!(second.rejected_nodes, vec!["n1".to_string()]);
    assert!(second.rejection_reasons["n1"].contains("stale"));
    assert!(second.refresh_revision >= first.alloc_revision);
    // Planned again at the refresh revision, it goes through.
    let third = submit(
        &mut client,
        plan(
            "e2",
            "t2",
            second.refresh_revision,
            vec![alloc("b", "web", "n1", 100)],
        ),
    )
    .await
    .unwrap();
    assert!(third.rejected_nodes.is_empty(), "{third:?}");
    assert_eq!(allocs(&store, &prefix).await.len(), 2);
    app.shutdown().await;
}

async fn a_follower_names_the_leader_and_a_deposed_leader_commits_nothing(
    store: Arc<dyn Store>,
    prefix: String,
) {
    let broker = start_broker(&store, &prefix).await;
    broker.broker.grant("e1", "t1");
    let rev = put_node(&store, &prefix, &node("n1", 4000)).await;
    let first = start_applier(&store, config(&prefix)).await;
    wait_leading(&first).await;
    let second = start_applier(&store, config(&prefix)).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut follower = second.client().await;
    let err = submit(
        &mut follower,
        plan("e1", "t1", rev, vec![alloc("a", "job", "n1", 100)]),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert_eq!(
        caravan_runtime::status::leader_hint(&err).as_deref(),
        Some(first.addr.as_str())
    );

    // Depose the first: its leader key vanishes, as when its lease is lost.
    let election = caravan_store::election_name(&prefix, caravan_runtime::names::PLAN_APPLIER);
    let leader = store.leader(election.as_bytes()).await.unwrap().unwrap();
    store
        .delete(caravan_store::Range::key(leader.key))
        .await
        .unwrap();
    let mut old = first.client().await;
    let refused = submit(
        &mut old,
        plan("e1", "t1", rev, vec![alloc("x", "job", "n1", 100)]),
    )
    .await;
    match refused {
        Err(s) if s.code() == Code::Unavailable => {}
        other => panic!("a deposed leader must not commit: {other:?}"),
    }
    assert!(
        allocs(&store, &prefix).await.is_empty(),
        "nothing committed"
    );
    // The standby takes over and commits.
    wait_leading(&second).await;
    let ok = submit(
        &mut follower,
        plan("e1", "t1", rev, vec![alloc("y", "job", "n1", 100)]),
    )
    .await
    .unwrap();
    assert!(ok.alloc_revision > 0);
    first.shutdown().await;
    second.shutdown().await;
}

async fn bad_input_names_the_field(store: Arc<dyn Store>, prefix: String) {
    let _broker = start_broker(&store, &prefix).await;
    let app = start_applier(&store, config(&prefix)).await;
    wait_leading(&app).await;
    let mut client = app.client().await;
    let err = client
        .submit_plan(caravan_proto::SubmitPlanRequest { plan: None })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().starts_with("plan"));
    let mut p = plan("e1", "t1", 5, vec![alloc("a", "job", "n1", 100)]);
    p.node_allocation.get_mut("n1").unwrap().allocs[0]
        .job_id
        .clear();
    let err = submit(&mut client, p).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message()
            .starts_with("plan.node_allocation[\"n1\"].allocs[0].job_id"),
        "{}",
        err.message()
    );
    assert!(allocs(&store, &prefix).await.is_empty());
    app.shutdown().await;
}

async fn concurrent_plans_never_over_commit_a_node(store: Arc<dyn Store>, prefix: String) {
    let broker = start_broker(&store, &prefix).await;
    put_node(&store, &prefix, &node("n1", 4000)).await;
    put_node(&store, &prefix, &node("n2", 4000)).await;
    // n2 starts full; a stop in one plan frees it while others race for it.
    let seed = caravan_state::encode(&{
        let mut a = alloc("seed", "seed-job", "n2", 4000);
        a.set_client_status(caravan_proto::AllocClientStatus::Running);
        a
    });
    let rev = store
        .put(
            &caravan_state::Keyspace::new(&prefix).alloc("seed"),
            &seed,
            0,
        )
        .await
        .unwrap();
    let app = start_applier(&store, config(&prefix)).await;
    wait_leading(&app).await;
    let mut tasks = Vec::new();
    for i in 0..24 {
        let eval = format!("e{i}");
        broker.broker.grant(&eval, "t");
        let node = if i % 2 == 0 { "n1" } else { "n2" };
        let mut p = plan(
            &eval,
            "t",
            rev,
            vec![alloc(&format!("a{i}"), &format!("job{i}"), node, 1000)],
        );
        if i == 5 {
            p.node_update
                .entry("n2".into())
                .or_default()
                .allocs
                .push(caravan_proto::Allocation {
                    id: "seed".into(),
                    desired_status: caravan_proto::AllocDesiredStatus::Stop as i32,
                    ..Default::default()
                });
            p.job = Some(caravan_proto::Job {
                id: "seed-job".into(),
                namespace: "default".into(),
                ..Default::default()
            });
        }
        let mut client = app.client().await;
        tasks.push(tokio::spawn(async move { submit(&mut client, p).await }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let stored = allocs(&store, &prefix).await;
    for n in ["n1", "n2"] {
        let held: u32 = stored
            .iter()
            .filter(|a| a.node_id == n && !a.is_terminal())
            .map(|a| a.allocated_resources.as_ref().unwrap().tasks["server"].cpu_mhz)
            .sum();
        assert!(held <= 4000, "{n} holds {held} MHz");
    }
    let live_n1 = stored
        .iter()
        .filter(|a| a.node_id == "n1" && !a.is_terminal())
        .count();
    assert_eq!(live_n1, 4, "n1 fills up exactly");
    app.shutdown().await;
}

/// A commit whose answer is lost while the store applies it later (a
/// timeout at the client of a proposal etcd still commits) can't land next
/// to the plan the worker sends again: one of the two commits, never both.
async fn a_commit_applied_after_its_timeout_never_lands_beside_the_retry(
    store: Arc<dyn Store>,
    prefix: String,
) {
    use std::sync::atomic::{AtomicBool, Ordering};

    use caravan_state::{Keyspace, Kind};
    use caravan_store::StoreError;
    use caravan_testkit::faults::{Fault, FaultyStore, puts_under};

    let broker = start_broker(&store, &prefix).await;
    let rev = put_node(&store, &prefix, &node("n1", 8000)).await;
    let allocs_prefix = Keyspace::new(&prefix).prefix_of(Kind::Allocs);
    let lost_one = Arc::new(AtomicBool::new(false));
    let first = Arc::clone(&lost_one);
    let lossy = FaultyStore::new(
        store.clone(),
        Box::new(move |txn| {
            (puts_under(txn, &allocs_prefix) && !first.swap(true, Ordering::SeqCst)).then(|| {
                Fault::ApplyLate {
                    error: StoreError::Unavailable("request timed out".into()),
                    after: Duration::from_millis(500),
                }
            })
        }),
    );
    let app = start_applier(&(lossy.clone() as Arc<dyn Store>), config(&prefix)).await;
    wait_leading(&app).await;
    broker.broker.grant("e1", "t1");
    let mut client = app.client().await;
    let lost = submit(
        &mut client,
        plan("e1", "t1", rev, vec![alloc("a1", "web", "n1", 100)]),
    )
    .await;
    assert!(lost.is_err(), "the outcome is unknown: {lost:?}");
    // The worker plans again on a snapshot without the first commit, which
    // has not applied yet.
    let retry = submit(
        &mut client,
        plan("e1", "t1", rev, vec![alloc("a2", "web", "n1", 100)]),
    )
    .await
    .unwrap();
    assert!(retry.rejected_nodes.is_empty(), "{retry:?}");
    caravan_testkit::wait::until(
        "the late commit to be tried",
        Duration::from_secs(10),
        || lossy.late_tried() == 1,
    )
    .await;
    let stored = allocs(&store, &prefix).await;
    let ids: Vec<&str> = stored.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, ["a2"], "one of the two commits, never both");
    app.shutdown().await;
}

//! Node-down detection: a node whose heartbeat lease ends is marked down
//! with a node-update eval for every job with live allocations on it.

use std::sync::Arc;
use std::time::Duration;

use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, Allocation, EvalStatus, Job, JobType, Node, NodeStatus,
    SchedulingEligibility,
};
use caravan_state::Keyspace;
use caravan_store::{Store, StoreError};
use caravan_testkit::faults::{Fault, FaultyStore, puts, puts_under};

use super::*;

fn keyspace() -> (String, Keyspace) {
    let prefix = caravan_testkit::unique_prefix("eval-broker-nodes");
    let ks = Keyspace::new(&prefix);
    (prefix, ks)
}

fn node(id: &str, status: NodeStatus) -> Node {
    Node {
        id: id.into(),
        name: id.into(),
        computed_class: "c1".into(),
        status: status as i32,
        scheduling_eligibility: SchedulingEligibility::Eligible as i32,
        ..Default::default()
    }
}

async fn put_job(store: &Arc<dyn Store>, ks: &Keyspace, id: &str, kind: JobType, priority: i32) {
    let job = Job {
        id: id.into(),
        name: id.into(),
        namespace: "default".into(),
        r#type: kind as i32,
        priority,
        ..Default::default()
    };
    put(store, ks.job("default", id), &job).await;
}

async fn put_alloc(
    store: &Arc<dyn Store>,
    ks: &Keyspace,
    job: &str,
    node: &str,
    client: AllocClientStatus,
) {
    let alloc = Allocation {
        id: uuid(),
        namespace: "default".into(),
        job_id: job.into(),
        node_id: node.into(),
        task_group: "g".into(),
        desired_status: AllocDesiredStatus::Run as i32,
        client_status: client as i32,
        ..Default::default()
    };
    put(store, ks.alloc(&alloc.id), &alloc).await;
}

/// Puts `node`'s heartbeat key on `lease`, as its registration does.
async fn heartbeat(store: &Arc<dyn Store>, ks: &Keyspace, node: &str, lease: i64) {
    store
        .put(&ks.heartbeat(node), b"", lease)
        .await
        .expect("heartbeat");
}

fn node_evals(evals: &[caravan_proto::Evaluation], node: &str) -> Vec<(String, String, i32)> {
    let mut v: Vec<_> = evals
        .iter()
        .filter(|e| e.node_id == node && e.triggered_by == "node-update")
        .map(|e| (e.job_id.clone(), e.r#type.clone(), e.priority))
        .collect();
    v.sort();
    v
}

pub async fn a_lost_heartbeat_marks_the_node_down_with_evals(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    put_job(&store, &ks, "web", JobType::Service, 70).await;
    put_job(&store, &ks, "report", JobType::Batch, 30).await;
    put_job(&store, &ks, "done", JobType::Batch, 50).await;
    put_alloc(&store, &ks, "web", "n1", AllocClientStatus::Running).await;
    put_alloc(&store, &ks, "web", "n1", AllocClientStatus::Pending).await;
    put_alloc(&store, &ks, "report", "n1", AllocClientStatus::Running).await;
    put_alloc(&store, &ks, "done", "n1", AllocClientStatus::Complete).await;
    put_alloc(&store, &ks, "web", "n2", AllocClientStatus::Running).await;
    let lease = store.lease_grant(30).await.expect("lease");
    heartbeat(&store, &ks, "n1", lease.id).await;
    put(&store, ks.node("n1"), &node("n1", NodeStatus::Ready)).await;

    let mut broker = start_leader(store.clone(), &prefix).await;
    assert!(all_evals(&store, &ks).await.is_empty());
    store.lease_revoke(lease.id).await.expect("the lease ends");

    let down = eventually_some("the node to be marked down", PATIENCE, || async {
        let kv = store.get(&ks.node("n1")).await.expect("get")?;
        let n: Node = caravan_state::decode(&kv).expect("decode");
        (n.status() == NodeStatus::Down).then_some(n)
    })
    .await;
    assert!(!down.status_description.is_empty());
    let evals = all_evals(&store, &ks).await;
    assert_eq!(
        node_evals(&evals, "n1"),
        vec![
            ("report".to_string(), "batch".to_string(), 30),
            ("web".to_string(), "service".to_string(), 70),
        ],
        "one eval per job with live allocs on the node, typed by the job"
    );
    for e in &evals {
        assert_eq!(e.status(), EvalStatus::Pending);
        assert_eq!(e.create_revision, down.modify_revision, "one txn");
    }
    broker
        .stats_become("the node-update evals to be ready", |s| s.total_ready == 2)
        .await;
    let (first, _, _) = broker.take().await;
    assert_eq!(first.job_id, "web", "the higher priority first");
    broker.stop().await;
}

pub async fn a_node_without_heartbeat_at_restore_goes_down(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    put_job(&store, &ks, "web", JobType::Service, 50).await;
    put_alloc(&store, &ks, "web", "gone", AllocClientStatus::Running).await;
    put(&store, ks.node("gone"), &node("gone", NodeStatus::Ready)).await;
    let already = put(&store, ks.node("dead"), &node("dead", NodeStatus::Down)).await;

    let broker = start_leader(store.clone(), &prefix).await;
    eventually("the node without heartbeat to go down", PATIENCE, || {
        let (store, ks) = (store.clone(), ks.clone());
        async move {
            let kv = store.get(&ks.node("gone")).await.expect("get");
            kv.map(|kv| caravan_state::decode::<Node>(&kv).expect("decode"))
                .is_some_and(|n| n.status() == NodeStatus::Down)
        }
    })
    .await;
    let evals = all_evals(&store, &ks).await;
    assert_eq!(
        node_evals(&evals, "gone"),
        vec![("web".to_string(), "service".to_string(), 50)]
    );
    let dead = store
        .get(&ks.node("dead"))
        .await
        .expect("get")
        .expect("dead");
    assert_eq!(
        dead.mod_revision, already,
        "a node already down is left alone"
    );
    broker.stop().await;
}

pub async fn a_node_with_many_jobs_goes_down_in_several_txns(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let jobs: Vec<String> = (0..7).map(|i| format!("job-{i}")).collect();
    for job in &jobs {
        put_job(&store, &ks, job, JobType::Batch, 40).await;
        put_alloc(&store, &ks, job, "busy", AllocClientStatus::Running).await;
    }
    let lease = store.lease_grant(30).await.expect("lease");
    heartbeat(&store, &ks, "busy", lease.id).await;
    put(&store, ks.node("busy"), &node("busy", NodeStatus::Ready)).await;
    let mut config = fast_config(&prefix);
    config.max_txn_ops = 4;
    let mut broker = start(store.clone(), config).await;
    broker.wait_leading().await;
    store.lease_revoke(lease.id).await.expect("the lease ends");

    let evals = eventually_some("an eval for every job", PATIENCE, || async {
        let evals = all_evals(&store, &ks).await;
        (evals.len() == jobs.len()).then_some(evals)
    })
    .await;
    let got: Vec<String> = node_evals(&evals, "busy")
        .into_iter()
        .map(|(job, _, _)| job)
        .collect();
    assert_eq!(got, jobs);
    let revisions: std::collections::BTreeSet<i64> =
        evals.iter().map(|e| e.create_revision).collect();
    assert!(revisions.len() > 1, "split over several transactions");
    let kv = store
        .get(&ks.node("busy"))
        .await
        .expect("get")
        .expect("node");
    let n: Node = caravan_state::decode(&kv).expect("decode");
    assert_eq!(n.status(), NodeStatus::Down);
    broker.stop().await;
}

/// A leader that dies right after marking a node down, before the evals
/// that did not fit that transaction: the next leader creates them.
pub async fn a_crash_after_marking_a_node_down_loses_none_of_its_evals(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let jobs: Vec<String> = (0..7).map(|i| format!("job-{i}")).collect();
    for job in &jobs {
        put_job(&store, &ks, job, JobType::Batch, 40).await;
        put_alloc(&store, &ks, job, "busy", AllocClientStatus::Running).await;
    }
    let lease = store.lease_grant(30).await.expect("lease");
    heartbeat(&store, &ks, "busy", lease.id).await;
    put(&store, ks.node("busy"), &node("busy", NodeStatus::Ready)).await;
    // The first leader's store takes the node-down transaction and then
    // no write of an eval, as if its host died right after it.
    let (node_key, evals_prefix) = (ks.node("busy"), ks.prefix_of(caravan_state::Kind::Evals));
    let marked = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = Arc::clone(&marked);
    let dying: Arc<dyn Store> = FaultyStore::new(
        store.clone(),
        Box::new(move |txn| {
            if seen.load(std::sync::atomic::Ordering::SeqCst) && puts_under(txn, &evals_prefix) {
                let gone = StoreError::Unavailable("the leader's host is gone".into());
                return Some(Fault::Fail(gone));
            }
            if puts(txn, &node_key) {
                seen.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            None
        }),
    );
    let mut config = fast_config(&prefix);
    config.max_txn_ops = 4;
    let mut first = start(dying, config.clone()).await;
    first.wait_leading().await;
    store.lease_revoke(lease.id).await.expect("the lease ends");
    eventually_some("the node to be marked down", PATIENCE, || async {
        let kv = store.get(&ks.node("busy")).await.expect("get")?;
        let n: Node = caravan_state::decode(&kv).expect("decode");
        (n.status() == NodeStatus::Down).then_some(n)
    })
    .await;
    let written = all_evals(&store, &ks).await.len();
    assert!(
        written < jobs.len(),
        "the node-down transaction holds only some of the evals ({written})"
    );
    first.stop().await;

    let second = start_leader(store.clone(), &prefix).await;
    let evals = eventually_some("an eval for every job", PATIENCE, || async {
        let evals = all_evals(&store, &ks).await;
        (evals.len() >= jobs.len()).then_some(evals)
    })
    .await;
    let got: Vec<String> = node_evals(&evals, "busy")
        .into_iter()
        .map(|(job, _, _)| job)
        .collect();
    assert_eq!(got, jobs, "one eval per job, none twice");
    eventually("the node's fan-out to be cleared", PATIENCE, || async {
        let kv = store.get(&ks.node("busy")).await.expect("get");
        kv.map(|kv| caravan_state::decode::<Node>(&kv).expect("decode"))
            .is_some_and(|n| n.pending_fan_outs.is_empty() && n.status() == NodeStatus::Down)
    })
    .await;
    second.stop().await;
}

/// A node change the gateway wrote with more evals than its transaction
/// held carries a fan-out; the leader creates the evals still missing (the
/// ones written with the change are not made again) and clears it.
pub async fn a_nodes_pending_fan_out_is_finished_once(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let jobs: Vec<String> = (0..5).map(|i| format!("sys-{i}")).collect();
    for job in &jobs {
        put_job(&store, &ks, job, JobType::System, 60).await;
    }
    let owed = caravan_proto::NodeFanOut {
        id: uuid(),
        triggered_by: "node-update".into(),
        created_at_unix_ns: 1,
        ..Default::default()
    };
    let written = caravan_proto::Evaluation {
        id: caravan_model::fan_out_eval_id(&owed.id, "default", "sys-0"),
        namespace: "default".into(),
        job_id: "sys-0".into(),
        r#type: "system".into(),
        priority: 60,
        triggered_by: "node-update".into(),
        node_id: "n1".into(),
        status: EvalStatus::Complete as i32,
        ..Default::default()
    };
    put(&store, ks.eval(&written.id), &written).await;
    let lease = store.lease_grant(30).await.expect("lease");
    heartbeat(&store, &ks, "n1", lease.id).await;
    let mut n1 = node("n1", NodeStatus::Ready);
    n1.node_pool = "default".into();
    n1.pending_fan_outs = vec![owed.clone()];
    put(&store, ks.node("n1"), &n1).await;

    let broker = start_leader(store.clone(), &prefix).await;
    let evals = eventually_some("an eval for every system job", PATIENCE, || async {
        let evals = all_evals(&store, &ks).await;
        (evals.len() >= jobs.len()).then_some(evals)
    })
    .await;
    let got: Vec<String> = node_evals(&evals, "n1")
        .into_iter()
        .map(|(job, _, _)| job)
        .collect();
    assert_eq!(got, jobs, "one eval per job, none twice");
    for e in &evals {
        assert_eq!(
            e.id,
            caravan_model::fan_out_eval_id(&owed.id, "default", &e.job_id)
        );
    }
    let sys0 = evals.iter().find(|e| e.job_id == "sys-0").expect("sys-0");
    assert_eq!(
        sys0.status(),
        EvalStatus::Complete,
        "the one written is kept"
    );
    eventually("the fan-out to be cleared", PATIENCE, || async {
        let kv = store.get(&ks.node("n1")).await.expect("get");
        kv.map(|kv| caravan_state::decode::<Node>(&kv).expect("decode"))
            .is_some_and(|n| n.pending_fan_outs.is_empty() && n.status() == NodeStatus::Ready)
    })
    .await;
    broker.stop().await;
    store.lease_revoke(lease.id).await.expect("revoke");
}

/// Many nodes losing their heartbeat at once point at the servers, not the
/// nodes: they get a grace to heartbeat again, and only those that don't
/// are marked down when it ends.
pub async fn a_mass_heartbeat_loss_waits_a_grace_before_marking_nodes_down(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let ids: Vec<String> = (0..12).map(|i| format!("n{i:02}")).collect();
    let lease = store.lease_grant(30).await.expect("lease");
    for id in &ids {
        heartbeat(&store, &ks, id, lease.id).await;
        put(&store, ks.node(id), &node(id, NodeStatus::Ready)).await;
    }
    let mut config = fast_config(&prefix);
    config.mass_heartbeat_loss_grace_ms = 6_000;
    let mut broker = start(store.clone(), config).await;
    broker.wait_leading().await;
    store
        .lease_revoke(lease.id)
        .await
        .expect("all leases end at once");
    let status = |id: String| {
        let (store, ks) = (store.clone(), ks.clone());
        async move {
            let kv = store.get(&ks.node(&id)).await.expect("get").expect("node");
            caravan_state::decode::<Node>(&kv).expect("decode").status()
        }
    };
    // Past the moment a lone loss would be acted on: nothing is down yet.
    let any_down_early = caravan_testkit::wait::holds_within(Duration::from_millis(2_000), || {
        let ids = ids.clone();
        let status = &status;
        async move {
            for id in ids {
                if status(id).await == NodeStatus::Down {
                    return true;
                }
            }
            false
        }
    })
    .await;
    if any_down_early {
        let mut states = Vec::new();
        for id in &ids {
            states.push((id.clone(), status(id.clone()).await));
        }
        panic!("no node goes down during the grace: {states:?}");
    }
    // Half of them come back (they register again) within the grace.
    let back = store.lease_grant(30).await.expect("lease");
    for id in &ids[..6] {
        heartbeat(&store, &ks, id, back.id).await;
    }
    for id in &ids[6..] {
        eventually(
            "the silent nodes to go down after the grace",
            PATIENCE,
            || {
                let (id, status) = (id.clone(), &status);
                async move { status(id).await == NodeStatus::Down }
            },
        )
        .await;
    }
    for id in &ids[..6] {
        assert_eq!(
            status(id.clone()).await,
            NodeStatus::Ready,
            "{id} came back"
        );
    }
    broker.stop().await;
    store.lease_revoke(back.id).await.expect("revoke");
}

//! Garbage collection: `ForceGc` takes every terminal object nothing live
//! names, and the periodic sweep honours the configured thresholds.

use std::sync::Arc;
use std::time::Duration;

use caravan_model::now_unix_ns;
use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, Allocation, Deployment, DeploymentStatus, EvalStatus,
    Evaluation, ForceGcRequest, Job, JobType, Node, NodeStatus, ServiceRegistration,
};
use caravan_state::Keyspace;
use caravan_store::Store;

use super::*;

const MINUTE_NS: i64 = 60 * 1_000_000_000;

fn keyspace() -> (String, Keyspace) {
    let prefix = caravan_testkit::unique_prefix("eval-broker-gc");
    let ks = Keyspace::new(&prefix);
    (prefix, ks)
}

fn job(id: &str, kind: JobType, stop: bool) -> Job {
    Job {
        id: id.into(),
        name: id.into(),
        namespace: "default".into(),
        r#type: kind as i32,
        priority: 50,
        stop,
        ..Default::default()
    }
}

fn eval(job: &str, kind: &str, status: EvalStatus, modified: i64) -> Evaluation {
    Evaluation {
        status: status as i32,
        create_time_unix_ns: modified,
        modify_time_unix_ns: modified,
        ..pending_eval(job, kind, 50)
    }
}

fn alloc(
    job: &str,
    eval: &str,
    node: &str,
    client: AllocClientStatus,
    modified: i64,
) -> Allocation {
    let desired = if client == AllocClientStatus::Running {
        AllocDesiredStatus::Run
    } else {
        AllocDesiredStatus::Stop
    };
    Allocation {
        id: uuid(),
        namespace: "default".into(),
        job_id: job.into(),
        eval_id: eval.into(),
        node_id: node.into(),
        task_group: "g".into(),
        desired_status: desired as i32,
        client_status: client as i32,
        create_time_unix_ns: modified,
        modify_time_unix_ns: modified,
        ..Default::default()
    }
}

async fn put_job(store: &Arc<dyn Store>, ks: &Keyspace, job: &Job) {
    put(store, ks.job_version("default", &job.id, 0), job).await;
    put(store, ks.job("default", &job.id), job).await;
}

async fn present(store: &Arc<dyn Store>, key: Vec<u8>) -> bool {
    store.get(&key).await.expect("get").is_some()
}

pub async fn force_gc_takes_terminal_objects_and_keeps_what_lives(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let mut broker = start_leader(Arc::clone(&store), &prefix).await;
    let now = now_unix_ns();

    // A stopped job whose work is all finished: goes whole.
    put_job(&store, &ks, &job("old", JobType::Service, true)).await;
    let old_eval = eval("old", "service", EvalStatus::Complete, now);
    put_eval(&store, &ks, &old_eval).await;
    let old_alloc = alloc(
        "old",
        &old_eval.id,
        "n-up",
        AllocClientStatus::Complete,
        now,
    );
    put(&store, ks.alloc(&old_alloc.id), &old_alloc).await;
    let old_dep = Deployment {
        id: uuid(),
        namespace: "default".into(),
        job_id: "old".into(),
        status: DeploymentStatus::Successful as i32,
        modify_time_unix_ns: now,
        ..Default::default()
    };
    put(&store, ks.deployment(&old_dep.id), &old_dep).await;

    // A running job: its eval is named by a running alloc and stays; a
    // terminal eval of it with a finished alloc goes.
    put_job(&store, &ks, &job("web", JobType::Service, false)).await;
    let live_eval = eval("web", "service", EvalStatus::Complete, now);
    put_eval(&store, &ks, &live_eval).await;
    let running = alloc(
        "web",
        &live_eval.id,
        "n-up",
        AllocClientStatus::Running,
        now,
    );
    put(&store, ks.alloc(&running.id), &running).await;
    let spent_eval = eval("web", "service", EvalStatus::Failed, now);
    put_eval(&store, &ks, &spent_eval).await;
    let spent = alloc(
        "web",
        &spent_eval.id,
        "n-up",
        AllocClientStatus::Complete,
        now,
    );
    put(&store, ks.alloc(&spent.id), &spent).await;
    // A pending eval is never collected.
    let waiting = eval("web", "service", EvalStatus::Pending, now);
    put_eval(&store, &ks, &waiting).await;

    // A down node without allocs goes; one still holding a live alloc stays.
    let down = |id: &str| Node {
        id: id.into(),
        name: id.into(),
        status: NodeStatus::Down as i32,
        status_updated_at_unix_ns: now,
        ..Default::default()
    };
    put(&store, ks.node("n-empty"), &down("n-empty")).await;
    put(&store, ks.node("n-busy"), &down("n-busy")).await;
    let stranded = alloc(
        "web",
        &live_eval.id,
        "n-busy",
        AllocClientStatus::Running,
        now,
    );
    put(&store, ks.alloc(&stranded.id), &stranded).await;

    let counts = force_gc(&mut broker).await;
    assert_eq!(
        (
            counts.jobs,
            counts.evals,
            counts.allocs,
            counts.nodes,
            counts.deployments
        ),
        (1, 2, 2, 1, 1),
        "{counts:?}"
    );

    assert!(!present(&store, ks.job("default", "old")).await);
    assert!(!present(&store, ks.job_version("default", "old", 0)).await);
    assert!(!present(&store, ks.eval(&old_eval.id)).await);
    assert!(!present(&store, ks.alloc(&old_alloc.id)).await);
    assert!(!present(&store, ks.deployment(&old_dep.id)).await);
    assert!(!present(&store, ks.eval(&spent_eval.id)).await);
    assert!(!present(&store, ks.alloc(&spent.id)).await);
    assert!(!present(&store, ks.node("n-empty")).await);

    assert!(present(&store, ks.job("default", "web")).await);
    assert!(present(&store, ks.eval(&live_eval.id)).await);
    assert!(present(&store, ks.alloc(&running.id)).await);
    assert!(present(&store, ks.eval(&waiting.id)).await);
    assert!(present(&store, ks.node("n-busy")).await);

    // Nothing left to take: a second forced sweep deletes nothing.
    let again = force_gc(&mut broker).await;
    assert_eq!(again, Default::default());
    broker.stop().await;
}

/// A forced sweep's counts.
async fn force_gc(broker: &mut Broker) -> caravan_proto::ForceGcResponse {
    broker
        .client
        .force_gc(ForceGcRequest {})
        .await
        .expect("force gc")
        .into_inner()
}

/// A running service job `web` with one complete eval, and an alloc of it
/// on `n1` in each of `statuses`, all stored.
async fn web_with_allocs(
    store: &Arc<dyn Store>,
    ks: &Keyspace,
    statuses: &[AllocClientStatus],
) -> Vec<Allocation> {
    let now = now_unix_ns();
    put_job(store, ks, &job("web", JobType::Service, false)).await;
    let e = eval("web", "service", EvalStatus::Complete, now);
    put_eval(store, ks, &e).await;
    let mut allocs = Vec::new();
    for status in statuses {
        let a = alloc("web", &e.id, "n1", *status, now);
        put(store, ks.alloc(&a.id), &a).await;
        allocs.push(a);
    }
    allocs
}

pub async fn a_sweep_removes_the_registrations_of_allocs_no_longer_live(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let mut broker = start_leader(Arc::clone(&store), &prefix).await;
    let allocs = web_with_allocs(
        &store,
        &ks,
        &[AllocClientStatus::Running, AllocClientStatus::Complete],
    )
    .await;
    let [running, done] = &allocs[..] else {
        unreachable!()
    };
    let register = |alloc_id: &str| ServiceRegistration {
        id: format!("_nomad-task-{alloc_id}-web-web-http"),
        service_name: "web".into(),
        namespace: "default".into(),
        alloc_id: alloc_id.into(),
        ..Default::default()
    };
    let live = register(&running.id);
    let ghosts = [register(&done.id), register("an-alloc-never-stored")];
    for reg in std::iter::once(&live).chain(&ghosts) {
        put(&store, ks.service("default", "web", &reg.id), reg).await;
    }

    let counts = force_gc(&mut broker).await;
    assert_eq!(counts.registrations, 2, "{counts:?}");
    assert!(present(&store, ks.service("default", "web", &live.id)).await);
    for ghost in &ghosts {
        assert!(!present(&store, ks.service("default", "web", &ghost.id)).await);
    }
    broker.stop().await;
}

/// With the full collection hours away, the registrations' own short sweep
/// removes the instances of a node that went down (its allocs not yet
/// marked lost) and keeps the others.
pub async fn instances_on_a_node_that_went_down_go_at_the_next_short_sweep(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let mut config = fast_config(&prefix);
    config.gc.interval_ms = 3_600_000;
    config.gc.registrations_interval_ms = 200;
    let broker = start(Arc::clone(&store), config).await;
    let now = now_unix_ns();
    put_job(&store, &ks, &job("web", JobType::Service, false)).await;
    let on_down = alloc("web", "e1", "n-down", AllocClientStatus::Running, now);
    let elsewhere = alloc("web", "e1", "n-up", AllocClientStatus::Running, now);
    for a in [&on_down, &elsewhere] {
        put(&store, ks.alloc(&a.id), a).await;
    }
    let register = |alloc_id: &str| ServiceRegistration {
        id: format!("_nomad-task-{alloc_id}-web-web-http"),
        service_name: "web".into(),
        namespace: "default".into(),
        alloc_id: alloc_id.into(),
        ..Default::default()
    };
    let doomed = register(&on_down.id);
    let kept = register(&elsewhere.id);
    for reg in [&doomed, &kept] {
        put(&store, ks.service("default", "web", &reg.id), reg).await;
    }
    let down = Node {
        id: "n-down".into(),
        name: "n-down".into(),
        status: NodeStatus::Down as i32,
        ..Default::default()
    };
    put(&store, ks.node("n-down"), &down).await;
    eventually("the down node's instance to go", PATIENCE, || async {
        !present(&store, ks.service("default", "web", &doomed.id)).await
    })
    .await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(present(&store, ks.service("default", "web", &kept.id)).await);
    assert!(
        present(&store, ks.alloc(&on_down.id)).await,
        "only registrations go in the short sweep"
    );
    broker.stop().await;
}

pub async fn the_sweep_runs_on_its_interval_with_the_thresholds(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let mut config = fast_config(&prefix);
    config.gc.interval_ms = 200;
    config.gc.eval_threshold_ms = 10 * 60_000;
    config.gc.job_threshold_ms = 10 * 60_000;
    let broker = start(Arc::clone(&store), config).await;
    let now = now_unix_ns();

    put_job(&store, &ks, &job("svc", JobType::Service, false)).await;
    let stale = eval("svc", "service", EvalStatus::Complete, now - 20 * MINUTE_NS);
    put_eval(&store, &ks, &stale).await;
    let fresh = eval("svc", "service", EvalStatus::Complete, now);
    put_eval(&store, &ks, &fresh).await;
    // A terminal batch eval waits for its own, longer threshold (24 h).
    // Its job, dead but submitted just now, is too young to go with it.
    let report = Job {
        submit_time_unix_ns: now,
        ..job("report", JobType::Batch, false)
    };
    put_job(&store, &ks, &report).await;
    let batch = eval(
        "report",
        "batch",
        EvalStatus::Complete,
        now - 20 * MINUTE_NS,
    );
    put_eval(&store, &ks, &batch).await;

    eventually("the stale eval to be collected", PATIENCE, || async {
        !present(&store, ks.eval(&stale.id)).await
    })
    .await;
    // A few more sweeps keep what is too young: only a wait shows "kept";
    // it covers three 200 ms sweeps after the one that took the stale eval.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(present(&store, ks.eval(&fresh.id)).await);
    assert!(present(&store, ks.eval(&batch.id)).await);
    assert!(present(&store, ks.job("default", "svc")).await);
    broker.stop().await;
}

/// The leader compacts the store's history every interval, up to what its
/// cache had seen one interval before, and keeps delivering evals after.
pub async fn the_leader_compacts_the_history_its_cache_has_seen(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let old = job("old", JobType::Batch, false);
    let first = put(&store, ks.job("default", "old"), &old).await;
    put(&store, ks.job("default", "old"), &old).await;
    let mut config = fast_config(&prefix);
    config.compaction_interval_ms = 300;
    let mut broker = start(store.clone(), config).await;
    broker.wait_leading().await;
    eventually(
        "the history up to the first write to be compacted",
        PATIENCE,
        || {
            let (store, key) = (store.clone(), ks.job("default", "old"));
            async move {
                let at_first = caravan_store::Range::key(key).at_revision(first);
                matches!(
                    store.range(at_first).await,
                    Err(caravan_store::StoreError::Compacted { .. })
                )
            }
        },
    )
    .await;
    let eval = pending_eval("web", "service", 50);
    put(&store, ks.eval(&eval.id), &eval).await;
    let (got, _, _) = broker.take().await;
    assert_eq!(
        got.id, eval.id,
        "the broker still delivers after compacting"
    );
    broker.stop().await;
}

/// A sweep frees the batches of a job that has piled them up: the entries
/// still chosen move (with their revisions) into one new batch, the dead
/// ones (superseded, or of an allocation never stored) go, and every
/// allocation reads the same before and after.
pub async fn a_sweep_frees_superseded_status_batches_and_allocations_read_alike(
    store: Arc<dyn Store>,
) {
    use caravan_state::status_batch::encode_batch;
    let (prefix, ks) = keyspace();
    let mut broker = start_leader(Arc::clone(&store), &prefix).await;
    let allocs = web_with_allocs(
        &store,
        &ks,
        &[AllocClientStatus::Pending, AllocClientStatus::Pending],
    )
    .await;
    let [r1, r2] = &allocs[..] else {
        unreachable!()
    };
    let reported = |a: &Allocation, status: AllocClientStatus| {
        let mut next = a.clone();
        next.set_client_status(status);
        caravan_state::client_part(&next)
    };
    let (pending1, pending2) = (
        reported(r1, AllocClientStatus::Pending),
        reported(r2, AllocClientStatus::Pending),
    );
    let (running1, running2) = (
        reported(r1, AllocClientStatus::Running),
        reported(r2, AllocClientStatus::Running),
    );
    let never = uuid();
    let batches: [Vec<(&str, &caravan_proto::AllocStatus, i64)>; 5] = [
        vec![(&r1.id, &pending1, 0), (&r2.id, &pending2, 0)],
        vec![(&r1.id, &running1, 0)],
        vec![(&r2.id, &running2, 0)],
        vec![(&never, &running2, 0)],
        vec![(&r1.id, &running1, 0)],
    ];
    for (i, entries) in batches.into_iter().enumerate() {
        let key = ks.job_status("default", "web", &format!("b{i}"));
        store
            .put(&key, &encode_batch(entries), 0)
            .await
            .expect("put batch");
    }
    // Another job's batches, one of which this build cannot read: they
    // stay, and the sweep goes on with web's.
    for i in 0..4 {
        let key = ks.job_status("default", "other", &format!("b{i}"));
        let value = if i == 0 {
            b"\xff".to_vec()
        } else {
            encode_batch([(r1.id.as_str(), &running1, 0)])
        };
        store.put(&key, &value, 0).await.expect("put batch");
    }
    let read = |id: String| {
        let (store, ks) = (Arc::clone(&store), ks.clone());
        async move {
            let a = caravan_state::read_alloc(store.as_ref(), &ks, &id)
                .await
                .expect("read")
                .expect("present");
            (a.client_status(), a.client_modify_revision)
        }
    };
    let before = (read(r1.id.clone()).await, read(r2.id.clone()).await);
    assert_eq!(before.0.0, AllocClientStatus::Running);
    assert_eq!(before.1.0, AllocClientStatus::Running);

    let counts = force_gc(&mut broker).await;
    // All but the newest batch (r1's last report, all of it chosen).
    assert_eq!(counts.status_batches, 4, "{counts:?}");
    let after = (read(r1.id.clone()).await, read(r2.id.clone()).await);
    assert_eq!(before, after, "every allocation reads the same");
    let left = store
        .range(caravan_store::Range::prefix(
            ks.job_status_of("default", "web"),
        ))
        .await
        .expect("range");
    assert_eq!(left.kvs.len(), 2, "the newest batch and the one moved into");
    let other = store
        .range(caravan_store::Range::prefix(
            ks.job_status_of("default", "other"),
        ))
        .await
        .expect("range");
    assert_eq!(
        other.kvs.len(),
        4,
        "a job with an unreadable batch keeps all"
    );
    assert!(
        left.kvs
            .iter()
            .any(|kv| kv.key == ks.job_status("default", "web", "b4"))
    );

    let again = force_gc(&mut broker).await;
    assert_eq!(again.status_batches, 0, "two batches are few enough");
    broker.stop().await;
}

//! Drain deadlines: once a drain's force deadline passes, what it still
//! covers is flagged to migrate with a node-drain eval per job, and the
//! drain completes when the client has finished everything on the node.

use std::sync::Arc;
use std::time::Duration;

use caravan_model::now_unix_ns;
use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, Allocation, DrainStrategy, Job, JobType, Node,
    NodeStatus, SchedulingEligibility,
};
use caravan_state::{Keyspace, decode};
use caravan_store::Store;

use super::*;

fn keyspace() -> (String, Keyspace) {
    let prefix = caravan_testkit::unique_prefix("eval-broker-drain");
    let ks = Keyspace::new(&prefix);
    (prefix, ks)
}

async fn put_job(store: &Arc<dyn Store>, ks: &Keyspace, id: &str, kind: JobType) {
    let job = Job {
        id: id.into(),
        name: id.into(),
        namespace: "default".into(),
        r#type: kind as i32,
        priority: 50,
        ..Default::default()
    };
    put(store, ks.job("default", id), &job).await;
}

fn running(id: &str, job: &str) -> Allocation {
    Allocation {
        id: id.into(),
        namespace: "default".into(),
        job_id: job.into(),
        node_id: "n1".into(),
        task_group: "g".into(),
        desired_status: AllocDesiredStatus::Run as i32,
        client_status: AllocClientStatus::Running as i32,
        // What the broker's lean cache leaves out, and a rewrite must keep.
        metrics: Some(Box::new(caravan_proto::AllocMetric {
            nodes_evaluated: 3,
            ..Default::default()
        })),
        task_states: [(
            "t".to_string(),
            caravan_proto::TaskState {
                state: "running".into(),
                ..Default::default()
            },
        )]
        .into(),
        ..Default::default()
    }
}

async fn read<T: caravan_state::StateObject>(store: &Arc<dyn Store>, key: Vec<u8>) -> T {
    let kv = store.get(&key).await.expect("get").expect("present");
    decode(&kv).expect("decode")
}

fn migrating(a: &Allocation) -> bool {
    a.desired_transition
        .as_ref()
        .is_some_and(|t| t.migrate == Some(true))
}

pub async fn a_passed_deadline_migrates_what_is_left_then_completes(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    put_job(&store, &ks, "web", JobType::Service).await;
    put_job(&store, &ks, "api", JobType::Service).await;
    put_job(&store, &ks, "agent", JobType::System).await;
    let lease = store.lease_grant(30).await.expect("lease");
    store
        .put(&ks.heartbeat("n1"), b"", lease.id)
        .await
        .expect("heartbeat");
    let deadline = now_unix_ns() + 1_500_000_000;
    let node = Node {
        id: "n1".into(),
        name: "n1".into(),
        status: NodeStatus::Ready as i32,
        scheduling_eligibility: SchedulingEligibility::Ineligible as i32,
        drain_strategy: Some(DrainStrategy {
            deadline_ns: 1_500_000_000,
            ignore_system_jobs: true,
            force_deadline_unix_ns: deadline,
            started_at_unix_ns: now_unix_ns(),
        }),
        ..Default::default()
    };
    put(&store, ks.node("n1"), &node).await;
    for (id, job) in [("w1", "web"), ("w2", "web"), ("a1", "api"), ("s1", "agent")] {
        put(&store, ks.alloc(id), &running(id, job)).await;
    }
    let broker = start_leader(Arc::clone(&store), &prefix).await;

    let drain_evals = eventually_some("node-drain evals at the deadline", PATIENCE, || async {
        let evals: Vec<_> = all_evals(&store, &ks)
            .await
            .into_iter()
            .filter(|e| e.triggered_by == "node-drain")
            .collect();
        (evals.len() >= 2).then_some(evals)
    })
    .await;
    assert!(now_unix_ns() >= deadline);
    let mut jobs: Vec<&str> = drain_evals.iter().map(|e| e.job_id.as_str()).collect();
    jobs.sort();
    assert_eq!(
        jobs,
        vec!["api", "web"],
        "one eval per job, system jobs aside"
    );
    for e in &drain_evals {
        assert_eq!(e.node_id, "n1");
        assert_eq!(e.r#type, "service");
    }
    // Before the deadline the drain is the scheduler's business: each eval
    // is stamped when it is written, with its allocs' flags in the same
    // write, so neither came early, however slow the setup above was.
    for e in &drain_evals {
        assert!(
            e.create_time_unix_ns >= deadline,
            "{} written {} ns before the deadline",
            e.id,
            deadline - e.create_time_unix_ns
        );
    }
    for (id, job) in [("w1", "web"), ("w2", "web"), ("a1", "api")] {
        let a: Allocation = read(&store, ks.alloc(id)).await;
        assert!(migrating(&a), "{id} not flagged");
        let eval = drain_evals.iter().find(|e| e.job_id == job).unwrap();
        assert_eq!(
            a.modify_revision, eval.create_revision,
            "{id} flagged with its job's eval, not before"
        );
        assert_eq!(
            (a.metrics.is_some(), a.task_states.len()),
            (true, 1),
            "{id} lost what the cache does not hold"
        );
    }
    let system: Allocation = read(&store, ks.alloc("s1")).await;
    assert!(!migrating(&system), "ignore_system_jobs keeps it");
    let still: Node = read(&store, ks.node("n1")).await;
    assert!(
        still.drain_strategy.is_some(),
        "done only when the client is"
    );

    // The scheduler stops them and the client finishes them.
    for (id, job) in [("w1", "web"), ("w2", "web"), ("a1", "api")] {
        let mut a: Allocation = read(&store, ks.alloc(id)).await;
        a.job_id = job.into();
        a.desired_status = AllocDesiredStatus::Stop as i32;
        a.client_status = AllocClientStatus::Complete as i32;
        put(&store, ks.alloc(id), &a).await;
    }
    let done = eventually_some("the drain to complete", PATIENCE, || async {
        let n: Node = read(&store, ks.node("n1")).await;
        n.drain_strategy.is_none().then_some(n)
    })
    .await;
    assert_eq!(
        done.scheduling_eligibility(),
        SchedulingEligibility::Ineligible
    );
    let last = done.last_drain.expect("last drain");
    assert_eq!(last.status, "complete");
    broker.stop().await;
    store.lease_revoke(lease.id).await.expect("revoke");
}

pub async fn a_drain_without_deadline_is_never_forced(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    put_job(&store, &ks, "web", JobType::Service).await;
    let lease = store.lease_grant(30).await.expect("lease");
    store
        .put(&ks.heartbeat("n1"), b"", lease.id)
        .await
        .expect("heartbeat");
    let node = Node {
        id: "n1".into(),
        name: "n1".into(),
        status: NodeStatus::Ready as i32,
        scheduling_eligibility: SchedulingEligibility::Ineligible as i32,
        drain_strategy: Some(DrainStrategy {
            deadline_ns: 0,
            ignore_system_jobs: false,
            force_deadline_unix_ns: 0,
            started_at_unix_ns: now_unix_ns(),
        }),
        ..Default::default()
    };
    put(&store, ks.node("n1"), &node).await;
    put(&store, ks.alloc("w1"), &running("w1", "web")).await;
    let broker = start_leader(Arc::clone(&store), &prefix).await;
    // Only a wait can show "never": the enforcer looks at every draining
    // node as its term starts, so this window covers that first look (and
    // a deadline of 0 misread as one long past would act on it).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let a: Allocation = read(&store, ks.alloc("w1")).await;
    assert!(!migrating(&a));
    assert!(
        all_evals(&store, &ks)
            .await
            .iter()
            .all(|e| e.triggered_by != "node-drain")
    );
    let n: Node = read(&store, ks.node("n1")).await;
    assert!(n.drain_strategy.is_some(), "the alloc still runs");
    broker.stop().await;
    store.lease_revoke(lease.id).await.expect("revoke");
}

//! The gateway over gRPC, in-process, against the embedded store and etcd:
//! job writes and reads, blocking queries, and the node-facing API.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;

use std::time::Duration;

use caravan_proto::job_service_client::JobServiceClient;
use caravan_proto::node_client_service_client::NodeClientServiceClient;
use caravan_proto::status_service_client::StatusServiceClient;
use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, AllocUpdate, Allocation, DeregisterJobRequest,
    GetJobRequest, HeartbeatRequest, Job, JobType, LeadersRequest, ListJobVersionsRequest,
    QueryOptions, RegisterJobRequest, RegisterNodeRequest, Resources, Task, TaskGroup,
    UpdateAllocationsRequest, WatchAllocationsRequest,
};
use caravan_state::{Kind, encode};
use caravan_testkit::wait::holds_within;
use common::{Backend, TestGateway};
use tonic::Code;

fn job(id: &str, count: i32) -> Job {
    let mut job = Job {
        id: id.into(),
        task_groups: vec![TaskGroup {
            name: "web".into(),
            count,
            tasks: vec![Task {
                name: "app".into(),
                driver: "mock".into(),
                resources: Some(Resources {
                    cpu_mhz: 100,
                    memory_mb: 64,
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    job.set_type(JobType::Service);
    job
}

fn node(id: &str) -> caravan_proto::Node {
    caravan_proto::Node {
        id: id.into(),
        name: format!("node-{id}"),
        datacenter: "dc1".into(),
        ..Default::default()
    }
}

fn register(job: Job) -> RegisterJobRequest {
    RegisterJobRequest {
        job: Some(job),
        ..Default::default()
    }
}

async fn register_writes_job_version_and_eval(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-register").await;
    let mut jobs = JobServiceClient::new(gw.channel().await);
    let r = jobs
        .register_job(register(job("web", 2)))
        .await
        .unwrap()
        .into_inner();
    assert!(!r.eval_id.is_empty());
    assert_eq!(r.eval_create_revision, r.job_modify_revision);
    let stored = gw.job("web").await.unwrap();
    assert_eq!(stored.version, 0);
    assert_eq!(stored.job_modify_revision, r.job_modify_revision);
    assert_eq!(stored.task_groups[0].count, 2);
    let versions: Vec<Job> = gw.objects(gw.keys.job_versions_of("default", "web")).await;
    assert_eq!(versions.len(), 1);
    let evals = gw.evals().await;
    assert_eq!(evals.len(), 1);
    let eval = &evals[0];
    assert_eq!(eval.id, r.eval_id);
    assert_eq!(eval.status(), caravan_proto::EvalStatus::Pending);
    assert_eq!(eval.triggered_by, "job-register");
    assert_eq!(eval.job_modify_revision, r.job_modify_revision);
    assert_eq!(eval.create_revision, r.eval_create_revision);

    // Same spec: same version, a new eval. New spec: next version.
    let again = jobs
        .register_job(register(job("web", 2)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.job_modify_revision, r.job_modify_revision);
    assert_eq!(gw.job("web").await.unwrap().version, 0);
    assert_eq!(gw.evals().await.len(), 2);
    for count in 3..10 {
        jobs.register_job(register(job("web", count)))
            .await
            .unwrap();
    }
    let stored = gw.job("web").await.unwrap();
    assert_eq!(stored.version, 7);
    let versions: Vec<Job> = gw.objects(gw.keys.job_versions_of("default", "web")).await;
    let kept: Vec<u64> = versions.iter().map(|j| j.version).collect();
    assert_eq!(kept, vec![2, 3, 4, 5, 6, 7]);
    // The cache serves the versions newest first.
    let listed = jobs
        .list_job_versions(ListJobVersionsRequest {
            job_id: "web".into(),
            options: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.versions[0].version, 7);
    assert_eq!(listed.versions.len(), 6);
    gw.stop().await;
}

async fn invalid_jobs_write_nothing(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-invalid").await;
    let mut jobs = JobServiceClient::new(gw.channel().await);
    let err = jobs
        .register_job(register(job("web", -1)))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("count"), "{}", err.message());
    let mut j = job("web", 1);
    j.task_groups[0].tasks[0]
        .resources
        .as_mut()
        .unwrap()
        .cpu_mhz = 0;
    let err = jobs.register_job(register(j)).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().to_lowercase().contains("cpu"),
        "{}",
        err.message()
    );
    let err = jobs
        .register_job(RegisterJobRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().starts_with("job"), "{}", err.message());
    assert_eq!(gw.key_count().await, 0);
    gw.stop().await;
}

async fn enforce_revision_and_deregister(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-enforce").await;
    let mut jobs = JobServiceClient::new(gw.channel().await);
    let first = jobs
        .register_job(RegisterJobRequest {
            job: Some(job("api", 1)),
            enforce_revision: true,
            job_modify_revision: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let err = jobs
        .register_job(RegisterJobRequest {
            job: Some(job("api", 2)),
            enforce_revision: true,
            job_modify_revision: first.job_modify_revision + 100,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    jobs.register_job(RegisterJobRequest {
        job: Some(job("api", 2)),
        enforce_revision: true,
        job_modify_revision: first.job_modify_revision,
    })
    .await
    .unwrap();

    let stop = jobs
        .deregister_job(DeregisterJobRequest {
            namespace: String::new(),
            job_id: "api".into(),
            purge: false,
        })
        .await
        .unwrap()
        .into_inner();
    let stored = gw.job("api").await.unwrap();
    assert!(stored.stop);
    assert_eq!(stored.version, 2);
    let evals = gw.evals().await;
    let dereg = evals.iter().find(|e| e.id == stop.eval_id).unwrap();
    assert_eq!(dereg.triggered_by, "job-deregister");

    jobs.deregister_job(DeregisterJobRequest {
        namespace: String::new(),
        job_id: "api".into(),
        purge: true,
    })
    .await
    .unwrap();
    assert!(gw.job("api").await.is_none());
    let versions: Vec<Job> = gw.objects(gw.keys.job_versions_of("default", "api")).await;
    assert!(versions.is_empty());
    let err = jobs
        .deregister_job(DeregisterJobRequest {
            namespace: String::new(),
            job_id: "api".into(),
            purge: true,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    gw.stop().await;
}

async fn blocking_query_returns_on_change_or_times_out(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-blocking").await;
    let channel = gw.channel().await;
    let mut jobs = JobServiceClient::new(channel.clone());
    jobs.register_job(register(job("web", 1))).await.unwrap();
    let now = jobs
        .get_job(GetJobRequest {
            job_id: "web".into(),
            options: None,
        })
        .await
        .unwrap()
        .into_inner();
    let revision = now.meta.unwrap().revision;
    assert!(revision > 0);

    // Nothing changes: the wait runs out (plus at most 1/16) and the revision stays.
    let started = tokio::time::Instant::now();
    let idle = jobs
        .get_job(GetJobRequest {
            job_id: "web".into(),
            options: Some(QueryOptions {
                min_revision: revision,
                wait_ns: 400_000_000,
                ..Default::default()
            }),
        })
        .await
        .unwrap()
        .into_inner();
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(390), "{waited:?}");
    assert!(waited < Duration::from_secs(3), "{waited:?}");
    assert_eq!(idle.meta.unwrap().revision, revision);

    // A change wakes it long before the wait ends.
    let mut blocked = JobServiceClient::new(channel.clone());
    let waiter = tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        let r = blocked
            .get_job(GetJobRequest {
                job_id: "web".into(),
                options: Some(QueryOptions {
                    min_revision: revision,
                    wait_ns: 30_000_000_000,
                    ..Default::default()
                }),
            })
            .await
            .unwrap()
            .into_inner();
        (r, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    jobs.register_job(register(job("web", 4))).await.unwrap();
    let (r, waited) = waiter.await.unwrap();
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    assert!(r.meta.unwrap().revision > revision);
    assert_eq!(r.job.unwrap().task_groups[0].count, 4);
    gw.stop().await;
}

async fn node_registration_heartbeats_and_expiry(backend: Backend) {
    let store = backend.store().await;
    let gw = TestGateway::start_with(store, "grpc-node", |c| {
        c.min_heartbeat_ttl_ms = 1_000;
        c.heartbeat_grace_ms = 1_000;
    })
    .await;
    let mut client = NodeClientServiceClient::new(gw.channel().await);
    let r = client
        .register_node(RegisterNodeRequest {
            node: Some(node("n1")),
        })
        .await
        .unwrap()
        .into_inner();
    let ttl = Duration::from_nanos(r.heartbeat_ttl_ns as u64);
    assert!(
        ttl >= Duration::from_secs(1) && ttl < Duration::from_secs(2),
        "{ttl:?}"
    );
    let stored = gw.node("n1").await.unwrap();
    assert_eq!(stored.status(), caravan_proto::NodeStatus::Ready);
    assert!(!stored.computed_class.is_empty());
    let hb = gw
        .store
        .get(&gw.keys.heartbeat("n1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(hb.lease, stored.heartbeat_lease_id);
    assert_ne!(hb.lease, 0);

    // Heartbeats keep the lease past its TTL.
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(600)).await;
        client
            .heartbeat(HeartbeatRequest {
                node_id: "n1".into(),
            })
            .await
            .unwrap();
    }
    assert!(
        gw.store
            .get(&gw.keys.heartbeat("n1"))
            .await
            .unwrap()
            .is_some()
    );

    // A re-registration moves the key to a new lease and keeps it.
    client
        .register_node(RegisterNodeRequest {
            node: Some(node("n1")),
        })
        .await
        .unwrap();
    let again = gw.node("n1").await.unwrap();
    assert_ne!(again.heartbeat_lease_id, stored.heartbeat_lease_id);
    let hb = gw
        .store
        .get(&gw.keys.heartbeat("n1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(hb.lease, again.heartbeat_lease_id);

    // Silence: the lease expires and takes the heartbeat key with it.
    let gone = holds_within(Duration::from_secs(10), || async {
        gw.store
            .get(&gw.keys.heartbeat("n1"))
            .await
            .unwrap()
            .is_none()
    })
    .await;
    assert!(gone, "heartbeat key outlived its lease");
    let err = client
        .heartbeat(HeartbeatRequest {
            node_id: "n1".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    let err = client
        .heartbeat(HeartbeatRequest {
            node_id: "nobody".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    let err = client
        .register_node(RegisterNodeRequest {
            node: Some(caravan_proto::Node {
                datacenter: String::new(),
                ..node("n2")
            }),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().starts_with("node.datacenter"),
        "{}",
        err.message()
    );
    gw.stop().await;
}

fn placed(id: &str, node_id: &str, job_id: &str) -> Allocation {
    let mut a = Allocation {
        id: id.into(),
        name: format!("{job_id}.web[0]"),
        namespace: "default".into(),
        job_id: job_id.into(),
        task_group: "web".into(),
        node_id: node_id.into(),
        ..Default::default()
    };
    a.set_desired_status(AllocDesiredStatus::Run);
    a.set_client_status(AllocClientStatus::Pending);
    a
}

async fn alloc_stream_and_client_updates(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-allocs").await;
    let channel = gw.channel().await;
    let mut jobs = JobServiceClient::new(channel.clone());
    let mut client = NodeClientServiceClient::new(channel);
    client
        .register_node(RegisterNodeRequest {
            node: Some(node("n1")),
        })
        .await
        .unwrap();
    jobs.register_job(register(job("web", 1))).await.unwrap();
    let mut stream = client
        .watch_allocations(WatchAllocationsRequest {
            node_id: "n1".into(),
            min_revision: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let first = stream.message().await.unwrap().unwrap();
    assert!(first.full, "a stream starts with the whole set");
    assert!(first.allocs.is_empty());

    // The plan-applier's write, simulated.
    let mut alloc = placed("a1", "n1", "web");
    gw.store
        .put(&gw.keys.alloc("a1"), &encode(&alloc), 0)
        .await
        .unwrap();
    let next = tokio::time::timeout(Duration::from_secs(5), stream.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(!next.full, "then only what changed");
    assert_eq!(next.allocs.len(), 1);
    assert_eq!(next.allocs[0].id, "a1");
    assert_eq!(next.jobs.len(), 1, "the job version the alloc runs");
    assert_eq!(next.jobs[0].id, "web");

    // The client reports running: its own report does not come back.
    let mut running = AllocUpdate {
        alloc_id: "a1".into(),
        client_description: "Tasks are running".into(),
        ..Default::default()
    };
    running.set_client_status(AllocClientStatus::Running);
    client
        .update_allocations(UpdateAllocationsRequest {
            node_id: "n1".into(),
            updates: vec![running],
        })
        .await
        .unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(500), stream.message())
            .await
            .is_err(),
        "a node's own status report is no news to it"
    );

    // A server-side change is: the stop of a second alloc, placed meanwhile.
    let second = placed("a2", "n1", "web");
    gw.store
        .put(&gw.keys.alloc("a2"), &encode(&second), 0)
        .await
        .unwrap();
    let placed_msg = tokio::time::timeout(Duration::from_secs(5), stream.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(placed_msg.allocs.len(), 1);
    assert_eq!(placed_msg.allocs[0].id, "a2");
    assert!(
        placed_msg.jobs.is_empty(),
        "a job version is sent once per stream"
    );
    let mut stopped = second;
    stopped.set_desired_status(AllocDesiredStatus::Stop);
    gw.store
        .put(&gw.keys.alloc("a2"), &encode(&stopped), 0)
        .await
        .unwrap();
    let stop_msg = tokio::time::timeout(Duration::from_secs(5), stream.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(stop_msg.allocs.len(), 1);
    assert_eq!(
        stop_msg.allocs[0].desired_status(),
        AllocDesiredStatus::Stop
    );
    gw.store
        .delete(caravan_store::Range::key(gw.keys.alloc("a2")))
        .await
        .unwrap();
    let gone = tokio::time::timeout(Duration::from_secs(5), stream.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(gone.allocs.is_empty());
    assert_eq!(gone.removed_alloc_ids, vec!["a2"]);

    let evals_before = gw.evals().await.len();
    let mut failed = AllocUpdate {
        alloc_id: "a1".into(),
        client_description: "Failed tasks".into(),
        ..Default::default()
    };
    failed.set_client_status(AllocClientStatus::Failed);
    client
        .update_allocations(UpdateAllocationsRequest {
            node_id: "n1".into(),
            updates: vec![failed],
        })
        .await
        .unwrap();
    alloc = gw
        .objects::<Allocation>(gw.keys.prefix_of(Kind::Allocs))
        .await
        .remove(0);
    assert_eq!(alloc.client_status(), AllocClientStatus::Failed);
    assert_eq!(alloc.client_description, "Failed tasks");
    let evals = gw.evals().await;
    assert_eq!(evals.len(), evals_before + 1);
    let failure = evals
        .iter()
        .find(|e| e.triggered_by == "alloc-failure")
        .expect("an alloc-failure eval");
    assert_eq!(failure.job_id, "web");
    assert_eq!(failure.related_alloc_ids, vec!["a1"]);
    assert_eq!(failure.create_revision, alloc.modify_revision, "same txn");

    // An update for another node's alloc is refused and writes nothing.
    let mut wrong = AllocUpdate {
        alloc_id: "a1".into(),
        ..Default::default()
    };
    wrong.set_client_status(AllocClientStatus::Complete);
    let err = client
        .update_allocations(UpdateAllocationsRequest {
            node_id: "n2".into(),
            updates: vec![wrong],
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().starts_with("updates[0].alloc_id"),
        "{}",
        err.message()
    );
    gw.stop().await;
}

async fn leaders_come_from_the_store(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-leaders").await;
    let mut status = StatusServiceClient::new(gw.channel().await);
    let none = status
        .leaders(LeadersRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(none.leaders.is_empty());
    let lease = gw.store.lease_grant(10).await.unwrap();
    gw.store
        .campaign(&gw.keys.leader("eval-broker"), b"10.0.0.1:4650", lease.id)
        .await
        .unwrap();
    let some = status
        .leaders(LeadersRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        some.leaders.get("eval-broker").map(String::as_str),
        Some("10.0.0.1:4650")
    );
    gw.store.lease_revoke(lease.id).await.unwrap();
    gw.stop().await;
}

async fn validate_and_plan_write_nothing(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-plan").await;
    let channel = gw.channel().await;
    let mut jobs = JobServiceClient::new(channel.clone());
    let invalid = jobs
        .validate_job(caravan_proto::ValidateJobRequest {
            job: Some(job("web", -3)),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        invalid.errors.iter().any(|e| e.contains("count")),
        "{invalid:?}"
    );
    let valid = jobs
        .validate_job(caravan_proto::ValidateJobRequest {
            job: Some(job("web", 3)),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(valid.errors.is_empty(), "{valid:?}");

    // No node can run it: the plan says why, and still writes nothing.
    let plan = jobs
        .plan_job(caravan_proto::PlanJobRequest {
            job: Some(job("web", 3)),
            diff: true,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(plan.failed_tg_allocs.contains_key("web"), "{plan:?}");
    assert!(plan.diff.contains("web"), "{}", plan.diff);
    assert_eq!(gw.key_count().await, 0);
    gw.stop().await;
}

async fn drains_complete_when_nothing_is_left(backend: Backend) {
    use caravan_proto::node_service_client::NodeServiceClient;
    let gw = TestGateway::start(backend, "grpc-drain").await;
    let channel = gw.channel().await;
    let mut client = NodeClientServiceClient::new(channel.clone());
    let mut nodes = NodeServiceClient::new(channel.clone());
    for id in ["n1", "n2"] {
        client
            .register_node(RegisterNodeRequest {
                node: Some(node(id)),
            })
            .await
            .unwrap();
    }
    JobServiceClient::new(channel)
        .register_job(register(job("web", 1)))
        .await
        .unwrap();
    let mut alloc = placed("a1", "n1", "web");
    alloc.set_client_status(AllocClientStatus::Running);
    gw.store
        .put(&gw.keys.alloc("a1"), &encode(&alloc), 0)
        .await
        .unwrap();
    assert!(
        holds_within(Duration::from_secs(5), || async {
            nodes
                .clone()
                .node_allocations(caravan_proto::NodeAllocationsRequest {
                    node_id: "n1".into(),
                    options: None,
                })
                .await
                .is_ok_and(|r| !r.into_inner().allocs.is_empty())
        })
        .await
    );
    let drain = caravan_proto::DrainStrategy {
        deadline_ns: 3_600_000_000_000,
        ..Default::default()
    };
    for id in ["n1", "n2"] {
        nodes
            .update_drain(caravan_proto::UpdateDrainRequest {
                node_id: id.into(),
                drain_strategy: Some(drain),
                mark_eligible: false,
            })
            .await
            .unwrap();
    }
    // n2 had nothing to move: drained at once, still ineligible.
    let n2 = gw.node("n2").await.unwrap();
    assert!(n2.drain_strategy.is_none());
    assert_eq!(n2.last_drain.as_ref().unwrap().status, "complete");
    assert_eq!(
        n2.scheduling_eligibility(),
        caravan_proto::SchedulingEligibility::Ineligible
    );
    assert!(gw.node("n1").await.unwrap().drain_strategy.is_some());
    let mut done = AllocUpdate {
        alloc_id: "a1".into(),
        ..Default::default()
    };
    done.set_client_status(AllocClientStatus::Complete);
    client
        .update_allocations(UpdateAllocationsRequest {
            node_id: "n1".into(),
            updates: vec![done],
        })
        .await
        .unwrap();
    let n1 = gw.node("n1").await.unwrap();
    assert!(n1.drain_strategy.is_none(), "{n1:?}");
    assert_eq!(n1.last_drain.unwrap().status, "complete");
    gw.stop().await;
}

caravan_testkit::backend_cases!(backend => crate;
    register_writes_job_version_and_eval,
    invalid_jobs_write_nothing,
    enforce_revision_and_deregister,
    blocking_query_returns_on_change_or_times_out,
    node_registration_heartbeats_and_expiry,
    alloc_stream_and_client_updates,
    leaders_come_from_the_store,
    validate_and_plan_write_nothing,
    drains_complete_when_nothing_is_left,
);

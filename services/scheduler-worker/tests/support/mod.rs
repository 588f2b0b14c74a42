//! The real plan applier in-process and cluster fixtures written straight
//! into the store; the fake eval broker that hands out evals and records
//! what workers write back is the testkit's.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use caravan_plan_applier::PlanApplierService;
use caravan_proto::*;
use caravan_runtime::service::{Running, Service};
use caravan_scheduler_worker::{SchedulerWorkerConfig, SchedulerWorkerService, WorkerPool};
use caravan_state::{Keyspace, decode, encode};
use caravan_store::Store;
use tokio_util::sync::CancellationToken;

pub use caravan_testkit::fake_broker::{BrokerLog, FakeBroker, start as start_broker};

/// Serves a gRPC router on a free port; returns its address.
pub async fn serve_router(
    router: caravan_runtime::grpc::Router,
    stop: CancellationToken,
) -> String {
    let (listener, addr) = caravan_runtime::grpc::bind("127.0.0.1:0").await.unwrap();
    tokio::spawn(caravan_runtime::grpc::serve(router, listener, stop));
    addr.to_string()
}

/// A service running in-process and the token that stops it.
pub struct Started<S: Service> {
    pub stop: CancellationToken,
    pub running: Running<S>,
}

impl<S: Service> Started<S> {
    /// Stops the service and waits for it.
    pub async fn shutdown(self) {
        self.stop.cancel();
        self.running.stopped().await.unwrap();
    }
}

/// Starts the real plan applier.
pub async fn start_applier(store: &Arc<dyn Store>, prefix: &str) -> Started<PlanApplierService> {
    let mut config = caravan_plan_applier::PlanApplierConfig {
        grpc_addr: "127.0.0.1:0".into(),
        leader_ttl_ms: 3_000,
        verify_threads: 2,
        ..Default::default()
    };
    config.store.prefix = prefix.into();
    let stop = CancellationToken::new();
    let running = caravan_runtime::service::start(
        PlanApplierService::default(),
        config,
        store.clone(),
        stop.clone(),
    )
    .await
    .unwrap();
    Started { stop, running }
}

/// Starts a worker replica; returns it with its pool.
pub async fn start_worker(
    store: &Arc<dyn Store>,
    prefix: &str,
    workers: usize,
) -> (Started<SchedulerWorkerService>, Arc<WorkerPool>) {
    let mut config = SchedulerWorkerConfig {
        grpc_addr: "127.0.0.1:0".into(),
        workers,
        dequeue_timeout_ms: 300,
        leader_wait_ms: 5_000,
        shutdown_grace_ms: 2_000,
        ..Default::default()
    };
    config.store.prefix = prefix.into();
    let stop = CancellationToken::new();
    let running = caravan_runtime::service::start(
        SchedulerWorkerService,
        config,
        store.clone(),
        stop.clone(),
    )
    .await
    .unwrap();
    let pool = running.ready.clone();
    (Started { stop, running }, pool)
}

/// A ready node with the exec driver.
pub fn node(id: &str, cpu: u64, mem: u64) -> Node {
    let mut n = Node {
        id: id.into(),
        name: id.into(),
        datacenter: "dc1".into(),
        node_pool: "default".into(),
        status: NodeStatus::Ready as i32,
        scheduling_eligibility: SchedulingEligibility::Eligible as i32,
        resources: Some(NodeResources {
            cpu_mhz: cpu,
            memory_mb: mem,
            disk_mb: 100_000,
            ..Default::default()
        }),
        reserved: Some(NodeReservedResources::default()),
        ..Default::default()
    };
    n.attributes.insert("kernel.name".into(), "linux".into());
    n.attributes.insert("unique.hostname".into(), id.into());
    n.drivers.insert(
        "exec".into(),
        DriverInfo {
            detected: true,
            healthy: true,
            ..Default::default()
        },
    );
    n.computed_class = caravan_scheduler::compute_node_class(&n);
    n
}

/// A service job with one group of `count`, each task asking `cpu` MHz.
pub fn job(id: &str, count: i32, cpu: u32) -> Job {
    Job {
        id: id.into(),
        name: id.into(),
        namespace: "default".into(),
        r#type: JobType::Service as i32,
        priority: 50,
        datacenters: vec!["*".into()],
        task_groups: vec![TaskGroup {
            name: "web".into(),
            count,
            tasks: vec![Task {
                name: "server".into(),
                driver: "exec".into(),
                resources: Some(Resources {
                    cpu_mhz: cpu,
                    memory_mb: 256,
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Writes nodes and a job (with its version) as the api-gateway would.
pub async fn seed(store: &Arc<dyn Store>, prefix: &str, nodes: &[Node], job: &Job) {
    let ks = Keyspace::new(prefix);
    for n in nodes {
        store.put(&ks.node(&n.id), &encode(n), 0).await.unwrap();
    }
    let txn = caravan_store::Txn::new()
        .and_then(caravan_store::Op::put(
            ks.job(&job.namespace, &job.id),
            encode(job),
        ))
        .and_then(caravan_store::Op::put(
            ks.job_version(&job.namespace, &job.id, job.version),
            encode(job),
        ));
    store.txn(txn).await.unwrap();
}

/// A pending registration eval of `job`.
pub fn eval(id: &str, job: &Job) -> Evaluation {
    Evaluation {
        id: id.into(),
        namespace: job.namespace.clone(),
        priority: job.priority,
        r#type: "service".into(),
        triggered_by: "job-register".into(),
        job_id: job.id.clone(),
        status: EvalStatus::Pending as i32,
        ..Default::default()
    }
}

/// Every allocation under the prefix.
pub async fn allocs(store: &Arc<dyn Store>, prefix: &str) -> Vec<Allocation> {
    let ks = Keyspace::new(prefix);
    let res = store
        .range(ks.range_of(caravan_state::Kind::Allocs))
        .await
        .unwrap();
    res.kvs.iter().map(|kv| decode(kv).unwrap()).collect()
}

/// Waits until `cond` holds on the broker log, for up to 10 s.
pub async fn wait_for(broker: &FakeBroker, what: &str, cond: impl Fn(&BrokerLog) -> bool) {
    caravan_testkit::wait::until(what, Duration::from_secs(10), || cond(&broker.log.lock())).await;
}

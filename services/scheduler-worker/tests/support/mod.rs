//! A fake eval broker holding evals to hand out and recording what workers
//! write back, the real plan applier in-process, and cluster fixtures
//! written straight into the store.
#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use caravan_plan_applier::PlanApplierService;
use caravan_proto::eval_broker_service_server::{EvalBrokerService, EvalBrokerServiceServer};
use caravan_proto::*;
use caravan_runtime::names::EVAL_BROKER;
use caravan_runtime::service::{Running, Service};
use caravan_scheduler_worker::{SchedulerWorkerConfig, SchedulerWorkerService, WorkerPool};
use caravan_state::{Keyspace, decode, encode};
use caravan_store::{EtcdStore, Leadership, MemStore, Store, election_name};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

/// The embedded store.
pub fn mem() -> Arc<dyn Store> {
    Arc::new(MemStore::new())
}

/// The test etcd named by `CARAVAN_TEST_ETCD`.
pub async fn etcd() -> Arc<dyn Store> {
    let endpoints = caravan_testkit::etcd_endpoints();
    match EtcdStore::connect(&endpoints).await {
        Ok(s) => Arc::new(s),
        Err(err) => panic!("cannot reach the test etcd at {endpoints:?}: {err}"),
    }
}

/// What the fake broker saw.
#[derive(Default)]
pub struct BrokerLog {
    pub ready: VecDeque<Evaluation>,
    pub outstanding: HashMap<String, String>,
    pub acked: Vec<String>,
    pub nacked: Vec<String>,
    pub updated: Vec<Evaluation>,
    pub created: Vec<Evaluation>,
    pub reblocked: Vec<Evaluation>,
    pub resets: usize,
    next_token: u64,
}

/// A broker handing out queued evals with tokens.
#[derive(Clone)]
pub struct FakeBroker {
    pub log: Arc<Mutex<BrokerLog>>,
    store: Arc<dyn Store>,
}

impl FakeBroker {
    fn token_ok(&self, eval_id: &str, token: &str) -> Result<(), Status> {
        match self.log.lock().outstanding.get(eval_id) {
            Some(t) if t == token => Ok(()),
            _ => Err(Status::failed_precondition(format!(
                "eval {eval_id}: token not outstanding"
            ))),
        }
    }

    /// Queues an eval for a worker.
    pub fn enqueue(&self, eval: Evaluation) {
        self.log.lock().ready.push_back(eval);
    }
}

#[async_trait::async_trait]
impl EvalBrokerService for FakeBroker {
    async fn dequeue(
        &self,
        req: Request<DequeueRequest>,
    ) -> Result<Response<DequeueResponse>, Status> {
        let timeout = Duration::from_nanos(u64::try_from(req.into_inner().timeout_ns).unwrap_or(0));
        let deadline = tokio::time::Instant::now() + timeout.min(Duration::from_millis(500));
        loop {
            let next = {
                let mut log = self.log.lock();
                match log.ready.pop_front() {
                    Some(eval) => {
                        log.next_token += 1;
                        let token = format!("token-{}", log.next_token);
                        log.outstanding.insert(eval.id.clone(), token.clone());
                        Some((eval, token))
                    }
                    None => None,
                }
            };
            if let Some((eval, token)) = next {
                let wait_revision = self.store.current_revision().await.unwrap_or(0);
                return Ok(Response::new(DequeueResponse {
                    eval: Some(eval),
                    token,
                    wait_revision,
                }));
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(Response::new(DequeueResponse::default()));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    async fn ack(&self, req: Request<AckRequest>) -> Result<Response<AckResponse>, Status> {
        let req = req.into_inner();
        self.token_ok(&req.eval_id, &req.token)?;
        let mut log = self.log.lock();
        log.outstanding.remove(&req.eval_id);
        log.acked.push(req.eval_id);
        Ok(Response::new(AckResponse {}))
    }
    async fn nack(&self, req: Request<NackRequest>) -> Result<Response<NackResponse>, Status> {
        let req = req.into_inner();
        self.token_ok(&req.eval_id, &req.token)?;
        let mut log = self.log.lock();
        log.outstanding.remove(&req.eval_id);
        log.nacked.push(req.eval_id);
        Ok(Response::new(NackResponse {}))
    }
    async fn outstanding_reset(
        &self,
        req: Request<OutstandingResetRequest>,
    ) -> Result<Response<OutstandingResetResponse>, Status> {
        let req = req.into_inner();
        self.token_ok(&req.eval_id, &req.token)?;
        self.log.lock().resets += 1;
        Ok(Response::new(OutstandingResetResponse {}))
    }
    async fn update_eval(
        &self,
        req: Request<UpdateEvalRequest>,
    ) -> Result<Response<EvalWriteResponse>, Status> {
        let req = req.into_inner();
        let eval = req.eval.ok_or_else(|| Status::invalid_argument("eval"))?;
        self.token_ok(&eval.id, &req.token)?;
        self.log.lock().updated.push(eval);
        Ok(Response::new(EvalWriteResponse { revision: 1 }))
    }
    async fn create_eval(
        &self,
        req: Request<CreateEvalRequest>,
    ) -> Result<Response<EvalWriteResponse>, Status> {
        let req = req.into_inner();
        let eval = req.eval.ok_or_else(|| Status::invalid_argument("eval"))?;
        let previous = eval.previous_eval.clone();
        self.token_ok(&previous, &req.token)?;
        self.log.lock().created.push(eval);
        Ok(Response::new(EvalWriteResponse { revision: 1 }))
    }
    async fn reblock_eval(
        &self,
        req: Request<ReblockEvalRequest>,
    ) -> Result<Response<EvalWriteResponse>, Status> {
        let req = req.into_inner();
        let eval = req.eval.ok_or_else(|| Status::invalid_argument("eval"))?;
        self.token_ok(&eval.id, &req.token)?;
        self.log.lock().reblocked.push(eval);
        Ok(Response::new(EvalWriteResponse { revision: 1 }))
    }
    async fn stats(
        &self,
        _: Request<BrokerStatsRequest>,
    ) -> Result<Response<BrokerStatsResponse>, Status> {
        Ok(Response::new(BrokerStatsResponse::default()))
    }

    async fn force_periodic(
        &self,
        _: Request<ForcePeriodicRequest>,
    ) -> Result<Response<ForcePeriodicResponse>, Status> {
        Err(Status::unimplemented(
            "the fake broker launches no periodic jobs",
        ))
    }

    async fn force_gc(
        &self,
        _: Request<ForceGcRequest>,
    ) -> Result<Response<ForceGcResponse>, Status> {
        Err(Status::unimplemented("the fake broker collects no garbage"))
    }
}

/// A running fake broker, leader of `eval-broker`.
pub struct BrokerHandle {
    pub broker: FakeBroker,
    pub leadership: Leadership,
    stop: CancellationToken,
}

impl Drop for BrokerHandle {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Serves a gRPC router on a free port; returns its address.
pub async fn serve_router(
    router: tonic::transport::server::Router,
    stop: CancellationToken,
) -> String {
    let (listener, addr) = caravan_runtime::grpc::bind("127.0.0.1:0").await.unwrap();
    tokio::spawn(caravan_runtime::grpc::serve(router, listener, stop));
    addr.to_string()
}

/// Starts the fake broker and makes it the broker leader.
pub async fn start_broker(store: &Arc<dyn Store>, prefix: &str) -> BrokerHandle {
    let broker = FakeBroker {
        log: Arc::default(),
        store: store.clone(),
    };
    let stop = CancellationToken::new();
    let router =
        caravan_runtime::grpc::server().add_service(EvalBrokerServiceServer::new(broker.clone()));
    let addr = serve_router(router, stop.clone()).await;
    let leadership = Leadership::campaign(
        store.clone(),
        &election_name(prefix, EVAL_BROKER),
        &addr,
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    BrokerHandle {
        broker,
        leadership,
        stop,
    }
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
    for _ in 0..1000 {
        if cond(&broker.log.lock()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

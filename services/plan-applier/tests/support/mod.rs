//! An in-process fake eval broker (token checks only), an applier replica on
//! a free port, and fixtures written straight into the store.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use caravan_plan_applier::{MAX_MESSAGE_BYTES, PlanApplierConfig, PlanApplierService};
use caravan_proto::eval_broker_service_server::{EvalBrokerService, EvalBrokerServiceServer};
use caravan_proto::plan_applier_service_client::PlanApplierServiceClient;
use caravan_proto::*;
use caravan_runtime::names::EVAL_BROKER;
use caravan_runtime::service::Running;
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

/// A broker that knows the tokens it was told about.
#[derive(Default, Clone)]
pub struct FakeBroker {
    pub tokens: Arc<Mutex<HashMap<String, String>>>,
    pub resets: Arc<Mutex<Vec<String>>>,
}

#[async_trait::async_trait]
impl EvalBrokerService for FakeBroker {
    async fn dequeue(
        &self,
        _: Request<DequeueRequest>,
    ) -> Result<Response<DequeueResponse>, Status> {
        Ok(Response::new(DequeueResponse::default()))
    }
    async fn ack(&self, _: Request<AckRequest>) -> Result<Response<AckResponse>, Status> {
        Ok(Response::new(AckResponse {}))
    }
    async fn nack(&self, _: Request<NackRequest>) -> Result<Response<NackResponse>, Status> {
        Ok(Response::new(NackResponse {}))
    }
    async fn outstanding_reset(
        &self,
        req: Request<OutstandingResetRequest>,
    ) -> Result<Response<OutstandingResetResponse>, Status> {
        let req = req.into_inner();
        self.resets.lock().push(req.eval_id.clone());
        match self.tokens.lock().get(&req.eval_id) {
            Some(t) if *t == req.token => Ok(Response::new(OutstandingResetResponse {})),
            _ => Err(Status::failed_precondition(format!(
                "eval {} is not outstanding with that token",
                req.eval_id
            ))),
        }
    }
    async fn update_eval(
        &self,
        _: Request<UpdateEvalRequest>,
    ) -> Result<Response<EvalWriteResponse>, Status> {
        Ok(Response::new(EvalWriteResponse::default()))
    }
    async fn create_eval(
        &self,
        _: Request<CreateEvalRequest>,
    ) -> Result<Response<EvalWriteResponse>, Status> {
        Ok(Response::new(EvalWriteResponse::default()))
    }
    async fn reblock_eval(
        &self,
        _: Request<ReblockEvalRequest>,
    ) -> Result<Response<EvalWriteResponse>, Status> {
        Ok(Response::new(EvalWriteResponse::default()))
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

impl FakeBroker {
    /// Hands out `token` for `eval`.
    pub fn grant(&self, eval: &str, token: &str) {
        self.tokens.lock().insert(eval.into(), token.into());
    }
}

/// A running fake broker, leader of `eval-broker` under the prefix.
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

/// Starts a fake broker and makes it the broker leader.
pub async fn start_broker(store: &Arc<dyn Store>, prefix: &str) -> BrokerHandle {
    let broker = FakeBroker::default();
    let (listener, addr) = caravan_runtime::grpc::bind("127.0.0.1:0").await.unwrap();
    let stop = CancellationToken::new();
    let router =
        caravan_runtime::grpc::server().add_service(EvalBrokerServiceServer::new(broker.clone()));
    tokio::spawn(caravan_runtime::grpc::serve(router, listener, stop.clone()));
    let leadership = Leadership::campaign(
        store.clone(),
        &election_name(prefix, EVAL_BROKER),
        &addr.to_string(),
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

/// A running applier replica.
pub struct ApplierHandle {
    pub addr: String,
    pub stop: CancellationToken,
    pub running: Running<PlanApplierService>,
}

impl ApplierHandle {
    /// A client of this replica.
    pub async fn client(&self) -> PlanApplierServiceClient<tonic::transport::Channel> {
        PlanApplierServiceClient::new(caravan_runtime::grpc::channel(&self.addr).unwrap())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
    }

    /// Stops the replica and waits for it.
    pub async fn shutdown(self) {
        self.stop.cancel();
        self.running.stopped().await.unwrap();
    }
}

/// The configuration of a test replica under `prefix`.
pub fn config(prefix: &str) -> PlanApplierConfig {
    let mut c = PlanApplierConfig {
        grpc_addr: "127.0.0.1:0".into(),
        leader_ttl_ms: 3_000,
        verify_threads: 2,
        ..Default::default()
    };
    c.store.prefix = prefix.into();
    c
}

/// Starts an applier replica with `config`.
pub async fn start_applier(store: &Arc<dyn Store>, config: PlanApplierConfig) -> ApplierHandle {
    let stop = CancellationToken::new();
    let running = caravan_runtime::service::start(
        PlanApplierService::default(),
        config,
        store.clone(),
        stop.clone(),
    )
    .await
    .unwrap();
    ApplierHandle {
        addr: running.local_addr.to_string(),
        stop,
        running,
    }
}

/// Waits until the applier at `addr` leads (answers an empty plan with
/// something other than a follower's refusal).
pub async fn wait_leading(app: &ApplierHandle) {
    let mut client = app.client().await;
    for _ in 0..200 {
        let probe = Plan {
            eval_id: "probe".into(),
            eval_token: "probe".into(),
            snapshot_revision: 1,
            ..Default::default()
        };
        match client
            .submit_plan(SubmitPlanRequest { plan: Some(probe) })
            .await
        {
            Err(s) if caravan_runtime::status::is_not_leader(&s) => {}
            Err(s) if s.code() == tonic::Code::Unavailable && s.message().contains("transport") => {
            }
            _ => return,
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("applier at {} never led", app.addr);
}

/// A ready node with `cpu` MHz and 4 GB.
pub fn node(id: &str, cpu: u64) -> Node {
    Node {
        id: id.into(),
        name: id.into(),
        datacenter: "dc1".into(),
        status: NodeStatus::Ready as i32,
        scheduling_eligibility: SchedulingEligibility::Eligible as i32,
        resources: Some(NodeResources {
            cpu_mhz: cpu,
            memory_mb: 4096,
            disk_mb: 100_000,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A new allocation of `job` on `node` holding `cpu` MHz.
pub fn alloc(id: &str, job: &str, node: &str, cpu: u32) -> Allocation {
    let mut tasks = BTreeMap::new();
    tasks.insert(
        "server".to_string(),
        AllocatedTaskResources {
            cpu_mhz: cpu,
            memory_mb: 64,
            ..Default::default()
        },
    );
    Allocation {
        id: id.into(),
        name: format!("{job}.web[0]"),
        namespace: "default".into(),
        job_id: job.into(),
        task_group: "web".into(),
        node_id: node.into(),
        desired_status: AllocDesiredStatus::Run as i32,
        allocated_resources: Some(AllocatedResources {
            tasks,
            shared: Some(AllocatedSharedResources {
                disk_mb: 10,
                ..Default::default()
            }),
        }),
        ..Default::default()
    }
}

/// A plan of `eval` with `token` at `snapshot_revision` placing `allocs`.
pub fn plan(eval: &str, token: &str, snapshot_revision: i64, allocs: Vec<Allocation>) -> Plan {
    let mut p = Plan {
        eval_id: eval.into(),
        eval_token: token.into(),
        priority: 50,
        snapshot_revision,
        ..Default::default()
    };
    for a in allocs {
        p.node_allocation
            .entry(a.node_id.clone())
            .or_default()
            .allocs
            .push(a);
    }
    p
}

/// Writes a node.
pub async fn put_node(store: &Arc<dyn Store>, prefix: &str, n: &Node) -> i64 {
    store
        .put(&Keyspace::new(prefix).node(&n.id), &encode(n), 0)
        .await
        .unwrap()
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

/// Submits a plan.
pub async fn submit(
    client: &mut PlanApplierServiceClient<tonic::transport::Channel>,
    plan: Plan,
) -> Result<PlanResult, Status> {
    client
        .submit_plan(SubmitPlanRequest { plan: Some(plan) })
        .await
        .map(|r| r.into_inner().result.unwrap_or_default())
}

//! An applier replica on a free port and fixtures written straight into the
//! store; the fake eval broker that checks plan tokens is the testkit's.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use caravan_plan_applier::{MAX_MESSAGE_BYTES, PlanApplierConfig, PlanApplierService};
use caravan_proto::plan_applier_service_client::PlanApplierServiceClient;
use caravan_proto::*;
use caravan_runtime::service::Running;
use caravan_state::{Keyspace, decode, encode};
use caravan_store::Store;
use tokio_util::sync::CancellationToken;
use tonic::Status;

pub use caravan_testkit::fake_broker::start as start_broker;

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
            tasks: tasks.into(),
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

//! Measures how many plans and placements per second the applier commits.
//!
//! Starts one applier replica on the given etcd (under a fresh prefix, with
//! every token accepted), registers simulated nodes, and submits plans of
//! distinct jobs from concurrent clients over gRPC:
//!
//! ```text
//! cargo run --release -p caravan-plan-applier --example throughput -- \
//!     http://127.0.0.1:2379 [plans=2000] [allocs-per-plan=10] [clients=16] [nodes=500]
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use caravan_plan_applier::{
    ApplierError, MAX_MESSAGE_BYTES, PlanApplierConfig, PlanApplierService, TokenCheck,
};
use caravan_proto::plan_applier_service_client::PlanApplierServiceClient;
use caravan_proto::*;
use caravan_state::{Keyspace, encode};
use caravan_store::{EtcdStore, Op, Range, Store, Txn};
use tokio_util::sync::CancellationToken;

struct AnyToken;

#[async_trait::async_trait]
impl TokenCheck for AnyToken {
    async fn check(&self, _: &str, _: &str) -> Result<(), ApplierError> {
        Ok(())
    }
}

fn arg(args: &[String], i: usize, default: usize) -> usize {
    args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default)
}

fn alloc(id: String, job: &str, node: String) -> Allocation {
    let mut tasks = BTreeMap::new();
    tasks.insert(
        "server".to_string(),
        AllocatedTaskResources {
            cpu_mhz: 100,
            memory_mb: 64,
            ..Default::default()
        },
    );
    Allocation {
        name: format!("{job}.web[0]"),
        id,
        namespace: "default".into(),
        job_id: job.into(),
        task_group: "web".into(),
        node_id: node,
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

/// What etcd itself sustains here: serial and concurrent single-put txns.
async fn baseline(store: &Arc<dyn Store>, ks: &Keyspace, clients: usize) {
    let n = 300;
    let started = Instant::now();
    for i in 0..n {
        let txn = Txn::new().and_then(Op::put(ks.eval(&format!("base-{i}")), vec![0u8; 500]));
        store.txn(txn).await.unwrap();
    }
    let serial = n as f64 / started.elapsed().as_secs_f64();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (store, ks) = (store.clone(), ks.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..n / clients.max(1) {
                let key = ks.eval(&format!("base-{c}-{i}"));
                store
                    .txn(Txn::new().and_then(Op::put(key, vec![0u8; 500])))
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let concurrent = (n / clients.max(1) * clients) as f64 / started.elapsed().as_secs_f64();
    println!(
        "etcd baseline: {serial:.0} serial txns/s, {concurrent:.0} txns/s from {clients} concurrent callers"
    );
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let endpoint = args
        .first()
        .cloned()
        .unwrap_or_else(|| "http://127.0.0.1:2379".into());
    let plans = arg(&args, 1, 2000);
    let per_plan = arg(&args, 2, 10);
    let clients = arg(&args, 3, 16).max(1);
    let nodes = arg(&args, 4, 500).max(1);
    let store: Arc<dyn Store> = Arc::new(
        EtcdStore::connect(std::slice::from_ref(&endpoint))
            .await
            .unwrap(),
    );
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let prefix = format!("/caravan-bench/{nanos}");
    let ks = Keyspace::new(&prefix);
    for chunk in (0..nodes).collect::<Vec<_>>().chunks(500) {
        let mut txn = Txn::new();
        for i in chunk {
            let node = Node {
                id: format!("node-{i:05}"),
                status: NodeStatus::Ready as i32,
                scheduling_eligibility: SchedulingEligibility::Eligible as i32,
                resources: Some(NodeResources {
                    cpu_mhz: 1_000_000,
                    memory_mb: 1_000_000,
                    disk_mb: 1_000_000,
                    ..Default::default()
                }),
                ..Default::default()
            };
            txn = txn.and_then(Op::put(ks.node(&node.id), encode(&node)));
        }
        store.txn(txn).await.unwrap();
    }
    baseline(&store, &ks, clients).await;
    let snapshot_revision = store.current_revision().await.unwrap();
    let mut config = PlanApplierConfig {
        grpc_addr: "127.0.0.1:0".into(),
        ..Default::default()
    };
    config.store.prefix = prefix.clone();
    let stop = CancellationToken::new();
    let server = caravan_runtime::service::start(
        PlanApplierService::with_tokens(Arc::new(AnyToken)),
        config,
        store.clone(),
        stop.clone(),
    )
    .await
    .unwrap();
    let addr = server.local_addr;
    let client =
        PlanApplierServiceClient::new(caravan_runtime::grpc::channel(&addr.to_string()).unwrap())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
    // Wait for leadership: an empty plan is answered once leading.
    loop {
        let probe = Plan {
            eval_id: "probe".into(),
            eval_token: "probe".into(),
            snapshot_revision,
            ..Default::default()
        };
        if client
            .clone()
            .submit_plan(SubmitPlanRequest { plan: Some(probe) })
            .await
            .is_ok()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let mut client = client.clone();
        tasks.push(tokio::spawn(async move {
            let (mut placed, mut partial) = (0usize, 0usize);
            let mut latencies = Vec::new();
            let mut p = c;
            while p < plans {
                let job = format!("job-{p:06}");
                let mut plan = Plan {
                    eval_id: format!("eval-{p:06}"),
                    eval_token: "t".into(),
                    priority: 50,
                    snapshot_revision,
                    ..Default::default()
                };
                for k in 0..per_plan {
                    let node = format!("node-{:05}", (p * per_plan + k) % nodes);
                    plan.node_allocation
                        .entry(node.clone())
                        .or_default()
                        .allocs
                        .push(alloc(format!("{job}-{k}"), &job, node));
                }
                let t = Instant::now();
                let result = client
                    .submit_plan(SubmitPlanRequest { plan: Some(plan) })
                    .await
                    .unwrap()
                    .into_inner()
                    .result
                    .unwrap_or_default();
                latencies.push(t.elapsed());
                placed += result
                    .node_allocation
                    .values()
                    .map(|l| l.allocs.len())
                    .sum::<usize>();
                partial += usize::from(!result.rejected_nodes.is_empty());
                p += clients;
            }
            (placed, partial, latencies)
        }));
    }
    let (mut placed, mut partial, mut latencies) = (0, 0, Vec::new());
    for t in tasks {
        let (a, b, l) = t.await.unwrap();
        placed += a;
        partial += b;
        latencies.extend(l);
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort();
    let pct = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q) as usize];
    println!(
        "{plans} plans x {per_plan} allocs, {clients} clients, {nodes} nodes: {:.2}s, {:.0} plans/s, {:.0} placements/s, {partial} partial, latency p50 {:?} p99 {:?}",
        elapsed,
        plans as f64 / elapsed,
        placed as f64 / elapsed,
        pct(0.5),
        pct(0.99),
    );
    stop.cancel();
    let _ = server.stopped().await;
    store
        .delete(Range::prefix(ks.root().to_vec()))
        .await
        .unwrap();
}

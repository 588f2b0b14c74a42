//! Builders of nodes, allocations, snapshots and plans for the unit tests.

use std::collections::BTreeMap;
use std::sync::Arc;

use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, AllocatedPort, AllocatedResources,
    AllocatedSharedResources, AllocatedTaskResources, Allocation, Evaluation, Node, NodeResources,
    NodeStatus, Plan, SchedulingEligibility,
};
use caravan_state::{Change, Id, Keyspace, Snapshot, Tables, encode};
use caravan_store::{Leadership, MemStore, Revision, Store};

use crate::error::ApplierError;
use crate::tokens::TokenCheck;

/// A ready, eligible node with four 1000 MHz cores and 4 GB.
pub(crate) fn node(id: &str) -> Node {
    Node {
        id: id.into(),
        name: id.into(),
        status: NodeStatus::Ready as i32,
        scheduling_eligibility: SchedulingEligibility::Eligible as i32,
        resources: Some(NodeResources {
            cpu_mhz: 4000,
            core_ids: vec![0, 1, 2, 3],
            memory_mb: 4096,
            disk_mb: 10_000,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A running allocation of job `web` holding `cpu` MHz and `mem` MB.
pub(crate) fn alloc(id: &str, node: &str, cpu: u32, mem: u32) -> Allocation {
    let mut tasks = BTreeMap::new();
    tasks.insert(
        "server".to_string(),
        AllocatedTaskResources {
            cpu_mhz: cpu,
            memory_mb: mem,
            ..Default::default()
        },
    );
    Allocation {
        id: id.into(),
        name: format!("web.web[{id}]"),
        namespace: "default".into(),
        job_id: "web".into(),
        task_group: "web".into(),
        node_id: node.into(),
        desired_status: AllocDesiredStatus::Run as i32,
        client_status: AllocClientStatus::Running as i32,
        allocated_resources: Some(AllocatedResources {
            tasks: tasks.into(),
            shared: Some(AllocatedSharedResources {
                disk_mb: 100,
                ..Default::default()
            }),
        }),
        ..Default::default()
    }
}

/// The allocation holding host port `port` too.
pub(crate) fn with_port(mut a: Allocation, port: u32) -> Allocation {
    if let Some(shared) = a
        .allocated_resources
        .as_mut()
        .and_then(|r| r.shared.as_mut())
    {
        shared.ports.push(AllocatedPort {
            label: "http".into(),
            value: port,
            to: 0,
            host_ip: "10.0.0.1".into(),
        });
    }
    a
}

/// The allocation reserving `cores` exclusively.
pub(crate) fn with_cores(mut a: Allocation, cores: &[u32]) -> Allocation {
    if let Some(t) = a
        .allocated_resources
        .as_mut()
        .and_then(|r| r.tasks.get_mut("server"))
    {
        t.reserved_cores = cores.to_vec();
    }
    a
}

/// A snapshot at `revision` holding `nodes` and `allocs` (each alloc's
/// revisions as given).
pub(crate) fn snapshot(revision: Revision, nodes: &[Node], allocs: &[Allocation]) -> Snapshot {
    snapshot_with_evals(revision, nodes, allocs, &[])
}

/// A snapshot at `revision` holding `nodes`, `allocs` and `evals` (each
/// object's revisions as given).
pub(crate) fn snapshot_with_evals(
    revision: Revision,
    nodes: &[Node],
    allocs: &[Allocation],
    evals: &[Evaluation],
) -> Snapshot {
    let mut t = Tables::new();
    for e in evals {
        t.apply(Change::Eval {
            id: Id::from(e.id.as_str()),
            eval: Some(Arc::new(e.clone())),
        });
    }
    for n in nodes {
        t.apply(Change::Node {
            id: Id::from(n.id.as_str()),
            node: Some(Arc::new(n.clone())),
        });
    }
    for a in allocs {
        t.apply(Change::Alloc {
            id: Id::from(a.id.as_str()),
            alloc: Some(Arc::new(a.clone())),
        });
    }
    t.advance_to(revision);
    Snapshot::new(t)
}

/// An empty plan of eval `e1` computed at `snapshot_revision`.
pub(crate) fn plan(snapshot_revision: Revision) -> Plan {
    Plan {
        eval_id: "e1".into(),
        eval_token: "t1".into(),
        priority: 50,
        snapshot_revision,
        ..Default::default()
    }
}

/// Adds a placement to a plan.
pub(crate) fn place(plan: &mut Plan, a: Allocation) {
    plan.node_allocation
        .entry(a.node_id.clone())
        .or_default()
        .allocs
        .push(a);
}

/// Adds a stop of `id` on `node` to a plan.
pub(crate) fn stop(plan: &mut Plan, node: &str, id: &str) {
    plan.node_update
        .entry(node.to_string())
        .or_default()
        .allocs
        .push(Allocation {
            id: id.into(),
            node_id: node.into(),
            namespace: "default".into(),
            job_id: "web".into(),
            desired_status: AllocDesiredStatus::Stop as i32,
            desired_description: "alloc not needed".into(),
            ..Default::default()
        });
}

/// This replica leading the plan-applier election under `/t` of `store`.
pub(crate) async fn leader(store: &Arc<dyn Store>) -> Leadership {
    Leadership::campaign(
        store.clone(),
        "/t/leader/plan-applier",
        "me:1",
        std::time::Duration::from_secs(10),
    )
    .await
    .unwrap()
}

/// A token check that vouches for every delivery.
pub(crate) struct AnyToken;

#[async_trait::async_trait]
impl TokenCheck for AnyToken {
    async fn check(&self, _: &str, _: &str) -> Result<(), ApplierError> {
        Ok(())
    }
}

/// An embedded store holding node n1 under `/t`, and that keyspace.
pub(crate) async fn store_with_n1() -> (Arc<dyn Store>, Keyspace) {
    let store: Arc<dyn Store> = Arc::new(MemStore::new());
    let ks = Keyspace::new("/t");
    store
        .put(&ks.node("n1"), &encode(&node("n1")), 0)
        .await
        .unwrap();
    (store, ks)
}

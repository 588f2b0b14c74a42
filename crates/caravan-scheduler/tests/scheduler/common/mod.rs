//! Fixture builders shared by the scenario tests.
#![allow(dead_code)]

use std::collections::BTreeMap;

use caravan_model::AllocExt;
use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, Allocation, Constraint, DriverInfo, EvalStatus,
    Evaluation, Job, JobType, Node, NodeReservedResources, NodeResources, NodeStatus, Resources,
    SchedulingEligibility, Task, TaskGroup,
};
use caravan_scheduler::harness::Harness;

/// A ready, eligible node with the `exec` driver.
pub fn node(id: &str, dc: &str, cpu: u64, mem: u64) -> Node {
    let mut n = Node {
        id: id.into(),
        name: id.into(),
        datacenter: dc.into(),
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

/// Recomputes a node's class after a test changed it.
pub fn reclass(mut n: Node) -> Node {
    n.computed_class = caravan_scheduler::compute_node_class(&n);
    n
}

/// A job of `ty` with one group `web` of `count`, one `exec` task of 500 MHz / 256 MB.
pub fn job(id: &str, ty: JobType, count: i32) -> Job {
    Job {
        id: id.into(),
        name: id.into(),
        namespace: "default".into(),
        r#type: ty as i32,
        priority: 50,
        datacenters: vec!["*".into()],
        create_revision: 1,
        job_modify_revision: 1,
        task_groups: vec![TaskGroup {
            name: "web".into(),
            count,
            tasks: vec![Task {
                name: "server".into(),
                driver: "exec".into(),
                resources: Some(Resources {
                    cpu_mhz: 500,
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

/// A service job.
pub fn service(id: &str, count: i32) -> Job {
    job(id, JobType::Service, count)
}

/// A constraint.
pub fn constraint(l: &str, op: &str, r: &str) -> Constraint {
    Constraint {
        l_target: l.into(),
        r_target: r.into(),
        operand: op.into(),
    }
}

/// A pending evaluation for a job.
pub fn eval(id: &str, job: &Job, trigger: &str) -> Evaluation {
    let ty = match job.r#type() {
        JobType::Batch => "batch",
        JobType::System => "system",
        JobType::Sysbatch => "sysbatch",
        _ => "service",
    };
    Evaluation {
        id: id.into(),
        namespace: job.namespace.clone(),
        priority: job.priority,
        r#type: ty.into(),
        triggered_by: trigger.into(),
        job_id: job.id.clone(),
        status: EvalStatus::Pending as i32,
        ..Default::default()
    }
}

/// A harness with `nodes` and `job` registered.
pub fn cluster(nodes: Vec<Node>, job: &Job) -> Harness {
    let mut h = Harness::new();
    for n in nodes {
        h.state.upsert_node(n);
    }
    h.state.upsert_job(job.clone());
    h
}

/// Allocations the last plan placed, sorted by name.
pub fn placed(h: &Harness) -> Vec<Allocation> {
    let mut v: Vec<Allocation> = h
        .plans
        .last()
        .map(|p| {
            p.node_allocation
                .values()
                .flat_map(|l| l.allocs.clone())
                .collect()
        })
        .unwrap_or_default();
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

/// Allocations the last plan stopped, sorted by name.
pub fn stopped(h: &Harness) -> Vec<Allocation> {
    let mut v: Vec<Allocation> = h
        .plans
        .last()
        .map(|p| {
            p.node_update
                .values()
                .flat_map(|l| l.allocs.clone())
                .collect()
        })
        .unwrap_or_default();
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

/// (name, node) of placed allocations.
pub fn names_nodes(allocs: &[Allocation]) -> Vec<(String, String)> {
    allocs
        .iter()
        .map(|a| (a.name.clone(), a.node_id.clone()))
        .collect()
}

/// Live allocations of the job in the harness state, by node.
pub fn live_by_node(h: &Harness) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for a in h.state.allocs() {
        if a.is_live() {
            *m.entry(a.node_id.clone()).or_insert(0) += 1;
        }
    }
    m
}

/// An existing allocation of `job` on `node`.
pub fn alloc(id: &str, job: &Job, index: u32, node: &str) -> Allocation {
    let mut tasks = BTreeMap::new();
    tasks.insert(
        "server".to_string(),
        caravan_proto::AllocatedTaskResources {
            cpu_mhz: 500,
            memory_mb: 256,
            ..Default::default()
        },
    );
    Allocation {
        id: id.into(),
        name: format!("{}.web[{index}]", job.id),
        namespace: job.namespace.clone(),
        job_id: job.id.clone(),
        job_version: job.version,
        task_group: "web".into(),
        node_id: node.into(),
        node_name: node.into(),
        desired_status: AllocDesiredStatus::Run as i32,
        client_status: AllocClientStatus::Running as i32,
        allocated_resources: Some(caravan_proto::AllocatedResources {
            tasks: tasks.into(),
            shared: Some(caravan_proto::AllocatedSharedResources {
                disk_mb: 300,
                ..Default::default()
            }),
        }),
        create_revision: 1,
        ..Default::default()
    }
}

/// Sets every live allocation of the state to running (the client's report).
pub fn mark_running(h: &mut Harness) {
    let ids: Vec<Allocation> = h
        .state
        .allocs()
        .filter(|a| a.is_live())
        .map(|a| (**a).clone())
        .collect();
    for mut a in ids {
        a.client_status = AllocClientStatus::Running as i32;
        h.state.upsert_alloc(a);
    }
}

/// The status of the last eval update.
pub fn last_status(h: &Harness) -> EvalStatus {
    h.last_update()
        .map(|e| e.status())
        .unwrap_or(EvalStatus::Unspecified)
}

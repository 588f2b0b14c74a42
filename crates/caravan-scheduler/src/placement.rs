//! Turning a chosen node into an allocation: ports, cores and resources.

use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, AllocMetric, AllocatedPort, AllocatedResources,
    AllocatedSharedResources, AllocatedTaskResources, Allocation, Job, Node, SmallMap, TaskGroup,
};

use crate::context::EvalContext;
use crate::feasible;
use crate::ports;
use crate::rank::GroupRules;
use crate::resources::{self, GroupAsk, NodeUsage};
use crate::rng::Rng;
use crate::select::Choice;

/// Builds the allocation for a placement on `choice.node`.
pub(crate) fn build(
    ctx: &mut EvalContext<'_>,
    job: &Job,
    tg: &TaskGroup,
    rules: &GroupRules,
    choice: &Choice,
    name: String,
    mut metric: AllocMetric,
) -> Allocation {
    let idx = choice.node;
    ctx.usage(idx);
    ctx.table.ensure_capacity(idx);
    let node = ctx.table.node(idx).clone();
    // Ports and cores are picked against what stays on the node; most asks need
    // neither, so the copies are made only when they do.
    let needs_pick = !rules.ask.dynamic_ports.is_empty() || rules.ask.cores > 0;
    let mut used: NodeUsage = if needs_pick {
        ctx.table.loaded_usage(idx).cloned().unwrap_or_default()
    } else {
        NodeUsage::default()
    };
    for a in choice.preempted.iter().filter(|_| needs_pick) {
        used.remove(a);
    }
    let cap = if needs_pick {
        ctx.table.capacity(idx).cloned().unwrap_or_default()
    } else {
        resources::Capacity {
            mhz_per_core: ctx.table.capacity(idx).map_or(0, |c| c.mhz_per_core),
            ..Default::default()
        }
    };

    let mut ports_out = allocate_ports(&mut ctx.rng, &rules.ask, &cap, &used, &node);
    if !rules.ask.host_networks.is_empty() {
        bind_host_networks(&mut ports_out, &rules.ask, &node);
    }
    let tasks = task_resources(&rules.ask, &cap, &used);
    metric.score_meta = vec![choice.score_meta(&node.id)];
    Allocation {
        id: ctx.rng.uuid(),
        name,
        namespace: job.namespace.clone(),
        job_id: job.id.clone(),
        job_version: job.version,
        task_group: tg.name.clone(),
        node_id: node.id.clone(),
        node_name: node.name.clone(),
        eval_id: ctx.eval.id.clone(),
        desired_status: AllocDesiredStatus::Run as i32,
        client_status: AllocClientStatus::Pending as i32,
        allocated_resources: Some(AllocatedResources {
            tasks,
            shared: Some(AllocatedSharedResources {
                disk_mb: u32::try_from(rules.ask.disk_mb).unwrap_or(u32::MAX),
                ports: ports_out,
                networks: tg.networks.clone(),
            }),
        }),
        metrics: Some(Box::new(metric)),
        placement_score: choice.score as f32,
        create_time_unix_ns: ctx.now,
        modify_time_unix_ns: ctx.now,
        job_modify_revision: job.job_modify_revision,
        ..Default::default()
    }
}

/// The group's static ports, then its dynamic ones picked from the node's
/// range around what is taken (by allocations, the node and the static ports).
fn allocate_ports(
    rng: &mut Rng,
    ask: &GroupAsk,
    cap: &resources::Capacity,
    used: &NodeUsage,
    node: &Node,
) -> Vec<AllocatedPort> {
    let mut ports: Vec<AllocatedPort> = ask
        .static_ports
        .iter()
        .map(|(label, value, to)| AllocatedPort {
            label: label.clone(),
            value: *value,
            to: *to,
            host_ip: String::new(),
        })
        .collect();
    if ask.dynamic_ports.is_empty() {
        return ports;
    }
    let statics: Vec<u32> = ports.iter().map(|p| p.value).collect();
    let (lo, hi) = cap.dynamic_range;
    // Ports reserved on the host networks the dynamic ports ask for; each
    // pick avoids all of them, so one pass serves every label.
    let network_reserved: Vec<&ports::PortSet> = if ask.host_networks.is_empty() {
        Vec::new()
    } else {
        let named: Vec<String> = ask
            .dynamic_ports
            .iter()
            .filter_map(|(label, _)| resolved_network(ask, label, node))
            .collect();
        cap.host_networks
            .iter()
            .filter(|n| named.contains(&n.name))
            .map(|n| &n.reserved_ports)
            .collect()
    };
    let taken = |p: u32| {
        used.ports.binary_search(&p).is_ok()
            || cap.reserved_ports.contains(p)
            || statics.contains(&p)
            || network_reserved.iter().any(|r| r.contains(p))
    };
    let picked =
        ports::pick_dynamic(rng, lo, hi, ask.dynamic_ports.len(), taken).unwrap_or_default();
    for ((label, to), value) in ask.dynamic_ports.iter().zip(picked) {
        ports.push(AllocatedPort {
            label: label.clone(),
            value,
            to: if *to == 0 { value } else { *to },
            host_ip: String::new(),
        });
    }
    ports
}

/// The host network name the port `label` asks for on `node` (a `${meta.*}`
/// name resolved), if it names one other than `default`.
fn resolved_network(ask: &GroupAsk, label: &str, node: &Node) -> Option<String> {
    let name = feasible::target::resolve(ask.network_of(label)?, node)?;
    (!feasible::host_networks::is_default(&name)).then(|| name.into_owned())
}

/// Gives each port that names a host network the node's address on it.
/// Feasibility placed the group only where every such network exists.
fn bind_host_networks(ports: &mut [AllocatedPort], ask: &GroupAsk, node: &Node) {
    for p in ports {
        let network = resolved_network(ask, &p.label, node);
        if let Some(net) = network.and_then(|name| feasible::host_networks::find(node, &name)) {
            p.host_ip = net.address.clone();
        }
    }
}

/// Each task's resources, with reserved cores taken in task order from the
/// node's free ones (a task on cores gets their whole cpu).
fn task_resources(
    ask: &GroupAsk,
    cap: &resources::Capacity,
    used: &NodeUsage,
) -> SmallMap<AllocatedTaskResources> {
    let mut free_cores = resources::pick_cores(cap, used, ask.cores).into_iter();
    let mut tasks = SmallMap::new();
    for t in &ask.tasks {
        let reserved_cores: Vec<u32> = free_cores.by_ref().take(t.cores as usize).collect();
        let cpu = if t.cores > 0 {
            u64::from(t.cores).saturating_mul(cap.mhz_per_core)
        } else {
            t.cpu_mhz
        };
        tasks.insert(
            t.name.clone(),
            AllocatedTaskResources {
                cpu_mhz: u32::try_from(cpu).unwrap_or(u32::MAX),
                reserved_cores,
                memory_mb: u32::try_from(t.memory_mb).unwrap_or(u32::MAX),
                memory_max_mb: u32::try_from(t.memory_max_mb).unwrap_or(u32::MAX),
                ports: Vec::new(),
                devices: Vec::new(),
            },
        );
    }
    tasks
}

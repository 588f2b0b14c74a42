//! Checking a plan before it is committed: its shape, the freshness of the
//! snapshot it was planned on, and per node whether its part can be applied.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use caravan_model::AllocExt;
use caravan_proto::{
    AllocList, Allocation, EvalStatus, Evaluation, Node, NodeStatus, Plan, SchedulingEligibility,
};
use caravan_scheduler::resources::{FitError, Kept, allocs_fit, fits_beside};
use caravan_store::Revision;

use crate::error::ApplierError;
use crate::overlay::View;

/// Plans with fewer nodes are verified on one thread: spreading them costs
/// more than it saves.
const PARALLEL_MIN_NODES: usize = 16;

/// Checks the shape of a plan; the error names the offending field.
pub(crate) fn validate_plan(plan: &Plan) -> Result<(), ApplierError> {
    if plan.eval_id.is_empty() {
        return Err(ApplierError::invalid("plan.eval_id", "must not be empty"));
    }
    if plan.eval_token.is_empty() {
        return Err(ApplierError::invalid(
            "plan.eval_token",
            "must not be empty",
        ));
    }
    if plan.snapshot_revision <= 0 {
        return Err(ApplierError::invalid(
            "plan.snapshot_revision",
            "must be the positive revision the plan was computed at",
        ));
    }
    let mut placed: HashSet<&str> = HashSet::new();
    for (node, list) in &plan.node_allocation {
        validate_list("node_allocation", node, list)?;
        for (i, a) in list.allocs.iter().enumerate() {
            let field = |f: &str| format!("plan.node_allocation[{node:?}].allocs[{i}].{f}");
            if a.node_id != *node {
                return Err(ApplierError::invalid(
                    field("node_id"),
                    format!("is {:?}, not the node it is listed under", a.node_id),
                ));
            }
            if a.job_id.is_empty() {
                return Err(ApplierError::invalid(field("job_id"), "must not be empty"));
            }
            if a.task_group.is_empty() {
                return Err(ApplierError::invalid(
                    field("task_group"),
                    "must not be empty",
                ));
            }
            if !placed.insert(&a.id) {
                return Err(ApplierError::invalid(
                    field("id"),
                    format!("allocation {} is placed twice", a.id),
                ));
            }
        }
    }
    for (node, list) in &plan.node_update {
        validate_list("node_update", node, list)?;
    }
    for (node, list) in &plan.node_preemptions {
        validate_list("node_preemptions", node, list)?;
    }
    if let Some(d) = &plan.deployment
        && d.id.is_empty()
    {
        return Err(ApplierError::invalid(
            "plan.deployment.id",
            "must not be empty",
        ));
    }
    for (i, u) in plan.deployment_updates.iter().enumerate() {
        if u.deployment_id.is_empty() {
            return Err(ApplierError::invalid(
                format!("plan.deployment_updates[{i}].deployment_id"),
                "must not be empty",
            ));
        }
    }
    for (i, e) in plan.evals.iter().enumerate() {
        if e.id.is_empty() {
            return Err(ApplierError::invalid(
                format!("plan.evals[{i}].id"),
                "must not be empty",
            ));
        }
    }
    if let Some(e) = &plan.eval_completion {
        validate_completion(plan, e)?;
    }
    Ok(())
}

/// A completion may only finish the plan's own eval, as delivered.
fn validate_completion(plan: &Plan, e: &Evaluation) -> Result<(), ApplierError> {
    if e.id != plan.eval_id {
        return Err(ApplierError::invalid(
            "plan.eval_completion.id",
            format!("is {:?}, not the plan's eval {:?}", e.id, plan.eval_id),
        ));
    }
    if e.status() != EvalStatus::Complete {
        return Err(ApplierError::invalid(
            "plan.eval_completion.status",
            "must be complete",
        ));
    }
    if e.modify_revision <= 0 {
        return Err(ApplierError::invalid(
            "plan.eval_completion.modify_revision",
            "must be the positive revision the eval had when delivered",
        ));
    }
    Ok(())
}

fn validate_list(map: &str, node: &str, list: &AllocList) -> Result<(), ApplierError> {
    if node.is_empty() {
        return Err(ApplierError::invalid(
            format!("plan.{map}"),
            "a node id key is empty",
        ));
    }
    for (i, a) in list.allocs.iter().enumerate() {
        if a.id.is_empty() {
            return Err(ApplierError::invalid(
                format!("plan.{map}[{node:?}].allocs[{i}].id"),
                "must not be empty",
            ));
        }
    }
    Ok(())
}

/// Every node a plan touches, ordered by id.
pub(crate) fn plan_nodes(plan: &Plan) -> Vec<String> {
    let mut nodes: BTreeSet<&String> = BTreeSet::new();
    nodes.extend(plan.node_update.keys());
    nodes.extend(plan.node_allocation.keys());
    nodes.extend(plan.node_preemptions.keys());
    nodes.into_iter().cloned().collect()
}

/// The jobs whose allocations a plan places, updates or stops (evictions of
/// other jobs' allocations are guarded by their mod revisions instead).
pub(crate) fn plan_jobs(view: &View, plan: &Plan) -> BTreeSet<(String, String)> {
    let mut jobs = BTreeSet::new();
    if let Some(j) = &plan.job {
        jobs.insert((j.namespace.clone(), j.id.clone()));
    }
    for a in plan.node_allocation.values().flat_map(|l| &l.allocs) {
        jobs.insert((a.namespace.clone(), a.job_id.clone()));
    }
    for a in plan.node_update.values().flat_map(|l| &l.allocs) {
        match view.alloc(&a.id) {
            Some(cur) => jobs.insert((cur.namespace.clone(), cur.job_id.clone())),
            None => jobs.insert((a.namespace.clone(), a.job_id.clone())),
        };
    }
    jobs
}

/// The newest server-side change to a job the plan touches when it is newer
/// than the snapshot the plan was computed on: the plan is stale and must be
/// refused as a whole, or it could place an allocation twice.
pub(crate) fn stale_revision(view: &View, plan: &Plan) -> Option<(String, Revision)> {
    plan_jobs(view, plan)
        .into_iter()
        .map(|(ns, job)| {
            let rev = view.job_revision(&ns, &job);
            (job, rev)
        })
        .filter(|(_, rev)| *rev > plan.snapshot_revision)
        .max_by_key(|(_, rev)| *rev)
}

/// The outcome of verifying every node of a plan.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// Nodes whose part can be committed, ordered by id.
    pub(crate) accepted: Vec<String>,
    /// Nodes whose part is refused, with why.
    pub(crate) rejected: BTreeMap<String, String>,
}

/// Verifies every node of `plan` against `view`, on up to `threads` threads.
pub(crate) fn verify_plan(view: &View, plan: &Plan, threads: usize) -> Verdict {
    let nodes = plan_nodes(plan);
    let outcomes: Vec<Result<(), String>> = if nodes.len() < PARALLEL_MIN_NODES || threads <= 1 {
        nodes.iter().map(|n| verify_node(view, plan, n)).collect()
    } else {
        let chunk = nodes.len().div_ceil(threads);
        std::thread::scope(|s| {
            let handles: Vec<_> = nodes
                .chunks(chunk)
                .map(|part| {
                    let handle = s.spawn(move || {
                        part.iter()
                            .map(|n| verify_node(view, plan, n))
                            .collect::<Vec<_>>()
                    });
                    (part.len(), handle)
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|(len, h)| {
                    h.join().unwrap_or_else(|_| {
                        vec![Err("internal error while verifying the node".to_string()); len]
                    })
                })
                .collect()
        })
    };
    let mut verdict = Verdict::default();
    for (node, outcome) in nodes.into_iter().zip(outcomes) {
        match outcome {
            Ok(()) => verdict.accepted.push(node),
            Err(reason) => {
                verdict.rejected.insert(node, reason);
            }
        }
    }
    verdict
}

fn allocs_of<'p>(map: &'p BTreeMap<String, AllocList>, node: &str) -> &'p [Allocation] {
    map.get(node).map_or(&[][..], |l| &l.allocs[..])
}

/// Whether one node's part of a plan can be applied: removals always can;
/// placements need a ready node, an eligible one unless they only update
/// allocations already there, and room for everything left after the
/// plan's stops and evictions.
pub(crate) fn verify_node(view: &View, plan: &Plan, node_id: &str) -> Result<(), String> {
    let placing = allocs_of(&plan.node_allocation, node_id);
    if placing.is_empty() {
        return Ok(());
    }
    let Some(node) = view.node(node_id) else {
        return Err("node does not exist".into());
    };
    if node.status() == NodeStatus::Disconnected && only_marks_unknown(view, placing, node_id) {
        // Marking a disconnected node's allocations unknown adds nothing to it.
        return Ok(());
    }
    if node.status() != NodeStatus::Ready {
        return Err(format!(
            "node is not ready for placements (status {})",
            node.status().as_str_name()
        ));
    }
    let mut first_new = None;
    for a in placing {
        match view.alloc(&a.id) {
            Some(cur) if cur.node_id != node_id => {
                return Err(format!(
                    "allocation {} already lives on node {}",
                    a.id, cur.node_id
                ));
            }
            Some(_) => {}
            None => {
                first_new.get_or_insert(a);
            }
        }
    }
    let ineligible = node.scheduling_eligibility() == SchedulingEligibility::Ineligible;
    let draining = node.drain_strategy.is_some();
    if (ineligible || draining)
        && let Some(a) = first_new
    {
        let why = if draining { "draining" } else { "ineligible" };
        return Err(format!(
            "node is {why}: it accepts only stops and in-place updates (allocation {} is new)",
            a.id
        ));
    }
    fit(view, plan, node, node_id).map_err(|e| e.to_string())
}

/// Whether every allocation the plan writes to the node already lives there
/// and is only being marked `unknown`, which a disconnected node takes.
fn only_marks_unknown(view: &View, placing: &[Allocation], node_id: &str) -> bool {
    placing.iter().all(|a| {
        a.client_status == caravan_proto::AllocClientStatus::Unknown as i32
            && view.alloc(&a.id).is_some_and(|cur| cur.node_id == node_id)
    })
}

/// Whether the plan's placements fit on the node beside what stays there.
///
/// It starts from the node's running usage in the cache, corrected for the
/// overlay and for what the plan stops, evicts or replaces, so its cost
/// follows the plan, not the allocations on the node. Device instances are
/// not in that sum: a node that has them is checked by summing every
/// allocation on it. Both refuse exactly what the scheduler's own check
/// ([`caravan_scheduler::resources::allocs_fit`]) refuses: the last line
/// before a commit.
fn fit(view: &View, plan: &Plan, node: &Node, node_id: &str) -> Result<(), FitError> {
    let placing = allocs_of(&plan.node_allocation, node_id);
    let removed = removed_on(plan, node_id);
    if has_devices(node) {
        return fit_by_sum(view, node, node_id, &removed, placing);
    }
    let mut usage = view.node_usage(node_id);
    for id in &removed {
        if let Some(cur) = view.alloc(id)
            && cur.node_id == node_id
        {
            usage.sub_alloc(&cur);
        }
    }
    if usage.device_instances > 0 {
        return fit_by_sum(view, node, node_id, &removed, placing);
    }
    let kept = Kept {
        cpu_mhz: usage.cpu_mhz,
        memory_mb: usage.memory_mb,
        disk_mb: usage.disk_mb,
        cores: usage.held_cores(),
        ports: usage.held_ports().collect(),
    };
    fits_beside(node, &kept, placing)
}

/// The ids of the allocations the plan stops, evicts or replaces on a
/// node, sorted, each once.
fn removed_on<'p>(plan: &'p Plan, node_id: &str) -> Vec<&'p str> {
    let mut removed: Vec<&str> = [
        &plan.node_update,
        &plan.node_preemptions,
        &plan.node_allocation,
    ]
    .into_iter()
    .flat_map(|map| allocs_of(map, node_id))
    .map(|a| a.id.as_str())
    .collect();
    removed.sort_unstable();
    removed.dedup();
    removed
}

/// The fit summed from every allocation on the node, in its newest form.
fn fit_by_sum(
    view: &View,
    node: &Node,
    node_id: &str,
    removed: &[&str],
    placing: &[Allocation],
) -> Result<(), FitError> {
    let existing = view.allocs_on_node(node_id);
    let kept = existing
        .iter()
        .filter(|a| !a.is_terminal() && removed.binary_search(&a.id.as_str()).is_err())
        .map(Arc::as_ref);
    allocs_fit(node, kept.chain(placing))
}

/// Whether the node offers device instances.
fn has_devices(node: &Node) -> bool {
    node.resources
        .iter()
        .flat_map(|r| &r.devices)
        .any(|d| !d.instance_ids.is_empty())
}

#[cfg(test)]
mod property;
#[cfg(test)]
mod tests;

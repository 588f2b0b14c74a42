//! What happens to a system job's existing allocations (Nomad's
//! `diffSystemAllocs`): moved off or lost with a tainted node, stopped when not
//! needed, kept, or queued as updates of an older job version.

use caravan_model::AllocExt;
use std::collections::BTreeMap;
use std::sync::Arc;

use caravan_proto::{AllocClientStatus, Allocation, DesiredUpdates, Node, NodeStatus};

use crate::attempt::JobSnapshot;
use crate::context::EvalContext;
use crate::feasible::node_in_job_scope;
use crate::reconcile::{ALLOC_LOST, ALLOC_MIGRATING, ALLOC_NOT_NEEDED};

/// Allocations keyed by (node id, allocation name).
pub(super) type ByNodeAndName = BTreeMap<(String, String), Arc<Allocation>>;

/// The job's allocations that stay where they are, by node and name.
pub(super) struct ExistingAllocs {
    /// Live allocations on untainted nodes, one per node and name.
    pub live: ByNodeAndName,
    /// The newest terminal allocation per node and name.
    pub terminal: ByNodeAndName,
}

/// A live allocation of an older job version on a node that takes placements.
pub(super) struct Outdated {
    /// The allocation.
    pub alloc: Arc<Allocation>,
    /// Its node's index in the context's table.
    pub node: u32,
    /// Its task group's index in the job.
    pub group: usize,
}

/// Sorts the job's allocations by node and name: those on tainted nodes
/// migrate, are ignored or are lost, a second live allocation of a name on a
/// node is stopped, and the rest are returned with the newest terminal ones.
pub(super) fn diff_allocs(
    ctx: &mut EvalContext<'_>,
    snapshot: &JobSnapshot,
    desired: &mut BTreeMap<String, DesiredUpdates>,
) -> ExistingAllocs {
    let mut live = ByNodeAndName::new();
    let mut terminal = ByNodeAndName::new();
    for a in &snapshot.allocs {
        let key = (a.node_id.clone(), a.name.clone());
        if a.is_terminal() {
            let newer = terminal
                .get(&key)
                .is_none_or(|t| (t.create_time_unix_ns, &t.id) < (a.create_time_unix_ns, &a.id));
            if newer {
                terminal.insert(key, a.clone());
            }
            continue;
        }
        let d = desired.entry(a.task_group.clone()).or_default();
        if let Some(node) = snapshot.tainted.get(&a.node_id) {
            leave_tainted_node(ctx, a, node.as_deref(), snapshot.runnable.is_some(), d);
            continue;
        }
        if live.contains_key(&key) {
            d.stop += 1;
            ctx.stop(a, ALLOC_NOT_NEEDED, None, None);
            continue;
        }
        live.insert(key, a.clone());
    }
    ExistingAllocs { live, terminal }
}

/// An allocation on a tainted node: lost with a node that is down,
/// disconnected or gone; moved off a draining one unless the drain leaves
/// system jobs alone (and the job still runs).
fn leave_tainted_node(
    ctx: &mut EvalContext<'_>,
    a: &Arc<Allocation>,
    node: Option<&Node>,
    job_runs: bool,
    d: &mut DesiredUpdates,
) {
    match node {
        Some(n) if !matches!(n.status(), NodeStatus::Down | NodeStatus::Disconnected) => {
            let ignore_system = n
                .drain_strategy
                .as_ref()
                .is_some_and(|s| s.ignore_system_jobs);
            if ignore_system && job_runs {
                d.ignore += 1;
            } else {
                d.migrate += 1;
                ctx.stop(a, ALLOC_MIGRATING, None, None);
            }
        }
        _ => {
            d.stop += 1;
            ctx.stop(a, ALLOC_LOST, Some(AllocClientStatus::Lost), None);
        }
    }
}

/// What each live allocation needs: stopped when the job or its group is gone
/// or its node left the job's scope, kept when it runs the current version or
/// its node merely stopped taking placements; the rest are returned as
/// updates.
pub(super) fn outdated_allocs(
    ctx: &mut EvalContext<'_>,
    snapshot: &JobSnapshot,
    live: &ByNodeAndName,
    desired: &mut BTreeMap<String, DesiredUpdates>,
) -> Vec<Outdated> {
    let mut updates: Vec<Outdated> = Vec::new();
    for ((node_id, _), a) in live {
        let d = desired.entry(a.task_group.clone()).or_default();
        let Some(job) = &snapshot.runnable else {
            d.stop += 1;
            ctx.stop(a, ALLOC_NOT_NEEDED, None, None);
            continue;
        };
        let Some(group) = job.task_groups.iter().position(|g| g.name == a.task_group) else {
            d.stop += 1;
            ctx.stop(a, ALLOC_NOT_NEEDED, None, None);
            continue;
        };
        let Some(node) = ctx.table.find(node_id) else {
            // The node no longer takes placements: stop if it left the job's
            // scope, keep the allocation if it is merely ineligible.
            let out_of_scope = ctx
                .state
                .node(node_id)
                .is_none_or(|n| !node_in_job_scope(job, &n));
            if out_of_scope {
                d.stop += 1;
                ctx.stop(a, ALLOC_NOT_NEEDED, None, None);
            } else {
                d.ignore += 1;
            }
            continue;
        };
        if a.job_version == job.version {
            d.ignore += 1;
        } else {
            updates.push(Outdated {
                alloc: a.clone(),
                node,
                group,
            });
        }
    }
    updates
}

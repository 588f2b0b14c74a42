//! Sorting a group's allocations into what happens to them.

use std::collections::BTreeMap;
use std::sync::Arc;

use caravan_model::{AllocExt, DeploymentStatusExt, alloc_index};
use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, Allocation, Deployment, Node, NodeStatus,
};

use crate::model;
use crate::reschedule;

/// Allocations by id, in id order.
pub type AllocSet = BTreeMap<String, Arc<Allocation>>;

/// Nodes allocations sit on that are going away: `None` when the node is gone.
pub type Tainted = BTreeMap<String, Option<Arc<Node>>>;

/// Whether a node is tainted for its allocations (down, gone, draining).
pub fn node_is_tainted(node: Option<&Node>) -> bool {
    match node {
        None => true,
        Some(n) => {
            matches!(n.status(), NodeStatus::Down | NodeStatus::Disconnected)
                || n.drain_strategy.is_some()
        }
    }
}

/// The tainted nodes among those the allocations run on.
pub fn tainted_nodes(state: &dyn crate::State, allocs: &[Arc<Allocation>]) -> Tainted {
    let mut out = Tainted::new();
    for a in allocs {
        if a.node_id.is_empty() || out.contains_key(&a.node_id) || a.is_terminal() {
            continue;
        }
        let node = state.node(&a.node_id);
        if node_is_tainted(node.as_deref()) {
            out.insert(a.node_id.clone(), node);
        }
    }
    out
}

/// Non-terminal allocations split into (untainted, migrate, lost); terminal ones
/// stay untainted.
pub fn by_tainted(set: AllocSet, tainted: &Tainted) -> (AllocSet, AllocSet, AllocSet) {
    let (mut untainted, mut migrate, mut lost) =
        (AllocSet::new(), AllocSet::new(), AllocSet::new());
    for (id, a) in set {
        if a.is_terminal() {
            untainted.insert(id, a);
            continue;
        }
        let wants_migrate = a
            .desired_transition
            .as_ref()
            .is_some_and(|t| t.migrate == Some(true));
        match tainted.get(&a.node_id) {
            None if wants_migrate => {
                migrate.insert(id, a);
            }
            None => {
                untainted.insert(id, a);
            }
            Some(None) => {
                lost.insert(id, a);
            }
            Some(Some(n)) => {
                if matches!(n.status(), NodeStatus::Down | NodeStatus::Disconnected) {
                    lost.insert(id, a);
                } else {
                    migrate.insert(id, a);
                }
            }
        }
    }
    (untainted, migrate, lost)
}

/// An allocation to replace later, and when.
#[derive(Debug, Clone)]
pub struct Delayed {
    /// The failed allocation.
    pub alloc: Arc<Allocation>,
    /// When it may be replaced.
    pub at: i64,
}

/// Splits untainted allocations into (untainted, reschedule now, reschedule later).
pub fn by_reschedulable(
    set: AllocSet,
    batch: bool,
    now: i64,
    eval_id: &str,
    deployment: Option<&Deployment>,
    policy: &caravan_proto::ReschedulePolicy,
) -> (AllocSet, AllocSet, Vec<Delayed>) {
    let (mut untainted, mut now_set, mut later) = (AllocSet::new(), AllocSet::new(), Vec::new());
    for (id, a) in set {
        let (keep, ignore) = should_filter(&a, batch);
        if keep {
            untainted.insert(id.clone(), a.clone());
        }
        if keep || ignore {
            continue;
        }
        // Only failed allocations that should run get here.
        let in_active_deployment =
            deployment.is_some_and(|d| a.deployment_id == d.id && d.status().is_active());
        let transition = a.desired_transition.unwrap_or_default();
        if in_active_deployment && transition.reschedule != Some(true) {
            untainted.insert(id, a);
            continue;
        }
        let forced = transition.force_reschedule == Some(true);
        match reschedule::next_time(&a, policy) {
            Some(at)
                if forced
                    || a.followup_eval_id == eval_id
                    || at.saturating_sub(now) <= reschedule::WINDOW_NS =>
            {
                now_set.insert(id, a);
            }
            Some(at) => {
                if a.followup_eval_id.is_empty() {
                    later.push(Delayed {
                        alloc: a.clone(),
                        at,
                    });
                }
                untainted.insert(id, a);
            }
            None if forced => {
                now_set.insert(id, a);
            }
            None => {
                untainted.insert(id, a);
            }
        }
    }
    (untainted, now_set, later)
}

/// (keep as untainted, ignore entirely) for one allocation.
fn should_filter(a: &Allocation, batch: bool) -> (bool, bool) {
    if batch {
        match a.desired_status() {
            AllocDesiredStatus::Stop => {
                return (model::ran_successfully(a), !model::ran_successfully(a));
            }
            AllocDesiredStatus::Evict => return (false, true),
            _ => {}
        }
        return match a.client_status() {
            AllocClientStatus::Failed => (false, false),
            _ => (true, false),
        };
    }
    if a.is_server_terminal() {
        return (false, true);
    }
    match a.client_status() {
        AllocClientStatus::Complete | AllocClientStatus::Lost => (false, true),
        AllocClientStatus::Failed => (false, false),
        _ => (true, false),
    }
}

/// Allocation names in index order.
pub fn name_order(set: &AllocSet) -> Vec<Arc<Allocation>> {
    let mut v: Vec<Arc<Allocation>> = set.values().cloned().collect();
    v.sort_by(|a, b| (alloc_index(&a.name), &a.id).cmp(&(alloc_index(&b.name), &b.id)));
    v
}

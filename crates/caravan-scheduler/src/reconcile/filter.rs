//! Sorting a group's allocations into what happens to them.

use std::collections::BTreeMap;
use std::sync::Arc;

use caravan_model::{AllocExt, DeploymentStatusExt, alloc_index, disconnect};
use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, Allocation, Deployment, Node, NodeStatus, TaskGroup,
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

/// A group's allocations sorted by where they run, disconnects included
/// (Nomad's `classifyAllocs`). Terminal allocations stay untainted.
#[derive(Debug, Default)]
pub struct ByNode {
    /// Allocations that stay where they are.
    pub untainted: AllocSet,
    /// Allocations to move off draining nodes.
    pub migrate: AllocSet,
    /// Allocations of nodes that are down or gone, and of disconnected
    /// nodes when their group gives them no window.
    pub lost: AllocSet,
    /// Allocations of a disconnected node not yet marked unknown.
    pub disconnecting: AllocSet,
    /// Allocations marked unknown whose node is back.
    pub reconnecting: AllocSet,
    /// Unknown allocations past their `lost_after` window.
    pub expiring: AllocSet,
}

/// Sorts a group's allocations by their node and their disconnect state.
pub fn by_node(set: AllocSet, tainted: &Tainted, tg: &TaskGroup, now: i64) -> ByNode {
    let mut out = ByNode::default();
    let window = disconnect::lost_after_ns(tg) > 0;
    let replace = disconnect::replace(tg);
    for (id, a) in set {
        let reconnect = disconnect::needs_to_reconnect(&a);
        let status = a.client_status();
        let node = tainted.get(&a.node_id);
        let node_status = node.and_then(|n| n.as_ref().map(|n| n.status()));
        let wants_migrate = a
            .desired_transition
            .as_ref()
            .is_some_and(|t| t.migrate == Some(true));
        let bucket = if reconnect
            && a.desired_status() == AllocDesiredStatus::Run
            && status == AllocClientStatus::Failed
        {
            &mut out.reconnecting
        } else if a.is_terminal() && !reconnect {
            &mut out.untainted
        } else if disconnect::expired(&a, tg, now) {
            &mut out.expiring
        } else if a.is_terminal() {
            // Failed while away and already stopped by the servers.
            &mut out.untainted
        } else if node_status == Some(NodeStatus::Disconnected) {
            match status {
                AllocClientStatus::Unknown => &mut out.untainted,
                AllocClientStatus::Pending => &mut out.lost,
                _ if !window => &mut out.lost,
                _ => &mut out.disconnecting,
            }
        } else if wants_migrate {
            &mut out.migrate
        } else if reconnect && matches!(node_status, None | Some(NodeStatus::Ready)) {
            // On a node that is up (untainted, or tainted only by a drain).
            if node.is_some_and(|n| n.is_none()) {
                &mut out.lost
            } else {
                &mut out.reconnecting
            }
        } else {
            match node {
                None => &mut out.untainted,
                Some(None) => &mut out.lost,
                Some(Some(_)) if node_status == Some(NodeStatus::Down) => match status {
                    AllocClientStatus::Unknown if !replace && window => &mut out.untainted,
                    AllocClientStatus::Running if !replace && window => &mut out.disconnecting,
                    _ => &mut out.lost,
                },
                Some(Some(_)) => &mut out.migrate,
            }
        };
        bucket.insert(id, a);
    }
    out
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

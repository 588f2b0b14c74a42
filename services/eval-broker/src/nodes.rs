//! What node and allocation changes mean to the broker: capacity that grew or
//! was freed for a computed class (which unblocks evals), and nodes whose
//! heartbeat is gone (which go down).
//! Pure functions of snapshots and their diffs.

use std::collections::BTreeSet;

use caravan_model::{AllocExt, NodeExt, disconnect};
use caravan_proto::{AllocDesiredStatus, Allocation, Node, NodeStatus};
use caravan_state::{ObjectChange, Tables};
use caravan_store::Revision;

use crate::evals::node_counts_as_up;

/// Whether anything that decides what fits on a node differs.
fn shape_changed(old: &Node, new: &Node) -> bool {
    old.computed_class != new.computed_class
        || old.resources != new.resources
        || old.reserved != new.reserved
        || old.drivers != new.drivers
        || old.attributes != new.attributes
        || old.meta != new.meta
        || old.node_class != new.node_class
        || old.node_pool != new.node_pool
        || old.datacenter != new.datacenter
}

/// The computed class whose capacity a node change may have grown: a node
/// that became schedulable (registered, ready again, eligible again) or
/// changed shape while schedulable.
pub fn capacity_grew<'a>(change: &ObjectChange<'a, Node>) -> Option<&'a str> {
    let new = change.new()?;
    if !new.is_schedulable() {
        return None;
    }
    let grew = match change.old() {
        None => true,
        Some(old) => !old.is_schedulable() || shape_changed(old, new),
    };
    grew.then_some(new.computed_class.as_str())
}

/// The node an allocation change freed capacity on: the allocation became
/// terminal, or a live one was deleted.
pub fn capacity_freed<'a>(change: &ObjectChange<'a, Allocation>) -> Option<&'a str> {
    match *change {
        ObjectChange::Added(_) => None,
        ObjectChange::Updated { old, new } => {
            (!old.is_terminal() && new.is_terminal()).then_some(new.node_id.as_str())
        }
        ObjectChange::Removed(old) => (!old.is_terminal()).then_some(old.node_id.as_str()),
    }
}

/// The classes whose capacity changed between two snapshots.
pub fn classes_with_new_capacity(older: &Tables, newer: &Tables) -> BTreeSet<String> {
    let mut classes: BTreeSet<String> = newer
        .node_changes_since(older)
        .filter_map(|c| capacity_grew(&c).map(str::to_string))
        .collect();
    for change in newer.alloc_changes_since(older) {
        let Some(node_id) = capacity_freed(&change) else {
            continue;
        };
        let node = newer.node(node_id).or_else(|| older.node(node_id));
        if let Some(node) = node {
            classes.insert(node.computed_class.clone());
        }
    }
    classes
}

/// Per class, the newest revision at which the store shows capacity
/// appearing: schedulable nodes written and allocations that turned
/// terminal. Blocked evals computed before it may have missed an unblock.
pub fn capacity_revisions(snapshot: &Tables) -> Vec<(String, Revision)> {
    let mut newest: std::collections::BTreeMap<String, Revision> = Default::default();
    let mut note = |class: &str, revision: Revision| {
        let slot = newest.entry(class.to_string()).or_default();
        *slot = (*slot).max(revision);
    };
    for node in snapshot.nodes().filter(|n| n.is_schedulable()) {
        note(&node.computed_class, node.modify_revision);
    }
    for alloc in snapshot.allocs().filter(|a| a.is_terminal()) {
        if let Some(node) = snapshot.node(&alloc.node_id) {
            note(&node.computed_class, alloc.modify_revision);
        }
    }
    newest.into_iter().collect()
}

/// Nodes the servers consider up whose heartbeat key is gone.
pub fn without_heartbeat(snapshot: &Tables) -> Vec<String> {
    snapshot
        .nodes()
        .filter(|n| node_counts_as_up(n) && !snapshot.heartbeat_live(&n.id))
        .map(|n| n.id.clone())
        .collect()
}

/// Nodes whose heartbeat key went away between two snapshots while they
/// were up.
pub fn heartbeats_lost(older: &Tables, newer: &Tables) -> Vec<String> {
    newer
        .heartbeat_changes_since(older)
        .filter(|(_, live)| !live)
        .filter(|(id, _)| newer.node(id).is_some_and(|n| node_counts_as_up(n)))
        .map(|(id, _)| id.to_string())
        .collect()
}

/// Disconnected nodes whose heartbeat is gone: their window is looked at
/// again, and they go down once it has closed.
pub fn disconnected_without_heartbeat(snapshot: &Tables) -> Vec<String> {
    snapshot
        .nodes()
        .filter(|n| n.status() == NodeStatus::Disconnected && !snapshot.heartbeat_live(&n.id))
        .map(|n| n.id.clone())
        .collect()
}

/// Until when a node that lost its heartbeat may stay disconnected rather
/// than go down: the latest end of the disconnect windows of its
/// allocations that should run and have not yet expired; `None` when none
/// has a window left (Nomad's rule for a missed heartbeat).
pub fn disconnect_window(snapshot: &Tables, node_id: &str, now_ns: i64) -> Option<i64> {
    snapshot
        .allocs_by_node(node_id)
        .filter(|a| !a.is_terminal() && a.desired_status() == AllocDesiredStatus::Run)
        .filter_map(|a| {
            let job = snapshot.job(&a.namespace, &a.job_id)?;
            let tg = job.task_groups.iter().find(|g| g.name == a.task_group)?;
            let window = disconnect::lost_after_ns(tg);
            if window <= 0 {
                return None;
            }
            let ends = disconnect::expires_at(a, tg).unwrap_or(now_ns.saturating_add(window));
            (ends > now_ns).then_some(ends)
        })
        .max()
}

/// Nodes that owe evals from a pending fan-out.
pub fn owing_fan_outs(snapshot: &Tables) -> Vec<String> {
    snapshot
        .nodes()
        .filter(|n| !n.pending_fan_outs.is_empty())
        .map(|n| n.id.clone())
        .collect()
}

/// Nodes written between two snapshots that owe evals from a fan-out.
pub fn fan_outs_added(older: &Tables, newer: &Tables) -> Vec<String> {
    newer
        .node_changes_since(older)
        .filter_map(|c| c.new().filter(|n| !n.pending_fan_outs.is_empty()))
        .map(|n| n.id.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use caravan_proto::{
        AllocClientStatus, AllocDesiredStatus, NodeResources, NodeStatus, SchedulingEligibility,
    };

    use super::*;

    fn node(status: NodeStatus, elig: SchedulingEligibility, class: &str) -> Arc<Node> {
        Arc::new(Node {
            id: "n1".into(),
            status: status as i32,
            scheduling_eligibility: elig as i32,
            computed_class: class.into(),
            ..Default::default()
        })
    }

    fn alloc(client: AllocClientStatus, desired: AllocDesiredStatus) -> Arc<Allocation> {
        Arc::new(Allocation {
            id: "a1".into(),
            node_id: "n1".into(),
            client_status: client as i32,
            desired_status: desired as i32,
            ..Default::default()
        })
    }

    fn put<T: caravan_state::StateObject>(
        tables: &mut Tables,
        key: caravan_state::StateKey,
        msg: &T,
    ) {
        let rev = 10;
        let kv = caravan_store::KeyValue {
            key: Vec::new(),
            value: caravan_state::encode(msg),
            create_revision: rev,
            mod_revision: rev,
            version: 1,
            lease: 0,
        };
        let change = caravan_state::Change::put(&key, &kv, caravan_state::AllocDetail::Full);
        tables.apply_all(change.unwrap());
        tables.advance_to(rev);
    }

    #[test]
    fn a_node_stays_disconnected_while_an_alloc_has_window_left() {
        use caravan_proto::{DisconnectStrategy, Job, TaskGroup};
        use caravan_state::StateKey;
        const S: i64 = 1_000_000_000;
        let job = |id: &str, lost_after: i64| Job {
            id: id.into(),
            namespace: "default".into(),
            task_groups: vec![TaskGroup {
                name: "g".into(),
                disconnect: Some(DisconnectStrategy {
                    lost_after_ns: lost_after,
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        };
        let on_n1 = |id: &str, job: &str| {
            let mut a = (*alloc(AllocClientStatus::Running, AllocDesiredStatus::Run)).clone();
            a.id = id.into();
            a.job_id = job.into();
            a.namespace = "default".into();
            a.task_group = "g".into();
            a
        };
        let key = |id: &str| StateKey::Job {
            namespace: "default".into(),
            id: id.into(),
        };
        let mut t = Tables::new();
        put(&mut t, key("plain"), &job("plain", 0));
        put(&mut t, StateKey::Alloc("a0".into()), &on_n1("a0", "plain"));
        let now = 1_000 * S;
        assert_eq!(disconnect_window(&t, "n1", now), None, "no window: down");
        put(&mut t, key("roams"), &job("roams", 60 * S));
        put(&mut t, StateKey::Alloc("a1".into()), &on_n1("a1", "roams"));
        assert_eq!(disconnect_window(&t, "n1", now), Some(now + 60 * S));
        // Marked unknown 50 s ago: 10 s left, counted from then.
        let mut unknown = on_n1("a1", "roams");
        unknown.set_client_status(AllocClientStatus::Unknown);
        unknown.unknown_since_unix_ns = now - 50 * S;
        put(&mut t, StateKey::Alloc("a1".into()), &unknown);
        assert_eq!(disconnect_window(&t, "n1", now), Some(now + 10 * S));
        assert_eq!(disconnect_window(&t, "n1", now + 10 * S), None, "expired");
    }

    #[test]
    fn capacity_grows_when_a_node_becomes_schedulable_or_changes_shape() {
        use NodeStatus::*;
        use SchedulingEligibility::*;
        let ready = node(Ready, Eligible, "c1");
        assert_eq!(capacity_grew(&ObjectChange::Added(&ready)), Some("c1"));
        let init = node(Initializing, Eligible, "c1");
        assert_eq!(capacity_grew(&ObjectChange::Added(&init)), None);
        let up = ObjectChange::Updated {
            old: &init,
            new: &ready,
        };
        assert_eq!(capacity_grew(&up), Some("c1"));
        let inelig = node(Ready, Ineligible, "c1");
        let eligible_again = ObjectChange::Updated {
            old: &inelig,
            new: &ready,
        };
        assert_eq!(capacity_grew(&eligible_again), Some("c1"));
        let same = ObjectChange::Updated {
            old: &ready,
            new: &ready,
        };
        assert_eq!(capacity_grew(&same), None);
        let mut bigger = (*ready).clone();
        bigger.resources = Some(NodeResources {
            cpu_mhz: 9000,
            ..Default::default()
        });
        let bigger = Arc::new(bigger);
        let grew = ObjectChange::Updated {
            old: &ready,
            new: &bigger,
        };
        assert_eq!(capacity_grew(&grew), Some("c1"));
        let down = node(Down, Eligible, "c1");
        let went_down = ObjectChange::Updated {
            old: &ready,
            new: &down,
        };
        assert_eq!(capacity_grew(&went_down), None);
        assert_eq!(capacity_grew(&ObjectChange::Removed(&ready)), None);
    }

    #[test]
    fn capacity_is_freed_when_allocs_turn_terminal_or_vanish() {
        use AllocClientStatus as C;
        use AllocDesiredStatus as D;
        let running = alloc(C::Running, D::Run);
        let done = alloc(C::Complete, D::Run);
        let stopped = alloc(C::Running, D::Stop);
        let finished = ObjectChange::Updated {
            old: &running,
            new: &done,
        };
        assert_eq!(capacity_freed(&finished), Some("n1"));
        let stopping = ObjectChange::Updated {
            old: &running,
            new: &stopped,
        };
        assert_eq!(capacity_freed(&stopping), Some("n1"));
        let still_terminal = ObjectChange::Updated {
            old: &stopped,
            new: &done,
        };
        assert_eq!(capacity_freed(&still_terminal), None);
        assert_eq!(capacity_freed(&ObjectChange::Removed(&running)), Some("n1"));
        assert_eq!(capacity_freed(&ObjectChange::Removed(&done)), None);
        assert_eq!(capacity_freed(&ObjectChange::Added(&running)), None);
    }
}

//! A node change's evaluations, made durable whatever their number. A node
//! going down owes an eval to every job with live allocations on it, and a
//! transaction holds only so many: the change commits with as many as fit
//! and a [`NodeFanOut`] entry on the node that owes the rest. Whoever leads
//! the broker finishes it, after a crash too: it derives every eval of the
//! fan-out from the store (one per job still live on the node), creates
//! those that do not exist yet (their ids derive from the fan-out's, so a
//! second try skips what the first made), then clears the entry. Pure
//! functions of a snapshot; `follow` makes the writes.

use std::collections::BTreeSet;

use caravan_model::AllocExt;
use caravan_proto::{Evaluation, Node, NodeFanOut};
use caravan_state::Tables;
use uuid::Uuid;

use crate::evals::node_eval;

/// The name space of fan-out eval ids (a fixed, random UUID).
const FAN_OUT_IDS: Uuid = Uuid::from_u128(0x6c1f_2d0e_93a4_4b57_8e61_0f3c_7a9d_5b22);

/// A new fan-out of `trigger` for a change made at `now_ns`.
pub fn start(trigger: &str, now_ns: i64) -> NodeFanOut {
    NodeFanOut {
        id: Uuid::new_v4().to_string(),
        triggered_by: trigger.to_string(),
        created_at_unix_ns: now_ns,
    }
}

/// The id of `fan_out`'s eval for a job: the same on every try.
pub fn eval_id(fan_out: &NodeFanOut, namespace: &str, job_id: &str) -> String {
    let name = format!("{}\n{namespace}\n{job_id}", fan_out.id);
    Uuid::new_v5(&FAN_OUT_IDS, name.as_bytes()).to_string()
}

/// The jobs with live allocations on a node, by namespace and id.
fn live_jobs<'a>(snapshot: &'a Tables, node_id: &str) -> BTreeSet<(&'a str, &'a str)> {
    snapshot
        .allocs_by_node(node_id)
        .filter(|a| !a.is_terminal())
        .map(|a| (a.namespace.as_str(), a.job_id.as_str()))
        .collect()
}

/// The evals `fan_out` owes: one per job with live allocations on the node,
/// pending, with ids derived from the fan-out's.
pub fn evals(snapshot: &Tables, node_id: &str, fan_out: &NodeFanOut) -> Vec<Evaluation> {
    live_jobs(snapshot, node_id)
        .into_iter()
        .map(|(ns, job_id)| {
            let job = snapshot.job(ns, job_id).map(|j| j.as_ref());
            let mut eval = node_eval(
                &fan_out.triggered_by,
                node_id,
                ns,
                job_id,
                job,
                fan_out.created_at_unix_ns,
            );
            eval.id = eval_id(fan_out, ns, job_id);
            eval
        })
        .collect()
}

/// `node` without the fan-outs named in `finished`.
pub fn cleared(node: &Node, finished: &[String]) -> Node {
    let mut n = node.clone();
    n.pending_fan_outs.retain(|f| !finished.contains(&f.id));
    n
}

#[cfg(test)]
mod tests {
    use caravan_proto::{AllocClientStatus, AllocDesiredStatus};

    use super::*;
    use crate::testing::{World, alloc};

    fn live(id: &str, job: &str, client: AllocClientStatus) -> caravan_proto::Allocation {
        alloc(id, job, "e1", "n1", AllocDesiredStatus::Run, client, 1)
    }

    #[test]
    fn every_live_job_gets_one_eval_whose_id_is_the_same_on_every_try() {
        let mut world = World::new();
        world
            .alloc(live("a1", "web", AllocClientStatus::Running))
            .alloc(live("a2", "web", AllocClientStatus::Pending))
            .alloc(live("a3", "db", AllocClientStatus::Running))
            .alloc(live("a4", "done", AllocClientStatus::Complete));
        let snap = &world.tables;
        let fan_out = start("node-update", 7);
        let first = evals(snap, "n1", &fan_out);
        let jobs: Vec<&str> = first.iter().map(|e| e.job_id.as_str()).collect();
        assert_eq!(jobs, ["db", "web"]);
        assert!(first.iter().all(|e| e.triggered_by == "node-update"));
        assert!(first.iter().all(|e| e.node_id == "n1"));
        assert!(first.iter().all(|e| e.create_time_unix_ns == 7));
        let ids = |e: &[Evaluation]| e.iter().map(|e| e.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&first), ids(&evals(snap, "n1", &fan_out)));
        let other = ids(&evals(snap, "n1", &start("node-update", 7)));
        assert!(ids(&first).iter().all(|id| !other.contains(id)));
    }

    #[test]
    fn clearing_keeps_the_fan_outs_not_finished() {
        let (a, b) = (start("node-update", 1), start("node-update", 2));
        let node = Node {
            pending_fan_outs: vec![a.clone(), b.clone()],
            ..Default::default()
        };
        assert_eq!(cleared(&node, &[a.id]).pending_fan_outs, vec![b]);
    }
}

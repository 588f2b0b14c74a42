//! A node change's evaluations, made durable whatever their number. A node
//! going down owes an eval to every job with live allocations on it (the
//! api-gateway's node changes owe theirs too), and a transaction holds
//! only so many: the change commits with as many as fit and a
//! [`NodeFanOut`] entry on the node that owes the rest. Whoever leads the
//! broker finishes it, after a crash too: it derives the fan-out's evals
//! from the store, creates those that do not exist yet (their ids derive
//! from the fan-out's, so a second try skips what the first made), then
//! clears the entry. Pure functions of a snapshot; `follow` makes the
//! writes.

use std::collections::BTreeSet;

use caravan_model::{AllocExt, fan_out_eval_id};
use caravan_proto::{Evaluation, Node, NodeFanOut};
use caravan_state::{Tables, node_change_jobs};
use uuid::Uuid;

use crate::evals::node_eval;

/// A new fan-out for a node that went down at `now_ns`: `trigger` evals for
/// every job with live allocations on it.
pub fn node_down(trigger: &str, now_ns: i64) -> NodeFanOut {
    NodeFanOut {
        id: Uuid::new_v4().to_string(),
        triggered_by: trigger.to_string(),
        created_at_unix_ns: now_ns,
        node_down: true,
        ..Default::default()
    }
}

/// The jobs with live allocations on a node, by namespace and id, whether
/// or not the job still exists.
fn live_jobs<'a>(snapshot: &'a Tables, node_id: &str) -> BTreeSet<(&'a str, &'a str)> {
    snapshot
        .allocs_by_node(node_id)
        .filter(|a| !a.is_terminal())
        .map(|a| (a.namespace.as_str(), a.job_id.as_str()))
        .collect()
}

/// The evals `fan_out` owes `node`: pending, one per job it concerns (see
/// `NodeFanOut`), with ids derived from the fan-out's.
pub fn evals(snapshot: &Tables, node: &Node, fan_out: &NodeFanOut) -> Vec<Evaluation> {
    let jobs: Vec<(String, String)> = if fan_out.node_down {
        live_jobs(snapshot, &node.id)
            .into_iter()
            .map(|(ns, id)| (ns.to_string(), id.to_string()))
            .collect()
    } else {
        node_change_jobs(
            snapshot,
            node,
            fan_out.only_placed,
            fan_out.ignore_system_jobs,
        )
        .iter()
        .map(|j| (j.namespace.clone(), j.id.clone()))
        .collect()
    };
    jobs.into_iter()
        .map(|(ns, job_id)| {
            let job = snapshot.job(&ns, &job_id).map(|j| j.as_ref());
            let mut eval = node_eval(
                &fan_out.triggered_by,
                &node.id,
                &ns,
                &job_id,
                job,
                fan_out.created_at_unix_ns,
            );
            eval.id = fan_out_eval_id(&fan_out.id, &ns, &job_id);
            eval.node_modify_revision = node.modify_revision;
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
        let n1 = Node {
            id: "n1".into(),
            ..Default::default()
        };
        let fan_out = node_down("node-update", 7);
        let first = evals(snap, &n1, &fan_out);
        let jobs: Vec<&str> = first.iter().map(|e| e.job_id.as_str()).collect();
        assert_eq!(jobs, ["db", "web"]);
        assert!(first.iter().all(|e| e.triggered_by == "node-update"));
        assert!(first.iter().all(|e| e.node_id == "n1"));
        assert!(first.iter().all(|e| e.create_time_unix_ns == 7));
        let ids = |e: &[Evaluation]| e.iter().map(|e| e.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&first), ids(&evals(snap, &n1, &fan_out)));
        let other = ids(&evals(snap, &n1, &node_down("node-update", 7)));
        assert!(ids(&first).iter().all(|id| !other.contains(id)));
    }

    #[test]
    fn clearing_keeps_the_fan_outs_not_finished() {
        let (a, b) = (node_down("node-update", 1), node_down("node-update", 2));
        let node = Node {
            pending_fan_outs: vec![a.clone(), b.clone()],
            ..Default::default()
        };
        assert_eq!(cleared(&node, &[a.id]).pending_fan_outs, vec![b]);
    }
}

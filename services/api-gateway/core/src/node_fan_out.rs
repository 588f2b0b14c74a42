//! The evaluations a node change owes, in one transaction with the change
//! when they fit. When they do not, the node carries a `NodeFanOut` that
//! owes them all: the change commits with as many as fit, every one's id
//! derives from the fan-out's, and the eval broker's leader creates the
//! rest and clears the fan-out (see `caravan_state::node_change_jobs` for
//! which jobs a change concerns).

use caravan_model::fan_out_eval_id;
use caravan_proto::{Evaluation, Node, NodeFanOut};
use caravan_state::{Tables, node_change_jobs};

use crate::evals;

/// What a node change concerns: `trigger` for the jobs with live
/// allocations on the node and, unless `only_placed`, the system jobs of
/// its pool, left out with `ignore_system`.
pub fn scope(trigger: &str, only_placed: bool, ignore_system: bool) -> NodeFanOut {
    NodeFanOut {
        triggered_by: trigger.to_string(),
        only_placed,
        ignore_system_jobs: ignore_system,
        ..Default::default()
    }
}

/// One eval per job the change of `node` concerns.
pub fn node_evals(snap: &Tables, node: &Node, scope: &NodeFanOut) -> Vec<Evaluation> {
    node_change_jobs(snap, node, scope.only_placed, scope.ignore_system_jobs)
        .iter()
        .map(|job| {
            let mut eval = evals::for_job(job, &scope.triggered_by);
            eval.node_id = node.id.clone();
            eval.node_modify_revision = node.modify_revision;
            eval
        })
        .collect()
}

/// What a change of `read` into `updated` owes when it concerns `scope`
/// (`None`: nothing): the evals to write with it and the ids of all of
/// them, `updated` carrying a fan-out for those past `room` (see [`fit`]).
pub fn owed(
    snap: &Tables,
    read: &Node,
    updated: &mut Node,
    scope: Option<NodeFanOut>,
    room: usize,
    now_ns: i64,
) -> (Vec<Evaluation>, Vec<String>) {
    match scope {
        Some(scope) => {
            let evals = node_evals(snap, read, &scope);
            fit(updated, evals, scope, room, now_ns)
        }
        None => (Vec::new(), Vec::new()),
    }
}

/// The evals to write with a change of `node` when `room` operations of its
/// transaction are left for them, and the ids of all of them. Past the
/// room, `node` gets a fan-out of `scope` made at `now_ns` that owes them
/// all, and every id derives from it.
pub fn fit(
    node: &mut Node,
    mut evals: Vec<Evaluation>,
    mut scope: NodeFanOut,
    room: usize,
    now_ns: i64,
) -> (Vec<Evaluation>, Vec<String>) {
    if evals.len() > room {
        scope.id = uuid::Uuid::new_v4().to_string();
        scope.created_at_unix_ns = now_ns;
        for eval in &mut evals {
            eval.id = fan_out_eval_id(&scope.id, &eval.namespace, &eval.job_id);
            eval.create_time_unix_ns = now_ns;
            eval.modify_time_unix_ns = now_ns;
        }
        node.pending_fan_outs.push(scope);
        let ids = evals.iter().map(|e| e.id.clone()).collect();
        evals.truncate(room);
        return (evals, ids);
    }
    let ids = evals.iter().map(|e| e.id.clone()).collect();
    (evals, ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(job: &str) -> Evaluation {
        Evaluation {
            id: format!("random-{job}"),
            namespace: "default".into(),
            job_id: job.into(),
            ..Default::default()
        }
    }

    #[test]
    fn what_fits_is_written_as_is() {
        let mut node = Node::default();
        let (write, ids) = fit(
            &mut node,
            vec![eval("a"), eval("b")],
            scope("node-update", false, false),
            2,
            5,
        );
        assert_eq!(ids, ["random-a", "random-b"]);
        assert_eq!(write.len(), 2);
        assert!(node.pending_fan_outs.is_empty());
    }

    #[test]
    fn past_the_room_the_node_owes_every_eval_through_a_fan_out() {
        let mut node = Node::default();
        let (write, ids) = fit(
            &mut node,
            vec![eval("a"), eval("b"), eval("c")],
            scope("node-drain", true, true),
            1,
            5,
        );
        let [owed] = node.pending_fan_outs.as_slice() else {
            panic!("one fan-out: {:?}", node.pending_fan_outs);
        };
        assert_eq!(
            (
                owed.triggered_by.as_str(),
                owed.only_placed,
                owed.ignore_system_jobs
            ),
            ("node-drain", true, true)
        );
        assert_eq!(owed.created_at_unix_ns, 5);
        assert_eq!(ids.len(), 3);
        assert_eq!(ids[2], fan_out_eval_id(&owed.id, "default", "c"));
        assert_eq!(write.len(), 1);
        assert_eq!(write[0].id, ids[0]);
    }
}

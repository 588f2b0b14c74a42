//! The answer to a plan: what committed, each allocation by its identity,
//! what was refused and why, and the revision the worker must refresh to.

use std::collections::BTreeMap;

use caravan_proto::{AllocList, Allocation, Plan, PlanResult};
use caravan_store::Revision;

use crate::commit::CommitOutcome;
use crate::verify::plan_nodes;

/// A result committing nothing, every node refused for `reason`.
pub(super) fn refused_result(plan: &Plan, reason: &str, refresh: Revision) -> PlanResult {
    let rejected = plan_nodes(plan)
        .into_iter()
        .map(|n| (n, reason.to_string()))
        .collect();
    let mut r = plan_result(plan, rejected, &CommitOutcome::default(), refresh);
    // Even a plan without nodes must send the worker to a fresher state.
    r.refresh_revision = r.refresh_revision.max(refresh);
    r
}

/// The answer to a plan: what `outcome` committed (each allocation by its
/// identity: the worker holds the plan it sent), what was refused, and
/// after a refusal the revision the worker must refresh to.
pub(super) fn plan_result(
    plan: &Plan,
    mut rejected: BTreeMap<String, String>,
    outcome: &CommitOutcome,
    view_revision: Revision,
) -> PlanResult {
    let mut r = PlanResult::default();
    for node in &outcome.committed {
        if let Some(l) = plan.node_update.get(node).filter(|l| !l.allocs.is_empty()) {
            r.node_update.insert(node.clone(), identities(l, |_| true));
        }
        if let Some(l) = plan
            .node_allocation
            .get(node)
            .filter(|l| !l.allocs.is_empty())
        {
            r.node_allocation
                .insert(node.clone(), identities(l, |_| true));
        }
        if let Some(l) = plan.node_preemptions.get(node) {
            let l = identities(l, |a| !outcome.skipped_evictions.contains(&a.id));
            if !l.allocs.is_empty() {
                r.node_preemptions.insert(node.clone(), l);
            }
        }
    }
    if outcome.global_committed {
        r.deployment = plan.deployment.clone();
        r.deployment_updates = plan.deployment_updates.clone();
    }
    r.alloc_revision = outcome.revision;
    r.eval_revision = outcome.eval_revision;
    rejected.extend(outcome.refused.clone());
    if !rejected.is_empty() {
        r.refresh_revision = outcome
            .revision
            .max(outcome.refresh)
            .max(view_revision)
            .max(1);
        r.rejected_nodes = rejected.keys().cloned().collect();
        r.rejection_reasons = rejected.into_iter().collect();
    }
    r
}

/// The allocations of `list` that `keep` keeps, each reduced to its id and
/// task group (the node is the list's key): a result that echoed every
/// allocation whole would cost the applier a copy and an encoding, and the
/// worker a decoding, of every placement it sent and still holds.
fn identities(list: &AllocList, keep: impl Fn(&Allocation) -> bool) -> AllocList {
    AllocList {
        allocs: list
            .allocs
            .iter()
            .filter(|a| keep(a))
            .map(|a| Allocation {
                id: a.id.clone(),
                task_group: a.task_group.clone(),
                ..Default::default()
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{alloc, place, plan};

    #[test]
    fn a_result_lists_what_committed_and_sends_the_worker_to_refresh() {
        let mut p = plan(10);
        place(&mut p, alloc("a", "n1", 1, 1));
        place(&mut p, alloc("b", "n2", 1, 1));
        let outcome = CommitOutcome {
            committed: vec!["n1".into()],
            revision: 14,
            ..Default::default()
        };
        let rejected = BTreeMap::from([("n2".to_string(), "cpu exhausted".to_string())]);
        let r = plan_result(&p, rejected, &outcome, 20);
        assert_eq!(r.node_allocation.keys().collect::<Vec<_>>(), vec!["n1"]);
        let placed = &p.node_allocation["n1"].allocs[0];
        assert_eq!(
            r.node_allocation["n1"].allocs,
            vec![Allocation {
                id: placed.id.clone(),
                task_group: placed.task_group.clone(),
                ..Default::default()
            }],
            "an allocation is named, not sent back whole"
        );
        assert!(!placed.task_group.is_empty() && placed.allocated_resources.is_some());
        assert_eq!(r.alloc_revision, 14);
        assert_eq!(r.refresh_revision, 20, "the newest state verified against");
        assert_eq!(r.rejected_nodes, vec!["n2"]);
        let full = plan_result(
            &p,
            BTreeMap::new(),
            &CommitOutcome {
                committed: vec!["n1".into(), "n2".into()],
                revision: 14,
                ..Default::default()
            },
            20,
        );
        assert_eq!(full.refresh_revision, 0, "a full commit needs no refresh");
        let stale = refused_result(&p, "stale", 30);
        assert_eq!(stale.refresh_revision, 30);
        assert!(stale.node_allocation.is_empty());
        assert_eq!(stale.rejected_nodes.len(), 2);
    }
}

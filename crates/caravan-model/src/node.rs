//! Whether a node takes new allocations.

use caravan_proto::{Node, NodeStatus, SchedulingEligibility};

/// Rules of a client node.
pub trait NodeExt {
    /// Whether the node is ready and not marked ineligible; an unset
    /// eligibility counts as eligible. Says nothing of a drain.
    fn is_schedulable(&self) -> bool;

    /// Whether the scheduler may place new allocations on the node:
    /// schedulable and not draining. A drain normally marks the node
    /// ineligible too, so the two differ only for a draining node whose
    /// eligibility was left eligible.
    fn accepts_placements(&self) -> bool;
}

impl NodeExt for Node {
    fn is_schedulable(&self) -> bool {
        self.status() == NodeStatus::Ready
            && self.scheduling_eligibility() != SchedulingEligibility::Ineligible
    }

    fn accepts_placements(&self) -> bool {
        self.is_schedulable() && self.drain_strategy.is_none()
    }
}

#[cfg(test)]
mod tests {
    use caravan_proto::DrainStrategy;

    use super::*;

    fn node(status: NodeStatus, eligibility: SchedulingEligibility) -> Node {
        let mut n = Node::default();
        n.set_status(status);
        n.set_scheduling_eligibility(eligibility);
        n
    }

    #[test]
    fn only_a_ready_eligible_node_is_schedulable() {
        use NodeStatus as S;
        use SchedulingEligibility as E;
        for s in [
            S::Unspecified,
            S::Initializing,
            S::Ready,
            S::Down,
            S::Disconnected,
        ] {
            for e in [E::Unspecified, E::Eligible, E::Ineligible] {
                let expected = s == S::Ready && e != E::Ineligible;
                let n = node(s, e);
                assert_eq!(n.is_schedulable(), expected, "{s:?}/{e:?}");
                assert_eq!(n.accepts_placements(), expected, "{s:?}/{e:?}");
            }
        }
    }

    #[test]
    fn a_draining_node_is_schedulable_but_takes_no_placements() {
        let mut n = node(NodeStatus::Ready, SchedulingEligibility::Eligible);
        n.drain_strategy = Some(DrainStrategy::default());
        assert!(n.is_schedulable());
        assert!(!n.accepts_placements());
    }
}

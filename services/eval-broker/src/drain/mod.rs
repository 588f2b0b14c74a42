//! Drain deadlines: what a drain whose force deadline passed still has to
//! move (every alloc the drain covers, marked for migration with a
//! `node-drain` eval per job, so the scheduler stops them regardless of
//! `migrate.max_parallel`), and when a drain is complete. Pure functions of
//! a snapshot and a clock; the [`enforcer`] runs them in the leader.
//!
//! A drain carries its deadline as a wall-clock time, written by the gateway
//! that started it; the enforcer times it on the monotonic clock from the
//! moment it first sees it ([`ForceDeadline`]), so a step of the broker's
//! wall clock (NTP correcting it by minutes) neither forces a drain early
//! nor holds it late.

pub mod enforcer;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use caravan_model::{AllocExt, JobTypeExt, trigger};
use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, Allocation, DrainMetadata, DrainStrategy, Evaluation,
    Node,
};
use caravan_state::Tables;

use tokio::time::Instant;

use crate::evals::node_eval;
use crate::queues::Now;

/// The drain of a node, if it drains.
pub fn drain_of(node: &Node) -> Option<&DrainStrategy> {
    node.drain_strategy.as_ref()
}

/// When a node's drain stops waiting for its allocs to move (Unix ns), if
/// it has a deadline.
pub fn force_deadline(node: &Node) -> Option<i64> {
    drain_of(node)
        .map(|d| d.force_deadline_unix_ns)
        .filter(|at| *at > 0)
}

/// A drain's force deadline as the enforcer times it: the wall-clock time
/// the drain carries, turned into a monotonic instant when first seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForceDeadline {
    /// The deadline the drain carries (Unix ns).
    pub unix_ns: i64,
    /// When it passes on this process's monotonic clock.
    pub at: Instant,
}

impl ForceDeadline {
    /// The deadline `unix_ns` seen at `now`: as far ahead on the monotonic
    /// clock as it is on the wall clock now (already passed when behind).
    pub fn seen(unix_ns: i64, now: Now) -> ForceDeadline {
        let wait = u64::try_from(unix_ns.saturating_sub(now.unix_ns)).unwrap_or(0);
        ForceDeadline {
            unix_ns,
            at: now.instant + Duration::from_nanos(wait),
        }
    }

    /// Whether it has passed at `now`: by the monotonic clock alone.
    pub fn passed(&self, now: Now) -> bool {
        self.at <= now.instant
    }
}

fn is_system(snap: &Tables, alloc: &Allocation) -> bool {
    snap.job(&alloc.namespace, &alloc.job_id)
        .is_some_and(|j| j.r#type().runs_on_every_node())
}

fn flagged(alloc: &Allocation) -> bool {
    alloc
        .desired_transition
        .as_ref()
        .is_some_and(|t| t.migrate == Some(true))
}

/// The allocs a forced drain still has to move: live, covered by the drain
/// (system jobs aside with `ignore_system_jobs`), not yet marked.
pub fn to_migrate(snap: &Tables, node: &Node) -> Vec<Arc<Allocation>> {
    let Some(drain) = drain_of(node) else {
        return Vec::new();
    };
    snap.allocs_by_node(&node.id)
        .filter(|a| !a.is_terminal() && !flagged(a))
        .filter(|a| !(drain.ignore_system_jobs && is_system(snap, a)))
        .cloned()
        .collect()
}

/// Asks an alloc's scheduler to move it off its node.
pub fn mark_migrate(alloc: &mut Allocation) {
    alloc
        .desired_transition
        .get_or_insert_with(Default::default)
        .migrate = Some(true);
}

/// The allocs marked for migration, grouped by job, each group with the
/// `node-drain` eval that moves it.
pub fn forced_moves(
    snap: &Tables,
    node: &Node,
    allocs: &[Arc<Allocation>],
    now_ns: i64,
) -> Vec<(Evaluation, Vec<Allocation>)> {
    let mut by_job: BTreeMap<(&str, &str), Vec<Allocation>> = BTreeMap::new();
    for a in allocs {
        let mut marked = (**a).clone();
        mark_migrate(&mut marked);
        by_job
            .entry((a.namespace.as_str(), a.job_id.as_str()))
            .or_default()
            .push(marked);
    }
    by_job
        .into_iter()
        .map(|((ns, job_id), marked)| {
            let job = snap.job(ns, job_id).map(|j| j.as_ref());
            let mut eval = node_eval(trigger::NODE_DRAIN, &node.id, ns, job_id, job, now_ns);
            eval.node_modify_revision = node.modify_revision;
            (eval, marked)
        })
        .collect()
}

/// Whether an alloc still keeps a drain going: the client hasn't finished
/// with it (a stop the client never started counts as finished), and the
/// drain covers it. The gateway judges client-reported completion by the
/// same rule.
pub fn keeps_drain_going(snap: &Tables, alloc: &Allocation, ignore_system: bool) -> bool {
    use AllocClientStatus as C;
    let client_done = alloc.is_client_terminal();
    let never_started = alloc.desired_status() != AllocDesiredStatus::Run
        && matches!(alloc.client_status(), C::Pending | C::Unspecified);
    if client_done || never_started {
        return false;
    }
    !(ignore_system && is_system(snap, alloc))
}

/// Whether a draining node has nothing left that keeps its drain going.
pub fn drain_done(snap: &Tables, node: &Node) -> bool {
    let Some(drain) = drain_of(node) else {
        return false;
    };
    !snap
        .allocs_by_node(&node.id)
        .any(|a| keeps_drain_going(snap, a, drain.ignore_system_jobs))
}

/// The node with its drain complete: the strategy cleared, the node left
/// ineligible, `last_drain` saying `complete`.
pub fn completed(node: &Node, now_ns: i64) -> Node {
    let started = drain_of(node).map_or(now_ns, |d| d.started_at_unix_ns);
    let mut done = node.clone();
    done.drain_strategy = None;
    done.last_drain = Some(DrainMetadata {
        started_at_unix_ns: started,
        updated_at_unix_ns: now_ns,
        status: "complete".into(),
    });
    done
}

#[cfg(test)]
mod tests {
    use caravan_proto::{
        AllocClientStatus as C, AllocDesiredStatus as D, DesiredTransition, JobType, NodeStatus,
        SchedulingEligibility,
    };

    use super::*;
    use crate::testing::{SEC, World, alloc, job, node};

    fn draining(deadline: i64, ignore_system: bool) -> Node {
        let mut n = node("n1", NodeStatus::Ready, 0);
        n.scheduling_eligibility = SchedulingEligibility::Ineligible as i32;
        n.drain_strategy = Some(DrainStrategy {
            deadline_ns: 60 * SEC,
            ignore_system_jobs: ignore_system,
            force_deadline_unix_ns: deadline,
            started_at_unix_ns: 5,
        });
        n
    }

    fn world(ignore_system: bool) -> World {
        let mut w = World::new();
        w.job(job("web", JobType::Service));
        w.job(job("api", JobType::Service));
        w.job(job("agent", JobType::System));
        w.node(draining(100 * SEC, ignore_system));
        w.alloc(alloc("w1", "web", "e", "n1", D::Run, C::Running, 0));
        w.alloc(alloc("w2", "web", "e", "n1", D::Run, C::Pending, 0));
        w.alloc(alloc("a1", "api", "e", "n1", D::Run, C::Running, 0));
        w.alloc(alloc("s1", "agent", "e", "n1", D::Run, C::Running, 0));
        w.alloc(alloc("done", "web", "e", "n1", D::Stop, C::Complete, 0));
        w.alloc(alloc("elsewhere", "web", "e", "n2", D::Run, C::Running, 0));
        w
    }

    fn ids(allocs: &[Arc<Allocation>]) -> Vec<&str> {
        allocs.iter().map(|a| a.id.as_str()).collect()
    }

    #[test]
    fn the_deadline_is_absolute_and_zero_means_none() {
        assert_eq!(force_deadline(&draining(100 * SEC, false)), Some(100 * SEC));
        assert_eq!(force_deadline(&draining(0, false)), None);
        assert_eq!(force_deadline(&node("n", NodeStatus::Ready, 0)), None);
    }

    #[test]
    fn a_deadline_is_timed_from_when_it_is_seen_and_wall_clock_steps_do_not_move_it() {
        let t0 = Instant::now();
        let at = |secs: u64, unix_ns: i64| Now {
            instant: t0 + Duration::from_secs(secs),
            unix_ns,
        };
        // Seen 100 s before it falls due, by the wall clock then.
        let d = ForceDeadline::seen(200 * SEC, at(0, 100 * SEC));
        assert_eq!(d.at, t0 + Duration::from_secs(100));
        // 10 s later the wall clock stepped 5 minutes ahead: not passed.
        assert!(!d.passed(at(10, 410 * SEC)));
        // 50 s later it stepped 5 minutes back: the deadline still falls on time.
        assert!(!d.passed(at(99, -101 * SEC)));
        assert!(d.passed(at(100, -100 * SEC)));
        // A deadline already behind the wall clock when seen has passed.
        assert!(ForceDeadline::seen(50 * SEC, at(0, 100 * SEC)).passed(at(0, 100 * SEC)));
    }

    #[test]
    fn a_forced_drain_moves_every_live_alloc_it_covers() {
        let w = world(false);
        let n = w.tables.node("n1").expect("node").clone();
        assert_eq!(
            ids(&to_migrate(&w.tables, &n)),
            vec!["a1", "s1", "w1", "w2"]
        );
        let w = world(true);
        let n = w.tables.node("n1").expect("node").clone();
        let allocs = to_migrate(&w.tables, &n);
        assert_eq!(ids(&allocs), vec!["a1", "w1", "w2"], "system jobs stay");

        let moves = forced_moves(&w.tables, &n, &allocs, 7);
        let jobs: Vec<(&str, usize)> = moves
            .iter()
            .map(|(e, a)| (e.job_id.as_str(), a.len()))
            .collect();
        assert_eq!(jobs, vec![("api", 1), ("web", 2)], "one eval per job");
        for (eval, marked) in &moves {
            assert_eq!(eval.triggered_by, "node-drain");
            assert_eq!(eval.node_id, "n1");
            assert_eq!(eval.node_modify_revision, n.modify_revision);
            assert_eq!(eval.r#type, "service");
            assert!(marked.iter().all(flagged));
        }
    }

    #[test]
    fn allocs_already_marked_are_not_marked_again() {
        let mut w = world(true);
        let mut marked = alloc("w1", "web", "e", "n1", D::Run, C::Running, 0);
        marked.desired_transition = Some(DesiredTransition {
            migrate: Some(true),
            ..Default::default()
        });
        w.alloc(marked);
        let n = w.tables.node("n1").expect("node").clone();
        assert_eq!(ids(&to_migrate(&w.tables, &n)), vec!["a1", "w2"]);
    }

    #[test]
    fn the_drain_is_done_when_the_client_finished_what_it_covers() {
        let mut w = world(true);
        let n = w.tables.node("n1").expect("node").clone();
        assert!(!drain_done(&w.tables, &n));
        // Stopped by the scheduler and finished by the client; one stop the
        // client never started.
        w.alloc(alloc("w1", "web", "e", "n1", D::Stop, C::Complete, 0));
        w.alloc(alloc("w2", "web", "e", "n1", D::Stop, C::Pending, 0));
        assert!(!drain_done(&w.tables, &n), "a1 still runs");
        w.alloc(alloc("a1", "api", "e", "n1", D::Stop, C::Lost, 0));
        assert!(drain_done(&w.tables, &n), "the system alloc is ignored");
        let mut w = world(false);
        for id in ["w1", "w2", "a1"] {
            w.alloc(alloc(id, "web", "e", "n1", D::Stop, C::Complete, 0));
        }
        let n = w.tables.node("n1").expect("node").clone();
        assert!(!drain_done(&w.tables, &n), "the system alloc counts");
    }

    #[test]
    fn completion_clears_the_strategy_and_keeps_the_node_ineligible() {
        let n = draining(100 * SEC, false);
        let done = completed(&n, 9);
        assert!(done.drain_strategy.is_none());
        assert_eq!(
            done.scheduling_eligibility(),
            SchedulingEligibility::Ineligible
        );
        let last = done.last_drain.expect("last drain");
        assert_eq!(
            (
                last.status.as_str(),
                last.started_at_unix_ns,
                last.updated_at_unix_ns
            ),
            ("complete", 5, 9)
        );
    }
}

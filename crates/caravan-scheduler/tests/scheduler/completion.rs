//! A planner that writes the evaluation's completion with a fully committed
//! plan: the scheduler then leaves out its own final update, and the
//! completion it hands over is exactly the update it would have written.
#![allow(clippy::unwrap_used)]

use crate::common::*;
use caravan_proto::{EvalStatus, Evaluation, Plan};
use caravan_scheduler::harness::{FixtureState, Harness};
use caravan_scheduler::{PlanOutcome, Planner, PlannerError};

/// The harness, writing completions with plans that commit in full.
struct Completing {
    h: Harness,
    /// Completions written with a plan.
    written: Vec<Evaluation>,
    /// Completions handed over with plans that were not committed in full.
    dropped: Vec<Evaluation>,
}

impl Planner for Completing {
    type State = FixtureState;

    fn submit_plan(&mut self, plan: Plan) -> Result<PlanOutcome<FixtureState>, PlannerError> {
        self.h.submit_plan(plan)
    }

    fn submit_plan_completing(
        &mut self,
        plan: Plan,
        completion: Evaluation,
    ) -> Result<PlanOutcome<FixtureState>, PlannerError> {
        let mut outcome = self.h.submit_plan(plan)?;
        if outcome.result.rejected_nodes.is_empty() {
            self.written.push(completion);
            outcome.result.eval_revision = self.h.state.revision.max(1);
        } else {
            self.dropped.push(completion);
        }
        Ok(outcome)
    }

    fn create_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError> {
        self.h.create_eval(eval)
    }

    fn update_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError> {
        self.h.update_eval(eval)
    }

    fn reblock_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError> {
        self.h.reblock_eval(eval)
    }
}

/// Runs `eval` on `h` twice: through the plain harness (every status goes
/// through `update_eval`) and through [`Completing`].
fn both(h: Harness, eval: &Evaluation) -> (Harness, Completing) {
    let mut plain = Harness {
        state: h.state.clone(),
        now: h.now,
        reject_nodes: h.reject_nodes.clone(),
        reject_for_plans: h.reject_for_plans,
        ..Default::default()
    };
    plain.process(eval).unwrap();
    let mut c = Completing {
        h,
        written: Vec::new(),
        dropped: Vec::new(),
    };
    let (snap, now) = (c.h.snapshot(), c.h.now);
    caravan_scheduler::process(eval, snap, &mut c, now).unwrap();
    (plain, c)
}

#[test]
fn a_full_commit_carries_the_final_update_and_no_update_follows() {
    let j = service("web", 3);
    let h = cluster(vec![node("n0", "dc1", 4000, 8192)], &j);
    let (plain, c) = both(h, &eval("e1", &j, "job-register"));
    let update = plain.last_update().unwrap();
    assert_eq!(update.status(), EvalStatus::Complete);
    assert_eq!(c.written, vec![update.clone()]);
    assert!(c.h.updated_evals.is_empty(), "{:?}", c.h.updated_evals);
    assert_eq!(c.h.results.len(), 1);
}

#[test]
fn after_a_partial_commit_the_full_retry_carries_the_final_update() {
    let j = service("web", 4);
    let mut h = cluster(
        vec![node("n0", "dc1", 4000, 8192), node("n1", "dc1", 4000, 8192)],
        &j,
    );
    h.reject_nodes = ["n0".to_string()].into();
    h.reject_for_plans = Some(1);
    let (plain, c) = both(h, &eval("e1", &j, "job-register"));
    let update = plain.last_update().unwrap();
    assert_eq!(
        c.dropped.len(),
        1,
        "the partial plan's completion is unused"
    );
    assert_eq!(c.written, vec![update.clone()]);
    assert!(c.h.updated_evals.is_empty());
    assert_eq!(update.queued_allocations.get("web"), Some(&0));
}

#[test]
fn an_eval_that_never_commits_in_full_is_updated_as_before() {
    let j = service("web", 1);
    let mut h = cluster(vec![node("n0", "dc1", 4000, 8192)], &j);
    h.reject_nodes = ["n0".to_string()].into();
    let (plain, c) = both(h, &eval("e1", &j, "job-register"));
    assert!(c.written.is_empty());
    assert_eq!(c.h.updated_evals, plain.updated_evals);
    assert_eq!(
        c.h.last_update().unwrap().status(),
        EvalStatus::Failed,
        "maximum plan attempts"
    );
}

#[test]
fn a_blocked_eval_that_still_fails_is_reblocked_without_a_completion() {
    let j = service("web", 2);
    // Room for one of the two.
    let h = cluster(vec![node("n0", "dc1", 600, 8192)], &j);
    let mut e = eval("e1", &j, "queued-allocs");
    e.status = EvalStatus::Blocked as i32;
    let (plain, c) = both(h, &e);
    assert_eq!(plain.reblocked_evals.len(), 1);
    assert!(c.written.is_empty() && c.dropped.is_empty());
    assert_eq!(c.h.reblocked_evals, plain.reblocked_evals);
    assert!(c.h.updated_evals.is_empty());
}

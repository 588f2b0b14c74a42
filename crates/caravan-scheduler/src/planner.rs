//! The write side: how a scheduler hands its decisions on.

use caravan_proto::{Evaluation, Plan, PlanResult};

use crate::{error::PlannerError, state::State};

/// What a plan submission came back with.
#[derive(Debug)]
pub struct PlanOutcome<S> {
    /// The part of the plan that was committed.
    pub result: PlanResult,
    /// A fresher state to plan against after a partial commit.
    pub refreshed: Option<S>,
}

/// Commits plans and writes evaluations on the scheduler's behalf.
pub trait Planner {
    /// The state a refresh hands back.
    type State: State;
    /// Submits a plan; on a partial commit the outcome should carry a refreshed state.
    fn submit_plan(&mut self, plan: Plan) -> Result<PlanOutcome<Self::State>, PlannerError>;
    /// Submits a plan whose full commit ends the evaluation as `completion`
    /// says (status complete), so the planner may write both at once; the
    /// result's `eval_revision` is non-zero when it did, and the scheduler
    /// then leaves out its own [`Planner::update_eval`]. By default the plan
    /// goes alone and the evaluation is written afterwards.
    fn submit_plan_completing(
        &mut self,
        plan: Plan,
        completion: Evaluation,
    ) -> Result<PlanOutcome<Self::State>, PlannerError> {
        let _ = completion;
        self.submit_plan(plan)
    }
    /// Creates a new evaluation (blocked, follow-up or rolling).
    fn create_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError>;
    /// Updates the evaluation being processed (its final status).
    fn update_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError>;
    /// Puts a blocked evaluation that still cannot place back into the blocked set.
    fn reblock_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError>;
}

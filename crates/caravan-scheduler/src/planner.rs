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
    /// Creates a new evaluation (blocked, follow-up or rolling).
    fn create_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError>;
    /// Updates the evaluation being processed (its final status).
    fn update_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError>;
    /// Puts a blocked evaluation that still cannot place back into the blocked set.
    fn reblock_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError>;
}

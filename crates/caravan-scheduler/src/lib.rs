//! Caravan's schedulers: pure, deterministic placement logic.
//!
//! [`process`] takes an evaluation, a consistent [`State`] and a [`Planner`], and
//! runs the scheduler the evaluation names: the generic scheduler (service,
//! batch) with the cluster reconciler, or the system scheduler (system,
//! sysbatch). The same evaluation and state always give the same plan: node order,
//! ids and ports come from a generator seeded with the eval id and revision.

mod attempt;
mod context;
mod downgrade;
mod error;
mod evals;
pub mod feasible;
mod generic;
pub mod harness;
mod inplace;
pub mod model;
mod placement;
mod planner;
pub mod ports;
mod preempt;
mod property;
mod rank;
mod reconcile;
pub mod reschedule;
pub mod resources;
mod retry;
pub mod rng;
mod select;
mod state;
mod system;
pub mod validate;

pub use error::{PlannerError, SchedulerError, ValidationError, ValidationErrors};
pub use evals::{BLOCKED_FAILED_PLACEMENTS, BLOCKED_MAX_PLANS};
pub use feasible::compute_node_class;
pub use generic::{MAX_BATCH_ATTEMPTS, MAX_SERVICE_ATTEMPTS};
pub use planner::{PlanOutcome, Planner};
pub use preempt::PRIORITY_DELTA;
pub use reconcile::{
    ALLOC_LOST, ALLOC_MIGRATING, ALLOC_NODE_TAINTED, ALLOC_NOT_NEEDED, ALLOC_RESCHEDULED,
    ALLOC_UPDATING,
};
pub use resources::NodeUsage;
pub use state::State;
pub use system::{MAX_SYSBATCH_ATTEMPTS, MAX_SYSTEM_ATTEMPTS};
pub use validate::validate_job;

use caravan_proto::Evaluation;

/// Processes one evaluation at time `now_unix_ns` with the scheduler its type names.
pub fn process<P: Planner>(
    eval: &Evaluation,
    state: P::State,
    planner: &mut P,
    now_unix_ns: i64,
) -> Result<(), SchedulerError> {
    match eval.r#type.as_str() {
        "service" | "batch" => generic::process(eval, state, planner, now_unix_ns),
        "system" | "sysbatch" => system::process(eval, state, planner, now_unix_ns),
        other => Err(SchedulerError::UnknownType(other.to_string())),
    }
}

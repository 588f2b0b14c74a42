//! The `caravan-plan-applier` binary.

use std::process::ExitCode;

use caravan_plan_applier::{PlanApplierConfig, run};

fn main() -> ExitCode {
    caravan_runtime::service::main::<PlanApplierConfig, _, _>("plan-applier", run)
}

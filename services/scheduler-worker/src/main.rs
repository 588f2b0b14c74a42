//! The `caravan-scheduler-worker` binary.

use std::process::ExitCode;

use caravan_scheduler_worker::{SchedulerWorkerConfig, run};

fn main() -> ExitCode {
    caravan_runtime::service::main::<SchedulerWorkerConfig, _, _>("scheduler-worker", run)
}

//! The `caravan-eval-broker` binary.

use std::process::ExitCode;

use caravan_eval_broker::{EvalBrokerConfig, SERVICE, run};

fn main() -> ExitCode {
    caravan_runtime::service::main::<EvalBrokerConfig, _, _>(SERVICE, run)
}

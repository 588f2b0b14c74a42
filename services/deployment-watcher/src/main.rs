//! The `caravan-deployment-watcher` binary.

use std::process::ExitCode;

use caravan_deployment_watcher::{DeploymentWatcherConfig, SERVICE, run};

fn main() -> ExitCode {
    caravan_runtime::service::main::<DeploymentWatcherConfig, _, _>(SERVICE, run)
}

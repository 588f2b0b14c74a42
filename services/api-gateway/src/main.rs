//! The `caravan-api-gateway` binary.

use std::process::ExitCode;

use caravan_api_gateway::{GatewayConfig, run};

fn main() -> ExitCode {
    caravan_runtime::service::main::<GatewayConfig, _, _>("api-gateway", run)
}

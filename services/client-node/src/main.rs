//! The `caravan-client-node` binary.

use std::process::ExitCode;

use caravan_client_node::{Args, ClientNodeService};
use clap::Parser;

/// mimalloc: the services allocate and free many short-lived buffers per
/// request (protobuf messages, transactions, stream frames), which glibc's
/// allocator hands back to the kernel and faults in again (see
/// docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    if let Some(code) = caravan_client_node::task_supervisor_main() {
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    caravan_runtime::service::main_with(ClientNodeService, Args::parse().into_service_args())
}

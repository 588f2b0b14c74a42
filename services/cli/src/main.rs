//! The `caravan` binary.

/// mimalloc: the services allocate and free many short-lived buffers per
/// request (protobuf messages, transactions, stream frames), which glibc's
/// allocator hands back to the kernel and faults in again (see
/// docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // `caravan dev` runs a client node in this process: its raw_exec tasks are
    // supervised by this same binary.
    if let Some(code) = caravan_client_node::task_supervisor_main() {
        return std::process::ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    caravan_cli::main()
}

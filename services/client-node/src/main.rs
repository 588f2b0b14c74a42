//! The `caravan-client-node` binary.

/// mimalloc: the services allocate and free many short-lived buffers per
/// request (protobuf messages, transactions, stream frames), which glibc's
/// allocator hands back to the kernel and faults in again (see
/// docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    caravan_client_node::main()
}

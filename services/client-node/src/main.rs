//! The `caravan-client-node` binary.

fn main() -> std::process::ExitCode {
    caravan_client_node::main()
}

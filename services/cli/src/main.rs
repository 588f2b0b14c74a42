//! The `caravan` binary.

fn main() -> std::process::ExitCode {
    caravan_cli::main()
}

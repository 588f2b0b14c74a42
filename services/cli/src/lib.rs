//! Caravan's command line: Nomad's verbs (`job run`, `job status`, `alloc
//! logs`, `node drain`, …) over Nomad's HTTP API (`-address`, `NOMAD_ADDR`)
//! or Caravan's gRPC API (`-grpc-address`, `CARAVAN_ADDR`), with Nomad's
//! table layouts, and `caravan dev`, which runs every service and a client
//! node in one process.
//!
//! `args` is the command line, `connection` where it connects, `commands`
//! the verbs, `views` and `monitor` what they print, `api` (the calls,
//! phrased for the operator) over `backend` (the two transports) and
//! `lookup` how they ask, and `dev` the one-process cluster ([`DevCluster`]).

mod api;
mod args;
mod backend;
mod commands;
mod connection;
mod dev;
mod error;
mod format;
mod hcl_spec;
mod lookup;
mod monitor;
mod placement;
mod server;
mod ui;
mod views;

use std::process::ExitCode;

use clap::Parser;

pub use api::{Api, DEFAULT_ADDRESS};
pub use connection::{Connection, Endpoint, TlsSettings};
pub use dev::{DevAddresses, DevCluster, DevOptions};
pub use error::CliError;
pub use ui::{Captured, Ui};

/// Parses `args` (the program name first) and runs the command, printing to
/// `ui`; returns the exit code. Usage errors print clap's message.
pub async fn run_args<I: IntoIterator<Item = String>>(args: I, ui: &mut Ui) -> u8 {
    let args: Vec<String> = args.into_iter().collect();
    if let Some(code) = commands::autocomplete(&args, ui) {
        return code;
    }
    let cli = match args::with_room(|| args::Cli::try_parse_from(args::normalize(args.clone()))) {
        Ok(cli) => cli,
        Err(e) => {
            let text = e.render().to_string();
            return if e.use_stderr() {
                ui.error(text.trim_end());
                1
            } else {
                ui.output(text.trim_end());
                0
            };
        }
    };
    match commands::dispatch(cli, ui).await {
        Ok(code) => code,
        Err(e) => {
            ui.error(e.to_string());
            e.exit_code()
        }
    }
}

/// The whole `main` of the `caravan` binary.
pub fn main() -> ExitCode {
    // A bug must still read as one line, not as a backtrace.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("caravan: internal error: {info}");
    }));
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("caravan: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut ui = Ui::stdio();
    let code = runtime.block_on(run_args(std::env::args(), &mut ui));
    // Lingering streams (a followed log) must not hold the exit.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    ExitCode::from(code)
}

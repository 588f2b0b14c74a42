//! What the end-to-end tests of `caravan dev` share: running a CLI command
//! line against a dev cluster, waiting for a condition, and the options of
//! a cluster on free ports.

#![allow(clippy::unwrap_used, dead_code)]

use std::path::Path;
use std::time::Duration;

use caravan_cli::{DevOptions, Ui, run_args};

/// How long a condition may take to come true.
pub const WAIT: Duration = Duration::from_secs(30);

/// Runs one CLI command line against the HTTP API at `address`; returns
/// exit code, stdout, stderr.
pub async fn cli(address: &str, line: &[&str]) -> (u8, String, String) {
    let args: Vec<&str> = ["-address", address]
        .into_iter()
        .chain(line.iter().copied())
        .collect();
    run(&args).await
}

/// Runs one CLI command line as given; returns exit code, stdout, stderr.
pub async fn run(line: &[&str]) -> (u8, String, String) {
    let (mut ui, captured) = Ui::captured();
    let args: Vec<String> = std::iter::once("caravan")
        .chain(line.iter().copied())
        .map(String::from)
        .collect();
    let code = run_args(args, &mut ui).await;
    (code, captured.stdout(), captured.stderr())
}

pub use caravan_testkit::wait::eventually_some;

/// A dev cluster on free ports with its client's data under `dir`.
pub fn options(dir: &Path) -> DevOptions {
    DevOptions {
        data_dir: Some(dir.join("client")),
        grpc_port: 0,
        http_port: 0,
        task_supervisor: env!("CARGO_BIN_EXE_caravan").into(),
        ..Default::default()
    }
}

//! What the end-to-end tests of `caravan dev` share: running a CLI command
//! line against a dev cluster, waiting for a condition, and the options of
//! a cluster on free ports.

#![allow(clippy::unwrap_used, dead_code)]

use std::path::Path;
use std::time::Duration;

use caravan_cli::{DevOptions, Ui, run_args};

/// How long a condition may take to come true.
pub const WAIT: Duration = Duration::from_secs(30);

/// Runs one CLI command line against `address`; returns exit code, stdout, stderr.
pub async fn cli(address: &str, line: &[&str]) -> (u8, String, String) {
    let (mut ui, captured) = Ui::captured();
    let head = ["caravan", "-address", address];
    let args: Vec<String> = head
        .iter()
        .chain(line.iter())
        .map(|s| s.to_string())
        .collect();
    let code = run_args(args, &mut ui).await;
    (code, captured.stdout(), captured.stderr())
}

/// Polls `probe` until it answers, failing the test after [`WAIT`].
pub async fn eventually<T, F, Fut>(what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A dev cluster on free ports with its client's data under `dir`.
pub fn options(dir: &Path) -> DevOptions {
    DevOptions {
        data_dir: Some(dir.join("client")),
        grpc_port: 0,
        http_port: 0,
        ..Default::default()
    }
}

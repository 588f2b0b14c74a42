//! Polling with a deadline: tests wait for the cluster to reach a state,
//! never for a fixed time.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use caravan_proto::Allocation;

/// What one look at the cluster found.
#[derive(Debug)]
pub enum Progress<T> {
    /// The awaited state, with what the caller wants from it.
    Done(T),
    /// Not yet; what was seen instead (reported if the deadline passes).
    Waiting(String),
}

/// How often a condition is checked.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Calls `probe` until it reports [`Progress::Done`] or `timeout` passes.
/// Errors from `probe` count as "not yet" (a service may be restarting);
/// the last observation or error is in the timeout's message.
pub async fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl AsyncFnMut() -> anyhow::Result<Progress<T>>,
) -> anyhow::Result<T> {
    let start = Instant::now();
    loop {
        let last = match probe().await {
            Ok(Progress::Done(value)) => return Ok(value),
            Ok(Progress::Waiting(seen)) => seen,
            Err(err) => format!("error: {err:#}"),
        };
        if start.elapsed() >= timeout {
            anyhow::bail!("timed out after {timeout:?} waiting for {what}; last seen: {last}");
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Waits up to `timeout` for every alloc's task to have written its pid to
/// `<dir>/<alloc id>.pid` (the test jobs' tasks do so first thing); returns
/// alloc id → pid.
pub async fn wait_for_pids(
    dir: &Path,
    allocs: &[Allocation],
    timeout: Duration,
) -> anyhow::Result<BTreeMap<String, i32>> {
    let files: Vec<(String, PathBuf)> = allocs
        .iter()
        .map(|a| (a.id.clone(), dir.join(format!("{}.pid", a.id))))
        .collect();
    wait_for("every task to write its pid", timeout, async || {
        let mut pids = BTreeMap::new();
        for (id, file) in &files {
            match std::fs::read_to_string(file)
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok())
            {
                Some(pid) => {
                    pids.insert(id.clone(), pid);
                }
                None => return Ok(Progress::Waiting(format!("no pid in {}", file.display()))),
            }
        }
        Ok(Progress::Done(pids))
    })
    .await
}

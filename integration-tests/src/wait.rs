//! Polling with a deadline: tests wait for the cluster to reach a state,
//! never for a fixed time.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use caravan_proto::Allocation;

pub use caravan_testkit::wait::{Progress, wait_for};

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

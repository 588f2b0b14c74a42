//! An `exec` task's handle: the supervised run of its isolate process (see
//! [`super::isolate`]), with what the task's cgroup adds: the OOM kills that
//! ended it (`OOM Killed`), its usage, and the group's removal once it ended.

use std::sync::Arc;
use std::time::{Duration, Instant};

use caravan_proto::TaskResourceUsage;
use nix::sys::signal::Signal;
use tokio::sync::OnceCell;

use super::cgroup::{self, TaskCgroup};
use super::{NAME, STATE_VERSION};
use crate::driver::{DriverError, ExecRequest, ExitResult, HandleState, TaskHandle};

/// How far apart the two CPU samples of a usage reading are.
const SAMPLE: Duration = Duration::from_millis(100);

/// A running `exec` task.
#[derive(Debug)]
pub struct ExecHandle {
    /// The supervised run of the task's isolate process.
    inner: Arc<dyn TaskHandle>,
    /// The task's cgroup.
    group: TaskCgroup,
    /// How the run ended, once its group is gone.
    ended: OnceCell<ExitResult>,
    /// The node's cores, to express CPU in MHz.
    node_cores: u64,
}

impl ExecHandle {
    /// The handle of `inner`'s run in `group`.
    pub(super) fn new(inner: Arc<dyn TaskHandle>, group: TaskCgroup, node_cores: u64) -> Self {
        ExecHandle {
            inner,
            group,
            ended: OnceCell::new(),
            node_cores,
        }
    }

    /// What the persisted state holds: the supervised run's own state.
    pub(super) fn inner_state(state: &HandleState) -> Option<HandleState> {
        if state.driver() != NAME || state.version() != STATE_VERSION {
            return None;
        }
        serde_json::from_slice(state.bytes()).ok()
    }

    /// The run ended as `exit`: reads the group's OOM kills, then ends what
    /// it left in its group and removes it.
    async fn finish(&self, exit: ExitResult) -> ExitResult {
        self.ended
            .get_or_init(|| async {
                let group = self.group.clone();
                let oom = tokio::task::spawn_blocking(move || {
                    let oom = group.oom_kills() > 0;
                    group.remove();
                    oom
                })
                .await
                .unwrap_or(false);
                let mut exit = exit;
                if oom {
                    exit.oom_killed = true;
                    exit.err = Some("OOM Killed".into());
                }
                exit
            })
            .await
            .clone()
    }
}

#[async_trait::async_trait]
impl TaskHandle for ExecHandle {
    fn state(&self) -> HandleState {
        // A handle state serializes to JSON without fail.
        let bytes = serde_json::to_vec(&self.inner.state()).unwrap_or_default();
        HandleState::new(NAME, STATE_VERSION, bytes)
    }

    async fn wait(&self) -> ExitResult {
        let exit = self.inner.wait().await;
        self.finish(exit).await
    }

    async fn stop(&self, signal: Signal, timeout: Duration) -> ExitResult {
        let exit = self.inner.stop(signal, timeout).await;
        self.finish(exit).await
    }

    /// Goes to the task's process group through isolate and init.
    async fn signal(&self, signal: Signal) -> Result<(), DriverError> {
        self.inner.signal(signal).await
    }

    async fn stats(&self, cpu_total_mhz: u64) -> Result<TaskResourceUsage, DriverError> {
        if self.ended.get().is_some() || !self.group.exists() {
            return Ok(crate::stats::idle_task_usage());
        }
        let before = (Instant::now(), self.group.cpu_times());
        tokio::time::sleep(SAMPLE).await;
        let now = self.group.cpu_times();
        Ok(cgroup::usage(
            self.group.memory_usage(),
            before.1,
            now,
            before.0.elapsed(),
            cpu_total_mhz,
            self.node_cores,
        ))
    }

    async fn exec(&self, _request: ExecRequest) -> Result<i32, DriverError> {
        Err(DriverError::unsupported(
            NAME,
            "running a command in a task's namespaces (alloc exec)",
        ))
    }
}

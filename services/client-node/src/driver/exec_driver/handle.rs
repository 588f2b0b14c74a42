//! An `exec` task's handle: the supervised run of its isolate process (see
//! [`super::isolate`]), with what the task's cgroup adds: the OOM kills that
//! ended it (`OOM Killed`), its usage, the group's removal once it ended,
//! and commands run in its namespaces, cgroup and credentials (`alloc exec`).

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use caravan_proto::TaskResourceUsage;
use nix::sys::signal::Signal;
use tokio::sync::OnceCell;

use super::cgroup::{self, TaskCgroup};
use super::isolate::{ENTER_ARG, Entry, ISOLATE_ARG};
use super::{NAME, STATE_VERSION};
use crate::driver::exec::pump;
use crate::driver::task_user::DEFAULT_PATH;
use crate::driver::{DriverError, ExecRequest, ExitResult, HandleState, TaskHandle};

/// How far apart the two CPU samples of a usage reading are.
const SAMPLE: Duration = Duration::from_millis(100);
/// How long an exec'd command's output may still take to arrive after it
/// exited (a child it left behind may hold the pipes).
const EXEC_DRAIN: Duration = Duration::from_secs(2);

/// What `alloc exec` runs a command with.
#[derive(Debug, Clone)]
pub(super) struct ExecContext {
    /// The client-node binary, which enters the task's namespaces.
    pub(super) binary: PathBuf,
    /// The task's cgroup and credentials (the command is the request's).
    pub(super) entry: Entry,
    /// The task's environment.
    pub(super) env: Vec<(String, String)>,
}

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
    /// What `exec` needs; `None` when the task's isolation is unknown.
    exec: Option<Arc<ExecContext>>,
}

impl ExecHandle {
    /// The handle of `inner`'s run in `group`.
    pub(super) fn new(
        inner: Arc<dyn TaskHandle>,
        group: TaskCgroup,
        node_cores: u64,
        exec: Option<Arc<ExecContext>>,
    ) -> Self {
        ExecHandle {
            inner,
            group,
            ended: OnceCell::new(),
            node_cores,
            exec,
        }
    }

    /// The host pid of the task's init: the child of the supervised
    /// isolate process, whose pid the supervised run's state holds.
    fn init_pid(&self) -> Option<i32> {
        let state = self.inner.state();
        let fields: serde_json::Value = serde_json::from_slice(state.bytes()).ok()?;
        let isolate = fields.get("pid")?.as_i64()?;
        let children =
            std::fs::read_to_string(format!("/proc/{isolate}/task/{isolate}/children")).ok()?;
        children.split_whitespace().next()?.parse().ok()
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

    /// Runs the command in the task's namespaces, root, cgroup and
    /// credentials, with its environment; its exit code (128 + the signal
    /// that ended it, as a shell says).
    async fn exec(&self, request: ExecRequest) -> Result<i32, DriverError> {
        let Some(ctx) = self.exec.clone() else {
            return Err(DriverError::fatal(
                "the task's isolation is unknown: cannot run a command in it",
            ));
        };
        let ExecRequest {
            command,
            tty,
            stdin,
            stdout,
            stderr,
            resize: _,
        } = request;
        if tty {
            return Err(DriverError::unsupported(NAME, "exec with a terminal"));
        }
        let Some((program, args)) = command.split_first() else {
            return Err(DriverError::fatal("exec: a command is required"));
        };
        let Some(init) = self.init_pid().filter(|_| self.ended.get().is_none()) else {
            return Err(DriverError::fatal("exec: the task is not running"));
        };
        let mut entry = ctx.entry.clone();
        entry.task.command = program.clone();
        entry.task.args = args.to_vec();
        let json =
            serde_json::to_string(&entry).map_err(|e| DriverError::fatal(format!("exec: {e}")))?;
        let mut child = tokio::process::Command::new(&ctx.binary)
            .args([ISOLATE_ARG, ENTER_ARG, &init.to_string(), &json])
            .env_clear()
            .env("PATH", DEFAULT_PATH)
            .envs(ctx.env.iter().map(|(k, v)| (k, v)))
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| DriverError::fatal(format!("exec {program:?}: {e}")))?;
        if let (Some(mut input), Some(mut to)) = (stdin, child.stdin.take()) {
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut input, &mut to).await;
            });
        }
        let out = child.stdout.take().map(|o| tokio::spawn(pump(o, stdout)));
        let err = child.stderr.take().map(|e| tokio::spawn(pump(e, stderr)));
        let status = child
            .wait()
            .await
            .map_err(|e| DriverError::fatal(format!("exec {program:?}: wait: {e}")))?;
        for copy in [out, err].into_iter().flatten() {
            let _ = tokio::time::timeout(EXEC_DRAIN, copy).await;
        }
        let exit = crate::driver::supervisor::exit_of(status);
        Ok(if exit.signal > 0 {
            128 + exit.signal
        } else {
            exit.exit_code
        })
    }
}

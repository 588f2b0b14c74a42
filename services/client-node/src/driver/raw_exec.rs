//! `raw_exec`: a task is a child process in its own process group, run in its
//! task dir with the task's environment, output appended to its log files.

use std::fs::OpenOptions;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use caravan_model::now_unix_ns;
use caravan_proto::DriverInfo;
use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::sync::watch;

use super::{Driver, DriverError, ExitResult, HandleState, TaskHandle, TaskSpec, proc_stat};

/// How often a re-attached process (not our child, so not waitable) is checked.
const RECOVERED_POLL: Duration = Duration::from_millis(200);
/// How long to wait for a process to go after SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(10);

/// Runs tasks as plain child processes.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawExecDriver;

/// A process started (or re-attached) by `raw_exec`.
#[derive(Debug)]
pub struct RawExecHandle {
    pid: i32,
    start_ticks: u64,
    started_at_unix_ns: i64,
    exit: watch::Receiver<Option<ExitResult>>,
    /// Not our child: its pid is checked again before every signal.
    recovered: bool,
}

fn exit_of(status: std::process::ExitStatus) -> ExitResult {
    match (status.code(), status.signal()) {
        (Some(code), _) => ExitResult {
            exit_code: code,
            ..Default::default()
        },
        (None, Some(sig)) => ExitResult {
            signal: sig,
            ..Default::default()
        },
        (None, None) => ExitResult {
            err: Some(format!("unrecognised exit status {status}")),
            ..Default::default()
        },
    }
}

/// Signals the whole process group; a group that is already gone is fine.
fn signal_group(pid: i32, signal: Signal) {
    match killpg(Pid::from_raw(pid), signal) {
        Ok(()) | Err(Errno::ESRCH) => {}
        Err(e) => tracing::warn!(pid, %signal, error = %e, "cannot signal task"),
    }
}

#[async_trait::async_trait]
impl Driver for RawExecDriver {
    fn name(&self) -> &'static str {
        "raw_exec"
    }

    fn info(&self) -> DriverInfo {
        DriverInfo {
            detected: true,
            healthy: true,
            health_description: "Healthy".into(),
            ..Default::default()
        }
    }

    fn wants_env(&self) -> bool {
        true
    }

    async fn start(&self, spec: TaskSpec) -> Result<Arc<dyn TaskHandle>, DriverError> {
        let (Some(env), Some(dirs)) = (spec.env.as_ref(), spec.dirs.as_ref()) else {
            return Err(DriverError::fatal("raw_exec needs the task's env and dirs"));
        };
        let command = spec
            .config
            .string("command")?
            .map(|c| env.interpolate(&c))
            .filter(|c| !c.trim().is_empty())
            .ok_or_else(|| DriverError::fatal("config.command: required"))?;
        let args: Vec<String> = spec
            .config
            .strings("args")?
            .iter()
            .map(|a| env.interpolate(a))
            .collect();
        let open = |path: &std::path::Path| {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| DriverError::recoverable(format!("open log {}: {e}", path.display())))
        };
        let stdout = open(&dirs.stdout)?;
        let stderr = open(&dirs.stderr)?;
        let mut cmd = tokio::process::Command::new(&command);
        cmd.args(&args)
            .envs(env.process_env())
            .current_dir(&dirs.task_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::from(stderr))
            // Its own group, so a stop reaches everything the task started.
            .process_group(0)
            // The task outlives the client; the next client start re-attaches.
            .kill_on_drop(false);
        let mut child = cmd
            .spawn()
            .map_err(|e| DriverError::recoverable(format!("failed to start {command:?}: {e}")))?;
        let pid = child
            .id()
            .and_then(|p| i32::try_from(p).ok())
            .ok_or_else(|| DriverError::recoverable("process exited before it had a pid"))?;
        let start_ticks = proc_stat(pid).map(|s| s.start_ticks).unwrap_or(0);
        let (tx, rx) = watch::channel(None);
        tokio::spawn(async move {
            let result = match child.wait().await {
                Ok(status) => exit_of(status),
                Err(e) => ExitResult {
                    err: Some(format!("wait: {e}")),
                    ..Default::default()
                },
            };
            // Whatever the task left behind in its group goes with it.
            signal_group(pid, Signal::SIGKILL);
            let _ = tx.send(Some(result));
        });
        tracing::debug!(alloc = %spec.alloc_id, task = %spec.task, pid, %command, "started process");
        Ok(Arc::new(RawExecHandle {
            pid,
            start_ticks,
            started_at_unix_ns: now_unix_ns(),
            exit: rx,
            recovered: false,
        }))
    }

    fn recover(&self, state: &HandleState) -> Option<Arc<dyn TaskHandle>> {
        let HandleState::RawExec {
            pid,
            start_ticks,
            started_at_unix_ns,
        } = *state
        else {
            return None;
        };
        let alive =
            |pid, ticks| proc_stat(pid).is_some_and(|s| s.alive() && s.start_ticks == ticks);
        if !alive(pid, start_ticks) {
            return None;
        }
        let (tx, rx) = watch::channel(None);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(RECOVERED_POLL) => {}
                    _ = tx.closed() => return,
                }
                if !alive(pid, start_ticks) {
                    break;
                }
            }
            // Not our child: the exit status went to whoever reaped it.
            let _ = tx.send(Some(ExitResult {
                err: Some(
                    "exit status unknown: the task was re-attached after a client restart".into(),
                ),
                ..Default::default()
            }));
        });
        Some(Arc::new(RawExecHandle {
            pid,
            start_ticks,
            started_at_unix_ns,
            exit: rx,
            recovered: true,
        }))
    }
}

impl RawExecHandle {
    fn exited(&self) -> Option<ExitResult> {
        self.exit.borrow().clone()
    }

    /// Whether signals still reach our task and not a process that reused its pid.
    fn still_ours(&self) -> bool {
        !self.recovered
            || proc_stat(self.pid).is_some_and(|s| s.alive() && s.start_ticks == self.start_ticks)
    }
}

#[async_trait::async_trait]
impl TaskHandle for RawExecHandle {
    fn state(&self) -> HandleState {
        HandleState::RawExec {
            pid: self.pid,
            start_ticks: self.start_ticks,
            started_at_unix_ns: self.started_at_unix_ns,
        }
    }

    async fn wait(&self) -> ExitResult {
        let mut rx = self.exit.clone();
        match rx.wait_for(Option::is_some).await {
            Ok(v) => v.clone().unwrap_or_default(),
            Err(_) => ExitResult {
                err: Some("lost track of the process".into()),
                ..Default::default()
            },
        }
    }

    async fn stop(&self, signal: Signal, timeout: Duration) -> ExitResult {
        if let Some(done) = self.exited() {
            return done;
        }
        if !self.still_ours() {
            return self.wait().await;
        }
        signal_group(self.pid, signal);
        if let Ok(r) = tokio::time::timeout(timeout, self.wait()).await {
            return r;
        }
        if self.still_ours() {
            signal_group(self.pid, Signal::SIGKILL);
        }
        match tokio::time::timeout(KILL_GRACE, self.wait()).await {
            Ok(r) => r,
            Err(_) => ExitResult {
                signal: Signal::SIGKILL as i32,
                err: Some("the process did not exit after SIGKILL".into()),
                ..Default::default()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::time::Instant;

    use caravan_proto::{Allocation, Job, Node, Task, TaskGroup};

    use super::*;
    use crate::alloc_dir::AllocDir;
    use crate::driver::config::{list_value, string_value};
    use crate::driver::{TaskConfig, proc_stat};
    use crate::task_env::TaskEnv;

    fn spec(dir: &std::path::Path, script: &str) -> TaskSpec {
        let alloc = Allocation {
            id: "a1".into(),
            name: "j.g[2]".into(),
            ..Default::default()
        };
        let job = Job {
            id: "j".into(),
            ..Default::default()
        };
        let group = TaskGroup {
            name: "g".into(),
            ..Default::default()
        };
        let mut task = Task {
            name: "t".into(),
            ..Default::default()
        };
        task.env = BTreeMap::from([("WHO".to_string(), "world".to_string())]);
        let ad = AllocDir::new(dir, "a1").unwrap();
        ad.build(["t"]).unwrap();
        let dirs = ad.task("t").unwrap();
        let env = TaskEnv::build(
            Arc::new(Node::default()),
            &alloc,
            &job,
            &group,
            &task,
            Some(&dirs),
        );
        TaskSpec {
            alloc_id: "a1".into(),
            task: "t".into(),
            config: TaskConfig::from_pairs([
                ("command", string_value("/bin/sh")),
                ("args", list_value(&["-c", script])),
            ]),
            env: Some(env),
            dirs: Some(dirs),
        }
    }

    #[tokio::test]
    async fn output_goes_to_the_log_files_with_the_task_env() {
        let dir = tempfile::tempdir().unwrap();
        let s = spec(
            dir.path(),
            "echo hello $WHO from ${NOMAD_ALLOC_INDEX} in $(pwd); echo oops >&2; exit 3",
        );
        let dirs = s.dirs.clone().unwrap();
        let h = RawExecDriver.start(s).await.unwrap();
        let r = h.wait().await;
        assert_eq!(r.exit_code, 3);
        let out = std::fs::read_to_string(&dirs.stdout).unwrap();
        assert_eq!(
            out.trim(),
            format!("hello world from 2 in {}", dirs.task_dir.display())
        );
        assert_eq!(
            std::fs::read_to_string(&dirs.stderr).unwrap().trim(),
            "oops"
        );
        // wait() can be asked again.
        assert_eq!(h.wait().await.exit_code, 3);
    }

    #[tokio::test]
    async fn stop_sends_the_signal_then_kills_after_the_timeout() {
        let dir = tempfile::tempdir().unwrap();
        // Traps TERM and keeps going: only SIGKILL ends it.
        let s = spec(
            dir.path(),
            "trap 'echo got-term' TERM; echo ready; while true; do sleep 0.05; done",
        );
        let dirs = s.dirs.clone().unwrap();
        let h = RawExecDriver.start(s).await.unwrap();
        wait_for_file(&dirs.stdout, "ready").await;
        let began = Instant::now();
        let r = h.stop(Signal::SIGTERM, Duration::from_millis(500)).await;
        let took = began.elapsed();
        assert_eq!(r.signal, Signal::SIGKILL as i32, "{r:?}");
        assert!(took >= Duration::from_millis(500), "{took:?}");
        assert!(took < Duration::from_secs(5), "{took:?}");
        wait_for_file(&dirs.stdout, "got-term").await;
    }

    #[tokio::test]
    async fn stop_of_a_cooperative_task_needs_no_kill() {
        let dir = tempfile::tempdir().unwrap();
        let s = spec(dir.path(), "echo ready; exec sleep 30");
        let dirs = s.dirs.clone().unwrap();
        let h = RawExecDriver.start(s).await.unwrap();
        wait_for_file(&dirs.stdout, "ready").await;
        let r = h.stop(Signal::SIGINT, Duration::from_secs(5)).await;
        assert_eq!(r.signal, Signal::SIGINT as i32);
    }

    #[tokio::test]
    async fn recover_finds_the_live_process_and_not_a_dead_one() {
        let dir = tempfile::tempdir().unwrap();
        let s = spec(dir.path(), "exec sleep 30");
        let h = RawExecDriver.start(s).await.unwrap();
        let state = h.state();
        let HandleState::RawExec {
            pid, start_ticks, ..
        } = state.clone()
        else {
            panic!("{state:?}")
        };
        assert_eq!(proc_stat(pid).unwrap().start_ticks, start_ticks);
        let again = RawExecDriver.recover(&state).expect("live process");
        let wrong = HandleState::RawExec {
            pid,
            start_ticks: start_ticks + 1,
            started_at_unix_ns: 0,
        };
        assert!(
            RawExecDriver.recover(&wrong).is_none(),
            "pid reuse is not our task"
        );
        let r = again.stop(Signal::SIGTERM, Duration::from_secs(5)).await;
        assert!(!r.successful());
        h.wait().await;
        assert!(RawExecDriver.recover(&state).is_none());
    }

    #[tokio::test]
    async fn missing_command_is_fatal_and_missing_binary_recoverable() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = spec(dir.path(), "true");
        s.config = TaskConfig::default();
        let e = RawExecDriver.start(s).await.unwrap_err();
        assert!(!e.recoverable);
        assert!(e.message.contains("config.command"));
        let mut s = spec(dir.path(), "true");
        s.config = TaskConfig::from_pairs([("command", string_value("/nonexistent/bin"))]);
        let e = RawExecDriver.start(s).await.unwrap_err();
        assert!(e.recoverable, "{e}");
    }

    async fn wait_for_file(path: &std::path::Path, needle: &str) {
        for _ in 0..200 {
            if std::fs::read_to_string(path).is_ok_and(|t| t.contains(needle)) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("{} never contained {needle:?}", path.display());
    }
}

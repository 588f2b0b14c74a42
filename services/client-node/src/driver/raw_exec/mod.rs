//! `raw_exec`: a task is a child process in its own process group, run in its
//! task dir with the task's environment (never the client's) as the task's
//! `user`, its output in its rotated log files.
//! A supervisor process (see [`super::supervisor`]) starts it, waits for it
//! and records its exit, so a task that ends while the client is down keeps
//! its exit status. Signals go to the task's process, usage is read from
//! its process group, and `exec` runs a child with the task's environment,
//! directory and user (see [`handle`]).

mod handle;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use caravan_model::now_unix_ns;
use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncBufReadExt;
use tokio::sync::watch;

use super::handle_state::LEGACY_VERSION;
use super::supervisor::{RECORDED, SupervisorArgs, read_exit, read_start, write_launch};
use super::task_user::{self, DEFAULT_PATH, TaskUser};
use super::{
    Capabilities, Driver, DriverError, ExitResult, Fingerprint, FsIsolation, HandleState,
    TaskHandle, TaskSpec, proc_stat,
};
use handle::ExecContext;
pub use handle::RawExecHandle;

/// The driver's name.
const NAME: &str = "raw_exec";
/// The format of the handle state: [`RawExecState`] as JSON.
const STATE_VERSION: u32 = 1;
/// How often a process that is not our child (so not waitable) is checked.
const RECOVERED_POLL: Duration = Duration::from_millis(200);
/// How long a supervisor may take to report the task's pid.
const HANDSHAKE: Duration = Duration::from_secs(30);

/// What a `raw_exec` handle persists: the task's process, identified by
/// pid and kernel start time, and its supervisor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawExecState {
    /// Process id (also the process group id).
    pub pid: i32,
    /// Start time in clock ticks since boot (`/proc/<pid>/stat` field 22).
    pub start_ticks: u64,
    /// Wall-clock start.
    pub started_at_unix_ns: i64,
    /// The supervisor that waits for the task and records its exit;
    /// absent in records of tasks started without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supervisor: Option<SupervisorState>,
}

impl RawExecState {
    /// The opaque state the client persists.
    pub fn encode(&self) -> HandleState {
        // Serializing plain numbers and a path cannot fail.
        let bytes = serde_json::to_vec(self).unwrap_or_default();
        HandleState::new(NAME, STATE_VERSION, bytes)
    }

    /// Reads a state this driver wrote (in this format, or as the fields
    /// of a record from before opaque states, which are the same).
    pub fn decode(state: &HandleState) -> Option<RawExecState> {
        if state.driver() != NAME {
            return None;
        }
        match state.version() {
            STATE_VERSION | LEGACY_VERSION => serde_json::from_slice(state.bytes()).ok(),
            _ => None,
        }
    }
}

/// The supervisor process of a `raw_exec` task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SupervisorState {
    /// Its pid.
    pub pid: i32,
    /// Its start time in clock ticks since boot.
    pub start_ticks: u64,
    /// Where it records the task's exit.
    pub exit_record: std::path::PathBuf,
}

/// Runs tasks as plain processes under a supervisor.
#[derive(Debug, Clone)]
pub struct RawExecDriver {
    /// The client-node binary, run as the task supervisor.
    supervisor: PathBuf,
}

/// What a supervisor started for a launch.
enum Launched {
    /// It runs the task: its process and the task's pid.
    Task(tokio::process::Child, i32),
    /// A run of the task was on record already (an earlier launch's).
    Recorded,
}

/// Signals the whole process group; a group that is already gone is fine.
fn signal_group(pid: i32, signal: Signal) {
    match killpg(Pid::from_raw(pid), signal) {
        Ok(()) | Err(Errno::ESRCH) => {}
        Err(e) => tracing::warn!(pid, %signal, error = %e, "cannot signal task"),
    }
}

fn alive(pid: i32, ticks: u64) -> bool {
    proc_stat(pid).is_some_and(|s| s.alive() && s.start_ticks == ticks)
}

/// The task's exit as its supervisor recorded it, once the supervisor is gone.
fn recorded_exit(sup: &SupervisorState, task_pid: i32, task_ticks: u64) -> ExitResult {
    match read_exit(&sup.exit_record) {
        Some(r) => r.exit,
        None => {
            // Without its supervisor nobody waits for the task: end it.
            if task_ticks != 0 && alive(task_pid, task_ticks) {
                signal_group(task_pid, Signal::SIGKILL);
            }
            ExitResult {
                err: Some(format!(
                    "the task's supervisor exited without recording its exit in {}",
                    sup.exit_record.display()
                )),
                ..Default::default()
            }
        }
    }
}

impl RawExecDriver {
    /// A driver whose tasks are supervised by `supervisor` (the client-node
    /// binary).
    pub fn new(supervisor: PathBuf) -> Self {
        RawExecDriver { supervisor }
    }

    /// Starts the supervisor and reads the task's pid from it.
    async fn spawn(
        &self,
        spec: &TaskSpec,
        user: Option<&TaskUser>,
        sup_args: SupervisorArgs,
    ) -> Result<Launched, DriverError> {
        let (Some(env), Some(_)) = (spec.env.as_ref(), spec.dirs.as_ref()) else {
            return Err(DriverError::fatal("raw_exec needs the task's env and dirs"));
        };
        let mut cmd = tokio::process::Command::new(&self.supervisor);
        // The supervisor passes its environment on to the task: it gets the
        // task's alone, so nothing of the client's (tokens, credentials in
        // its variables) leaks into a job. The task's env may set PATH.
        cmd.env_clear().env("PATH", DEFAULT_PATH);
        if let Some(user) = user {
            cmd.env("HOME", &user.home).env("USER", &user.name);
        }
        if let Some(netns) = &spec.netns {
            // The supervisor enters it before starting the task (the
            // workspace allows no `pre_exec` here); the task never sees it.
            cmd.env(super::supervisor::NETNS_ENV, netns);
        }
        cmd.args(sup_args.to_args())
            .envs(env.process_env())
            .current_dir(work_dir(spec)?)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            // It outlives the client: it must hold none of the client's pipes.
            .stderr(Stdio::null())
            // Its own group: signals meant for the client don't reach it.
            .process_group(0)
            // The task outlives the client; the next client start re-attaches.
            .kill_on_drop(false);
        let mut child = cmd.spawn().map_err(|e| {
            DriverError::recoverable(format!(
                "failed to start the task supervisor {}: {e}",
                self.supervisor.display()
            ))
        })?;
        let Some(stdout) = child.stdout.take() else {
            return Err(DriverError::recoverable(
                "the task supervisor has no stdout",
            ));
        };
        let mut line = String::new();
        let mut reader = tokio::io::BufReader::new(stdout);
        let read = tokio::time::timeout(HANDSHAKE, reader.read_line(&mut line)).await;
        let line = line.trim();
        if let Some(why) = line.strip_prefix("error ") {
            let _ = child.wait().await;
            return Err(DriverError::recoverable(why.to_string()));
        }
        if line == RECORDED {
            let _ = child.wait().await;
            return Ok(Launched::Recorded);
        }
        match line
            .strip_prefix("pid ")
            .and_then(|p| p.parse::<i32>().ok())
        {
            Some(pid) if pid > 0 => Ok(Launched::Task(child, pid)),
            _ => {
                let _ = child.start_kill();
                Err(DriverError::recoverable(format!(
                    "the task supervisor did not report the task's pid ({})",
                    match read {
                        Err(_) => "timed out".to_string(),
                        Ok(Err(e)) => e.to_string(),
                        Ok(Ok(_)) => format!("said {line:?}"),
                    }
                )))
            }
        }
    }
}

#[async_trait::async_trait]
impl Driver for RawExecDriver {
    fn name(&self) -> &'static str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            send_signals: true,
            exec: true,
            fs_isolation: FsIsolation::None,
            network_isolation: false,
            // It runs the task on the host, where nothing is mounted for it
            // (Nomad's raw_exec: `MountConfigSupportNone`).
            mounts: false,
        }
    }

    async fn fingerprint(&self) -> Fingerprint {
        Fingerprint::healthy(Default::default())
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
        let user = task_user::resolve(&spec.user)?;
        if let Some(user) = user.as_ref().filter(|u| u.switch) {
            // The task may write in its own dirs and the alloc's shared ones,
            // as it could as the client's user.
            task_user::hand_over(
                user,
                &[
                    &dirs.task_dir,
                    &dirs.local_dir,
                    &dirs.secrets_dir,
                    &dirs.task_dir.join("tmp"),
                ],
            )?;
            task_user::open_shared(&[&dirs.alloc_dir.join("data"), &dirs.alloc_dir.join("tmp")])?;
        }
        let exit_record = dirs.exit_record.clone();
        // The supervisor runs the task only for the latest launch, and only
        // while no run is on record: a supervisor an earlier client started
        // just before it died may still be on its way (see `supervisor`).
        let launch = uuid::Uuid::new_v4().to_string();
        write_launch(&dirs.start_record, &launch).map_err(|e| {
            DriverError::recoverable(format!(
                "cannot record the task's launch beside {}: {e}",
                dirs.start_record.display()
            ))
        })?;
        let log_dir = dirs
            .stdout
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| dirs.alloc_dir.join("logs"));
        let sup_args = SupervisorArgs {
            status_file: exit_record.clone(),
            start_file: dirs.start_record.clone(),
            launch,
            log_dir,
            task: spec.task.clone(),
            limits: spec.logs,
            credentials: user
                .as_ref()
                .filter(|u| u.switch)
                .map(TaskUser::credentials),
            command: command.clone().into(),
            args: args.into_iter().map(Into::into).collect(),
        };
        let (mut child, pid) = match self.spawn(&spec, user.as_ref(), sup_args).await? {
            Launched::Task(child, pid) => (child, pid),
            Launched::Recorded => {
                return self.adopt_run(&spec).ok_or_else(|| {
                    DriverError::recoverable("a run of the task was on record, then gone")
                });
            }
        };
        let sup_pid = child
            .id()
            .and_then(|p| i32::try_from(p).ok())
            .unwrap_or_default();
        let supervisor = SupervisorState {
            pid: sup_pid,
            start_ticks: proc_stat(sup_pid).map(|s| s.start_ticks).unwrap_or(0),
            exit_record,
        };
        let start_ticks = proc_stat(pid).map(|s| s.start_ticks).unwrap_or(0);
        let (tx, rx) = watch::channel(None);
        let sup = supervisor.clone();
        tokio::spawn(async move {
            let result = match child.wait().await {
                Ok(_) => recorded_exit(&sup, pid, start_ticks),
                Err(e) => ExitResult {
                    err: Some(format!("wait for the task supervisor: {e}")),
                    ..Default::default()
                },
            };
            let _ = tx.send(Some(result));
        });
        tracing::debug!(alloc = %spec.alloc_id, task = %spec.task, pid, %command, "started process");
        Ok(Arc::new(RawExecHandle {
            pid,
            start_ticks,
            started_at_unix_ns: now_unix_ns(),
            supervisor: Some(supervisor),
            exit: rx,
            recovered: false,
            exec: self.exec_context(&spec),
        }))
    }

    async fn recover(&self, spec: &TaskSpec, state: &HandleState) -> Option<Arc<dyn TaskHandle>> {
        self.recover_state(spec, RawExecState::decode(state)?)
    }

    async fn adopt(&self, spec: &TaskSpec) -> Option<Arc<dyn TaskHandle>> {
        self.adopt_run(spec)
    }

    async fn release(&self, spec: &TaskSpec) {
        if let Some(dirs) = &spec.dirs
            && let Err(e) = remove_record(&dirs.start_record)
        {
            tracing::warn!(alloc = %spec.alloc_id, task = %spec.task, error = %e, "cannot forget the task's run");
        }
    }
}

impl RawExecDriver {
    /// What `exec` needs of the task: its environment, dir and user.
    fn exec_context(&self, spec: &TaskSpec) -> Option<Arc<ExecContext>> {
        let (env, dirs) = (spec.env.as_ref()?, spec.dirs.as_ref()?);
        let user = task_user::resolve(&spec.user).ok().flatten();
        Some(Arc::new(ExecContext {
            switch: self.supervisor.clone(),
            env: env.process_env(),
            dir: work_dir(spec).unwrap_or_else(|_| dirs.task_dir.clone()),
            user,
            netns: spec.netns.clone(),
        }))
    }

    /// The handle of the run `state` names, if it still runs or its end is
    /// on record.
    fn recover_state(&self, spec: &TaskSpec, state: RawExecState) -> Option<Arc<dyn TaskHandle>> {
        let RawExecState {
            pid,
            start_ticks,
            started_at_unix_ns,
            supervisor,
        } = state;
        let (tx, rx) = watch::channel(None);
        match &supervisor {
            Some(sup) if alive(sup.pid, sup.start_ticks) => {
                let sup = sup.clone();
                tokio::spawn(async move {
                    loop {
                        tokio::select! {
                            _ = tokio::time::sleep(RECOVERED_POLL) => {}
                            _ = tx.closed() => return,
                        }
                        if !alive(sup.pid, sup.start_ticks) {
                            break;
                        }
                    }
                    let _ = tx.send(Some(recorded_exit(&sup, pid, start_ticks)));
                });
            }
            // The task ended while the client was down: its exit is on record.
            Some(sup) => {
                let done = read_exit(&sup.exit_record)?;
                let _ = tx.send(Some(done.exit));
            }
            None => {
                if !alive(pid, start_ticks) {
                    return None;
                }
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
                    // Not our child and no supervisor: nobody kept the status.
                    let _ = tx.send(Some(ExitResult {
                        err: Some(
                            "exit status unknown: the task was started without a supervisor".into(),
                        ),
                        ..Default::default()
                    }));
                });
            }
        }
        Some(Arc::new(RawExecHandle {
            pid,
            start_ticks,
            started_at_unix_ns,
            supervisor,
            exit: rx,
            recovered: true,
            exec: self.exec_context(spec),
        }))
    }

    /// A run the supervisor recorded that the client may not have.
    fn adopt_run(&self, spec: &TaskSpec) -> Option<Arc<dyn TaskHandle>> {
        let dirs = spec.dirs.as_ref()?;
        let start = read_start(&dirs.start_record)?;
        let supervisor = SupervisorState {
            pid: start.supervisor_pid,
            start_ticks: start.supervisor_ticks,
            exit_record: dirs.exit_record.clone(),
        };
        let state = RawExecState {
            pid: start.pid,
            start_ticks: start.start_ticks,
            started_at_unix_ns: start.started_at_unix_ns,
            supervisor: Some(supervisor.clone()),
        };
        tracing::info!(alloc = %spec.alloc_id, task = %spec.task, pid = start.pid, "adopting a run the client had not recorded");
        if let Some(h) = self.recover_state(spec, state) {
            return Some(h);
        }
        // The supervisor died without recording the exit: the run ended
        // unknown, which is not a reason to run the task again unasked.
        let (_tx, exit) = watch::channel(Some(recorded_exit(
            &supervisor,
            start.pid,
            start.start_ticks,
        )));
        Some(Arc::new(RawExecHandle {
            pid: start.pid,
            start_ticks: start.start_ticks,
            started_at_unix_ns: start.started_at_unix_ns,
            supervisor: Some(supervisor),
            exit,
            recovered: true,
            exec: self.exec_context(spec),
        }))
    }
}

/// The directory the task runs in: `config.work_dir` (relative to the task
/// dir, or absolute), else the task dir.
fn work_dir(spec: &TaskSpec) -> Result<PathBuf, DriverError> {
    let Some(dirs) = &spec.dirs else {
        return Err(DriverError::fatal("raw_exec needs the task's dirs"));
    };
    let asked = spec
        .config
        .string("work_dir")?
        .map(|w| match &spec.env {
            Some(env) => env.interpolate(&w),
            None => w,
        })
        .filter(|w| !w.trim().is_empty());
    Ok(match asked {
        Some(w) => dirs.task_dir.join(w),
        None => dirs.task_dir.clone(),
    })
}

/// Removes a task record; one that isn't there is fine.
fn remove_record(path: &Path) -> Result<(), String> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("remove {}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests;

//! `raw_exec`: a task is a child process in its own process group, run in its
//! task dir with the task's environment (never the client's) as the task's
//! `user`, its output in its rotated log files.
//! A supervisor process (see [`super::supervisor`]) starts it, waits for it
//! and records its exit, so a task that ends while the client is down keeps
//! its exit status.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use caravan_model::now_unix_ns;
use caravan_proto::DriverInfo;
use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::AsyncBufReadExt;
use tokio::sync::watch;

use super::supervisor::{RECORDED, SupervisorArgs, read_exit, read_start, write_launch};
use super::task_user::{self, DEFAULT_PATH, TaskUser};
use super::{
    Driver, DriverError, ExitResult, HandleState, SupervisorState, TaskHandle, TaskSpec, proc_stat,
};

/// How often a process that is not our child (so not waitable) is checked.
const RECOVERED_POLL: Duration = Duration::from_millis(200);
/// How long to wait for a process to go after SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(10);
/// How long a supervisor may take to report the task's pid.
const HANDSHAKE: Duration = Duration::from_secs(30);

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

/// A process started (or re-attached) by `raw_exec`.
#[derive(Debug)]
pub struct RawExecHandle {
    pid: i32,
    start_ticks: u64,
    started_at_unix_ns: i64,
    supervisor: Option<SupervisorState>,
    exit: watch::Receiver<Option<ExitResult>>,
    /// Not our child: its pid is checked again before every signal.
    recovered: bool,
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
        let (Some(env), Some(dirs)) = (spec.env.as_ref(), spec.dirs.as_ref()) else {
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
        cmd.args(sup_args.to_args())
            .envs(env.process_env())
            .current_dir(&dirs.task_dir)
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
                return self.adopt(&spec).ok_or_else(|| {
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
        }))
    }

    fn recover(&self, state: &HandleState) -> Option<Arc<dyn TaskHandle>> {
        let HandleState::RawExec {
            pid,
            start_ticks,
            started_at_unix_ns,
            supervisor,
        } = state.clone()
        else {
            return None;
        };
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
        }))
    }

    fn adopt(&self, spec: &TaskSpec) -> Option<Arc<dyn TaskHandle>> {
        let dirs = spec.dirs.as_ref()?;
        let start = read_start(&dirs.start_record)?;
        let supervisor = SupervisorState {
            pid: start.supervisor_pid,
            start_ticks: start.supervisor_ticks,
            exit_record: dirs.exit_record.clone(),
        };
        let state = HandleState::RawExec {
            pid: start.pid,
            start_ticks: start.start_ticks,
            started_at_unix_ns: start.started_at_unix_ns,
            supervisor: Some(supervisor.clone()),
        };
        tracing::info!(alloc = %spec.alloc_id, task = %spec.task, pid = start.pid, "adopting a run the client had not recorded");
        if let Some(h) = self.recover(&state) {
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
        }))
    }

    fn release(&self, spec: &TaskSpec) {
        if let Some(dirs) = &spec.dirs
            && let Err(e) = remove_record(&dirs.start_record)
        {
            tracing::warn!(alloc = %spec.alloc_id, task = %spec.task, error = %e, "cannot forget the task's run");
        }
    }
}

/// Removes a task record; one that isn't there is fine.
fn remove_record(path: &Path) -> Result<(), String> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("remove {}: {e}", path.display())),
    }
}

impl RawExecHandle {
    fn exited(&self) -> Option<ExitResult> {
        self.exit.borrow().clone()
    }

    /// Whether signals still reach our task and not a process that reused its
    /// pid (the supervisor, not us, reaps it).
    fn still_ours(&self) -> bool {
        (!self.recovered && self.supervisor.is_none()) || alive(self.pid, self.start_ticks)
    }
}

#[async_trait::async_trait]
impl TaskHandle for RawExecHandle {
    fn state(&self) -> HandleState {
        HandleState::RawExec {
            pid: self.pid,
            start_ticks: self.start_ticks,
            started_at_unix_ns: self.started_at_unix_ns,
            supervisor: self.supervisor.clone(),
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
    use std::os::unix::fs::PermissionsExt;
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
            logs: Default::default(),
            user: String::new(),
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
        let h = driver().start(s).await.unwrap();
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
        let h = driver().start(s).await.unwrap();
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
        let s = spec(dir.path(), "exec sleep 30");
        let h = driver().start(s).await.unwrap();
        let r = stop_once_sleeping(h.as_ref(), Signal::SIGINT).await;
        assert_eq!(r.signal, Signal::SIGINT as i32);
    }

    #[tokio::test]
    async fn a_task_gets_default_signal_actions_whatever_the_client_ignores() {
        let dir = tempfile::tempdir().unwrap();
        // The supervisor started with SIGHUP, SIGINT, SIGQUIT and SIGTERM
        // ignored, as by `nohup` from a shell's background job: ignored
        // signals survive exec, and the task could not be stopped with them.
        let wrapper = dir.path().join("ignoring-supervisor");
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\ntrap '' HUP INT QUIT TERM\nexec {} \"$@\"\n",
                driver().supervisor.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
        let (h, out) = output_until_checked(
            &RawExecDriver::new(wrapper),
            dir.path(),
            "grep -E '^SigIgn' /proc/self/status; echo checked; exec sleep 30",
        )
        .await;
        let ignored = out
            .strip_prefix("SigIgn:\t")
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())
            .unwrap_or_else(|| panic!("no SigIgn line in {out:?}"));
        for signal in [
            Signal::SIGHUP,
            Signal::SIGINT,
            Signal::SIGQUIT,
            Signal::SIGTERM,
        ] {
            assert_eq!(
                ignored & (1 << (signal as u64 - 1)),
                0,
                "the task ignores {signal}: {out:?}"
            );
        }
        let r = stop_once_sleeping(h.as_ref(), Signal::SIGINT).await;
        assert_eq!(r.signal, Signal::SIGINT as i32, "{r:?}");
    }

    #[tokio::test]
    async fn a_task_gets_the_hosts_huge_pages_whatever_the_client_turned_off() {
        let thp = |status: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("THP_enabled:\t"))
                .map(str::to_owned)
        };
        let host = thp(&std::fs::read_to_string("/proc/self/status").unwrap());
        if host.as_deref() != Some("1") {
            // A kernel without transparent huge pages: nothing to give back.
            return;
        }
        // As a client-node process runs: huge pages off, inherited by
        // whatever it starts.
        caravan_runtime::huge_pages::disable();
        let dir = tempfile::tempdir().unwrap();
        let (h, out) = output_until_checked(
            &driver(),
            dir.path(),
            "grep -E '^THP_enabled' /proc/self/status; echo checked; exec sleep 30",
        )
        .await;
        caravan_runtime::huge_pages::restore_for_children();
        assert_eq!(thp(&out).as_deref(), Some("1"), "{out:?}");
        let r = stop_once_sleeping(h.as_ref(), Signal::SIGTERM).await;
        assert_eq!(r.signal, Signal::SIGTERM as i32, "{r:?}");
    }

    #[tokio::test]
    async fn recover_finds_the_live_process_and_not_a_dead_one() {
        let dir = tempfile::tempdir().unwrap();
        let s = spec(dir.path(), "exec sleep 30");
        let h = driver().start(s).await.unwrap();
        let state = h.state();
        let HandleState::RawExec {
            pid,
            start_ticks,
            supervisor: Some(sup),
            ..
        } = state.clone()
        else {
            panic!("{state:?}")
        };
        assert_eq!(proc_stat(pid).unwrap().start_ticks, start_ticks);
        let again = driver().recover(&state).expect("live process");
        let wrong = HandleState::RawExec {
            pid,
            start_ticks: start_ticks + 1,
            started_at_unix_ns: 0,
            supervisor: Some(SupervisorState {
                start_ticks: sup.start_ticks + 1,
                ..sup.clone()
            }),
        };
        assert!(
            driver().recover(&wrong).is_none(),
            "pid reuse is not our task"
        );
        let r = again.stop(Signal::SIGTERM, Duration::from_secs(5)).await;
        assert_eq!(r.signal, Signal::SIGTERM as i32, "{r:?}");
        assert_eq!(h.wait().await.signal, Signal::SIGTERM as i32);
        // Gone, but its exit is on record.
        let late = driver().recover(&state).expect("recorded exit");
        assert_eq!(late.wait().await.signal, Signal::SIGTERM as i32);
        std::fs::remove_file(&sup.exit_record).unwrap();
        assert!(driver().recover(&state).is_none(), "no record: lost");
    }

    #[tokio::test]
    async fn the_exit_code_survives_the_client() {
        let dir = tempfile::tempdir().unwrap();
        let s = spec(dir.path(), "echo ready; sleep 0.3; exit 3");
        let dirs = s.dirs.clone().unwrap();
        let h = driver().start(s).await.unwrap();
        let state = h.state();
        let HandleState::RawExec {
            supervisor: Some(sup),
            ..
        } = state.clone()
        else {
            panic!("{state:?}")
        };
        // A client that re-attaches while the task runs learns its exit code.
        let again = driver().recover(&state).expect("live supervisor");
        assert_eq!(again.wait().await.exit_code, 3);
        assert_eq!(h.wait().await.exit_code, 3);
        wait_for_file(&dirs.stdout, "ready").await;
        let rec = read_exit(&sup.exit_record).unwrap();
        assert_eq!(rec.exit.exit_code, 3);
        assert!(rec.finished_at_unix_ns > 0);
    }

    #[tokio::test]
    async fn a_run_the_client_never_recorded_is_adopted_once() {
        let dir = tempfile::tempdir().unwrap();
        let ran = dir.path().join("ran");
        let s = spec(
            dir.path(),
            &format!("echo run >> {}; sleep 0.3; exit 4", ran.display()),
        );
        // The client dies right after the start: the handle is never persisted.
        let first = driver().start(s.clone()).await.unwrap();
        let HandleState::RawExec { pid, .. } = first.state() else {
            panic!("{:?}", first.state())
        };
        drop(first);
        let adopted = driver().adopt(&s).expect("the run is on record");
        let HandleState::RawExec { pid: same, .. } = adopted.state() else {
            panic!("{:?}", adopted.state())
        };
        assert_eq!(same, pid);
        assert_eq!(adopted.wait().await.exit_code, 4);
        // Its end is on record until the client has taken it into account.
        let late = driver().adopt(&s).expect("still on record");
        assert_eq!(late.wait().await.exit_code, 4);
        driver().release(&s);
        assert!(
            driver().adopt(&s).is_none(),
            "released runs are not adopted"
        );
        assert_eq!(std::fs::read_to_string(&ran).unwrap().lines().count(), 1);
    }

    /// A client killed right after it started a supervisor, before the run
    /// was recorded, starts again and finds no run on record: the start it
    /// makes then must not run the task a second time beside the first
    /// supervisor, still on its way.
    #[tokio::test]
    async fn a_start_racing_an_earlier_clients_supervisor_runs_the_task_once() {
        for round in 0..5 {
            let dir = tempfile::tempdir().unwrap();
            let ran = dir.path().join("ran");
            let s = spec(
                dir.path(),
                &format!("echo run >> {}; sleep 0.3", ran.display()),
            );
            // The client dies once its supervisor is spawned, before the
            // handshake: the start is dropped at its first wait.
            let died = tokio::time::timeout(Duration::ZERO, driver().start(s.clone())).await;
            assert!(died.is_err(), "the start was cut short");
            // The next client, as its task runner does: adopt, else start.
            let h = match driver().adopt(&s) {
                Some(h) => h,
                None => driver().start(s.clone()).await.unwrap(),
            };
            assert_eq!(h.wait().await.exit_code, 0);
            let runs = std::fs::read_to_string(&ran).unwrap_or_default();
            assert_eq!(runs.lines().count(), 1, "round {round}: {runs:?}");
        }
    }

    #[tokio::test]
    async fn a_run_whose_supervisor_died_unrecorded_ends_unknown_and_is_not_rerun() {
        let dir = tempfile::tempdir().unwrap();
        let s = spec(dir.path(), "exec sleep 30");
        let h = driver().start(s.clone()).await.unwrap();
        let HandleState::RawExec {
            pid,
            start_ticks,
            supervisor: Some(sup),
            ..
        } = h.state()
        else {
            panic!("{:?}", h.state())
        };
        nix::sys::signal::kill(Pid::from_raw(sup.pid), Signal::SIGKILL).unwrap();
        let r = h.wait().await;
        assert!(r.err.is_some(), "{r:?}");
        let adopted = driver().adopt(&s).expect("the run is on record");
        let r = adopted.wait().await;
        assert!(
            r.err
                .as_deref()
                .is_some_and(|e| e.contains("without recording")),
            "{r:?}"
        );
        // Nobody waits for the task any more: it is ended.
        for _ in 0..200 {
            if !alive(pid, start_ticks) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("the task of a run that ended unknown still runs");
    }

    #[tokio::test]
    async fn missing_command_is_fatal_and_missing_binary_recoverable() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = spec(dir.path(), "true");
        s.config = TaskConfig::default();
        let e = driver().start(s).await.unwrap_err();
        assert!(!e.recoverable);
        assert!(e.message.contains("config.command"));
        let mut s = spec(dir.path(), "true");
        s.config = TaskConfig::from_pairs([("command", string_value("/nonexistent/bin"))]);
        let e = driver().start(s).await.unwrap_err();
        assert!(e.recoverable, "{e}");
    }

    /// The client-node binary, built next to the test binary's `deps/`.
    fn driver() -> RawExecDriver {
        let exe = std::env::current_exe().unwrap();
        let bin = exe
            .parent()
            .and_then(|deps| deps.parent())
            .unwrap()
            .join("caravan-client-node");
        assert!(
            bin.exists(),
            "{} is missing: build the binaries first (cargo build --bins)",
            bin.display()
        );
        RawExecDriver::new(bin)
    }

    /// Starts `script` in `dir` with `driver` and returns its handle and its
    /// output once it has printed `checked`.
    async fn output_until_checked(
        driver: &RawExecDriver,
        dir: &std::path::Path,
        script: &str,
    ) -> (Arc<dyn TaskHandle>, String) {
        let s = spec(dir, script);
        let dirs = s.dirs.clone().unwrap();
        let h = driver.start(s).await.unwrap();
        wait_for_file(&dirs.stdout, "checked").await;
        (h, std::fs::read_to_string(&dirs.stdout).unwrap())
    }

    /// Stops a task running `exec sleep …` with `signal` once it is `sleep`
    /// itself, so the signal reaches the program the test means rather than
    /// the shell before its exec.
    async fn stop_once_sleeping(h: &dyn TaskHandle, signal: Signal) -> ExitResult {
        let HandleState::RawExec { pid, .. } = h.state() else {
            panic!("{:?}", h.state())
        };
        wait_for_file(
            &std::path::PathBuf::from(format!("/proc/{pid}/comm")),
            "sleep",
        )
        .await;
        h.stop(signal, Duration::from_secs(5)).await
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

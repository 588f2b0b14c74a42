//! The task supervisor: a small process between the client and a `raw_exec`
//! task (Nomad's executor). It starts the task in its own process group,
//! writes the task's output to its rotated log files, waits for it and
//! records how it ended in a file, so the exit status survives a client that
//! died or restarted meanwhile.
//!
//! It is the client-node binary run as `caravan-client-node task-supervisor
//! STATUS_FILE START_FILE LAUNCH LOG_DIR TASK MAX_FILES MAX_FILE_BYTES on|off
//! CREDENTIALS COMMAND [ARG…]`, with the task's environment (and nothing of
//! the client's) and working directory. CREDENTIALS is `-`, or the
//! `uid:gid:groups` the task runs with (see [`super::task_user`]). Once the task
//! runs it records so in START_FILE (synced), and only then says
//! `pid <task pid>` as its first line on stdout (or `error <why>`); it then
//! lets go of stdout. A client killed between the start and persisting the
//! task's handle finds the run in START_FILE and adopts it instead of starting
//! the task a second time.
//!
//! A client killed before its supervisor recorded the start finds no run,
//! and starts another supervisor while the first may still be on its way.
//! So a supervisor claims the run under a lock of the task's first: it runs
//! the task only if the client's launch record (written before each start)
//! still names LAUNCH, its own, and no run is on record yet. A supervisor of
//! a later launch that finds the run of an earlier one recorded says
//! `recorded`, and the client adopts that run instead.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, mpsc};
use std::time::Duration;

use caravan_model::now_unix_ns;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use super::ExitResult;
use super::task_user::{Credentials, ExecReport, TASK_EXEC_ARG};
use crate::log_rotate::{LogLimits, RotatingLog};

/// The argument that runs the binary as a task supervisor.
pub const SUPERVISOR_ARG: &str = "task-supervisor";

/// CREDENTIALS of a task that runs as the supervisor's user.
const NO_CREDENTIALS: &str = "-";

/// This very binary, even when its file was replaced by an upgrade since.
const SELF_EXE: &str = "/proc/self/exe";

/// What a supervisor says when a run of the task is already on record.
pub const RECORDED: &str = "recorded";

/// How long output still buffered in the pipes may take to reach the logs
/// after the task ended (a descendant that left the group may hold them open).
const LOG_DRAIN: Duration = Duration::from_secs(2);

/// What the supervisor records when the task ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedExit {
    /// How the task ended.
    pub exit: ExitResult,
    /// When it ended.
    pub finished_at_unix_ns: i64,
}

/// What the supervisor records once the task runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedStart {
    /// The supervisor's pid.
    pub supervisor_pid: i32,
    /// The supervisor's start time in clock ticks since boot.
    pub supervisor_ticks: u64,
    /// The task's pid (its process group).
    pub pid: i32,
    /// The task's start time in clock ticks since boot.
    pub start_ticks: u64,
    /// When it started.
    pub started_at_unix_ns: i64,
}

/// Where the client names the launch it made last, beside START_FILE.
pub fn launch_record(start_file: &Path) -> PathBuf {
    beside(start_file, "launch")
}

/// The lock a supervisor holds from claiming the run to recording it.
fn run_lock(start_file: &Path) -> PathBuf {
    beside(start_file, "lock")
}

/// `<file>.<suffix>` in the same directory.
fn beside(file: &Path, suffix: &str) -> PathBuf {
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(".");
    name.push(suffix);
    file.with_file_name(name)
}

/// Names `launch` as the client's latest launch of the task whose runs are
/// recorded in `start_file`: any supervisor of an earlier launch still on
/// its way will not run the task.
pub fn write_launch(start_file: &Path, launch: &str) -> std::io::Result<()> {
    let path = launch_record(start_file);
    let tmp = beside(&path, "tmp");
    std::fs::write(&tmp, launch)?;
    std::fs::rename(&tmp, &path)
}

/// How a supervisor's claim of the run came out.
enum Claim {
    /// The run is this supervisor's: the lock is held until it is recorded.
    Mine(std::fs::File),
    /// A run of the task is on record already: the client adopts it.
    Recorded,
    /// The client launched the task again since: this supervisor is stale.
    Superseded,
}

/// Claims the task's run for `args.launch`, under the task's run lock.
fn claim(args: &SupervisorArgs) -> std::io::Result<Claim> {
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(run_lock(&args.start_file))?;
    lock.lock()?;
    let latest = match std::fs::read_to_string(launch_record(&args.start_file)) {
        Ok(latest) => latest,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e),
    };
    if latest.trim() != args.launch {
        return Ok(Claim::Superseded);
    }
    if args.start_file.exists() {
        return Ok(Claim::Recorded);
    }
    // No run on record: an exit record left is an earlier run's, which the
    // client has taken into account; it must not stand for this run.
    match std::fs::remove_file(&args.status_file) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    Ok(Claim::Mine(lock))
}

/// Reads a recorded exit; `None` when there is none (yet).
pub fn read_exit(path: &Path) -> Option<RecordedExit> {
    read_record(path)
}

/// Reads a recorded start; `None` when there is none.
pub fn read_start(path: &Path) -> Option<RecordedStart> {
    read_record(path)
}

fn read_record<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
    let bytes = std::fs::read(path).ok()?;
    match serde_json::from_slice(&bytes) {
        Ok(r) => Some(r),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "unreadable task record");
            None
        }
    }
}

/// How a std exit status reads as a task exit.
pub fn exit_of(status: std::process::ExitStatus) -> ExitResult {
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

/// The supervisor's command line after [`SUPERVISOR_ARG`].
#[derive(Debug, Clone, PartialEq)]
pub struct SupervisorArgs {
    /// Where the exit is recorded.
    pub status_file: PathBuf,
    /// Where the start is recorded.
    pub start_file: PathBuf,
    /// This launch's name, as the client wrote it to the launch record.
    pub launch: String,
    /// `alloc/logs`.
    pub log_dir: PathBuf,
    /// The task's name (log file prefix).
    pub task: String,
    /// Log rotation.
    pub limits: LogLimits,
    /// `uid:gid:groups` to run the task with; `None` keeps the supervisor's.
    pub credentials: Option<String>,
    /// What to run.
    pub command: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
}

impl SupervisorArgs {
    /// The arguments that make a supervisor of these (after the binary's path).
    pub fn to_args(&self) -> Vec<OsString> {
        let mut out: Vec<OsString> = vec![
            SUPERVISOR_ARG.into(),
            self.status_file.clone().into(),
            self.start_file.clone().into(),
            self.launch.clone().into(),
            self.log_dir.clone().into(),
            self.task.clone().into(),
            self.limits.max_files.to_string().into(),
            self.limits.max_file_bytes.to_string().into(),
            if self.limits.disabled { "off" } else { "on" }.into(),
            self.credentials.as_deref().unwrap_or(NO_CREDENTIALS).into(),
            self.command.clone(),
        ];
        out.extend(self.args.iter().cloned());
        out
    }

    /// Parses what [`to_args`](Self::to_args) wrote (without the leading argument).
    pub fn parse(argv: &[OsString]) -> Result<SupervisorArgs, String> {
        let [
            status,
            start,
            launch,
            log_dir,
            task,
            max_files,
            max_bytes,
            logs,
            credentials,
            command,
            args @ ..,
        ] = argv
        else {
            return Err(
                "usage: task-supervisor STATUS_FILE START_FILE LAUNCH LOG_DIR TASK MAX_FILES MAX_FILE_BYTES on|off CREDENTIALS COMMAND [ARG...]"
                    .into(),
            );
        };
        let credentials = match credentials.to_str() {
            Some(NO_CREDENTIALS) => None,
            Some(c) => {
                Credentials::parse(c)?;
                Some(c.to_string())
            }
            None => return Err(format!("credentials: not UTF-8: {credentials:?}")),
        };
        let disabled = match logs.to_str() {
            Some("on") => false,
            Some("off") => true,
            _ => return Err(format!("logs: expected on or off, got {logs:?}")),
        };
        let number = |name: &str, v: &OsString| {
            v.to_str()
                .and_then(|s| s.parse::<u64>().ok())
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("{name}: expected a positive number, got {v:?}"))
        };
        Ok(SupervisorArgs {
            status_file: status.into(),
            start_file: start.into(),
            launch: launch
                .to_str()
                .filter(|l| !l.is_empty())
                .ok_or_else(|| format!("launch: expected a name, got {launch:?}"))?
                .to_string(),
            log_dir: log_dir.into(),
            task: task
                .to_str()
                .ok_or_else(|| format!("task: not UTF-8: {task:?}"))?
                .to_string(),
            limits: LogLimits {
                max_files: u32::try_from(number("max_files", max_files)?)
                    .map_err(|_| "max_files: too large".to_string())?,
                max_file_bytes: number("max_file_bytes", max_bytes)?,
                disabled,
            },
            credentials,
            command: command.clone(),
            args: args.to_vec(),
        })
    }
}

/// Signals a task is stopped with, or that whoever started the client may
/// have left ignored (a background job of a non-interactive shell ignores
/// SIGINT and SIGQUIT, `nohup` SIGHUP).
const TASK_SIGNALS: [i32; 6] = [
    signal_hook::consts::SIGHUP,
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGQUIT,
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGUSR1,
    signal_hook::consts::SIGUSR2,
];

/// Gives the task the default action of every signal it may be stopped
/// with, whatever the client inherited: an ignored signal stays ignored
/// across exec, so a task could not be stopped by its `kill_signal`, while a
/// handled one is reset to the default. The supervisor handles each by
/// noting it; signals for the task go to the task's own process group.
fn default_signals_for_the_task() {
    let noted = Arc::new(AtomicBool::new(false));
    for signal in TASK_SIGNALS {
        if let Err(e) = signal_hook::flag::register(signal, Arc::clone(&noted)) {
            eprintln!("cannot reset signal {signal} for the task: {e}");
        }
    }
}

/// The variable naming the network namespace (a pinned nsfs file) the
/// supervisor enters before it starts the task; the task's environment
/// never holds it.
pub const NETNS_ENV: &str = "CARAVAN_TASK_NETNS";

/// Runs the supervisor; returns the process's exit code.
pub fn main(argv: &[OsString]) -> i32 {
    let args = match SupervisorArgs::parse(argv) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    // Entered by the thread that starts the task, before anything else: its
    // children are born in the alloc's network.
    if let Some(netns) = std::env::var_os(NETNS_ENV)
        && let Err(e) = crate::network::netns::enter(std::path::Path::new(&netns))
    {
        let _ = writeln!(
            std::io::stdout(),
            "error cannot enter the alloc's network namespace {}: {e}",
            std::path::Path::new(&netns).display()
        );
        return 1;
    }
    default_signals_for_the_task();
    // The client runs without transparent huge pages; the task gets the
    // host's policy.
    caravan_runtime::huge_pages::restore_for_children();
    let mut handshake = std::io::stdout();
    let run_lock = match claim(&args) {
        Ok(Claim::Mine(lock)) => lock,
        Ok(Claim::Recorded) => {
            let _ = writeln!(handshake, "{RECORDED}");
            return 0;
        }
        Ok(Claim::Superseded) => {
            let _ = writeln!(
                handshake,
                "error superseded: the task was launched again since"
            );
            return 1;
        }
        Err(e) => {
            let _ = writeln!(
                handshake,
                "error cannot claim the task's run beside {}: {e}",
                args.start_file.display()
            );
            return 1;
        }
    };
    let logs = if args.limits.disabled {
        None
    } else {
        let logs = ["stdout", "stderr"]
            .map(|s| RotatingLog::open(&args.log_dir, &args.task, s, args.limits));
        let [Ok(out_log), Ok(err_log)] = logs else {
            let why = logs
                .into_iter()
                .find_map(Result::err)
                .map(|e| e.to_string())
                .unwrap_or_default();
            let _ = writeln!(
                handshake,
                "error open log in {}: {why}",
                args.log_dir.display()
            );
            return 1;
        };
        Some((out_log, err_log))
    };
    let output = || {
        if logs.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        }
    };
    // The task inherits this process's environment: the client gave it the
    // task's, and nothing of its own.
    // Through the credential switch, a task that cannot be started is known
    // only from its report pipe: it fails as one started directly would.
    let mut report = None;
    let mut command = match &args.credentials {
        None => {
            let mut c = Command::new(&args.command);
            c.stdin(Stdio::null());
            c
        }
        Some(credentials) => {
            let (read, write) = match ExecReport::open() {
                Ok(pipe) => pipe,
                Err(e) => {
                    let _ = writeln!(handshake, "error failed to start {:?}: {e}", args.command);
                    return 1;
                }
            };
            let mut c = Command::new(SELF_EXE);
            c.arg(TASK_EXEC_ARG)
                .arg(credentials)
                .arg(&args.command)
                .stdin(Stdio::from(write));
            report = Some(read);
            c
        }
    };
    let spawned = command
        .env_remove(NETNS_ENV)
        .args(&args.args)
        .stdout(output())
        .stderr(output())
        // Its own group, so a stop reaches everything the task started.
        .process_group(0)
        .spawn();
    // The command holds this process's copy of the report's writing end.
    drop(command);
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(handshake, "error failed to start {:?}: {e}", args.command);
            return 1;
        }
    };
    if let Some(read) = report {
        // Only the switch holds the writing end now: the read ends when it
        // becomes the task (its copy closes on exec) or reports and exits.
        if let Some(e) = ExecReport::wait(read) {
            let _ = child.wait();
            let _ = writeln!(handshake, "error failed to start {:?}: {e}", args.command);
            return 1;
        }
    }
    let pid = child.id();
    if let Err(e) = record_start(&args.start_file, pid) {
        // Unrecorded, a run could be started twice: it doesn't run at all.
        if let Ok(pgid) = i32::try_from(pid) {
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
        let _ = child.wait();
        let _ = writeln!(
            handshake,
            "error cannot record the task's start in {}: {e}",
            args.start_file.display()
        );
        return 1;
    }
    // Recorded: a supervisor of a later launch finds the run and leaves it.
    drop(run_lock);
    let _ = writeln!(handshake, "pid {pid}");
    let _ = handshake.flush();
    // The client may go away; nothing more is said to it.
    release_stdout();

    let (drained_tx, drained_rx) = mpsc::channel();
    let mut copies = 0;
    if let Some((out_log, err_log)) = logs {
        if let Some(pipe) = child.stdout.take() {
            copy_to(pipe, out_log, drained_tx.clone());
            copies += 1;
        }
        if let Some(pipe) = child.stderr.take() {
            copy_to(pipe, err_log, drained_tx.clone());
            copies += 1;
        }
    }
    drop(drained_tx);

    let exit = match child.wait() {
        Ok(status) => exit_of(status),
        Err(e) => ExitResult {
            err: Some(format!("wait: {e}")),
            ..Default::default()
        },
    };
    // Whatever the task left behind in its group goes with it.
    if let Ok(pgid) = i32::try_from(pid) {
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    }
    // The last output reaches the logs before the exit is recorded.
    let deadline = std::time::Instant::now() + LOG_DRAIN;
    for _ in 0..copies {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if drained_rx.recv_timeout(left).is_err() {
            break;
        }
    }
    let record = RecordedExit {
        exit,
        finished_at_unix_ns: now_unix_ns(),
    };
    match write_record(&args.status_file, &record) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!(
                "cannot record the task's exit in {}: {e}",
                args.status_file.display()
            );
            1
        }
    }
}

/// Records that the task `pid` runs under this supervisor.
fn record_start(path: &Path, pid: u32) -> std::io::Result<()> {
    let ticks = |pid: i32| super::proc_stat(pid).map(|s| s.start_ticks).unwrap_or(0);
    let supervisor_pid = i32::try_from(std::process::id()).map_err(std::io::Error::other)?;
    let pid = i32::try_from(pid).map_err(std::io::Error::other)?;
    write_record(
        path,
        &RecordedStart {
            supervisor_pid,
            supervisor_ticks: ticks(supervisor_pid),
            pid,
            start_ticks: ticks(pid),
            started_at_unix_ns: now_unix_ns(),
        },
    )
}

/// Points stdout at /dev/null, so a client that died doesn't matter.
fn release_stdout() {
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        let _ = nix::unistd::dup2_stdout(&null);
    }
}

fn copy_to(mut pipe: impl Read + Send + 'static, mut log: RotatingLog, done: mpsc::Sender<()>) {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if let Err(e) = log.write_all(&buf[..n]) {
                        eprintln!("task log: {e}");
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = done.send(());
    });
}

/// Writes the record through a synced temporary file and a rename.
fn write_record(path: &Path, record: &impl Serialize) -> std::io::Result<()> {
    let bytes = serde_json::to_vec(record).map_err(std::io::Error::other)?;
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent()
        && let Ok(d) = std::fs::File::open(dir)
    {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_round_trip_and_bad_ones_are_named() {
        let a = SupervisorArgs {
            status_file: "/d/.web.exit".into(),
            start_file: "/d/.web.start".into(),
            launch: "l1".into(),
            log_dir: "/d/alloc/logs".into(),
            task: "web".into(),
            limits: LogLimits {
                max_files: 3,
                max_file_bytes: 1000,
                disabled: false,
            },
            credentials: None,
            command: "/bin/sh".into(),
            args: vec!["-c".into(), "exit 3".into()],
        };
        let argv = a.to_args();
        assert_eq!(argv[0], SUPERVISOR_ARG);
        assert_eq!(SupervisorArgs::parse(&argv[1..]).unwrap(), a);
        let as_user = SupervisorArgs {
            credentials: Some("65534:65534:65534".into()),
            ..a.clone()
        };
        assert_eq!(
            SupervisorArgs::parse(&as_user.to_args()[1..]).unwrap(),
            as_user
        );
        let mut forged = argv[1..].to_vec();
        forged[8] = "root".into();
        assert!(
            SupervisorArgs::parse(&forged)
                .unwrap_err()
                .contains("credentials")
        );
        let mut bad = argv[1..].to_vec();
        bad[5] = "0".into();
        assert!(
            SupervisorArgs::parse(&bad)
                .unwrap_err()
                .contains("max_files")
        );
        assert!(
            SupervisorArgs::parse(&argv[1..4])
                .unwrap_err()
                .contains("usage")
        );
    }
}

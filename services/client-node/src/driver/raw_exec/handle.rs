//! A `raw_exec` task's handle: it waits for the supervisor's record of the
//! task's exit, stops and signals the task's process (checking first that
//! its pid is still the task's), reads its process group's usage, and runs
//! `exec` commands as children with the task's environment, directory and
//! user.

use std::path::PathBuf;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use caravan_proto::TaskResourceUsage;
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, watch};

use super::{RawExecState, SupervisorState, alive, signal_group};
use crate::driver::exec::pump;
use crate::driver::task_user::{
    DEFAULT_PATH, KEEP_CREDENTIALS, TASK_EXEC_ARG, TASK_EXEC_STDIO, TASK_EXEC_TTY, TaskUser,
};
use crate::driver::{DriverError, ExecRequest, ExitResult, HandleState, TaskHandle, TtySize};

/// How long to wait for a process to go after SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(10);
/// How long an exec'd command's output may still take to arrive after it
/// exited (a child it left behind may hold the pipes).
const EXEC_DRAIN: Duration = Duration::from_secs(2);

/// What `exec` runs a command with.
#[derive(Debug)]
pub(super) struct ExecContext {
    /// The client-node binary, whose credential switch runs a command as
    /// another user.
    pub(super) switch: PathBuf,
    /// The task's environment.
    pub(super) env: Vec<(String, String)>,
    /// The task's working directory.
    pub(super) dir: PathBuf,
    /// The task's user, if it names one.
    pub(super) user: Option<TaskUser>,
    /// The alloc's network namespace the task runs in, if not the host's.
    pub(super) netns: Option<PathBuf>,
}

/// A process started (or re-attached) by `raw_exec`.
#[derive(Debug)]
pub struct RawExecHandle {
    pub(super) pid: i32,
    pub(super) start_ticks: u64,
    pub(super) started_at_unix_ns: i64,
    pub(super) supervisor: Option<SupervisorState>,
    pub(super) exit: watch::Receiver<Option<ExitResult>>,
    /// Not our child: its pid is checked again before every signal.
    pub(super) recovered: bool,
    /// What `exec` needs; `None` when the task's env or dirs are unknown.
    pub(super) exec: Option<Arc<ExecContext>>,
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

    /// Whether `pid` is the task's process, alive.
    fn running(&self) -> bool {
        self.exited().is_none()
            && crate::driver::proc_stat(self.pid).is_some_and(|s| {
                s.alive() && (self.start_ticks == 0 || s.start_ticks == self.start_ticks)
            })
    }
}

#[async_trait::async_trait]
impl TaskHandle for RawExecHandle {
    fn state(&self) -> HandleState {
        RawExecState {
            pid: self.pid,
            start_ticks: self.start_ticks,
            started_at_unix_ns: self.started_at_unix_ns,
            supervisor: self.supervisor.clone(),
        }
        .encode()
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

    /// The task's main process gets it, as Nomad's executor sends it.
    async fn signal(&self, signal: Signal) -> Result<(), DriverError> {
        if !self.running() {
            return Err(DriverError::fatal(format!("process {} is gone", self.pid)));
        }
        nix::sys::signal::kill(Pid::from_raw(self.pid), signal)
            .map_err(|e| DriverError::fatal(format!("kill {}: {e}", self.pid)))
    }

    async fn stats(&self, cpu_total_mhz: u64) -> Result<TaskResourceUsage, DriverError> {
        if !self.running() {
            return Ok(crate::stats::idle_task_usage());
        }
        Ok(crate::stats::process_group_usage(self.pid, cpu_total_mhz).await)
    }

    async fn exec(&self, request: ExecRequest) -> Result<i32, DriverError> {
        let Some(ctx) = self.exec.clone() else {
            return Err(DriverError::fatal(
                "the task's environment is unknown: cannot run a command in it",
            ));
        };
        run_in_task(&ctx, request).await
    }
}

/// Runs `request` as a child with the task's environment, directory and
/// user; its exit code (128 + the signal that ended it, as a shell says).
async fn run_in_task(ctx: &ExecContext, request: ExecRequest) -> Result<i32, DriverError> {
    let ExecRequest {
        command,
        tty,
        stdin,
        stdout,
        stderr,
        resize,
    } = request;
    let Some((program, args)) = command.split_first() else {
        return Err(DriverError::fatal("exec: a command is required"));
    };
    let switch = ctx.user.as_ref().filter(|u| u.switch);
    let mut cmd = match (switch, tty) {
        (Some(user), _) => {
            let mut c = tokio::process::Command::new(&ctx.switch);
            c.arg(TASK_EXEC_ARG).arg(TASK_EXEC_STDIO);
            if tty {
                c.arg(TASK_EXEC_TTY);
            }
            c.arg(user.credentials()).arg(program);
            c
        }
        // The switch gives the command its terminal as a controlling one.
        (None, true) => {
            let mut c = tokio::process::Command::new(&ctx.switch);
            c.arg(TASK_EXEC_ARG)
                .arg(TASK_EXEC_STDIO)
                .arg(TASK_EXEC_TTY)
                .arg(KEEP_CREDENTIALS)
                .arg(program);
            c
        }
        // In the alloc's network namespace: the switch enters it first.
        (None, false) if ctx.netns.is_some() => {
            let mut c = tokio::process::Command::new(&ctx.switch);
            c.arg(TASK_EXEC_ARG)
                .arg(TASK_EXEC_STDIO)
                .arg(KEEP_CREDENTIALS)
                .arg(program);
            c
        }
        (None, false) => tokio::process::Command::new(program),
    };
    cmd.args(args).env_clear().env("PATH", DEFAULT_PATH);
    if let Some(netns) = &ctx.netns {
        cmd.env(super::super::supervisor::NETNS_ENV, netns);
    }
    if let Some(user) = &ctx.user {
        cmd.env("HOME", &user.home).env("USER", &user.name);
    }
    cmd.envs(ctx.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&ctx.dir)
        .kill_on_drop(true);
    if tty {
        return run_on_terminal(cmd, program, stdin, stdout, resize).await;
    }
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| DriverError::fatal(format!("exec {program:?}: {e}")))?;
    if let (Some(mut input), Some(mut to)) = (stdin, child.stdin.take()) {
        tokio::spawn(async move {
            let _ = tokio::io::copy(&mut input, &mut to).await;
            // Dropping `to` closes the command's stdin: it sees the end.
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
    Ok(exit_code(status))
}

/// A command's exit code as a shell says it: 128 + the signal that ended it.
fn exit_code(status: std::process::ExitStatus) -> i32 {
    let exit = crate::driver::supervisor::exit_of(status);
    if exit.signal > 0 {
        128 + exit.signal
    } else {
        exit.exit_code
    }
}

/// Runs `cmd` on a new pseudo-terminal: its input, output and errors all go
/// through the terminal, which `resize` sizes.
async fn run_on_terminal(
    mut cmd: tokio::process::Command,
    program: &str,
    stdin: Option<Pin<Box<dyn AsyncRead + Send>>>,
    stdout: Pin<Box<dyn AsyncWrite + Send>>,
    resize: Option<mpsc::Receiver<TtySize>>,
) -> Result<i32, DriverError> {
    let fail = |e: std::io::Error| DriverError::fatal(format!("exec {program:?}: terminal: {e}"));
    let pty = nix::pty::openpty(None, None).map_err(|e| fail(e.into()))?;
    let slave = |pty: &nix::pty::OpenptyResult| pty.slave.try_clone().map(Stdio::from);
    cmd.stdin(slave(&pty).map_err(fail)?)
        .stdout(slave(&pty).map_err(fail)?)
        .stderr(slave(&pty).map_err(fail)?);
    let mut child = cmd
        .spawn()
        .map_err(|e| DriverError::fatal(format!("exec {program:?}: {e}")))?;
    // Ours closed, the command's end is the terminal's last: reading the
    // other side then ends.
    drop(pty.slave);
    let master = std::fs::File::from(pty.master);
    let writer = tokio::fs::File::from_std(master.try_clone().map_err(fail)?);
    let sizer = master.try_clone().map_err(fail)?;
    let reader = tokio::fs::File::from_std(master);
    let resizing = resize.map(|mut sizes| {
        tokio::spawn(async move {
            while let Some(size) = sizes.recv().await {
                let winsize = rustix::termios::Winsize {
                    ws_row: size.height,
                    ws_col: size.width,
                    ws_xpixel: 0,
                    ws_ypixel: 0,
                };
                if let Err(e) = rustix::termios::tcsetwinsize(&sizer, winsize) {
                    tracing::debug!(error = %e, "exec terminal resize refused");
                }
            }
        })
    });
    let feeding = stdin.map(|mut input| {
        tokio::spawn(async move {
            let mut to = writer;
            let _ = tokio::io::copy(&mut input, &mut to).await;
        })
    });
    // The terminal reports EIO once the command and its children are gone:
    // the end of its output, not a failure.
    let out = tokio::spawn(pump(TerminalOutput(reader), stdout));
    let status = child
        .wait()
        .await
        .map_err(|e| DriverError::fatal(format!("exec {program:?}: wait: {e}")))?;
    let _ = tokio::time::timeout(EXEC_DRAIN, out).await;
    for task in [feeding, resizing].into_iter().flatten() {
        task.abort();
    }
    Ok(exit_code(status))
}

/// A terminal's master side read as a stream that ends (instead of failing
/// with EIO) when the last process on the terminal has closed it.
struct TerminalOutput(tokio::fs::File);

impl AsyncRead for TerminalOutput {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match Pin::new(&mut self.0).poll_read(cx, buf) {
            std::task::Poll::Ready(Err(e)) if e.raw_os_error() == Some(nix::libc::EIO) => {
                std::task::Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

//! A docker task's handle: a container, waited for by a task that survives
//! the daemon going away (it waits again once the daemon answers, and only
//! the daemon's word that the container stopped or is gone ends the run),
//! records the exit code and an OOM kill, and copies the container's
//! output to the task's logs. Stop, signal, usage and exec go to the
//! daemon.

use std::sync::Arc;
use std::time::Duration;

use bollard::Docker;
use bollard::errors::Error;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::query_parameters::{KillContainerOptions, StatsOptions, WaitContainerOptions};
use caravan_proto::TaskResourceUsage;
use futures::StreamExt;
use nix::sys::signal::Signal;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::daemon::{Daemon, answered, message, not_found};
use super::logs::{self, LogTarget};
use super::{NAME, stats};
use crate::driver::{DriverError, ExecRequest, ExitResult, HandleState, TaskHandle};

/// The format of the handle state: [`DockerState`] as JSON.
pub const STATE_VERSION: u32 = 1;
/// How long the last output may take to reach the logs after the exit.
const LOG_DRAIN: Duration = Duration::from_secs(2);
/// How long to wait for a container to go after SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(10);
/// Between attempts to reach a daemon that went away.
const RETRY: Duration = Duration::from_millis(500);

/// What a docker handle persists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DockerState {
    /// The container's id.
    pub container_id: String,
    /// Its image, as the task named it.
    pub image: String,
    /// When it started.
    pub started_at_unix_ns: i64,
}

impl DockerState {
    /// The opaque state the client persists.
    pub fn encode(&self) -> HandleState {
        // Strings and a number always serialize.
        HandleState::new(
            NAME,
            STATE_VERSION,
            serde_json::to_vec(self).unwrap_or_default(),
        )
    }

    /// Reads a state this driver wrote.
    pub fn decode(state: &HandleState) -> Option<DockerState> {
        (state.driver() == NAME && state.version() == STATE_VERSION)
            .then(|| serde_json::from_slice(state.bytes()).ok())
            .flatten()
    }
}

/// A container started (or found again) by the docker driver.
#[derive(Debug)]
pub struct DockerHandle {
    daemon: Arc<Daemon>,
    state: DockerState,
    exit: watch::Receiver<Option<ExitResult>>,
    /// The container's address on its docker network (none on the host's).
    ip: Option<String>,
    /// Ends the waiter and the log copy if the handle goes before the run.
    _tasks: DropGuard,
}

impl DockerHandle {
    /// Watches the container `state` names: waits for it and copies its
    /// output to `logs` (none when the task keeps no logs).
    pub fn watch(daemon: Arc<Daemon>, state: DockerState, logs: Option<LogTarget>) -> DockerHandle {
        let (tx, rx) = watch::channel(None);
        let cancel = CancellationToken::new();
        tokio::spawn(wait_for_exit(
            Arc::clone(&daemon),
            state.container_id.clone(),
            logs,
            tx,
            cancel.clone(),
        ));
        DockerHandle {
            daemon,
            state,
            exit: rx,
            ip: None,
            _tasks: cancel.drop_guard(),
        }
    }

    /// [`Self::watch`], with the container's network address looked up
    /// once (it keeps it for its life).
    pub async fn open(
        daemon: Arc<Daemon>,
        state: DockerState,
        logs: Option<LogTarget>,
    ) -> DockerHandle {
        let mut handle = DockerHandle::watch(daemon, state, logs);
        if let Ok(docker) = handle.daemon.client().await
            && let Ok(found) = docker
                .inspect_container(&handle.state.container_id, None)
                .await
        {
            handle.ip = found
                .network_settings
                .and_then(|n| n.networks)
                .and_then(|nets| {
                    nets.into_values()
                        .filter_map(|e| e.ip_address)
                        .find(|ip| !ip.is_empty())
                });
        }
        handle
    }

    fn exited(&self) -> Option<ExitResult> {
        self.exit.borrow().clone()
    }

    async fn docker(&self) -> Result<Docker, DriverError> {
        self.daemon.client().await.map_err(|e| {
            DriverError::recoverable(format!("the docker daemon does not answer: {e}"))
        })
    }

    /// Sends `signal`; a container that is not running any more is fine.
    async fn kill(&self, signal: Signal) -> Result<(), DriverError> {
        let docker = self.docker().await?;
        let options = KillContainerOptions {
            signal: signal.as_str().to_string(),
        };
        match docker
            .kill_container(&self.state.container_id, Some(options))
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if answered(&e) && self.exited().is_some() => Ok(()),
            Err(e) => Err(DriverError::fatal(format!(
                "signal container {}: {}",
                short(&self.state.container_id),
                message(&e)
            ))),
        }
    }
}

/// The first 12 characters of an id, as Docker shows them.
pub fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// Waits for the container to stop and records how it ended; the daemon
/// going away meanwhile is waited out.
async fn wait_for_exit(
    daemon: Arc<Daemon>,
    id: String,
    logs: Option<LogTarget>,
    tx: watch::Sender<Option<ExitResult>>,
    cancel: CancellationToken,
) {
    let log_stop = cancel.child_token();
    let mut copy = None;
    let exit = loop {
        let docker = match daemon.client().await {
            Ok(d) => d,
            Err(_) => {
                tokio::select! {
                    _ = tokio::time::sleep(RETRY) => continue,
                    _ = cancel.cancelled() => return,
                }
            }
        };
        if copy.is_none()
            && let Some(target) = logs.clone()
        {
            copy = Some(tokio::spawn(logs::follow(
                docker.clone(),
                id.clone(),
                target,
                log_stop.clone(),
            )));
        }
        let options = WaitContainerOptions {
            condition: "not-running".to_string(),
        };
        let mut waited = docker.wait_container(&id, Some(options));
        let next = tokio::select! {
            n = waited.next() => n,
            _ = cancel.cancelled() => return,
        };
        let code = match next {
            Some(Ok(r)) => r.status_code,
            Some(Err(Error::DockerContainerWaitError { code, .. })) => code,
            Some(Err(e)) if not_found(&e) => {
                break ExitResult {
                    err: Some(format!("container {} is gone", short(&id))),
                    ..Default::default()
                };
            }
            // The daemon went away: wait for it to come back.
            Some(Err(_)) | None => {
                tokio::select! {
                    _ = tokio::time::sleep(RETRY) => continue,
                    _ = cancel.cancelled() => return,
                }
            }
        };
        break ended(&docker, &id, code).await;
    };
    if let Some(copy) = copy
        && tokio::time::timeout(LOG_DRAIN, copy).await.is_err()
    {
        log_stop.cancel();
    }
    let _ = tx.send(Some(exit));
}

/// How the stopped container `id` ended: its exit code, and whether the
/// kernel's OOM killer ended it (Nomad's `OOM Killed`).
async fn ended(docker: &Docker, id: &str, code: i64) -> ExitResult {
    let state = docker
        .inspect_container(id, None)
        .await
        .ok()
        .and_then(|c| c.state);
    let oom = state.as_ref().and_then(|s| s.oom_killed) == Some(true);
    let code = state.as_ref().and_then(|s| s.exit_code).unwrap_or(code);
    ExitResult {
        exit_code: i32::try_from(code).unwrap_or(i32::MAX),
        signal: 0,
        err: oom.then(|| "OOM Killed".to_string()),
        oom_killed: oom,
    }
}

#[async_trait::async_trait]
impl TaskHandle for DockerHandle {
    fn state(&self) -> HandleState {
        self.state.encode()
    }

    fn driver_ip(&self) -> Option<String> {
        self.ip.clone()
    }

    async fn wait(&self) -> ExitResult {
        let mut rx = self.exit.clone();
        match rx.wait_for(Option::is_some).await {
            Ok(v) => v.clone().unwrap_or_default(),
            Err(_) => ExitResult {
                err: Some("lost track of the container".into()),
                ..Default::default()
            },
        }
    }

    async fn stop(&self, signal: Signal, timeout: Duration) -> ExitResult {
        if let Some(done) = self.exited() {
            return done;
        }
        if let Err(e) = self.kill(signal).await {
            tracing::warn!(container = %short(&self.state.container_id), error = %e, "cannot send the kill signal");
        }
        if let Ok(r) = tokio::time::timeout(timeout, self.wait()).await {
            return r;
        }
        if let Err(e) = self.kill(Signal::SIGKILL).await {
            tracing::warn!(container = %short(&self.state.container_id), error = %e, "cannot kill the container");
        }
        match tokio::time::timeout(KILL_GRACE, self.wait()).await {
            Ok(r) => r,
            Err(_) => ExitResult {
                signal: Signal::SIGKILL as i32,
                err: Some("the container did not stop after SIGKILL".into()),
                ..Default::default()
            },
        }
    }

    async fn signal(&self, signal: Signal) -> Result<(), DriverError> {
        if self.exited().is_some() {
            return Err(DriverError::fatal(format!(
                "container {} is not running",
                short(&self.state.container_id)
            )));
        }
        self.kill(signal).await
    }

    async fn stats(&self, cpu_total_mhz: u64) -> Result<TaskResourceUsage, DriverError> {
        if self.exited().is_some() {
            return Ok(crate::stats::idle_task_usage());
        }
        let docker = self.docker().await?;
        let options = StatsOptions {
            stream: false,
            one_shot: false,
        };
        let mut sampled = docker.stats(&self.state.container_id, Some(options));
        match sampled.next().await {
            Some(Ok(s)) => Ok(stats::task_usage(&s, cpu_total_mhz)),
            Some(Err(e)) => Err(DriverError::recoverable(format!(
                "container stats: {}",
                message(&e)
            ))),
            None => Err(DriverError::recoverable("container stats: no answer")),
        }
    }

    async fn exec(&self, request: ExecRequest) -> Result<i32, DriverError> {
        let docker = self.docker().await?;
        let ExecRequest {
            command,
            tty,
            stdin,
            mut stdout,
            mut stderr,
            resize,
        } = request;
        if command.is_empty() {
            return Err(DriverError::fatal("exec: a command is required"));
        }
        let created = docker
            .create_exec(
                &self.state.container_id,
                CreateExecOptions::<String> {
                    cmd: Some(command.clone()),
                    attach_stdin: Some(stdin.is_some()),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    tty: Some(tty),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| DriverError::fatal(format!("exec {:?}: {}", command[0], message(&e))))?;
        let started = docker
            .start_exec(
                &created.id,
                Some(StartExecOptions {
                    detach: false,
                    tty,
                    output_capacity: None,
                }),
            )
            .await
            .map_err(|e| DriverError::fatal(format!("exec {:?}: {}", command[0], message(&e))))?;
        let StartExecResults::Attached {
            mut output,
            mut input,
        } = started
        else {
            return Err(DriverError::fatal("exec: the daemon did not attach"));
        };
        // The daemon sizes an exec's terminal only once it has started.
        let resizing = resize.map(|mut sizes| {
            let (docker, exec_id) = (docker.clone(), created.id.clone());
            tokio::spawn(async move {
                while let Some(size) = sizes.recv().await {
                    let options = bollard::query_parameters::ResizeExecOptionsBuilder::default()
                        .h(i32::from(size.height))
                        .w(i32::from(size.width))
                        .build();
                    if let Err(e) = docker.resize_exec(&exec_id, options).await {
                        tracing::debug!(error = %e, "exec terminal resize refused");
                    }
                }
            })
        });
        let feeding = stdin.map(|mut from| {
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut from, &mut input).await;
                // Closing the write side is the command's end of input.
                // A terminal's daemon ends the whole session on it, output
                // and all: there the input just stops, as a terminal's does.
                if !tty {
                    let _ = input.shutdown().await;
                }
            })
        });
        while let Some(frame) = output.next().await {
            let frame = match frame {
                Ok(f) => f,
                Err(e) => {
                    tracing::debug!(error = %e, "exec output broke");
                    break;
                }
            };
            let written = match frame {
                bollard::container::LogOutput::StdErr { message } => {
                    stderr.write_all(&message).await
                }
                bollard::container::LogOutput::StdOut { message }
                | bollard::container::LogOutput::Console { message } => {
                    stdout.write_all(&message).await
                }
                bollard::container::LogOutput::StdIn { .. } => Ok(()),
            };
            if written.is_err() {
                break;
            }
        }
        for task in [feeding, resizing].into_iter().flatten() {
            task.abort();
        }
        let _ = stdout.shutdown().await;
        let _ = stderr.shutdown().await;
        // The daemon records the exit code a moment after the output ends.
        for _ in 0..50 {
            let inspected = docker
                .inspect_exec(&created.id)
                .await
                .map_err(|e| DriverError::recoverable(format!("exec: {}", message(&e))))?;
            if inspected.running != Some(true) {
                return Ok(inspected
                    .exit_code
                    .and_then(|c| i32::try_from(c).ok())
                    .unwrap_or(-1));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err(DriverError::recoverable(
            "exec: the command's exit code never came",
        ))
    }
}

//! `alloc exec` on the node: one stream per command. The caller's first
//! message says what to run and in which task; the node checks the task
//! runs and its driver can exec (and, for a driver without file system
//! isolation, that the caller may run commands on the node itself), then
//! relays stdin and terminal sizes to the driver's exec and its output back,
//! and ends with the command's exit code.

use std::sync::Arc;

use caravan_proto::exec_input::Input;
use caravan_proto::exec_output::Output;
use caravan_proto::{ExecInput, ExecOutput, ExecSetup};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

use crate::driver::{ExecRequest, FsIsolation, TaskHandle, TtySize};
use crate::live_allocs::LiveAllocs;

/// How much of a command's input or output is buffered between the stream
/// and the driver.
const PIPE_BYTES: usize = 64 * 1024;

/// The answers of one exec stream.
pub type ExecStream = ReceiverStream<Result<ExecOutput, Status>>;

/// Checks the setup message against the alloc's tasks; the handle of the
/// task to run the command in.
async fn task_for(live: &LiveAllocs, setup: &ExecSetup) -> Result<Arc<dyn TaskHandle>, Status> {
    if setup.alloc_id.is_empty() {
        return Err(Status::invalid_argument("must provide a valid alloc id"));
    }
    if setup.task.is_empty() {
        return Err(Status::invalid_argument("task: must provide task name"));
    }
    if setup.command.is_empty() || setup.command[0].is_empty() {
        return Err(Status::invalid_argument("command: command is not present"));
    }
    let tasks = live.tasks(&setup.alloc_id).await?;
    let view = tasks.get(&setup.task).ok_or_else(|| {
        Status::invalid_argument(format!("task: unknown task name {:?}", setup.task))
    })?;
    let caps = view.capabilities.ok_or_else(|| {
        Status::failed_precondition(format!(
            "task {:?}: its driver is missing on this node",
            setup.task
        ))
    })?;
    if !caps.exec {
        return Err(Status::failed_precondition(format!(
            "task {:?}: its driver does not support exec",
            setup.task
        )));
    }
    // A command in a task that shares the node's file system runs on the
    // node itself: that takes more than `alloc-exec`.
    if caps.fs_isolation == FsIsolation::None && !setup.node_exec_allowed {
        return Err(Status::permission_denied("Permission denied"));
    }
    match &view.handle {
        Some(h) if view.running() => Ok(h.clone()),
        _ => Err(Status::not_found(format!(
            "task {:?} is not running.",
            setup.task
        ))),
    }
}

/// Starts the command the stream's first message names; the stream of its
/// output.
pub async fn start(
    live: &LiveAllocs,
    mut inbound: Streaming<ExecInput>,
) -> Result<ExecStream, Status> {
    let setup = match inbound.message().await? {
        Some(ExecInput {
            input: Some(Input::Setup(setup)),
        }) => setup,
        _ => {
            return Err(Status::invalid_argument(
                "the first message of an exec must say what to run (setup)",
            ));
        }
    };
    let handle = task_for(live, &setup).await?;
    tracing::info!(alloc = %setup.alloc_id, task = %setup.task, command = ?setup.command, tty = setup.tty, "task exec session starting");

    let (tx, rx) = mpsc::channel(16);
    let (stdin_ours, stdin_theirs) = tokio::io::duplex(PIPE_BYTES);
    let (stdout_theirs, stdout_ours) = tokio::io::duplex(PIPE_BYTES);
    let (stderr_theirs, stderr_ours) = tokio::io::duplex(PIPE_BYTES);
    let (resize_tx, resize_rx) = mpsc::channel(4);
    let mut request = ExecRequest::new(setup.command.clone(), stdout_theirs, stderr_theirs)
        .with_stdin(stdin_theirs);
    if setup.tty {
        request = request.with_tty(resize_rx);
    }
    let feeding = tokio::spawn(feed(inbound, stdin_ours, resize_tx));
    let out = tokio::spawn(relay(
        stdout_ours,
        tx.clone(),
        Output::Stdout,
        Output::StdoutClose,
    ));
    let err = tokio::spawn(relay(
        stderr_ours,
        tx.clone(),
        Output::Stderr,
        Output::StderrClose,
    ));
    tokio::spawn(async move {
        let running = handle.exec(request);
        let ended = tokio::select! {
            ended = running => ended,
            // Nobody reads the output any more: the command is dropped.
            () = tx.closed() => {
                feeding.abort();
                return;
            }
        };
        feeding.abort();
        finish(out, err).await;
        let last = match ended {
            Ok(code) => Ok(ExecOutput {
                output: Some(Output::ExitCode(code)),
            }),
            Err(e) => Err(Status::failed_precondition(e.message)),
        };
        let _ = tx.send(last).await;
    });
    Ok(ReceiverStream::new(rx))
}

/// Waits until both output relays have sent what the command wrote.
async fn finish(out: JoinHandle<()>, err: JoinHandle<()>) {
    let _ = out.await;
    let _ = err.await;
}

/// Hands the caller's input to the command: stdin bytes, its end, and
/// terminal sizes.
async fn feed(
    mut inbound: Streaming<ExecInput>,
    stdin: DuplexStream,
    resize: mpsc::Sender<TtySize>,
) {
    let mut stdin = Some(stdin);
    while let Ok(Some(msg)) = inbound.message().await {
        match msg.input {
            Some(Input::Stdin(data)) => {
                if let Some(w) = stdin.as_mut()
                    && w.write_all(&data).await.is_err()
                {
                    stdin = None;
                }
            }
            Some(Input::StdinClose(true)) => {
                if let Some(mut w) = stdin.take() {
                    let _ = w.shutdown().await;
                }
            }
            Some(Input::TtySize(size)) => {
                let size = TtySize {
                    height: u16::try_from(size.height).unwrap_or(u16::MAX),
                    width: u16::try_from(size.width).unwrap_or(u16::MAX),
                };
                let _ = resize.try_send(size);
            }
            // A heartbeat, or a second setup: nothing to do.
            _ => {}
        }
    }
}

/// Sends what the command writes on one stream, then that stream's end.
async fn relay(
    mut from: DuplexStream,
    tx: mpsc::Sender<Result<ExecOutput, Status>>,
    data: fn(Vec<u8>) -> Output,
    close: fn(bool) -> Output,
) {
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let msg = ExecOutput {
            output: Some(data(buf[..n].to_vec())),
        };
        if tx.send(Ok(msg)).await.is_err() {
            return;
        }
    }
    let _ = tx
        .send(Ok(ExecOutput {
            output: Some(close(true)),
        }))
        .await;
}

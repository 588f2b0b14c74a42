//! A command run in a task's context (Nomad's `ExecTaskStreaming`): its
//! argv and the streams it reads and writes.

use std::fmt;
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

/// A terminal's size in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TtySize {
    /// Rows.
    pub height: u16,
    /// Columns.
    pub width: u16,
}

/// A command to run in a task's context.
pub struct ExecRequest {
    /// The program and its arguments.
    pub command: Vec<String>,
    /// Whether it gets a terminal.
    pub tty: bool,
    /// What it reads on stdin; `None` gives it an empty one.
    pub stdin: Option<Pin<Box<dyn AsyncRead + Send>>>,
    /// Where its stdout goes.
    pub stdout: Pin<Box<dyn AsyncWrite + Send>>,
    /// Where its stderr goes (with a terminal, stdout carries both).
    pub stderr: Pin<Box<dyn AsyncWrite + Send>>,
    /// The terminal's size whenever the caller's changes (with `tty`).
    pub resize: Option<mpsc::Receiver<TtySize>>,
}

impl ExecRequest {
    /// A request for `command` with no input, whose output goes to the
    /// given writers.
    pub fn new(
        command: Vec<String>,
        stdout: impl AsyncWrite + Send + 'static,
        stderr: impl AsyncWrite + Send + 'static,
    ) -> Self {
        ExecRequest {
            command,
            tty: false,
            stdin: None,
            stdout: Box::pin(stdout),
            stderr: Box::pin(stderr),
            resize: None,
        }
    }

    /// The same request reading `stdin`.
    pub fn with_stdin(mut self, stdin: impl AsyncRead + Send + 'static) -> Self {
        self.stdin = Some(Box::pin(stdin));
        self
    }

    /// The same request with a terminal, resized by what `resize` sends.
    pub fn with_tty(mut self, resize: mpsc::Receiver<TtySize>) -> Self {
        self.tty = true;
        self.resize = Some(resize);
        self
    }
}

impl fmt::Debug for ExecRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecRequest")
            .field("command", &self.command)
            .field("tty", &self.tty)
            .field("stdin", &self.stdin.is_some())
            .finish_non_exhaustive()
    }
}

/// Copies `from` to `to` until `from` ends, then shuts `to` down; what a
/// command's pipe fails with ends the copy, not the command.
pub async fn pump(
    mut from: impl AsyncRead + Unpin,
    mut to: Pin<Box<dyn AsyncWrite + Send>>,
) -> std::io::Result<u64> {
    let copied = tokio::io::copy(&mut from, &mut to).await;
    let _ = tokio::io::AsyncWriteExt::shutdown(&mut to).await;
    copied
}

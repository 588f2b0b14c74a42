//! A `script` check: its command run inside the task through the driver's
//! exec (on the host in the task's directory for `raw_exec`), judged by its
//! exit code as Nomad does: 0 passing, 1 warning, anything else critical.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use caravan_proto::ServiceCheck;
use parking_lot::Mutex;
use tokio::io::AsyncWrite;

use super::probe::{OUTPUT_LIMIT, Observation};
use super::status::Outcome;
use crate::driver::{ExecRequest, TaskHandle};

/// What a `script` check runs, and the run it runs in.
#[derive(Clone, Debug)]
pub struct ScriptProbe {
    command: Vec<String>,
    task: Arc<dyn TaskHandle>,
}

impl ScriptProbe {
    /// The probe of `check` in the run `task`; `Err` when it names no command.
    pub fn new(check: &ServiceCheck, task: Arc<dyn TaskHandle>) -> Result<Self, String> {
        if check.command.is_empty() {
            return Err(format!(
                "check {:?}: a script check requires a command",
                check.name
            ));
        }
        let mut command = vec![check.command.clone()];
        command.extend(check.args.iter().cloned());
        Ok(ScriptProbe { command, task })
    }

    /// Runs the command once (the caller bounds how long).
    pub async fn run(&self) -> Observation {
        let output = Captured::default();
        let request = ExecRequest::new(self.command.clone(), output.clone(), output.clone());
        match self.task.exec(request).await {
            Ok(code) => Observation {
                outcome: match code {
                    0 => Outcome::Success,
                    1 => Outcome::Warning,
                    _ => Outcome::Failure,
                },
                status_code: 0,
                output: output.text(),
            },
            Err(e) => Observation {
                outcome: Outcome::Failure,
                status_code: 0,
                output: format!("running {:?}: {}", self.command[0], e.message),
            },
        }
    }
}

/// The start of what a command writes to stdout and stderr together.
#[derive(Clone, Debug, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock()).into_owned()
    }
}

impl AsyncWrite for Captured {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut out = self.0.lock();
        let room = OUTPUT_LIMIT.saturating_sub(out.len());
        out.extend_from_slice(&buf[..buf.len().min(room)]);
        // The rest is dropped, not refused: the command must not block on it.
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use caravan_proto::TaskResourceUsage;
    use nix::sys::signal::Signal;
    use tokio::io::AsyncWriteExt;

    use super::*;
    use crate::driver::{DriverError, ExitResult, HandleState};

    /// A run whose exec prints the command line and exits with the number
    /// given as the command's last argument.
    #[derive(Debug)]
    struct Echo;

    #[async_trait::async_trait]
    impl TaskHandle for Echo {
        fn state(&self) -> HandleState {
            HandleState::new("echo", 1, Vec::new())
        }
        async fn wait(&self) -> ExitResult {
            std::future::pending().await
        }
        async fn stop(&self, _signal: Signal, _timeout: Duration) -> ExitResult {
            ExitResult::default()
        }
        async fn signal(&self, _signal: Signal) -> Result<(), DriverError> {
            Ok(())
        }
        async fn stats(&self, _cpu: u64) -> Result<TaskResourceUsage, DriverError> {
            Ok(TaskResourceUsage::default())
        }
        async fn exec(&self, mut request: ExecRequest) -> Result<i32, DriverError> {
            let line = request.command.join(" ");
            let _ = request.stdout.write_all(line.as_bytes()).await;
            let _ = request.stderr.write_all(b" (stderr)").await;
            match request.command.last().and_then(|c| c.parse().ok()) {
                Some(code) => Ok(code),
                None => Err(DriverError::fatal("no such command")),
            }
        }
    }

    fn probe(args: &[&str]) -> ScriptProbe {
        let check = ServiceCheck {
            name: "s".into(),
            r#type: "script".into(),
            command: "/bin/check".into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            ..Default::default()
        };
        ScriptProbe::new(&check, Arc::new(Echo)).unwrap()
    }

    #[tokio::test]
    async fn the_exit_code_decides_and_the_output_is_kept() {
        let ok = probe(&["0"]).run().await;
        assert_eq!(ok.outcome, Outcome::Success);
        assert_eq!(ok.output, "/bin/check 0 (stderr)");
        assert_eq!(probe(&["1"]).run().await.outcome, Outcome::Warning);
        assert_eq!(probe(&["2"]).run().await.outcome, Outcome::Failure);
        let failed = probe(&["x"]).run().await;
        assert_eq!(failed.outcome, Outcome::Failure);
        assert!(failed.output.contains("no such command"), "{failed:?}");
    }

    #[test]
    fn a_script_check_needs_a_command() {
        let check = ServiceCheck {
            name: "s".into(),
            r#type: "script".into(),
            ..Default::default()
        };
        let err = ScriptProbe::new(&check, Arc::new(Echo)).unwrap_err();
        assert!(err.contains("requires a command"), "{err}");
    }
}

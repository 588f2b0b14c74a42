//! A rewritten task file's `change_mode` applied to the task's run (a
//! re-rendered template, a renewed identity token): restart it in place,
//! send it a signal, or run a script inside it.

use std::sync::Arc;
use std::time::Duration;

use caravan_proto::ChangeScript;
use nix::sys::signal::Signal;

use crate::driver::{ExecRequest, TaskHandle};
use crate::restart::RestartDecision;
use crate::task_runner::{TaskRunner, event, events, push_event};

/// The event of a hook's message to the user (a change script's outcome).
pub const TASK_HOOK_MESSAGE: &str = "Task hook message";

/// What rewrote the task's file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangedBy {
    /// A template re-rendered.
    Template,
    /// A workload identity's token was renewed.
    Identity,
}

/// A task file rewritten, and what its `change_mode` asks of the run.
#[derive(Debug, Clone, PartialEq)]
pub struct FileChange {
    /// What rewrote it.
    pub by: ChangedBy,
    /// What the run is asked.
    pub action: TemplateChange,
}

/// What a change asks of the run.
#[derive(Debug, Clone, PartialEq)]
pub enum TemplateChange {
    /// `change_mode = "restart"`.
    Restart,
    /// `change_mode = "signal"` with its `change_signal`.
    Signal(Signal),
    /// `change_mode = "script"` with its `change_script`.
    Script(ChangeScript),
}

/// What the runner does after a change was applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// Keep waiting on the same run.
    SameRun,
    /// The run ended: start the task again.
    StartAgain,
    /// The task is not to run again (or the client is going away).
    Over,
}

/// A change script's default timeout.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(5);

impl TaskRunner {
    /// Applies a file's change to the run `handle`.
    pub(crate) async fn file_changed(
        &mut self,
        handle: &Arc<dyn TaskHandle>,
        change: FileChange,
    ) -> Applied {
        let (restart_msg, signal_msg) = match change.by {
            ChangedBy::Template => (
                "Template with change_mode restart re-rendered",
                "Template re-rendered",
            ),
            ChangedBy::Identity => (
                "Identity with change_mode restart renewed",
                "Identity renewed",
            ),
        };
        match change.action {
            TemplateChange::Restart => {
                push_event(
                    &mut self.state,
                    event(events::RESTART_SIGNALED, restart_msg),
                );
                self.send(Some(handle));
                let stop = handle.stop(self.kill_signal, self.kill_timeout);
                let exit = tokio::select! {
                    r = stop => r,
                    _ = self.detach.cancelled() => return Applied::Over,
                };
                self.terminated(&exit);
                self.restarting(Duration::ZERO, "Task restarting in 0s");
                self.release_once_recorded().await;
                Applied::StartAgain
            }
            TemplateChange::Signal(signal) => {
                push_event(&mut self.state, event(events::SIGNALING, signal_msg));
                self.send(Some(handle));
                if let Err(e) = handle.signal(signal).await {
                    tracing::warn!(alloc = %self.spec.alloc_id, task = %self.name, error = %e.message,
                        "signal on template change failed");
                    push_event(
                        &mut self.state,
                        event(
                            TASK_HOOK_MESSAGE,
                            format!("Template failed to send signals {signal}: {}", e.message),
                        ),
                    );
                    self.send(Some(handle));
                }
                Applied::SameRun
            }
            TemplateChange::Script(script) => self.change_script(handle, &script).await,
        }
    }

    async fn change_script(
        &mut self,
        handle: &Arc<dyn TaskHandle>,
        script: &ChangeScript,
    ) -> Applied {
        let mut command = vec![script.command.clone()];
        command.extend(script.args.iter().cloned());
        let timeout = u64::try_from(script.timeout_ns)
            .ok()
            .filter(|n| *n > 0)
            .map_or(SCRIPT_TIMEOUT, Duration::from_nanos);
        let request = ExecRequest::new(command, tokio::io::sink(), tokio::io::sink());
        let outcome = match tokio::time::timeout(timeout, handle.exec(request)).await {
            Ok(Ok(0)) => Ok(()),
            Ok(Ok(code)) => Err(format!("exit code {code}")),
            Ok(Err(e)) => Err(e.message),
            Err(_) => Err(format!(
                "timed out after {}",
                caravan_jobspec::format_duration(i64::try_from(timeout.as_nanos()).unwrap_or(0))
            )),
        };
        match outcome {
            Ok(()) => {
                push_event(
                    &mut self.state,
                    event(
                        TASK_HOOK_MESSAGE,
                        format!(
                            "Template successfully ran script {} with arguments: [{}]. Exit code: 0",
                            script.command,
                            script.args.join(" ")
                        ),
                    ),
                );
                self.send(Some(handle));
                Applied::SameRun
            }
            Err(why) if !script.fail_on_error => {
                push_event(
                    &mut self.state,
                    event(
                        TASK_HOOK_MESSAGE,
                        format!(
                            "Template ran script {} with arguments [{}] on change but it failed: {why}",
                            script.command,
                            script.args.join(" ")
                        ),
                    ),
                );
                self.send(Some(handle));
                Applied::SameRun
            }
            Err(why) => {
                push_event(
                    &mut self.state,
                    event(
                        events::KILLING,
                        format!("Template script failed, task is being killed: {why}"),
                    ),
                );
                self.send(Some(handle));
                let stop = handle.stop(self.kill_signal, self.kill_timeout);
                let exit = tokio::select! {
                    r = stop => r,
                    _ = self.detach.cancelled() => return Applied::Over,
                };
                self.terminated(&exit);
                let decision = RestartDecision::Fail {
                    reason: format!("Template change script {} failed", script.command),
                };
                self.after(decision, true).await;
                Applied::Over
            }
        }
    }
}

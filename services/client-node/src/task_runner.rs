//! Runs one task through its life: start with the driver, wait, apply the
//! restart policy on exit, stop with the kill signal and timeout when asked,
//! and report each state change with Nomad's task events.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use caravan_model::now_unix_ns;
use caravan_proto::{TaskEvent, TaskState};
use nix::sys::signal::Signal;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::driver::{Driver, ExitResult, TaskHandle, TaskSpec};
use crate::prestart::{HookFailure, Prestart};
use crate::restart::{RestartDecision, RestartTracker};
use crate::template::change::{Applied, FileChange};

/// Task events kept per task, as Nomad keeps them.
pub const MAX_EVENTS: usize = 10;

pub use caravan_model::task_state as states;

/// Task event types as Nomad names them.
pub mod events {
    /// The client received the task.
    pub const RECEIVED: &str = "Received";
    /// Its directories and environment are ready.
    pub const TASK_SETUP: &str = "Task Setup";
    /// The driver started it.
    pub const STARTED: &str = "Started";
    /// It exited.
    pub const TERMINATED: &str = "Terminated";
    /// It will be started again after a delay.
    pub const RESTARTING: &str = "Restarting";
    /// The restart policy gave up.
    pub const NOT_RESTARTING: &str = "Not Restarting";
    /// The stop signal was sent.
    pub const KILLING: &str = "Killing";
    /// It was stopped.
    pub const KILLED: &str = "Killed";
    /// The driver could not start it.
    pub const DRIVER_FAILURE: &str = "Driver Failure";
    /// The alloc's setup failed.
    pub const SETUP_FAILURE: &str = "Setup Failure";
    /// Another task of the alloc failed.
    pub const SIBLING_FAILED: &str = "Sibling Task Failed";
    /// The group's leader task died.
    pub const LEADER_DEAD: &str = "Leader Task Dead";
    /// The client lost the servers for the group's `stop_on_client_after`.
    pub const SERVERS_UNREACHABLE: &str = "Servers Unreachable";
    /// The group's main tasks are dead, so a sidecar stops.
    pub const MAIN_DEAD: &str = "Main Tasks Dead";
    /// The client restarted and the task's process was gone.
    pub const TASK_LOST: &str = "Task Lost";
    /// A user asked for the task to restart.
    pub const RESTART_SIGNALED: &str = "Restart Signaled";
    /// A user sent the task a signal.
    pub const SIGNALING: &str = "Signaling";
    /// The task's `shutdown_delay` runs before the kill signal.
    pub const WAITING_SHUTDOWN_DELAY: &str = "Waiting for shutdown delay";
}

/// How a user-requested restart ended: `Err` says why it did not happen.
pub type RestartReply = tokio::sync::oneshot::Sender<Result<(), String>>;

/// What a user asks of a task through its runner.
#[derive(Debug)]
pub enum TaskControl {
    /// Stop the task and start it again in place.
    Restart(RestartReply),
    /// The task's process was sent this signal: recorded as an event.
    Signaled(Box<str>),
    /// Leave the run unwatched and hand it back (see [`ParkedTask`]), if
    /// it may go unwatched; ignored otherwise.
    Park,
    /// A service check of the task reached its `check_restart` limit: stop
    /// the run and restart it as a failure its restart policy counts (as
    /// Nomad's check watcher does), the reason in the event. Ignored when
    /// no run is up.
    CheckRestart(Box<str>),
    /// A file of the task was rewritten (a template re-rendered, an
    /// identity renewed): its `change_mode` is applied to the run. Ignored
    /// when no run is up: the next start writes it anew.
    FileChanged(Box<FileChange>),
}

/// A running task whose runner stepped aside: the run and the restart
/// bookkeeping a new runner takes over, so nothing about the task changes.
#[derive(Debug)]
pub struct ParkedTask {
    /// The task.
    pub task: String,
    /// Its run.
    pub handle: Arc<dyn TaskHandle>,
    /// Its restart policy's count so far.
    pub restart: RestartTracker,
    /// What users asked that the runner had not read yet, for the next one.
    pub control: Option<mpsc::UnboundedReceiver<TaskControl>>,
}

/// A state change of a task, sent to its alloc runner.
#[derive(Debug)]
pub struct TaskUpdate {
    /// The task.
    pub task: String,
    /// Its new state.
    pub state: TaskState,
    /// The running task: its state is persisted to re-attach after a
    /// restart, and signals, usage and exec reach it through it.
    pub handle: Option<Arc<dyn TaskHandle>>,
    /// Told whether the alloc runner persisted this state (true) or could
    /// not (false), once it has tried.
    pub persisted: Option<oneshot::Sender<bool>>,
}

/// Why a task is being stopped: an optional event first (e.g. `Sibling Task Failed`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KillRequest {
    /// Event recorded before `Killing`.
    pub cause: Option<(String, String)>,
}

/// A task event at the current time.
pub fn event(kind: &str, message: impl Into<String>) -> TaskEvent {
    TaskEvent {
        r#type: kind.to_string(),
        time_unix_ns: now_unix_ns(),
        message: message.into(),
        ..Default::default()
    }
}

/// Appends an event, keeping the newest [`MAX_EVENTS`].
pub fn push_event(state: &mut TaskState, ev: TaskEvent) {
    state.events.push(ev);
    if state.events.len() > MAX_EVENTS {
        let drop = state.events.len() - MAX_EVENTS;
        state.events.drain(..drop);
    }
}

fn ns(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// Everything one task runner needs.
#[derive(Debug)]
pub struct TaskRunner {
    /// The task's name.
    pub name: String,
    /// Its driver.
    pub driver: Arc<dyn Driver>,
    /// What the driver starts.
    pub spec: TaskSpec,
    /// Signal sent to stop it.
    pub kill_signal: Signal,
    /// Time between the signal and SIGKILL.
    pub kill_timeout: Duration,
    /// Time between a stop being asked and the kill signal (the task's
    /// `shutdown_delay`).
    pub shutdown_delay: Duration,
    /// Restart policy bookkeeping.
    pub restart: RestartTracker,
    /// Its state so far.
    pub state: TaskState,
    /// Where state changes go (boxed, see the alloc runner).
    pub updates: mpsc::UnboundedSender<Box<TaskUpdate>>,
    /// Set when the task must stop.
    pub kill: watch::Receiver<Option<KillRequest>>,
    /// Cancelled when the client stops: leave the task running and return.
    pub detach: CancellationToken,
    /// What users ask: restarts (`alloc restart`: the task is stopped and
    /// started again in place, outside its restart policy) and signals sent.
    pub control: mpsc::UnboundedReceiver<TaskControl>,
    /// The trace of the scheduling that placed the alloc: each start of the
    /// task is a span in it.
    pub trace_context: BTreeMap<String, String>,
    /// Answers whether the last state sent was persisted.
    pub unrecorded: Option<oneshot::Receiver<bool>>,
    /// The run handed back on a [`TaskControl::Park`].
    pub parked: Option<Arc<dyn TaskHandle>>,
    /// What must be ready before each start (boxed: most tasks have none).
    pub prestart: Option<Box<Prestart>>,
}

/// How a task's prestart ended.
enum Prestarted {
    Ready(Box<TaskSpec>),
    Failed(HookFailure),
    Kill(KillRequest),
    Detach,
}

/// How a wait ended.
enum Woken<T> {
    Done(T),
    Kill(KillRequest),
    Detach,
    Restart(RestartReply),
    Park,
    CheckRestart(Box<str>),
    FileChanged(Box<FileChange>),
}

impl TaskRunner {
    pub(crate) fn send(&mut self, handle: Option<&Arc<dyn TaskHandle>>) {
        let (persisted, unrecorded) = oneshot::channel();
        self.unrecorded = Some(unrecorded);
        let _ = self.updates.send(Box::new(TaskUpdate {
            task: self.name.clone(),
            state: self.state.clone(),
            handle: handle.cloned(),
            persisted: Some(persisted),
        }));
    }

    /// Lets the driver forget the run that just ended, once the client's own
    /// record holds the state sent last (the run's end). Until then the
    /// driver's record of the run is all a client killed meanwhile has: its
    /// next start would find neither a handle nor a run, and start the task
    /// a second time. Kept when the state could not be persisted (the run
    /// is then adopted again, ended, rather than run again).
    pub(crate) async fn release_once_recorded(&mut self) {
        let recorded = match self.unrecorded.take() {
            Some(answer) => answer.await.unwrap_or(false),
            None => true,
        };
        if recorded {
            self.driver.release(&self.spec).await;
        } else {
            tracing::warn!(alloc = %self.spec.alloc_id, task = %self.name, "the end of the task's run is not persisted; the driver keeps its record of the run");
        }
    }

    fn kill_requested(&self) -> Option<KillRequest> {
        self.kill.borrow().clone()
    }

    /// Waits for `fut`, a kill request, a restart request or the client's
    /// shutdown; records signals sent meanwhile to the run `handle`.
    async fn until<T>(
        &mut self,
        handle: Option<&Arc<dyn TaskHandle>>,
        fut: impl std::future::Future<Output = T>,
    ) -> Woken<T> {
        if let Some(k) = self.kill_requested() {
            return Woken::Kill(k);
        }
        let mut kill = self.kill.clone();
        let detach = self.detach.clone();
        let mut fut = std::pin::pin!(fut);
        loop {
            let control = tokio::select! {
                v = &mut fut => return Woken::Done(v),
                r = kill.wait_for(Option::is_some) => return match r {
                    Ok(k) => Woken::Kill(k.clone().unwrap_or_default()),
                    // The alloc runner is gone; nobody can ask for a stop any more.
                    Err(_) => Woken::Detach,
                },
                _ = detach.cancelled() => return Woken::Detach,
                Some(c) = self.control.recv() => c,
            };
            match control {
                TaskControl::Restart(reply) => return Woken::Restart(reply),
                TaskControl::Park => {
                    if handle.is_some_and(|h| h.unwatched_until().is_some()) {
                        return Woken::Park;
                    }
                }
                TaskControl::CheckRestart(reason) => {
                    if handle.is_some() {
                        return Woken::CheckRestart(reason);
                    }
                }
                TaskControl::FileChanged(change) => {
                    if handle.is_some() {
                        return Woken::FileChanged(change);
                    }
                }
                TaskControl::Signaled(signal) => {
                    push_event(
                        &mut self.state,
                        event(
                            events::SIGNALING,
                            format!("Task being sent signal {signal}"),
                        ),
                    );
                    self.send(handle);
                }
            }
        }
    }

    fn die(&mut self, failed: bool) {
        self.state.state = states::DEAD.into();
        self.state.failed |= failed;
        self.state.finished_at_unix_ns = now_unix_ns();
        self.send(None);
    }

    fn killed_before_running(&mut self, req: KillRequest) {
        if let Some((kind, msg)) = req.cause {
            push_event(&mut self.state, event(&kind, msg));
        }
        push_event(
            &mut self.state,
            event(events::KILLED, "Task killed before it ran"),
        );
        self.die(false);
    }

    /// Runs the task to its end (or until the client stops, or until it is
    /// parked: then its run comes back). `recovered` is a handle re-attached
    /// after a client restart or a park.
    pub async fn run(mut self, recovered: Option<Arc<dyn TaskHandle>>) -> Option<ParkedTask> {
        self.drive(recovered).await;
        let handle = self.parked.take()?;
        Some(ParkedTask {
            task: self.name,
            handle,
            restart: self.restart,
            control: Some(self.control),
        })
    }

    async fn drive(&mut self, mut recovered: Option<Arc<dyn TaskHandle>>) {
        loop {
            let handle = match recovered.take() {
                Some(h) => h,
                // A run started just before the client died, never recorded.
                None => match self.driver.adopt(&self.spec).await {
                    Some(h) => {
                        self.running(h, "Task started by client (adopted after a client restart)")
                    }
                    None => {
                        if let Some(req) = self.kill_requested() {
                            return self.killed_before_running(req);
                        }
                        let starting = tracing::info_span!(
                            "task.start",
                            alloc = %self.spec.alloc_id,
                            task = %self.name
                        );
                        caravan_runtime::trace::follow(&starting, &self.trace_context);
                        let spec = match self.prestart().await {
                            Prestarted::Ready(spec) => *spec,
                            Prestarted::Failed(f) => {
                                push_event(&mut self.state, event(&f.event_type, f.message));
                                let decision = self
                                    .restart
                                    .on_start_error(Instant::now().into_std(), f.recoverable);
                                if self.after(decision, false).await {
                                    continue;
                                }
                                return;
                            }
                            Prestarted::Kill(req) => return self.killed_before_running(req),
                            Prestarted::Detach => return,
                        };
                        let started = self.driver.start(spec).instrument(starting);
                        match started.await {
                            Ok(h) => self.running(h, "Task started by client"),
                            Err(e) => {
                                let mut ev = event(events::DRIVER_FAILURE, e.message.clone());
                                ev.driver_error = e.message.clone();
                                push_event(&mut self.state, ev);
                                let decision = self
                                    .restart
                                    .on_start_error(Instant::now().into_std(), e.recoverable);
                                if self.after(decision, false).await {
                                    continue;
                                }
                                return;
                            }
                        }
                    }
                },
            };
            let waited = {
                let h = handle.clone();
                self.until(Some(&handle), async move { h.wait().await })
                    .await
            };
            match waited {
                Woken::Detach => return,
                Woken::Park => {
                    self.parked = Some(handle);
                    return;
                }
                Woken::Kill(req) => return self.stop(&handle, req).await,
                Woken::Restart(reply) => {
                    if !self.restart_in_place(&handle, reply).await {
                        return;
                    }
                }
                Woken::CheckRestart(reason) => {
                    if !self.restart_for_check(&handle, &reason).await {
                        return;
                    }
                }
                Woken::FileChanged(change) => match self.file_changed(&handle, *change).await {
                    Applied::SameRun => recovered = Some(handle),
                    Applied::StartAgain => {}
                    Applied::Over => return,
                },
                Woken::Done(exit) => {
                    self.terminated(&exit);
                    let decision = self.restart.on_exit(Instant::now().into_std(), &exit);
                    if !self.after(decision, true).await {
                        return;
                    }
                }
            }
        }
    }

    /// Runs the task's prestart hooks on a copy of its spec, recording
    /// their events as they come; a stop asked meanwhile (or the client's
    /// shutdown) ends them.
    async fn prestart(&mut self) -> Prestarted {
        let mut spec = self.spec.clone();
        let Some(prestart) = self.prestart.clone() else {
            return Prestarted::Ready(Box::new(spec));
        };
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut emit = move |ev: TaskEvent| {
            let _ = tx.send(ev);
        };
        let mut kill = self.kill.clone();
        let detach = self.detach.clone();
        let out = {
            let run = prestart.run(&mut spec, &mut emit);
            let mut run = std::pin::pin!(run);
            loop {
                tokio::select! {
                    r = &mut run => break r.map(|()| None).unwrap_or_else(|f| Some(Prestarted::Failed(f))),
                    Some(ev) = rx.recv() => {
                        push_event(&mut self.state, ev);
                        self.send(None);
                    }
                    r = kill.wait_for(Option::is_some) => break Some(match r {
                        Ok(k) => Prestarted::Kill(k.clone().unwrap_or_default()),
                        Err(_) => Prestarted::Detach,
                    }),
                    _ = detach.cancelled() => break Some(Prestarted::Detach),
                }
            }
        };
        let mut more = false;
        while let Ok(ev) = rx.try_recv() {
            push_event(&mut self.state, ev);
            more = true;
        }
        if more {
            self.send(None);
        }
        out.unwrap_or_else(|| Prestarted::Ready(Box::new(spec)))
    }

    /// The task runs as `h`: recorded, with the handle to re-attach to.
    fn running(&mut self, h: Arc<dyn TaskHandle>, message: &str) -> Arc<dyn TaskHandle> {
        self.state.state = states::RUNNING.into();
        self.state.started_at_unix_ns = now_unix_ns();
        push_event(&mut self.state, event(events::STARTED, message));
        self.send(Some(&h));
        h
    }

    pub(crate) fn terminated(&mut self, exit: &ExitResult) {
        if exit.oom_killed {
            tracing::warn!(alloc = %self.spec.alloc_id, task = %self.name, "OOM Killed");
        }
        let mut ev = event(
            events::TERMINATED,
            match &exit.err {
                Some(e) => format!(
                    "Exit Code: {}, Signal: {} ({e})",
                    exit.exit_code, exit.signal
                ),
                None => format!("Exit Code: {}, Signal: {}", exit.exit_code, exit.signal),
            },
        );
        ev.exit_code = exit.exit_code;
        ev.signal = exit.signal;
        push_event(&mut self.state, ev);
    }

    /// Applies a restart decision; true when the task should start again.
    /// `ran`: a run of the task ended, which the driver may forget once the
    /// decision is persisted.
    pub(crate) async fn after(&mut self, decision: RestartDecision, ran: bool) -> bool {
        match decision {
            RestartDecision::Complete => {
                self.die(false);
                if ran {
                    self.release_once_recorded().await;
                }
                false
            }
            RestartDecision::Fail { reason } => {
                let mut ev = event(events::NOT_RESTARTING, reason);
                ev.fails_task = true;
                push_event(&mut self.state, ev);
                self.die(true);
                if ran {
                    self.release_once_recorded().await;
                }
                false
            }
            RestartDecision::Restart { delay, reason } => {
                self.restarting(delay, reason);
                if ran {
                    self.release_once_recorded().await;
                }
                match self
                    .until(None, tokio::time::sleep_until(Instant::now() + delay))
                    .await
                {
                    // (No run to park or check while waiting to start one.)
                    Woken::Done(())
                    | Woken::Park
                    | Woken::CheckRestart(_)
                    | Woken::FileChanged(_) => true,
                    // Asked to restart while waiting to: start now.
                    Woken::Restart(reply) => {
                        let _ = reply.send(Ok(()));
                        true
                    }
                    Woken::Detach => false,
                    Woken::Kill(req) => {
                        self.killed_before_running(req);
                        false
                    }
                }
            }
        }
    }

    /// A user-requested restart: stops the run with the kill signal and
    /// timeout and starts the task again at once, counted as a restart but
    /// outside the restart policy, as Nomad does. False when the client is
    /// going away meanwhile.
    async fn restart_in_place(
        &mut self,
        handle: &Arc<dyn TaskHandle>,
        reply: RestartReply,
    ) -> bool {
        push_event(
            &mut self.state,
            event(events::RESTART_SIGNALED, "User requested restart"),
        );
        self.send(Some(handle));
        let stop = handle.stop(self.kill_signal, self.kill_timeout);
        let exit = tokio::select! {
            r = stop => r,
            _ = self.detach.cancelled() => {
                let _ = reply.send(Err("the client node is shutting down".into()));
                return false;
            }
        };
        self.terminated(&exit);
        self.restarting(Duration::ZERO, "Task restarting in 0s");
        self.release_once_recorded().await;
        let _ = reply.send(Ok(()));
        true
    }

    /// A restart asked by a failing check: the run is stopped with the
    /// kill signal and timeout, then the restart policy decides as after a
    /// failed exit. False when the task is not to run again (or the client
    /// is going away).
    async fn restart_for_check(&mut self, handle: &Arc<dyn TaskHandle>, reason: &str) -> bool {
        push_event(&mut self.state, event(events::RESTART_SIGNALED, reason));
        self.send(Some(handle));
        let stop = handle.stop(self.kill_signal, self.kill_timeout);
        let exit = tokio::select! {
            r = stop => r,
            _ = self.detach.cancelled() => return false,
        };
        self.terminated(&exit);
        let decision = self.restart.on_check_failure(Instant::now().into_std());
        self.after(decision, true).await
    }

    /// Records a restart after `delay` (an event, pending, one more restart)
    /// and reports it.
    pub(crate) fn restarting(&mut self, delay: Duration, reason: impl Into<String>) {
        let mut ev = event(events::RESTARTING, reason);
        ev.restart_delay_ns = ns(delay);
        push_event(&mut self.state, ev);
        self.state.state = states::PENDING.into();
        self.state.restarts += 1;
        self.state.last_restart_unix_ns = now_unix_ns();
        self.send(None);
    }

    async fn stop(&mut self, handle: &Arc<dyn TaskHandle>, req: KillRequest) {
        if let Some((kind, msg)) = req.cause {
            push_event(&mut self.state, event(&kind, msg));
        }
        if !self.shutdown_delay.is_zero() {
            push_event(
                &mut self.state,
                event(
                    events::WAITING_SHUTDOWN_DELAY,
                    format!(
                        "Waiting for shutdown_delay of {} before killing the task.",
                        caravan_jobspec::format_duration(ns(self.shutdown_delay))
                    ),
                ),
            );
            self.send(Some(handle));
            tokio::select! {
                _ = tokio::time::sleep(self.shutdown_delay) => {}
                // It ended by itself meanwhile: nothing to kill.
                _ = handle.wait() => {}
                _ = self.detach.cancelled() => return,
            }
        }
        push_event(
            &mut self.state,
            event(
                events::KILLING,
                format!(
                    "Sent interrupt. Waiting {} before force killing",
                    caravan_jobspec::format_duration(ns(self.kill_timeout))
                ),
            ),
        );
        self.send(Some(handle));
        let stop = handle.stop(self.kill_signal, self.kill_timeout);
        let exit = tokio::select! {
            r = stop => r,
            // The client is going away: leave the rest to the next start.
            _ = self.detach.cancelled() => return,
        };
        self.terminated(&exit);
        push_event(
            &mut self.state,
            event(events::KILLED, "Task successfully killed"),
        );
        self.die(false);
        self.release_once_recorded().await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use caravan_proto::RestartPolicy;

    use super::*;
    use crate::driver::{
        Capabilities, DriverError, Fingerprint, HandleState, MockDriver, TaskConfig, number_value,
        string_value,
    };

    struct Harness {
        updates: mpsc::UnboundedReceiver<Box<TaskUpdate>>,
        kill: watch::Sender<Option<KillRequest>>,
        detach: CancellationToken,
        control: mpsc::UnboundedSender<TaskControl>,
        join: tokio::task::JoinHandle<Option<ParkedTask>>,
    }

    fn runner(
        config: Vec<(&str, prost_types::Value)>,
        policy: RestartPolicy,
        batch: bool,
    ) -> Harness {
        runner_with(config, policy, batch, Duration::ZERO)
    }

    fn runner_with(
        config: Vec<(&str, prost_types::Value)>,
        policy: RestartPolicy,
        batch: bool,
        shutdown_delay: Duration,
    ) -> Harness {
        let (tx, rx) = mpsc::unbounded_channel();
        let (kill_tx, kill_rx) = watch::channel(None);
        let detach = CancellationToken::new();
        let (control_tx, control) = mpsc::unbounded_channel();
        let r = TaskRunner {
            name: "t".into(),
            driver: Arc::new(MockDriver::new()),
            spec: TaskSpec {
                alloc_id: "a".into(),
                task: "t".into(),
                config: TaskConfig::from_pairs(config),
                env: None,
                dirs: None,
                logs: Default::default(),
                user: String::new(),
                resources: None,
                volume_mounts: Vec::new(),
                netns: None,
                group_net: Default::default(),
            },
            kill_signal: Signal::SIGTERM,
            kill_timeout: Duration::from_secs(5),
            shutdown_delay,
            restart: RestartTracker::new(&policy, batch).without_jitter(),
            state: TaskState {
                state: states::PENDING.into(),
                ..Default::default()
            },
            updates: tx,
            kill: kill_rx,
            detach: detach.clone(),
            control,
            trace_context: BTreeMap::new(),
            unrecorded: None,
            parked: None,
            prestart: None,
        };
        Harness {
            updates: persisting(rx),
            kill: kill_tx,
            detach,
            control: control_tx,
            join: tokio::spawn(r.run(None)),
        }
    }

    /// A driver with one run to adopt, which counts starts and releases.
    #[derive(Debug, Default)]
    struct Adopting {
        run: std::sync::Mutex<Option<Arc<dyn TaskHandle>>>,
        starts: std::sync::atomic::AtomicUsize,
        releases: std::sync::atomic::AtomicUsize,
    }

    #[async_trait::async_trait]
    impl Driver for Adopting {
        fn name(&self) -> &'static str {
            "mock"
        }
        fn capabilities(&self) -> Capabilities {
            MockDriver::new().capabilities()
        }
        async fn fingerprint(&self) -> Fingerprint {
            MockDriver::new().fingerprint().await
        }
        fn wants_env(&self) -> bool {
            false
        }
        async fn start(&self, spec: TaskSpec) -> Result<Arc<dyn TaskHandle>, DriverError> {
            self.starts.fetch_add(1, Ordering::SeqCst);
            MockDriver::new().start(spec).await
        }
        async fn recover(
            &self,
            spec: &TaskSpec,
            state: &HandleState,
        ) -> Option<Arc<dyn TaskHandle>> {
            MockDriver::new().recover(spec, state).await
        }
        async fn adopt(&self, _spec: &TaskSpec) -> Option<Arc<dyn TaskHandle>> {
            self.run.lock().unwrap().clone()
        }
        async fn release(&self, _spec: &TaskSpec) {
            self.run.lock().unwrap().take();
            self.releases.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_run_the_driver_holds_is_adopted_not_started_again() {
        let spec = TaskSpec {
            alloc_id: "a".into(),
            task: "t".into(),
            config: TaskConfig::from_pairs([("run_for", string_value("1s"))]),
            env: None,
            dirs: None,
            logs: Default::default(),
            user: String::new(),
            resources: None,
            volume_mounts: Vec::new(),
            netns: None,
            group_net: Default::default(),
        };
        let driver = Arc::new(Adopting::default());
        *driver.run.lock().unwrap() = Some(MockDriver::new().start(spec.clone()).await.unwrap());
        let (tx, rx) = mpsc::unbounded_channel();
        let (_kill_tx, kill_rx) = watch::channel(None);
        let r = TaskRunner {
            name: "t".into(),
            driver: driver.clone(),
            spec,
            kill_signal: Signal::SIGTERM,
            kill_timeout: Duration::from_secs(5),
            shutdown_delay: Duration::ZERO,
            restart: RestartTracker::new(&policy(2, "fail"), true).without_jitter(),
            state: TaskState {
                state: states::PENDING.into(),
                ..Default::default()
            },
            updates: tx,
            kill: kill_rx,
            detach: CancellationToken::new(),
            control: mpsc::unbounded_channel().1,
            trace_context: BTreeMap::new(),
            unrecorded: None,
            parked: None,
            prestart: None,
        };
        let mut rx = persisting(rx);
        r.run(None).await;
        let mut last = None;
        while let Some(u) = rx.recv().await {
            last = Some(u.state);
        }
        let s = last.unwrap();
        assert_eq!(s.state, "dead");
        assert!(!s.failed);
        assert_eq!(kinds(&s), vec!["Started", "Terminated"]);
        assert!(s.events[0].message.contains("adopted"), "{:?}", s.events[0]);
        assert_eq!(
            driver.starts.load(Ordering::SeqCst),
            0,
            "adopted, not started"
        );
        assert_eq!(driver.releases.load(Ordering::SeqCst), 1);
    }

    /// Stands for the alloc runner: persists every update at once and passes
    /// it on to the test.
    fn persisting(
        mut rx: mpsc::UnboundedReceiver<Box<TaskUpdate>>,
    ) -> mpsc::UnboundedReceiver<Box<TaskUpdate>> {
        let (tx, out) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(mut u) = rx.recv().await {
                if let Some(answer) = u.persisted.take() {
                    let _ = answer.send(true);
                }
                let _ = tx.send(u);
            }
        });
        out
    }

    /// The driver forgets a run that ended only once the alloc runner has
    /// persisted its end: a client killed in between would otherwise start
    /// again with neither a handle nor a run on record, and run the task a
    /// second time.
    #[tokio::test(start_paused = true)]
    async fn a_run_is_released_only_once_its_end_is_persisted() {
        let driver = Arc::new(Adopting::default());
        let (tx, mut rx) = mpsc::unbounded_channel();
        let (_kill_tx, kill_rx) = watch::channel(None);
        let r = TaskRunner {
            name: "t".into(),
            driver: driver.clone(),
            spec: TaskSpec {
                alloc_id: "a".into(),
                task: "t".into(),
                config: TaskConfig::from_pairs([("run_for", string_value("1s"))]),
                env: None,
                dirs: None,
                logs: Default::default(),
                user: String::new(),
                resources: None,
                volume_mounts: Vec::new(),
                netns: None,
                group_net: Default::default(),
            },
            kill_signal: Signal::SIGTERM,
            kill_timeout: Duration::from_secs(5),
            shutdown_delay: Duration::ZERO,
            restart: RestartTracker::new(&policy(2, "fail"), true).without_jitter(),
            state: TaskState {
                state: states::PENDING.into(),
                ..Default::default()
            },
            updates: tx,
            kill: kill_rx,
            detach: CancellationToken::new(),
            control: mpsc::unbounded_channel().1,
            trace_context: BTreeMap::new(),
            unrecorded: None,
            parked: None,
            prestart: None,
        };
        let join = tokio::spawn(r.run(None));
        // A slow alloc runner: it has the updates but has persisted none.
        let mut unanswered = Vec::new();
        loop {
            let mut u = rx.recv().await.unwrap();
            let dead = u.state.state == states::DEAD;
            unanswered.push(u.persisted.take().unwrap());
            if dead {
                break;
            }
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(
            driver.releases.load(Ordering::SeqCst),
            0,
            "the run was forgotten before its end was persisted"
        );
        for answer in unanswered {
            let _ = answer.send(true);
        }
        join.await.unwrap();
        assert_eq!(driver.starts.load(Ordering::SeqCst), 1);
        assert_eq!(driver.releases.load(Ordering::SeqCst), 1);
    }

    fn policy(attempts: i32, mode: &str) -> RestartPolicy {
        RestartPolicy {
            attempts,
            interval_ns: 3_600_000_000_000,
            delay_ns: 1_000_000_000,
            mode: mode.into(),
            on_success: false,
        }
    }

    async fn last(h: &mut Harness) -> TaskState {
        let mut last = None;
        while let Some(u) = h.updates.recv().await {
            last = Some(u.state);
        }
        last.unwrap()
    }

    fn kinds(s: &TaskState) -> Vec<&str> {
        s.events.iter().map(|e| e.r#type.as_str()).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn batch_success_is_dead_not_failed() {
        let mut h = runner(
            vec![("run_for", string_value("1s"))],
            policy(2, "fail"),
            true,
        );
        (&mut h.join).await.unwrap();
        let s = last(&mut h).await;
        assert_eq!(s.state, "dead");
        assert!(!s.failed);
        assert_eq!(kinds(&s), vec!["Started", "Terminated"]);
    }

    #[tokio::test(start_paused = true)]
    async fn failures_restart_then_fail() {
        let mut h = runner(
            vec![
                ("run_for", string_value("1s")),
                ("exit_code", number_value(2.0)),
            ],
            policy(2, "fail"),
            false,
        );
        (&mut h.join).await.unwrap();
        let s = last(&mut h).await;
        assert_eq!(s.state, "dead");
        assert!(s.failed);
        assert_eq!(s.restarts, 2);
        assert_eq!(
            kinds(&s),
            vec![
                "Started",
                "Terminated",
                "Restarting",
                "Started",
                "Terminated",
                "Restarting",
                "Started",
                "Terminated",
                "Not Restarting"
            ]
        );
        let term = s.events.iter().find(|e| e.r#type == "Terminated").unwrap();
        assert_eq!(term.exit_code, 2);
        let restarting = s.events.iter().find(|e| e.r#type == "Restarting").unwrap();
        assert_eq!(restarting.restart_delay_ns, 1_000_000_000);
        assert!(s.events.last().unwrap().fails_task);
    }

    #[tokio::test(start_paused = true)]
    async fn a_requested_restart_runs_the_task_again_in_place() {
        let mut h = runner(
            vec![("run_for", string_value("1h"))],
            policy(0, "fail"),
            false,
        );
        assert_eq!(h.updates.recv().await.unwrap().state.state, "running");
        h.control
            .send(TaskControl::Signaled("SIGUSR1".into()))
            .unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel();
        h.control.send(TaskControl::Restart(tx)).unwrap();
        rx.await.unwrap().unwrap();
        let s = loop {
            let u = h.updates.recv().await.unwrap();
            if u.state.state == "running" && u.state.restarts > 0 {
                break u.state;
            }
        };
        // A policy of no attempts does not stop a user's restart.
        assert_eq!(s.restarts, 1);
        assert_eq!(
            kinds(&s),
            vec![
                "Started",
                "Signaling",
                "Restart Signaled",
                "Terminated",
                "Restarting",
                "Started"
            ]
        );
        h.detach.cancel();
        (&mut h.join).await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_check_restart_is_a_failure_the_policy_counts() {
        let reason = "healthcheck: check \"alive\" unhealthy";
        let mut h = runner(
            vec![("run_for", string_value("1h"))],
            policy(1, "fail"),
            false,
        );
        assert_eq!(h.updates.recv().await.unwrap().state.state, "running");
        h.control
            .send(TaskControl::CheckRestart(reason.into()))
            .unwrap();
        let s = loop {
            let u = h.updates.recv().await.unwrap();
            if u.state.state == "running" && u.state.restarts > 0 {
                break u.state;
            }
        };
        assert_eq!(
            kinds(&s),
            vec![
                "Started",
                "Restart Signaled",
                "Terminated",
                "Restarting",
                "Started"
            ]
        );
        assert_eq!(s.events[1].message, reason);
        assert_eq!(s.events[3].message, "Restart within policy");
        // The policy's one attempt is spent: the next one fails the task.
        h.control
            .send(TaskControl::CheckRestart(reason.into()))
            .unwrap();
        (&mut h.join).await.unwrap();
        let s = last(&mut h).await;
        assert_eq!(s.state, "dead");
        assert!(s.failed);
        assert_eq!(s.events.last().unwrap().r#type, "Not Restarting");
    }

    #[tokio::test(start_paused = true)]
    async fn kill_stops_a_running_task() {
        let mut h = runner(
            vec![("run_for", string_value("1h"))],
            policy(2, "fail"),
            false,
        );
        let first = h.updates.recv().await.unwrap();
        assert_eq!(first.state.state, "running");
        assert_eq!(first.handle.as_ref().unwrap().state().driver(), "mock");
        h.kill
            .send(Some(KillRequest {
                cause: Some((
                    events::SIBLING_FAILED.into(),
                    "Task's sibling \"x\" failed".into(),
                )),
            }))
            .unwrap();
        (&mut h.join).await.unwrap();
        let s = last(&mut h).await;
        assert_eq!(s.state, "dead");
        assert!(!s.failed);
        assert_eq!(
            kinds(&s),
            vec![
                "Started",
                "Sibling Task Failed",
                "Killing",
                "Terminated",
                "Killed"
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_shutdown_delay_runs_before_the_kill_signal() {
        let mut h = runner_with(
            vec![("run_for", string_value("1h"))],
            policy(2, "fail"),
            false,
            Duration::from_secs(3),
        );
        assert_eq!(h.updates.recv().await.unwrap().state.state, "running");
        let began = Instant::now();
        h.kill.send(Some(KillRequest::default())).unwrap();
        (&mut h.join).await.unwrap();
        assert_eq!(began.elapsed(), Duration::from_secs(3));
        let s = last(&mut h).await;
        assert_eq!(
            kinds(&s),
            vec![
                "Started",
                "Waiting for shutdown delay",
                "Killing",
                "Terminated",
                "Killed"
            ]
        );
        assert_eq!(
            s.events[1].message,
            "Waiting for shutdown_delay of 3s before killing the task."
        );
    }

    #[tokio::test(start_paused = true)]
    async fn kill_during_the_restart_delay() {
        let mut h = runner(
            vec![
                ("run_for", string_value("1s")),
                ("exit_code", number_value(1.0)),
            ],
            policy(5, "fail"),
            false,
        );
        loop {
            let u = h.updates.recv().await.unwrap();
            if u.state.state == "pending" {
                break;
            }
        }
        h.kill.send(Some(KillRequest::default())).unwrap();
        (&mut h.join).await.unwrap();
        let s = last(&mut h).await;
        assert_eq!(s.state, "dead");
        assert_eq!(s.events.last().unwrap().r#type, "Killed");
    }

    #[tokio::test(start_paused = true)]
    async fn unrecoverable_start_error_fails_at_once() {
        let mut h = runner(
            vec![("start_error", string_value("no such image"))],
            policy(2, "fail"),
            false,
        );
        (&mut h.join).await.unwrap();
        let s = last(&mut h).await;
        assert!(s.failed);
        assert_eq!(kinds(&s), vec!["Driver Failure", "Not Restarting"]);
        assert_eq!(s.events[0].driver_error, "no such image");
    }

    #[tokio::test(start_paused = true)]
    async fn detach_leaves_the_task_alone() {
        let mut h = runner(
            vec![("run_for", string_value("1h"))],
            policy(2, "fail"),
            false,
        );
        let first = h.updates.recv().await.unwrap();
        assert_eq!(first.state.state, "running");
        h.detach.cancel();
        (&mut h.join).await.unwrap();
        assert!(
            h.updates.recv().await.is_none(),
            "no state change after a detach"
        );
    }

    #[test]
    fn events_are_capped() {
        let mut s = TaskState::default();
        for i in 0..25 {
            push_event(&mut s, event("X", i.to_string()));
        }
        assert_eq!(s.events.len(), MAX_EVENTS);
        assert_eq!(s.events[0].message, "15");
    }
}

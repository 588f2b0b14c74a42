//! Runs one alloc: builds its directory, runs its tasks concurrently, stops
//! them when the servers say so (or when the leader dies or a sibling fails),
//! persists their state for a client restart, and reports the alloc's status.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, AllocUpdate, Allocation, Job, JobType, Node, Task,
    TaskGroup, TaskState,
};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::alloc_dir::AllocDir;
use crate::driver::{Drivers, HandleState, TaskConfig, TaskHandle, TaskSpec, parse_signal};
use crate::lifecycle::{self, Phase};
use crate::restart::RestartTracker;
use crate::state_dir::{AllocRecord, StateDir, TaskRecord, TaskStateRecord};
use crate::status_reporter::StatusSink;
use crate::task_env::TaskEnv;
use crate::task_runner::{KillRequest, TaskRunner, TaskUpdate, event, events, push_event, states};

/// Kill timeout of a task that sets none.
const DEFAULT_KILL_TIMEOUT: Duration =
    Duration::from_nanos(caravan_jobspec::DEFAULT_KILL_TIMEOUT_NS as u64);

/// What every alloc runner of one node shares.
#[derive(Debug)]
pub struct NodeContext {
    /// The node, for the task env and interpolation.
    pub node: Arc<Node>,
    /// Its drivers.
    pub drivers: Drivers,
    /// Where alloc dirs live; `None` on simulated nodes (nothing touches disk).
    pub data_dir: Option<PathBuf>,
    /// Where alloc records persist; `None` on simulated nodes.
    pub state: Option<StateDir>,
    /// Status updates go here.
    pub sink: StatusSink,
    /// Cancelled when the client stops.
    pub shutdown: CancellationToken,
    /// Kill tasks when the client stops instead of leaving them running.
    pub stop_on_shutdown: bool,
    /// Cap on the kill timeout of any task.
    pub max_kill_timeout: Duration,
}

/// What the node tells a running alloc.
#[derive(Debug, Clone)]
pub enum AllocCommand {
    /// A newer version of the alloc from the servers.
    Update(Arc<Allocation>),
    /// The alloc is gone from the servers: stop everything and delete its dir.
    Destroy,
}

/// The alloc's status from its tasks' states, as Nomad computes it.
pub fn client_status(tasks: &BTreeMap<String, TaskState>) -> (AllocClientStatus, &'static str) {
    let (mut pending, mut running, mut dead, mut failed) = (false, false, false, false);
    for s in tasks.values() {
        match s.state.as_str() {
            states::RUNNING => running = true,
            states::DEAD if s.failed => failed = true,
            states::DEAD => dead = true,
            _ => pending = true,
        }
    }
    if failed {
        (AllocClientStatus::Failed, "Failed tasks")
    } else if running {
        (AllocClientStatus::Running, "Tasks are running")
    } else if pending {
        (AllocClientStatus::Pending, "No tasks have started")
    } else if dead {
        (AllocClientStatus::Complete, "All tasks have completed")
    } else {
        (AllocClientStatus::Pending, "No tasks")
    }
}

/// Whether the servers want the alloc stopped.
pub fn wants_stop(alloc: &Allocation) -> bool {
    matches!(
        alloc.desired_status(),
        AllocDesiredStatus::Stop | AllocDesiredStatus::Evict
    )
}

struct Slot {
    state: TaskState,
    handle: Option<HandleState>,
    kill: watch::Sender<Option<KillRequest>>,
    leader: bool,
}

/// One alloc's runner.
pub struct AllocRunner {
    ctx: Arc<NodeContext>,
    alloc: Arc<Allocation>,
    job: Arc<Job>,
    group: Option<Arc<TaskGroup>>,
    slots: BTreeMap<String, Slot>,
    /// Tasks handed to a runner (or failed on the way): never started twice.
    started: HashSet<String>,
    stopping: bool,
    stop_at: Option<Instant>,
    destroying: bool,
    detaching: bool,
    last_reported: Option<AllocUpdate>,
    /// Don't report (an orphan the servers don't know).
    quiet: bool,
    runners: JoinSet<()>,
    updates_tx: mpsc::UnboundedSender<TaskUpdate>,
    updates: mpsc::UnboundedReceiver<TaskUpdate>,
}

/// The handle the node keeps on a running alloc.
#[derive(Debug)]
pub struct AllocRunnerHandle {
    /// Commands to the runner.
    pub commands: mpsc::UnboundedSender<AllocCommand>,
    /// The runner's task; finished once the alloc is destroyed or the client stopped.
    pub join: tokio::task::JoinHandle<()>,
}

impl AllocRunner {
    /// Starts a runner for `alloc` of `job`; `recovered` is its record from
    /// before a client restart; a `quiet` runner reports nothing.
    pub fn spawn(
        ctx: Arc<NodeContext>,
        alloc: Arc<Allocation>,
        job: Arc<Job>,
        recovered: Option<AllocRecord>,
        quiet: bool,
    ) -> AllocRunnerHandle {
        let (tx, rx) = mpsc::unbounded_channel();
        let (updates_tx, updates) = mpsc::unbounded_channel();
        let runner = AllocRunner {
            ctx,
            alloc,
            job,
            group: None,
            slots: BTreeMap::new(),
            started: HashSet::new(),
            stopping: false,
            stop_at: None,
            destroying: false,
            detaching: false,
            last_reported: None,
            quiet,
            runners: JoinSet::new(),
            updates_tx,
            updates,
        };
        let join = tokio::spawn(runner.run(rx, recovered));
        AllocRunnerHandle { commands: tx, join }
    }

    fn find_group(&self) -> Option<&TaskGroup> {
        self.job
            .task_groups
            .iter()
            .find(|g| g.name == self.alloc.task_group)
    }

    fn alloc_dir(&self) -> Option<AllocDir> {
        let data_dir = self.ctx.data_dir.as_ref()?;
        AllocDir::new(data_dir, &self.alloc.id).ok()
    }

    async fn run(
        mut self,
        mut commands: mpsc::UnboundedReceiver<AllocCommand>,
        recovered: Option<AllocRecord>,
    ) {
        self.group = self.find_group().cloned().map(Arc::new);
        match self.group.clone() {
            None => {
                let msg = format!(
                    "task group {:?} is not in version {} of job {:?}",
                    self.alloc.task_group, self.alloc.job_version, self.alloc.job_id
                );
                self.report_with(AllocClientStatus::Failed, &msg);
            }
            Some(group) => match recovered {
                Some(rec) => self.restore(&group, rec),
                None => self.setup(&group),
            },
        }
        let stop_now = wants_stop(&self.alloc);
        if stop_now {
            self.begin_stop(&self.alloc.clone());
        }
        let mut shutdown_seen = false;
        loop {
            let stop_at = self.stop_at;
            tokio::select! {
                Some(u) = self.updates.recv() => self.on_task_update(u),
                Some(_) = self.runners.join_next(), if !self.runners.is_empty() => {}
                cmd = commands.recv(), if !self.destroying => match cmd {
                    Some(AllocCommand::Update(a)) => self.on_alloc_update(a),
                    Some(AllocCommand::Destroy) | None => {
                        self.destroying = true;
                        self.kill_all(KillRequest::default());
                    }
                },
                _ = async { if let Some(at) = stop_at { tokio::time::sleep_until(at).await } }, if stop_at.is_some() => {
                    self.stop_at = None;
                    self.kill_all(KillRequest::default());
                }
                _ = self.ctx.shutdown.cancelled(), if !shutdown_seen => {
                    shutdown_seen = true;
                    if self.ctx.stop_on_shutdown {
                        self.kill_all(KillRequest::default());
                    } else {
                        self.detaching = true;
                    }
                }
            }
            if self.runners.is_empty() && (self.destroying || shutdown_seen) {
                while let Ok(u) = self.updates.try_recv() {
                    self.on_task_update(u);
                }
                break;
            }
        }
        if self.destroying {
            if let Some(dir) = self.alloc_dir()
                && let Err(e) = dir.destroy()
            {
                tracing::warn!(alloc = %self.alloc.id, error = %e, "cannot remove alloc dir");
            }
            if let Some(state) = &self.ctx.state
                && let Err(e) = state.remove(&self.alloc.id)
            {
                tracing::warn!(alloc = %self.alloc.id, error = %e, "cannot remove alloc record");
            }
        }
    }

    /// First start: dirs, payload, task states, then the tasks.
    fn setup(&mut self, group: &TaskGroup) {
        for task in &group.tasks {
            let mut state = TaskState {
                state: states::PENDING.into(),
                ..Default::default()
            };
            push_event(
                &mut state,
                event(events::RECEIVED, "Task received by client"),
            );
            self.slots
                .insert(task.name.clone(), self.slot(state, task.leader));
        }
        if let Err(msg) = self.build_dirs(group) {
            for slot in self.slots.values_mut() {
                push_event(&mut slot.state, event(events::SETUP_FAILURE, msg.clone()));
                slot.state.state = states::DEAD.into();
                slot.state.failed = true;
            }
            self.persist();
            self.report();
            return;
        }
        for slot in self.slots.values_mut() {
            push_event(
                &mut slot.state,
                event(events::TASK_SETUP, "Building Task Directory"),
            );
        }
        self.persist();
        self.report();
        if wants_stop(&self.alloc) {
            for slot in self.slots.values_mut() {
                push_event(
                    &mut slot.state,
                    event(events::KILLED, "Task killed before it ran"),
                );
                slot.state.state = states::DEAD.into();
            }
            self.persist();
            self.report();
            return;
        }
        self.start_ready();
        self.settle_early_deaths();
    }

    /// Starts every task whose lifecycle phase allows it now.
    fn start_ready(&mut self) {
        let Some(group) = self.group.clone() else {
            return;
        };
        if self.ctx.shutdown.is_cancelled() && !self.ctx.stop_on_shutdown {
            return;
        }
        let ready = lifecycle::startable(&group, &self.task_states(), &self.started, self.stopping);
        for name in ready {
            if let Some(task) = group.tasks.iter().find(|t| t.name == name) {
                self.start_task(&group, task, None);
            }
        }
    }

    fn build_dirs(&self, group: &TaskGroup) -> Result<(), String> {
        let Some(dir) = self.alloc_dir() else {
            return Ok(());
        };
        dir.build(group.tasks.iter().map(|t| t.name.as_str()))
            .map_err(|e| e.to_string())?;
        if !self.job.payload.is_empty() {
            for task in group
                .tasks
                .iter()
                .filter(|t| !t.dispatch_payload_file.is_empty())
            {
                dir.write_payload(&task.name, &task.dispatch_payload_file, &self.job.payload)
                    .map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }

    /// After a client restart: re-attach to live tasks, mark lost ones failed,
    /// restart nothing that might still run.
    fn restore(&mut self, group: &TaskGroup, rec: AllocRecord) {
        for task in &group.tasks {
            let Some(tr) = rec.tasks.get(&task.name) else {
                let mut state = TaskState {
                    state: states::PENDING.into(),
                    ..Default::default()
                };
                push_event(
                    &mut state,
                    event(events::RECEIVED, "Task received by client"),
                );
                self.slots
                    .insert(task.name.clone(), self.slot(state, task.leader));
                continue;
            };
            let mut state = TaskState::from(&tr.state);
            let recovered = tr
                .handle
                .as_ref()
                .map(|h| self.ctx.drivers.for_state(h).and_then(|d| d.recover(h)));
            self.slots
                .insert(task.name.clone(), self.slot(state.clone(), task.leader));
            match recovered {
                Some(Some(handle)) => {
                    tracing::info!(alloc = %self.alloc.id, task = %task.name, "re-attached to task");
                    self.start_task(group, task, Some(handle));
                }
                Some(None) => {
                    push_event(
                        &mut state,
                        event(events::TASK_LOST, "client restarted; task lost"),
                    );
                    state.state = states::DEAD.into();
                    state.failed = true;
                    state.finished_at_unix_ns = crate::driver::now_unix_ns();
                    self.started.insert(task.name.clone());
                    if let Some(slot) = self.slots.get_mut(&task.name) {
                        slot.state = state;
                    }
                }
                None if state.state == states::DEAD => {
                    self.started.insert(task.name.clone());
                }
                // Nothing runs (never started, or waiting to restart): it may
                // start when its phase allows.
                None => {}
            }
        }
        if wants_stop(&self.alloc) {
            self.stopping = true;
            self.kill_all(KillRequest::default());
        }
        self.start_ready();
        self.settle_early_deaths();
    }

    fn slot(&self, state: TaskState, leader: bool) -> Slot {
        Slot {
            state,
            handle: None,
            kill: watch::channel(None).0,
            leader,
        }
    }

    fn fail_task(&mut self, task: &str, kind: &str, msg: String) {
        if let Some(slot) = self.slots.get_mut(task) {
            let mut ev = event(kind, msg.clone());
            ev.driver_error = msg;
            ev.fails_task = true;
            push_event(&mut slot.state, ev);
            slot.state.state = states::DEAD.into();
            slot.state.failed = true;
            slot.state.finished_at_unix_ns = crate::driver::now_unix_ns();
        }
    }

    fn start_task(
        &mut self,
        group: &TaskGroup,
        task: &Task,
        recovered: Option<Arc<dyn TaskHandle>>,
    ) {
        if !self.started.insert(task.name.clone()) {
            return;
        }
        let Some(driver) = self.ctx.drivers.get(&task.driver) else {
            let msg = format!("missing driver {:?} on this node", task.driver);
            return self.fail_task(&task.name, events::DRIVER_FAILURE, msg);
        };
        let kill_signal = match parse_signal(&task.kill_signal) {
            Ok(s) => s,
            Err(e) => {
                return self.fail_task(
                    &task.name,
                    events::SETUP_FAILURE,
                    format!("kill_signal: {e}"),
                );
            }
        };
        let dirs = match self.alloc_dir().map(|d| d.task(&task.name)).transpose() {
            Ok(d) => d,
            Err(e) => return self.fail_task(&task.name, events::SETUP_FAILURE, e.to_string()),
        };
        let env = driver.wants_env().then(|| {
            TaskEnv::build(
                self.ctx.node.clone(),
                &self.alloc,
                &self.job,
                group,
                task,
                dirs.as_ref(),
            )
        });
        let policy = task
            .restart_policy
            .clone()
            .or_else(|| group.restart_policy.clone())
            .unwrap_or_else(|| crate::restart::default_policy(self.job.r#type()));
        let batch = matches!(self.job.r#type(), JobType::Batch | JobType::Sysbatch)
            || Phase::of(task).is_ephemeral();
        let kill_timeout = u64::try_from(task.kill_timeout_ns)
            .ok()
            .filter(|n| *n > 0)
            .map_or(DEFAULT_KILL_TIMEOUT, Duration::from_nanos)
            .min(self.ctx.max_kill_timeout);
        let Some(slot) = self.slots.get(&task.name) else {
            return;
        };
        let runner = TaskRunner {
            name: task.name.clone(),
            driver,
            spec: TaskSpec {
                alloc_id: self.alloc.id.clone(),
                task: task.name.clone(),
                config: TaskConfig(task.config.clone().unwrap_or_default()),
                env,
                dirs,
            },
            kill_signal,
            kill_timeout,
            restart: RestartTracker::new(&policy, batch),
            state: slot.state.clone(),
            updates: self.updates_tx.clone(),
            kill: slot.kill.subscribe(),
            detach: if self.ctx.stop_on_shutdown {
                CancellationToken::new()
            } else {
                self.ctx.shutdown.clone()
            },
        };
        self.runners.spawn(runner.run(recovered));
    }

    fn on_task_update(&mut self, u: TaskUpdate) {
        let Some(slot) = self.slots.get_mut(&u.task) else {
            return;
        };
        let dead = u.state.state == states::DEAD;
        let failed = u.state.failed;
        let leader = slot.leader;
        slot.handle = if dead { None } else { u.handle };
        slot.state = u.state;
        self.persist();
        if dead {
            self.after_death(&u.task, failed, leader);
            self.stop_sidecars_after_main();
        }
        self.start_ready();
        if !self.detaching {
            self.report();
        }
    }

    /// Sidecars live as long as the main tasks.
    fn stop_sidecars_after_main(&mut self) {
        let Some(group) = self.group.clone() else {
            return;
        };
        if !lifecycle::main_tasks_dead(&group, &self.task_states()) {
            return;
        }
        for t in group.tasks.iter().filter(|t| Phase::of(t).is_sidecar()) {
            if let Some(slot) = self.slots.get(&t.name)
                && self.started.contains(&t.name)
                && slot.state.state != states::DEAD
                && slot.kill.borrow().is_none()
            {
                let _ = slot.kill.send(Some(KillRequest {
                    cause: Some((
                        events::MAIN_DEAD.into(),
                        "Main tasks of the group are dead".into(),
                    )),
                }));
            }
        }
    }

    /// A failed task takes its siblings down; so does a dead leader.
    fn after_death(&mut self, task: &str, failed: bool, leader: bool) {
        if self.stopping {
            return;
        }
        if failed {
            self.kill_all(KillRequest {
                cause: Some((
                    events::SIBLING_FAILED.into(),
                    format!("Task's sibling {task:?} failed"),
                )),
            });
        } else if leader {
            self.kill_all(KillRequest {
                cause: Some((
                    events::LEADER_DEAD.into(),
                    format!("Leader Task {task:?} is dead"),
                )),
            });
        }
    }

    /// After tasks were handed to runners: those that failed before running
    /// (no driver, bad kill signal) affect their siblings too.
    fn settle_early_deaths(&mut self) {
        let failed = self
            .slots
            .iter()
            .find(|(_, s)| s.state.state == states::DEAD && s.state.failed)
            .map(|(name, _)| name.clone());
        if let Some(task) = failed {
            self.after_death(&task, true, false);
        }
        self.persist();
        self.report();
    }

    fn on_alloc_update(&mut self, alloc: Arc<Allocation>) {
        self.alloc = alloc.clone();
        if wants_stop(&alloc) && !self.stopping {
            self.begin_stop(&alloc);
        }
    }

    fn begin_stop(&mut self, alloc: &Allocation) {
        let delay = self
            .group
            .as_ref()
            .map(|g| g.shutdown_delay_ns)
            .and_then(|n| u64::try_from(n).ok())
            .filter(|n| *n > 0)
            .map(Duration::from_nanos);
        match delay {
            Some(d) => {
                self.stopping = true;
                self.stop_at = Some(Instant::now() + d);
            }
            None => self.kill_all(KillRequest::default()),
        }
        tracing::debug!(alloc = %alloc.id, desired = ?alloc.desired_status(), "stopping alloc");
    }

    /// Stops every started task; those not started yet never will be, except
    /// poststop tasks, which run once everything else is dead.
    fn kill_all(&mut self, req: KillRequest) {
        self.stopping = true;
        let poststop: HashSet<&str> = self
            .group
            .iter()
            .flat_map(|g| g.tasks.iter())
            .filter(|t| Phase::of(t) == Phase::Poststop)
            .map(|t| t.name.as_str())
            .collect();
        let mut never_started = Vec::new();
        for (name, slot) in self.slots.iter_mut() {
            if slot.state.state == states::DEAD {
                continue;
            }
            if self.started.contains(name) {
                if slot.kill.borrow().is_none() {
                    let _ = slot.kill.send(Some(req.clone()));
                }
            } else if !poststop.contains(name.as_str()) {
                push_event(
                    &mut slot.state,
                    event(events::KILLED, "Task killed before it ran"),
                );
                slot.state.state = states::DEAD.into();
                never_started.push(name.clone());
            }
        }
        if !never_started.is_empty() {
            self.started.extend(never_started);
            self.persist();
            if !self.detaching {
                self.report();
            }
            self.start_ready();
        }
    }

    fn task_states(&self) -> BTreeMap<String, TaskState> {
        self.slots
            .iter()
            .map(|(k, s)| (k.clone(), s.state.clone()))
            .collect()
    }

    fn persist(&self) {
        let Some(state) = &self.ctx.state else {
            return;
        };
        let (status, _) = client_status(&self.task_states());
        let rec = AllocRecord {
            alloc_id: self.alloc.id.clone(),
            client_status: status as i32,
            tasks: self
                .slots
                .iter()
                .map(|(k, s)| {
                    (
                        k.clone(),
                        TaskRecord {
                            state: TaskStateRecord::from(&s.state),
                            handle: s.handle.clone(),
                        },
                    )
                })
                .collect(),
        };
        if let Err(e) = state.save(&rec) {
            tracing::error!(alloc = %self.alloc.id, error = %e, "cannot persist alloc state");
        }
    }

    fn report(&mut self) {
        let states = self.task_states();
        let (status, desc) = client_status(&states);
        self.report_states(status, desc, states);
    }

    fn report_with(&mut self, status: AllocClientStatus, desc: &str) {
        let states = self.task_states();
        self.report_states(status, desc, states);
    }

    fn report_states(
        &mut self,
        status: AllocClientStatus,
        desc: &str,
        states: BTreeMap<String, TaskState>,
    ) {
        let mut u = AllocUpdate {
            alloc_id: self.alloc.id.clone(),
            client_description: desc.to_string(),
            task_states: states,
            ..Default::default()
        };
        u.set_client_status(status);
        if self.quiet || self.last_reported.as_ref() == Some(&u) {
            return;
        }
        self.last_reported = Some(u.clone());
        self.ctx.sink.report(u);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(state: &str, failed: bool) -> TaskState {
        TaskState {
            state: state.into(),
            failed,
            ..Default::default()
        }
    }

    #[test]
    fn client_status_follows_nomad() {
        let mut m = BTreeMap::new();
        m.insert("a".to_string(), st("pending", false));
        assert_eq!(client_status(&m).0, AllocClientStatus::Pending);
        m.insert("b".to_string(), st("running", false));
        assert_eq!(client_status(&m).0, AllocClientStatus::Running);
        m.insert("a".to_string(), st("dead", false));
        assert_eq!(client_status(&m).0, AllocClientStatus::Running);
        m.insert("b".to_string(), st("dead", false));
        assert_eq!(client_status(&m).0, AllocClientStatus::Complete);
        m.insert("c".to_string(), st("dead", true));
        assert_eq!(client_status(&m).0, AllocClientStatus::Failed);
        m.insert("d".to_string(), st("running", false));
        assert_eq!(client_status(&m).0, AllocClientStatus::Failed);
    }
}

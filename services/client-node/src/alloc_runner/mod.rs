//! Runs one alloc: builds its directory, runs its tasks concurrently, stops
//! them when the servers say so (or when the leader dies or a sibling fails),
//! persists their state for a client restart, and reports the alloc's status.

mod mailbox;
mod park;
mod services;
mod setup;
mod status;
mod task_spec;

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use caravan_model::{AllocExt, JobTypeExt, now_unix_ns};
use caravan_proto::{
    AllocClientStatus, AllocUpdate, Allocation, Job, Node, Task, TaskGroup, TaskState,
};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::alloc_dir::AllocDir;
use crate::checks::alloc_services::AllocServices;
use crate::driver::{Drivers, TaskHandle, parse_signal};
use crate::health::HealthTracker;
use crate::lifecycle::{self, Phase};
use crate::live_allocs::{LiveAllocs, RestartTickets, TaskView};
use crate::network::{self, Networks};
use crate::prestart::{self, Prestart};
use crate::restart::RestartTracker;
use crate::shared_jobs::SharedJobs;
use crate::state_dir::{AllocRecord, StateDir};
use crate::status_reporter::StatusSink;
use crate::task_runner::{
    KillRequest, ParkedTask, TaskControl, TaskRunner, TaskUpdate, event, events, push_event, states,
};
pub use mailbox::{CommandReceiver, CommandSender, WeakCommandSender};
use park::{ParkedAlloc, Wake};

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
    /// Job versions, shared with the process's other nodes.
    pub jobs: Arc<SharedJobs>,
    /// The live allocs, for the node's API.
    pub live: Arc<LiveAllocs>,
    /// A simulated node: an alloc whose tasks all run gives up its runners
    /// until something happens to it (a command, a run's natural end, the
    /// client's stop), and runners keep only the parts of an alloc they
    /// read (no task environment is built).
    pub simulated: bool,
    /// When the node last reached the servers.
    pub contact: Arc<crate::server_contact::ServerContact>,
    /// The servers as this node, for tasks' prestart hooks; `None` on
    /// simulated nodes (their tasks have none).
    pub api: Option<Arc<crate::node_api::NodeApi>>,
    /// The client's settings for prestart hooks.
    pub hook_config: Arc<prestart::HookConfig>,
}

/// What the node tells a running alloc.
#[derive(Debug)]
pub enum AllocCommand {
    /// A newer version of the alloc from the servers.
    Update(Arc<Allocation>),
    /// A newer version of the alloc at another version of its job: an
    /// in-place update (boxed: a pair would widen every command).
    UpdateJob(Box<(Arc<Allocation>, Arc<Job>)>),
    /// The alloc is gone from the servers: stop everything and delete its dir.
    Destroy,
    /// What the alloc's tasks are doing.
    Tasks(oneshot::Sender<BTreeMap<String, TaskView>>),
    /// Restart a task (or every running one; with `all`, every task) in
    /// place. (Boxed, as is `Signaled`: every alloc's channel allocates
    /// room for 32 commands up front.)
    Restart(Box<RestartRequest>),
    /// The task's process was sent a signal: its runner records it.
    Signaled(Box<TaskSignaled>),
    /// Garbage-collect a finished alloc: delete its dir and record. The
    /// answer is false (and nothing happens) while a task is not dead;
    /// true once the dir is gone.
    Gc(oneshot::Sender<bool>),
}

/// A restart a user asked for.
#[derive(Debug)]
pub struct RestartRequest {
    /// Only this task.
    pub task: Option<String>,
    /// Every task, running or not.
    pub all: bool,
    /// The tasks asked, each with where its outcome comes; `Err` when
    /// none can be.
    pub reply: oneshot::Sender<Result<RestartTickets, String>>,
}

/// A signal sent to a task's process.
#[derive(Debug)]
pub struct TaskSignaled {
    /// The task.
    pub task: String,
    /// The signal's name.
    pub signal: String,
}

struct Slot {
    state: TaskState,
    /// The running task, if any.
    handle: Option<Arc<dyn TaskHandle>>,
    kill: watch::Sender<Option<KillRequest>>,
    leader: bool,
    /// Restarts and signals users ask for go to the task's runner here.
    control: mpsc::UnboundedSender<TaskControl>,
    /// The runner's end, until the task is handed to one.
    control_rx: Option<mpsc::UnboundedReceiver<TaskControl>>,
    /// The run its runner handed back while the alloc parks.
    parked: Option<ParkedTask>,
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
    /// Answered once a garbage collection removed the dir.
    gc_reply: Option<oneshot::Sender<bool>>,
    detaching: bool,
    last_reported: Option<AllocUpdate>,
    /// Don't report (an orphan the servers don't know).
    quiet: bool,
    /// Deployment health, while undecided.
    health: Option<HealthTracker>,
    /// The health decided for the current deployment, with when.
    health_verdict: Option<(bool, i64)>,
    runners: JoinSet<Option<ParkedTask>>,
    /// Runners were asked to hand their runs back: the alloc parks once
    /// they all have, unless something happens first.
    parking: bool,
    /// Its services' registrations and checks.
    services: AllocServices,
    // Boxed: a channel allocates room for 32 messages up front, and a node
    // runs hundreds of these.
    updates_tx: mpsc::UnboundedSender<Box<TaskUpdate>>,
    updates: mpsc::UnboundedReceiver<Box<TaskUpdate>>,
}

/// The handle the node keeps on a running alloc.
#[derive(Debug)]
pub struct AllocRunnerHandle {
    /// Commands to the runner.
    pub commands: CommandSender,
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
        let (tx, rx) = mailbox::mailbox();
        ctx.live.insert(&alloc.id, &tx);
        let ctx_simulated = ctx.simulated;
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
            gc_reply: None,
            detaching: false,
            last_reported: None,
            quiet,
            health: None,
            health_verdict: None,
            runners: JoinSet::new(),
            updates_tx,
            updates,
            parking: false,
            services: AllocServices::new(!ctx_simulated),
        };
        // Boxed, as is the runner's future below: a parked alloc keeps only
        // this task's small future, which holds what it captures for good.
        let start = Box::new((runner, recovered));
        let join = tokio::spawn(async move {
            let mut commands = rx;
            // (Out of the box at once: the box is freed here, not at the end.)
            let (runner, recovered) = {
                let start = start;
                *start
            };
            let mut parked = Box::pin(runner.run(&mut commands, recovered)).await;
            while let Some(mut p) = parked {
                parked = match p.wait(&mut commands).await {
                    Wake::Health => {
                        p.check_health();
                        Some(p)
                    }
                    Wake::Shutdown => {
                        // As a runner detaching: the tasks are left running.
                        p.ctx.live.remove(&p.alloc_id());
                        None
                    }
                    Wake::Due => Box::pin(AllocRunner::resume(p).drive(&mut commands, None)).await,
                    Wake::Command(c) => {
                        Box::pin(AllocRunner::resume(p).drive(&mut commands, Some(c))).await
                    }
                };
            }
        });
        AllocRunnerHandle { commands: tx, join }
    }

    /// The node's alloc network namespaces; `None` on simulated nodes.
    fn networks(&self) -> Option<Networks> {
        if self.ctx.simulated {
            return None;
        }
        let data_dir = self.ctx.data_dir.as_ref()?;
        Some(Networks::new(data_dir, network::DEFAULT_PLUGIN_DIR))
    }

    /// Detaches and removes the alloc's network namespace, if it has one,
    /// on a blocking thread (the plugins are processes); the returned task
    /// ends when it is done.
    /// The infra container of a group with docker tasks goes after the
    /// plugins detached its namespace.
    fn teardown_network(&self) -> Option<tokio::task::JoinHandle<()>> {
        let networks = self.networks()?;
        let alloc_id = self.alloc.id.clone();
        let holder = self.group.as_ref().and_then(|g| self.infra_driver(g));
        Some(tokio::spawn(async move {
            let id = alloc_id.clone();
            let done = tokio::task::spawn_blocking(move || networks.teardown(&id)).await;
            match done {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(alloc = %alloc_id, error = %e, "cannot tear down alloc network")
                }
                Err(e) => tracing::warn!(alloc = %alloc_id, error = %e, "alloc network teardown"),
            }
            if let Some(driver) = holder {
                driver.remove_infra(&alloc_id).await;
            }
        }))
    }

    /// The driver whose infra container holds the namespace of `group`'s
    /// alloc: docker, when a `bridge`/`none` group has a docker task.
    fn infra_driver(&self, group: &TaskGroup) -> Option<Arc<dyn crate::driver::Driver>> {
        network::GroupNetwork::of(group)?;
        group.tasks.iter().find(|t| t.driver == "docker")?;
        self.ctx.drivers.get("docker")
    }

    /// Once every task is dead and the servers want the alloc stopped, its
    /// namespace goes: nothing will run in it again.
    fn teardown_network_when_done(&self) {
        let all_dead = self.slots.values().all(|s| s.state.state == states::DEAD);
        if all_dead && self.alloc.is_server_terminal() {
            drop(self.teardown_network());
        }
    }

    fn alloc_dir(&self) -> Option<AllocDir> {
        let data_dir = self.ctx.data_dir.as_ref()?;
        AllocDir::new(data_dir, &self.alloc.id).ok()
    }

    async fn run(
        mut self,
        commands: &mut CommandReceiver,
        recovered: Option<AllocRecord>,
    ) -> Option<ParkedAlloc> {
        self.group = self.ctx.jobs.group(&self.job, &self.alloc.task_group);
        self.health = self
            .group
            .as_ref()
            .and_then(|g| HealthTracker::for_alloc(&self.alloc, &self.job, g, Instant::now()));
        match self.group.clone() {
            None => {
                let msg = format!(
                    "task group {:?} is not in version {} of job {:?}",
                    self.alloc.task_group, self.alloc.job_version, self.alloc.job_id
                );
                self.report_with(AllocClientStatus::Failed, &msg);
            }
            Some(group) => match recovered {
                Some(rec) => self.restore(&group, rec).await,
                None => self.setup(&group).await,
            },
        }
        let stop_now = self.alloc.is_server_terminal();
        if stop_now {
            self.begin_stop(&self.alloc.clone());
        }
        self.drive(commands, None).await
    }

    /// Runs the alloc until it ends (`None`) or parks; `first` is a
    /// command to handle first (the one that woke it from a park).
    async fn drive(
        mut self,
        commands: &mut CommandReceiver,
        first: Option<Option<AllocCommand>>,
    ) -> Option<ParkedAlloc> {
        if let Some(cmd) = first {
            self.on_command(cmd);
        }
        let mut shutdown_seen = false;
        loop {
            self.begin_parking_if_idle();
            let stop_at = self.stop_at;
            let health_at = self.health.as_ref().and_then(HealthTracker::next_check);
            let cut_off_at = self.cut_off_deadline();
            tokio::select! {
                Some(u) = self.updates.recv() => self.on_task_update(*u),
                r = self.services.next_report(), if self.services.checking() => self.on_check_report(r),
                Some(ended) = self.runners.join_next(), if !self.runners.is_empty() => {
                    if let Ok(Some(run)) = ended {
                        self.on_parked(run);
                    }
                }
                cmd = commands.recv(), if !self.destroying => self.on_command(cmd),
                _ = async { if let Some(at) = stop_at { tokio::time::sleep_until(at).await } }, if stop_at.is_some() => {
                    self.stop_at = None;
                    self.kill_all(KillRequest::default());
                }
                _ = async { if let Some(at) = health_at { tokio::time::sleep_until(at).await } }, if health_at.is_some() && !self.detaching => {
                    self.check_health();
                    self.report();
                }
                _ = async { if let Some(at) = cut_off_at { tokio::time::sleep_until(at).await } }, if cut_off_at.is_some() => {
                    self.stop_if_cut_off();
                }
                _ = self.ctx.shutdown.cancelled(), if !shutdown_seen => {
                    shutdown_seen = true;
                    self.cancel_parking();
                    if self.ctx.stop_on_shutdown {
                        self.kill_all(KillRequest::default());
                    } else {
                        self.detaching = true;
                    }
                }
            }
            if self.runners.is_empty() && (self.destroying || shutdown_seen) {
                while let Ok(u) = self.updates.try_recv() {
                    self.on_task_update(*u);
                }
                break;
            }
            if self.parking
                && self.runners.is_empty()
                && let Some(parked) = self.park()
            {
                return Some(parked);
            }
        }
        self.ctx.live.remove(&self.alloc.id);
        if self.destroying {
            if let Some(done) = self.teardown_network() {
                let _ = done.await;
            }
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
            if let Some(reply) = self.gc_reply.take() {
                let _ = reply.send(true);
            }
        }
        None
    }

    fn on_command(&mut self, cmd: Option<AllocCommand>) {
        self.cancel_parking();
        match cmd {
            Some(AllocCommand::Update(a)) => self.on_alloc_update(a),
            Some(AllocCommand::UpdateJob(update)) => {
                let (alloc, job) = *update;
                self.on_job_update(alloc, job);
            }
            Some(AllocCommand::Destroy) | None => {
                self.destroying = true;
                self.kill_all(KillRequest::default());
            }
            Some(AllocCommand::Tasks(reply)) => {
                let _ = reply.send(self.task_views());
            }
            Some(AllocCommand::Signaled(sent)) => {
                if let Some(slot) = self.slots.get(&sent.task) {
                    let _ = slot
                        .control
                        .send(TaskControl::Signaled(sent.signal.into_boxed_str()));
                }
            }
            Some(AllocCommand::Restart(req)) => {
                let _ = req
                    .reply
                    .send(self.restart_tasks(req.task.as_deref(), req.all));
            }
            Some(AllocCommand::Gc(reply)) => {
                if self.slots.values().all(|s| s.state.state == states::DEAD) {
                    self.destroying = true;
                    self.gc_reply = Some(reply);
                } else {
                    let _ = reply.send(false);
                }
            }
        }
    }

    fn task_views(&self) -> BTreeMap<String, TaskView> {
        self.slots
            .iter()
            .map(|(name, slot)| {
                let capabilities = self
                    .group
                    .as_ref()
                    .and_then(|g| g.tasks.iter().find(|t| t.name == *name))
                    .and_then(|t| self.ctx.drivers.get(&t.driver))
                    .map(|d| d.capabilities());
                let view = TaskView {
                    state: slot.state.state.clone(),
                    handle: slot.handle.clone(),
                    capabilities,
                };
                (name.clone(), view)
            })
            .collect()
    }

    /// Asks the runners of the running tasks to restart (Nomad restarts
    /// only running tasks; `all` asks for every task, and a dead one is
    /// refused like one not running).
    fn restart_tasks(&self, task: Option<&str>, all: bool) -> Result<RestartTickets, String> {
        if self.stopping || self.destroying {
            return Err("Allocation is stopping".into());
        }
        let names: Vec<&String> = match task {
            Some(name) => {
                let (key, _) = self
                    .slots
                    .get_key_value(name)
                    .ok_or_else(|| format!("Could not find task runner for task: {name}"))?;
                vec![key]
            }
            None => self.slots.keys().collect(),
        };
        let mut tickets = Vec::new();
        for name in names {
            let slot = &self.slots[name];
            let running = slot.state.state == states::RUNNING && slot.handle.is_some();
            if !running {
                if task.is_some() || all {
                    return Err(format!("Task not running: {name}"));
                }
                continue;
            }
            let (tx, rx) = oneshot::channel();
            if slot.control.send(TaskControl::Restart(tx)).is_err() {
                return Err(format!("Task not running: {name}"));
            }
            tickets.push((name.clone(), rx));
        }
        if tickets.is_empty() {
            return Err("Task not running".into());
        }
        Ok(tickets)
    }

    fn slot(&self, state: TaskState, leader: bool) -> Slot {
        let (control, control_rx) = mpsc::unbounded_channel();
        Slot {
            state,
            handle: None,
            kill: watch::channel(None).0,
            leader,
            control,
            control_rx: Some(control_rx),
            parked: None,
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
            slot.state.finished_at_unix_ns = now_unix_ns();
        }
    }

    /// Hands `task` to a runner; `recovered` is a run to re-attach to,
    /// `restart` its restart bookkeeping so far (after a park).
    fn start_task(
        &mut self,
        group: &TaskGroup,
        task: &Task,
        recovered: Option<Arc<dyn TaskHandle>>,
        restart: Option<RestartTracker>,
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
        let spec = match self.task_spec(group, task, driver.as_ref()) {
            Ok(s) => s,
            Err(e) => return self.fail_task(&task.name, events::SETUP_FAILURE, e),
        };
        let policy = task
            .restart_policy
            .clone()
            .or_else(|| group.restart_policy.clone())
            .unwrap_or_else(|| crate::restart::default_policy(self.job.r#type()));
        let batch = self.job.r#type().runs_to_completion() || Phase::of(task).is_ephemeral();
        let kill_timeout = u64::try_from(task.kill_timeout_ns)
            .ok()
            .filter(|n| *n > 0)
            .map_or(DEFAULT_KILL_TIMEOUT, Duration::from_nanos)
            .min(self.ctx.max_kill_timeout);
        let prestart = self.prestart_for(task);
        let Some(slot) = self.slots.get_mut(&task.name) else {
            return;
        };
        let control = slot
            .control_rx
            .take()
            .unwrap_or_else(|| mpsc::unbounded_channel().1);
        let runner = TaskRunner {
            name: task.name.clone(),
            driver,
            spec,
            kill_signal,
            kill_timeout,
            shutdown_delay: u64::try_from(task.shutdown_delay_ns)
                .map_or(Duration::ZERO, Duration::from_nanos),
            restart: restart.unwrap_or_else(|| RestartTracker::new(&policy, batch)),
            state: slot.state.clone(),
            updates: self.updates_tx.clone(),
            kill: slot.kill.subscribe(),
            control,
            trace_context: self
                .alloc
                .trace_context
                .as_ref()
                .map(|t| t.fields.clone())
                .unwrap_or_default(),
            unrecorded: None,
            parked: None,
            prestart,
            detach: if self.ctx.stop_on_shutdown {
                CancellationToken::new()
            } else {
                self.ctx.shutdown.clone()
            },
        };
        self.runners.spawn(runner.run(recovered));
    }

    /// The task's prestart hooks, if it has any (none on simulated nodes).
    fn prestart_for(&self, task: &Task) -> Option<Box<Prestart>> {
        if self.ctx.simulated {
            return None;
        }
        let hooks = prestart::hooks_for(task, &self.ctx.hook_config);
        if hooks.is_empty() {
            return None;
        }
        let control = self.slots.get(&task.name)?.control.clone();
        Some(Box::new(Prestart {
            hooks,
            task: Arc::new(task.clone()),
            alloc: Arc::clone(&self.alloc),
            job: Arc::clone(&self.job),
            api: self.ctx.api.clone(),
            control,
        }))
    }

    fn on_task_update(&mut self, u: TaskUpdate) {
        self.cancel_parking();
        let Some(slot) = self.slots.get_mut(&u.task) else {
            return;
        };
        let dead = u.state.state == states::DEAD;
        let failed = u.state.failed;
        let leader = slot.leader;
        slot.handle = if dead { None } else { u.handle };
        slot.state = u.state;
        let persisted = self.persist();
        if let Some(answer) = u.persisted {
            let _ = answer.send(persisted);
        }
        if dead {
            self.after_death(&u.task, failed, leader);
            self.stop_sidecars_after_main();
            self.teardown_network_when_done();
        }
        self.start_ready();
        self.check_health();
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
                // Kept even while no runner listens (one parked meanwhile):
                // the next runner of the task sees it.
                slot.kill.send_replace(Some(KillRequest {
                    cause: Some((
                        events::MAIN_DEAD.into(),
                        "Main tasks of the group are dead".into(),
                    )),
                }));
            }
        }
    }

    /// When the group's `stop_on_client_after` runs out, counted from the
    /// node's last contact with the servers; `None` when the group has none
    /// or the alloc is stopping anyway.
    fn cut_off_deadline(&self) -> Option<Instant> {
        if self.stopping || self.destroying {
            return None;
        }
        let after = caravan_model::disconnect::stop_on_client_after_ns(self.group.as_deref()?)?;
        let after = Duration::from_nanos(u64::try_from(after).unwrap_or(0));
        Some(self.ctx.contact.last_ok() + after)
    }

    /// Stops the tasks when the servers have not answered for the group's
    /// `stop_on_client_after`: they will have replaced the alloc by now.
    fn stop_if_cut_off(&mut self) {
        let Some(group) = self.group.clone() else {
            return;
        };
        let Some(after) = caravan_model::disconnect::stop_on_client_after_ns(&group) else {
            return;
        };
        let after = Duration::from_nanos(u64::try_from(after).unwrap_or(0));
        if self.stopping || !self.ctx.contact.lost_for(after) {
            return;
        }
        tracing::warn!(alloc = %self.alloc.id, after_ms = after.as_millis() as u64,
            "no contact with the servers for the group's stop_on_client_after; stopping the alloc");
        self.kill_all(KillRequest {
            cause: Some((
                events::SERVERS_UNREACHABLE.into(),
                format!(
                    "No contact with the servers for {}s (stop_on_client_after)",
                    after.as_secs()
                ),
            )),
        });
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

    pub(super) fn on_alloc_update(&mut self, alloc: Arc<Allocation>) {
        let canary = |a: &Allocation| a.deployment_status.as_ref().is_some_and(|d| d.canary);
        let promoted = canary(&self.alloc) != canary(&alloc);
        if alloc.deployment_id != self.alloc.deployment_id {
            // An in-place update into a new deployment: its health starts over.
            self.health_verdict = None;
            self.health = self
                .group
                .as_ref()
                .and_then(|g| HealthTracker::for_alloc(&alloc, &self.job, g, Instant::now()));
            self.alloc = alloc.clone();
            // Tasks already running start the new deployment's clock now;
            // no task event would start it.
            self.check_health();
        }
        self.alloc = alloc.clone();
        if promoted {
            // A promotion: the registrations take the tags of a non-canary.
            self.services.set_canary(canary(&alloc));
            if self.services.has_unsent() && !self.detaching {
                self.report();
            }
        }
        if alloc.is_server_terminal() && !self.stopping {
            self.begin_stop(&alloc);
        } else if alloc.client_status() == AllocClientStatus::Unknown {
            // The servers marked it unknown while this node was away: tell
            // them how it is, even if nothing changed here since.
            self.last_reported = None;
            self.report();
        }
        // Its tasks may all have ended before the servers stopped it.
        self.teardown_network_when_done();
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
        // Its services go before its tasks stop (and before the shutdown
        // delay, which is there for their users to move away).
        self.sync_services();
        if self.services.has_unsent() && !self.detaching {
            self.report();
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
                    // Kept even while no runner listens (see above).
                    slot.kill.send_replace(Some(req.clone()));
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
}

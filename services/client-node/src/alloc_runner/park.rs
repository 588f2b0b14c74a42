//! Parking: an alloc whose tasks all run and need no watching (simulated
//! runs) lets its runners go, with their channels and buffers, and keeps
//! only what new runners need to take over where the old ones were. A
//! command, a run's natural end or the client's stop wakes it; nothing the
//! servers or the node's API see changes. A deployment's health still
//! undecided is decided while parked: its tasks run without a break until
//! something wakes the alloc, so the verdict needs only the clock. The
//! allocation and its tasks' states are kept encoded while parked (a third
//! of their decoded size): a simulated node holds thousands, read only when
//! one wakes.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use caravan_model::now_unix_ns;
use caravan_proto::{Allocation, Job, SmallMap, TaskGroup, TaskState};
use prost::Message;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::status::{client_status, update_of};
use super::{AllocCommand, AllocRunner, NodeContext};
use crate::checks::alloc_services::AllocServices;
use crate::health::HealthTracker;
use crate::task_runner::{ParkedTask, TaskControl, states};

/// A parked alloc: what its runner knew, without the runner.
#[derive(Debug)]
pub(super) struct ParkedAlloc {
    pub(super) ctx: Arc<NodeContext>,
    alloc: Packed<Allocation>,
    job: Arc<Job>,
    group: Arc<TaskGroup>,
    /// Deployment health, while undecided.
    health: Option<Box<HealthTracker>>,
    health_verdict: Option<(bool, i64)>,
    tasks: Box<[ParkedSlot]>,
    /// The earliest natural end of a run.
    due: Option<Instant>,
}

/// One task of a parked alloc.
#[derive(Debug)]
struct ParkedSlot {
    state: Packed<TaskState>,
    leader: bool,
    run: ParkedTask,
}

/// A message kept encoded, in a block of its exact size.
struct Packed<T> {
    bytes: Box<[u8]>,
    kind: PhantomData<fn() -> T>,
}

impl<T: Message + Default> Packed<T> {
    fn pack(msg: &T) -> Self {
        Packed {
            bytes: msg.encode_to_vec().into_boxed_slice(),
            kind: PhantomData,
        }
    }

    fn unpack(&self) -> T {
        // Bytes this process encoded from a valid message always decode.
        T::decode(&*self.bytes).expect("a message encoded here decodes")
    }
}

impl<T> fmt::Debug for Packed<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Packed({} bytes)", self.bytes.len())
    }
}

/// What woke a parked alloc.
pub(super) enum Wake {
    /// A command came (`None`: the node let go of the alloc).
    Command(Option<AllocCommand>),
    /// A run ends now.
    Due,
    /// The deployment health may be decided now.
    Health,
    /// The client stops.
    Shutdown,
}

impl ParkedAlloc {
    /// Waits for what wakes the alloc.
    pub(super) async fn wait(&self, commands: &mut super::CommandReceiver) -> Wake {
        let due = self.due;
        let health_at = self.health.as_ref().and_then(|h| h.next_check());
        tokio::select! {
            c = commands.recv() => Wake::Command(c),
            _ = async { if let Some(at) = due { tokio::time::sleep_until(at).await } }, if due.is_some() => Wake::Due,
            _ = async { if let Some(at) = health_at { tokio::time::sleep_until(at).await } }, if health_at.is_some() => Wake::Health,
            _ = self.ctx.shutdown.cancelled() => Wake::Shutdown,
        }
    }

    /// The allocation's id.
    pub(super) fn alloc_id(&self) -> String {
        self.alloc.unpack().id
    }

    /// Decides the deployment health if its time came, and reports it as
    /// the runner would have.
    pub(super) fn check_health(&mut self) {
        let Some(health) = self.health.as_mut() else {
            return;
        };
        let states: SmallMap<TaskState> = self
            .tasks
            .iter()
            .map(|t| (t.run.task.clone(), t.state.unpack()))
            .collect();
        // (A simulated node runs no checks: only its tasks count.)
        let Some(healthy) = health.observe(Instant::now(), &self.group, &states, true) else {
            return;
        };
        let alloc = self.alloc.unpack();
        tracing::debug!(alloc = %alloc.id, healthy, "deployment health decided");
        self.health = None;
        self.health_verdict = Some((healthy, now_unix_ns()));
        let (status, desc) = client_status(&states);
        // Parked only once its current states were reported, and a parked
        // task's state does not change: the verdict goes without them.
        self.ctx.sink.report(update_of(
            &alloc,
            self.health_verdict,
            status,
            desc,
            SmallMap::new(),
        ));
    }
}

impl AllocRunner {
    /// Every task runs and nothing is under way: no stop, no state the
    /// servers have not been sent.
    fn idle(&self) -> bool {
        let ctx = &self.ctx;
        ctx.simulated
            && !ctx.stop_on_shutdown
            && !ctx.shutdown.is_cancelled()
            && !self.quiet
            && !self.stopping
            && !self.destroying
            && !self.detaching
            && self.stop_at.is_none()
            && self.gc_reply.is_none()
            && self.group.is_some()
            && !self.slots.is_empty()
            && self.runners.len() == self.slots.len()
            && self.slots.iter().all(|(name, s)| {
                s.state.state == states::RUNNING
                    && s.handle.is_some()
                    && s.parked.is_none()
                    && self.started.contains(name)
                    && s.kill.borrow().is_none()
            })
            && self.last_reported.as_ref() == Some(&self.current_update())
            && !self.services.has_unsent()
    }

    /// Asks every runner for its run when the alloc is idle.
    pub(super) fn begin_parking_if_idle(&mut self) {
        if self.parking || !self.idle() {
            return;
        }
        self.parking = true;
        for slot in self.slots.values() {
            let _ = slot.control.send(TaskControl::Park);
        }
    }

    /// A runner handed its run back.
    pub(super) fn on_parked(&mut self, run: ParkedTask) {
        let Some(slot) = self.slots.get_mut(&run.task) else {
            return;
        };
        slot.parked = Some(run);
        if !self.parking {
            // A late answer to a park given up meanwhile.
            self.reattach();
        }
    }

    /// Something happened: the runs handed back get runners again.
    pub(super) fn cancel_parking(&mut self) {
        if self.parking {
            self.parking = false;
            self.reattach();
        }
    }

    fn reattach(&mut self) {
        let Some(group) = self.group.clone() else {
            return;
        };
        for task in &group.tasks {
            let Some(slot) = self.slots.get_mut(&task.name) else {
                continue;
            };
            let Some(run) = slot.parked.take() else {
                continue;
            };
            // What users asked meanwhile goes to the next runner.
            if let Some(rx) = run.control {
                slot.control_rx = Some(rx);
            }
            self.started.remove(&task.name);
            self.start_task(&group, task, Some(run.handle), Some(run.restart));
        }
    }

    /// Every runner has stepped aside: the parked alloc (this runner is
    /// then done), or `None` and the runs re-attached when something
    /// changed meanwhile.
    pub(super) fn park(&mut self) -> Option<ParkedAlloc> {
        // A state sent just before a runner stepped aside.
        while let Ok(u) = self.updates.try_recv() {
            self.on_task_update(*u);
        }
        let mut due: Option<Instant> = None;
        let mut all_unwatched = self.parking;
        for slot in self.slots.values() {
            let until = slot
                .parked
                .as_ref()
                .filter(|_| slot.state.state == states::RUNNING)
                .and_then(|r| r.handle.unwatched_until());
            match until {
                Some(Some(at)) => due = Some(due.map_or(at, |d| d.min(at))),
                Some(None) => {}
                None => all_unwatched = false,
            }
        }
        let Some(group) = self.group.clone().filter(|_| all_unwatched) else {
            self.cancel_parking();
            return None;
        };
        let tasks = std::mem::take(&mut self.slots)
            .into_values()
            .filter_map(|s| {
                let mut run = s.parked?;
                // Nothing can be waiting in it: only a driven alloc sends
                // there. A woken alloc's tasks get new channels.
                run.control = None;
                Some(ParkedSlot {
                    run,
                    state: Packed::pack(&s.state),
                    leader: s.leader,
                })
            })
            .collect();
        Some(ParkedAlloc {
            ctx: Arc::clone(&self.ctx),
            alloc: Packed::pack(self.alloc.as_ref()),
            job: Arc::clone(&self.job),
            group,
            health: self.health.take().map(Box::new),
            health_verdict: self.health_verdict,
            tasks,
            due,
        })
    }

    /// New runners for a parked alloc's tasks, re-attached to their runs.
    pub(super) fn resume(p: ParkedAlloc) -> AllocRunner {
        let (updates_tx, updates) = mpsc::unbounded_channel();
        let mut runner = AllocRunner {
            ctx: p.ctx,
            alloc: Arc::new(p.alloc.unpack()),
            job: p.job,
            group: Some(p.group),
            slots: BTreeMap::new(),
            started: HashSet::new(),
            stopping: false,
            stop_at: None,
            destroying: false,
            gc_reply: None,
            detaching: false,
            last_reported: None,
            quiet: false,
            health: p.health.map(|h| *h),
            health_verdict: p.health_verdict,
            runners: JoinSet::new(),
            updates_tx,
            updates,
            parking: false,
            services: AllocServices::new(false),
        };
        for t in p.tasks {
            let mut slot = runner.slot(t.state.unpack(), t.leader);
            slot.handle = Some(Arc::clone(&t.run.handle));
            let name = t.run.task.clone();
            slot.parked = Some(t.run);
            runner.slots.insert(name, slot);
        }
        // It parked only once its newest state (and registrations) was sent.
        runner.sync_services();
        runner.services.mark_sent();
        runner.last_reported = Some(runner.current_update());
        runner.reattach();
        runner
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use caravan_proto::{
        AllocClientStatus, AllocDesiredStatus, AllocUpdate, JobType, Node, Task, UpdateStrategy,
    };
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::driver::{Drivers, string_value};
    use crate::status_reporter::StatusSink;

    fn ctx(park: bool) -> Arc<NodeContext> {
        Arc::new(NodeContext {
            node: Arc::new(Node::default()),
            drivers: Drivers::simulated(),
            data_dir: None,
            state: None,
            sink: StatusSink::new(100),
            shutdown: CancellationToken::new(),
            stop_on_shutdown: false,
            max_kill_timeout: Duration::from_secs(30),
            jobs: Default::default(),
            live: Default::default(),
            simulated: park,
            contact: Default::default(),
            api: None,
            hook_config: Default::default(),
        })
    }

    /// Task `a` runs 30 s at a time (restarted twice by the service
    /// policy, then failed); `b` runs until stopped.
    fn job() -> Job {
        let mut config = prost_types::Struct::default();
        config.fields.insert("run_for".into(), string_value("30s"));
        let mut job = Job {
            id: "j".into(),
            namespace: "default".into(),
            task_groups: vec![TaskGroup {
                name: "g".into(),
                tasks: vec![
                    Task {
                        name: "a".into(),
                        driver: "mock".into(),
                        config: Some(config),
                        ..Default::default()
                    },
                    Task {
                        name: "b".into(),
                        driver: "mock".into(),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }],
            ..Default::default()
        };
        job.set_type(JobType::Service);
        job
    }

    fn alloc() -> Allocation {
        let mut a = Allocation {
            id: "a1".into(),
            namespace: "default".into(),
            job_id: "j".into(),
            task_group: "g".into(),
            ..Default::default()
        };
        a.set_desired_status(AllocDesiredStatus::Run);
        a
    }

    /// What the servers see of a task: its state and its events' kinds.
    type Seen = Vec<(String, String, bool, u64, Vec<String>)>;

    /// What the servers see of a report: the alloc's status, its tasks and
    /// its deployment health.
    type Report = (AllocClientStatus, Seen, Option<bool>);

    fn seen(u: &AllocUpdate) -> Report {
        let tasks = u
            .task_states
            .iter()
            .map(|(name, s)| {
                let kinds = s.events.iter().map(|e| e.r#type.clone()).collect();
                (name.clone(), s.state.clone(), s.failed, s.restarts, kinds)
            })
            .collect();
        let healthy = u.deployment_status.as_ref().and_then(|d| d.healthy);
        (u.client_status(), tasks, healthy)
    }

    fn newest(ctx: &NodeContext, into: &mut Vec<Report>) {
        for u in ctx.sink.take() {
            into.push(seen(&u));
        }
    }

    /// Runs the alloc through a user restart, its task's natural ends and
    /// restarts, and a policy that gives up; returns every report sent and
    /// the runtime's live tasks while it idled. In a `deployment`, the
    /// alloc's health is decided 10 s after the restart.
    async fn life(park: bool, deployment: bool) -> (Vec<Report>, usize) {
        let ctx = ctx(park);
        let (mut alloc, mut job) = (alloc(), job());
        if deployment {
            alloc.deployment_id = "d1".into();
            job.update = Some(UpdateStrategy {
                max_parallel: 1,
                health_check: "task_states".into(),
                min_healthy_time_ns: 10_000_000_000,
                healthy_deadline_ns: 300_000_000_000,
                ..Default::default()
            });
        }
        let handle = AllocRunner::spawn(ctx.clone(), Arc::new(alloc), Arc::new(job), None, false);
        let mut reports = Vec::new();
        tokio::time::sleep(Duration::from_secs(2)).await;
        newest(&ctx, &mut reports);
        let idle_tasks = tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks();
        let tasks = ctx.live.tasks("a1").await.unwrap();
        assert!(tasks.values().all(|t| t.running()), "{tasks:?}");
        ctx.live
            .restart("a1", Some("b".into()), false)
            .await
            .unwrap();
        for _ in 0..200 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            newest(&ctx, &mut reports);
        }
        let _ = handle.commands.send(AllocCommand::Destroy);
        handle.join.await.unwrap();
        newest(&ctx, &mut reports);
        (reports, idle_tasks)
    }

    /// The life of a watched and of a parked alloc: the same reports, the
    /// parked one idling on one small task; returns the reports.
    async fn parked_as_watched(deployment: bool) -> Vec<Report> {
        let (watched, busy) = life(false, deployment).await;
        let (parked, idle) = life(true, deployment).await;
        assert_eq!(busy, 3, "the alloc's runner and one per task");
        assert_eq!(idle, 1, "a parked alloc keeps one small task");
        assert_eq!(parked, watched);
        parked
    }

    #[tokio::test(start_paused = true)]
    async fn a_parked_alloc_tells_the_servers_what_a_watched_one_does() {
        let parked = parked_as_watched(false).await;
        let (status, tasks, _) = parked.last().unwrap().clone();
        assert_eq!(status, AllocClientStatus::Failed);
        let a = &tasks[0];
        assert_eq!((a.1.as_str(), a.2, a.3), ("dead", true, 2), "{a:?}");
        assert_eq!(a.4.last().unwrap(), "Not Restarting");
        let b = &tasks[1];
        assert_eq!(b.3, 1, "the user's restart");
        assert_eq!(
            b.4[b.4.len() - 4..],
            ["Sibling Task Failed", "Killing", "Terminated", "Killed"]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_parked_alloc_decides_its_deployment_health_as_a_watched_one_does() {
        // Parks (one small task at 2 s) with its health undecided.
        let parked = parked_as_watched(true).await;
        let healthy_at = parked.iter().position(|r| r.2 == Some(true));
        let before = healthy_at.map(|i| &parked[..i]).unwrap_or_default();
        assert!(
            healthy_at.is_some() && before.iter().all(|r| r.2.is_none()),
            "healthy once, never undecided again: {parked:?}"
        );
    }
}

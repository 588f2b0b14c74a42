//! The node's side of alloc sync: each alloc set the servers stream is
//! reconciled against the runners this node has. An alloc gets at most one
//! runner for its whole life on the node, so no alloc ever runs twice.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use caravan_model::{AllocClientStatusExt, AllocExt, now_unix_ns};
use caravan_proto::{AllocClientStatus, AllocUpdate, Allocation, Job, NodeAllocations};

use crate::alloc_runner::{AllocCommand, AllocRunner, AllocRunnerHandle, NodeContext};
use crate::state_dir::AllocRecord;

/// Identifies one version of one job.
type JobKey = (String, String, u64);

/// Every alloc this node runs.
#[derive(Debug)]
pub struct NodeAllocs {
    ctx: Arc<NodeContext>,
    runners: HashMap<String, Entry>,
    jobs: HashMap<JobKey, Arc<Job>>,
    /// Records from before a client restart, consumed by the first alloc set.
    recovered: Option<BTreeMap<String, AllocRecord>>,
    /// Allocs this node decided not to run and already told the servers about.
    settled: HashSet<String>,
    /// Allocs whose job version hasn't arrived (warned once).
    waiting_for_job: HashSet<String>,
    /// The newest revision a message of the servers carried: a stream opened
    /// again asks for a view at least this new, since a whole set from an
    /// older one (a gateway whose cache lags) would stop allocs placed since.
    revision: i64,
    /// The sweep of what drivers left for allocs no longer here has begun
    /// (after the first whole set: only then is it known what is here).
    sweeping: bool,
}

#[derive(Debug)]
struct Entry {
    handle: AllocRunnerHandle,
    alloc_modify_revision: i64,
    desired_status: i32,
    modify_revision: i64,
    /// The job version the runner runs: an in-place update brings it the
    /// new version's job (its services may have changed).
    job_version: u64,
    destroyed: bool,
}

/// Tells a runner whose alloc left the node's set to stop and clean up.
fn destroy(id: &str, entry: &mut Entry) {
    if !entry.destroyed {
        tracing::debug!(alloc = %id, "alloc left the node's set; destroying");
        entry.destroyed = true;
        let _ = entry.handle.commands.send(AllocCommand::Destroy);
    }
}

fn job_key(ns: &str, id: &str, version: u64) -> JobKey {
    (ns.to_string(), id.to_string(), version)
}

impl NodeAllocs {
    /// An empty set; `recovered` are the alloc records found on disk.
    pub fn new(ctx: Arc<NodeContext>, recovered: BTreeMap<String, AllocRecord>) -> Self {
        // The allocs it ran before a restart were in a view at least as new
        // as each one's revision: so must be the first set it takes now.
        let revision = recovered.values().map(|r| r.revision).max().unwrap_or(0);
        NodeAllocs {
            ctx,
            runners: HashMap::new(),
            jobs: HashMap::new(),
            recovered: Some(recovered),
            settled: HashSet::new(),
            waiting_for_job: HashSet::new(),
            revision,
            sweeping: false,
        }
    }

    /// The newest revision the servers' messages carried so far (0: none yet).
    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// Allocs with a runner that hasn't been told to go away.
    #[cfg(test)]
    pub fn running(&self) -> usize {
        self.runners.values().filter(|e| !e.destroyed).count()
    }

    /// Reconciles against a message of the node's alloc stream: the whole
    /// set, or what the servers changed since the previous message.
    pub fn apply(&mut self, mut set: NodeAllocations) {
        for job in std::mem::take(&mut set.jobs) {
            let key = job_key(&job.namespace, &job.id, job.version);
            self.jobs.insert(key, self.ctx.jobs.share(job));
        }
        self.runners
            .retain(|_, e| !(e.destroyed && e.handle.join.is_finished()));
        self.revision = self.revision.max(set.revision);
        if set.full {
            self.apply_full(set);
        } else {
            self.apply_delta(set);
        }
    }

    fn apply_full(&mut self, set: NodeAllocations) {
        let mut recovered = self.recovered.take();
        let mut seen = HashSet::with_capacity(set.allocs.len());
        for alloc in set.allocs {
            seen.insert(alloc.id.clone());
            let key = job_key(&alloc.namespace, &alloc.job_id, alloc.job_version);
            let record = recovered.as_mut().and_then(|r| r.remove(&alloc.id));
            self.reconcile_one(alloc, key, record);
        }
        for (id, entry) in &mut self.runners {
            if !seen.contains(id) {
                destroy(id, entry);
            }
        }
        // Records of allocs the servers no longer know: their tasks may still
        // run, so they get a runner only to stop them and clean up. A set at
        // revision 0 is no proof of absence (nothing synced yet): wait.
        if set.revision <= 0 {
            if let Some(rest) = recovered.filter(|r| !r.is_empty()) {
                self.recovered
                    .get_or_insert_with(BTreeMap::new)
                    .extend(rest);
            }
        } else {
            for (id, record) in recovered.into_iter().flatten() {
                self.destroy_orphan(id, record);
            }
            // Every alloc of the node has a runner now: anything a driver
            // holds for another alloc is left over.
            if !self.sweeping && !self.ctx.simulated {
                self.sweeping = true;
                crate::orphans::sweep_periodically(self.ctx.clone());
            }
        }
        self.settled.retain(|id| seen.contains(id));
        self.waiting_for_job.retain(|id| seen.contains(id));
    }

    fn apply_delta(&mut self, set: NodeAllocations) {
        for alloc in set.allocs {
            let key = job_key(&alloc.namespace, &alloc.job_id, alloc.job_version);
            let record = self.recovered.as_mut().and_then(|r| r.remove(&alloc.id));
            self.reconcile_one(alloc, key, record);
        }
        for id in set.removed_alloc_ids {
            if let Some(entry) = self.runners.get_mut(&id) {
                destroy(&id, entry);
            }
            self.settled.remove(&id);
            self.waiting_for_job.remove(&id);
        }
    }

    /// A new alloc stream starts: the gateway sends every job version again,
    /// so what the old stream sent can go (running allocs hold their own).
    pub fn stream_restarted(&mut self) {
        self.jobs.clear();
    }

    fn reconcile_one(&mut self, alloc: Allocation, key: JobKey, record: Option<AllocRecord>) {
        if let Some(entry) = self.runners.get_mut(&alloc.id) {
            if entry.destroyed {
                // Still stopping from an earlier disappearance; never a second runner.
                return;
            }
            if entry.alloc_modify_revision != alloc.alloc_modify_revision
                || entry.desired_status != alloc.desired_status
                || entry.modify_revision != alloc.modify_revision
            {
                entry.alloc_modify_revision = alloc.alloc_modify_revision;
                entry.desired_status = alloc.desired_status;
                entry.modify_revision = alloc.modify_revision;
                let new_job = (entry.job_version != alloc.job_version)
                    .then(|| self.jobs.get(&key).cloned())
                    .flatten();
                let alloc = Arc::new(Self::runner_view(&self.ctx, alloc));
                let command = match new_job {
                    Some(job) => {
                        entry.job_version = alloc.job_version;
                        AllocCommand::UpdateJob(Box::new((alloc, job)))
                    }
                    None => AllocCommand::Update(alloc),
                };
                let _ = entry.handle.commands.send(command);
            }
            return;
        }
        let server_status = alloc.client_status();
        if record.is_none() {
            if server_status.is_terminal() || self.settled.contains(&alloc.id) {
                return;
            }
            if alloc.is_server_terminal() {
                // Stopped before this node ever ran it.
                self.settle(
                    &alloc,
                    AllocClientStatus::Complete,
                    "alloc was stopped before it started",
                );
                return;
            }
            if server_status == AllocClientStatus::Running && self.ctx.state.is_some() {
                // It ran here, but its record is gone: its tasks may or may
                // not still run, so it must not start again.
                self.settle(
                    &alloc,
                    AllocClientStatus::Failed,
                    "client restarted; alloc state lost",
                );
                return;
            }
        }
        let Some(job) = self.jobs.get(&key).cloned() else {
            if self.waiting_for_job.insert(alloc.id.clone()) {
                tracing::warn!(alloc = %alloc.id, job = %alloc.job_id, version = alloc.job_version, "job version not received yet; alloc waits");
            }
            if let Some(r) = record {
                // Keep it for the next set rather than treat it as an orphan.
                self.recovered
                    .get_or_insert_with(BTreeMap::new)
                    .insert(r.alloc_id.clone(), r);
            }
            return;
        };
        self.waiting_for_job.remove(&alloc.id);
        let id = alloc.id.clone();
        let entry = Entry {
            alloc_modify_revision: alloc.alloc_modify_revision,
            desired_status: alloc.desired_status,
            modify_revision: alloc.modify_revision,
            job_version: alloc.job_version,
            destroyed: false,
            handle: AllocRunner::spawn(
                self.ctx.clone(),
                Arc::new(Self::runner_view(&self.ctx, alloc)),
                job,
                record,
                false,
            ),
        };
        self.runners.insert(id, entry);
    }

    /// The alloc as its runner keeps it. A simulated node keeps only what
    /// a runner reads: it holds hundreds of thousands of them, and builds
    /// no task environment (which reads the allocated resources).
    fn runner_view(ctx: &NodeContext, alloc: Allocation) -> Allocation {
        if !ctx.simulated {
            return alloc;
        }
        let mut view = Allocation {
            id: alloc.id,
            name: alloc.name,
            namespace: alloc.namespace,
            job_id: alloc.job_id,
            job_version: alloc.job_version,
            task_group: alloc.task_group,
            deployment_id: alloc.deployment_id,
            deployment_status: alloc.deployment_status,
            previous_allocation: alloc.previous_allocation,
            modify_revision: alloc.modify_revision,
            trace_context: alloc.trace_context,
            ..Default::default()
        };
        view.desired_status = alloc.desired_status;
        view.client_status = alloc.client_status;
        view
    }

    fn settle(&mut self, alloc: &Allocation, status: AllocClientStatus, desc: &str) {
        self.settled.insert(alloc.id.clone());
        let mut u = AllocUpdate {
            alloc_id: alloc.id.clone(),
            client_description: desc.to_string(),
            task_states: alloc.task_states.clone(),
            ..Default::default()
        };
        for s in u.task_states.values_mut() {
            if s.state != crate::task_runner::states::DEAD {
                s.state = crate::task_runner::states::DEAD.into();
                s.failed = status == AllocClientStatus::Failed;
                s.finished_at_unix_ns = now_unix_ns();
            }
        }
        u.set_client_status(status);
        self.ctx.sink.report(u);
    }

    fn destroy_orphan(&mut self, id: String, record: AllocRecord) {
        let live = record.tasks.values().any(|t| t.handle.is_some());
        if !live {
            if let Some(state) = &self.ctx.state
                && let Err(e) = state.remove(&id)
            {
                tracing::warn!(alloc = %id, error = %e, "cannot remove alloc record");
            }
            if let Some(dir) = self
                .ctx
                .data_dir
                .as_ref()
                .and_then(|d| crate::alloc_dir::AllocDir::new(d, &id).ok())
                && let Err(e) = dir.destroy()
            {
                tracing::warn!(alloc = %id, error = %e, "cannot remove alloc dir");
            }
            return;
        }
        // A stand-in job whose one group names the recorded tasks, so the
        // runner can re-attach to them and stop them.
        let group = caravan_proto::TaskGroup {
            name: "orphan".into(),
            tasks: record
                .tasks
                .iter()
                .map(|(t, rec)| caravan_proto::Task {
                    name: t.clone(),
                    // The driver that ran it cleans up after it.
                    driver: rec
                        .handle
                        .as_ref()
                        .map_or_else(|| "mock".to_string(), |h| h.driver().to_string()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let job = Arc::new(Job {
            id: "orphan".into(),
            task_groups: vec![group],
            ..Default::default()
        });
        let mut alloc = Allocation {
            id: id.clone(),
            task_group: "orphan".into(),
            ..Default::default()
        };
        alloc.set_desired_status(caravan_proto::AllocDesiredStatus::Stop);
        tracing::info!(alloc = %id, "stopping tasks of an alloc the servers no longer know");
        let handle = AllocRunner::spawn(self.ctx.clone(), Arc::new(alloc), job, Some(record), true);
        let _ = handle.commands.send(AllocCommand::Destroy);
        self.runners.insert(
            id,
            Entry {
                handle,
                alloc_modify_revision: 0,
                desired_status: 0,
                modify_revision: 0,
                job_version: 0,
                destroyed: true,
            },
        );
    }

    /// Waits for every runner to finish (after the client's shutdown token fired).
    pub async fn join_all(&mut self) {
        for (_, e) in self.runners.drain() {
            let _ = e.handle.join.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use caravan_proto::{AllocDesiredStatus, Node, Task, TaskGroup};
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::driver::{
        Capabilities, Driver, DriverError, Drivers, Fingerprint, HandleState, MockDriver,
        TaskHandle, TaskSpec,
    };
    use crate::state_dir::{TaskRecord, TaskStateRecord};
    use crate::status_reporter::StatusSink;

    /// A mock that counts its starts.
    #[derive(Debug, Default)]
    struct Counting(AtomicUsize);

    #[async_trait::async_trait]
    impl Driver for Counting {
        fn name(&self) -> &'static str {
            "mock"
        }
        fn capabilities(&self) -> Capabilities {
            MockDriver::simulated().capabilities()
        }
        async fn fingerprint(&self) -> Fingerprint {
            MockDriver::simulated().fingerprint().await
        }
        fn wants_env(&self) -> bool {
            false
        }
        async fn start(&self, spec: TaskSpec) -> Result<Arc<dyn TaskHandle>, DriverError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            MockDriver::simulated().start(spec).await
        }
        async fn recover(
            &self,
            spec: &TaskSpec,
            state: &HandleState,
        ) -> Option<Arc<dyn TaskHandle>> {
            MockDriver::simulated().recover(spec, state).await
        }
    }

    fn setup() -> (NodeAllocs, Arc<Counting>, CancellationToken) {
        let counting = Arc::new(Counting::default());
        let mut drivers = Drivers::default();
        drivers.add(counting.clone());
        let shutdown = CancellationToken::new();
        let ctx = Arc::new(NodeContext {
            node: Arc::new(Node::default()),
            drivers,
            data_dir: None,
            state: None,
            sink: StatusSink::new(100),
            shutdown: shutdown.clone(),
            stop_on_shutdown: false,
            max_kill_timeout: Duration::from_secs(30),
            jobs: Default::default(),
            live: Default::default(),
            simulated: false,
            contact: Default::default(),
            api: None,
            hook_config: Default::default(),
        });
        (NodeAllocs::new(ctx, BTreeMap::new()), counting, shutdown)
    }

    fn job() -> Job {
        Job {
            id: "j".into(),
            namespace: "default".into(),
            task_groups: vec![TaskGroup {
                name: "g".into(),
                tasks: vec![Task {
                    name: "t".into(),
                    driver: "mock".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn alloc(id: &str, revision: i64, desired: AllocDesiredStatus) -> Allocation {
        let mut a = Allocation {
            id: id.into(),
            namespace: "default".into(),
            job_id: "j".into(),
            task_group: "g".into(),
            alloc_modify_revision: revision,
            modify_revision: revision,
            ..Default::default()
        };
        a.set_desired_status(desired);
        a
    }

    fn set(allocs: Vec<Allocation>, revision: i64, with_job: bool) -> NodeAllocations {
        NodeAllocations {
            allocs,
            revision,
            jobs: if with_job { vec![job()] } else { vec![] },
            full: true,
            ..Default::default()
        }
    }

    async fn settle() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    #[tokio::test]
    async fn an_alloc_is_started_once_whatever_the_stream_repeats() {
        let (mut allocs, counting, shutdown) = setup();
        allocs.apply(set(vec![alloc("a", 1, AllocDesiredStatus::Run)], 1, true));
        settle().await;
        // Repeats, newer revisions, and a set that omits the job version.
        for rev in 2..6 {
            allocs.apply(set(
                vec![alloc("a", rev, AllocDesiredStatus::Run)],
                rev,
                rev % 2 == 0,
            ));
        }
        settle().await;
        assert_eq!(counting.0.load(Ordering::SeqCst), 1);
        assert_eq!(allocs.running(), 1);
        // Gone, then back while still stopping: no second runner.
        allocs.apply(set(vec![], 7, false));
        allocs.apply(set(vec![alloc("a", 8, AllocDesiredStatus::Run)], 8, true));
        settle().await;
        assert_eq!(counting.0.load(Ordering::SeqCst), 1);
        shutdown.cancel();
        allocs.join_all().await;
    }

    #[tokio::test]
    async fn allocs_wait_for_their_job_and_stopped_ones_never_start() {
        let (mut allocs, counting, shutdown) = setup();
        allocs.apply(set(vec![alloc("a", 1, AllocDesiredStatus::Run)], 1, false));
        settle().await;
        assert_eq!(counting.0.load(Ordering::SeqCst), 0, "no job version yet");
        allocs.apply(set(
            vec![
                alloc("a", 2, AllocDesiredStatus::Run),
                alloc("b", 2, AllocDesiredStatus::Stop),
            ],
            2,
            true,
        ));
        settle().await;
        assert_eq!(counting.0.load(Ordering::SeqCst), 1);
        assert_eq!(
            allocs.ctx.sink.pending(),
            2,
            "a's state and b settled as complete"
        );
        shutdown.cancel();
        allocs.join_all().await;
    }

    #[tokio::test]
    async fn recovered_records_are_not_orphans_until_a_synced_set_says_so() {
        let (allocs, _counting, shutdown) = setup();
        let mut tasks = BTreeMap::new();
        tasks.insert(
            "t".to_string(),
            TaskRecord {
                state: TaskStateRecord {
                    state: "dead".into(),
                    ..Default::default()
                },
                handle: None,
            },
        );
        let rec = AllocRecord {
            alloc_id: "old".into(),
            client_status: 3,
            tasks,
            revision: 4,
        };
        let mut allocs = NodeAllocs::new(
            allocs.ctx.clone(),
            BTreeMap::from([("old".to_string(), rec)]),
        );
        assert_eq!(
            allocs.revision(),
            4,
            "a restarted node asks for a view as new as its records"
        );
        allocs.apply(set(vec![], 0, false));
        assert!(
            allocs
                .recovered
                .as_ref()
                .is_some_and(|r| r.contains_key("old"))
        );
        allocs.apply(set(vec![], 3, false));
        assert!(allocs.recovered.as_ref().is_none_or(|r| r.is_empty()));
        shutdown.cancel();
        allocs.join_all().await;
    }
}

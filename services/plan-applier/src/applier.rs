//! The plan applier: the queue the gRPC service feeds while this replica
//! leads, and the pipeline that verifies plan N+1 while plan N commits.
//!
//! Per plan: the eval broker vouches for the delivery token as the plan
//! arrives (before it is queued), the cache catches up with the plan's
//! snapshot, every node is verified against the
//! cache plus the overlay (including the plan still committing, optimistic
//! view), then the previous commit is awaited (a commit that fell short means
//! the plan is verified again), the job's freshness is checked, and the
//! accepted part is committed in the background. Answers go out only after
//! the real commit.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use caravan_model::now_unix_ns;
use caravan_proto::{AllocList, Allocation, Plan, PlanResult};
use caravan_runtime::names::PLAN_APPLIER;
use caravan_state::{AllocDetail, Informer, InformerConfig, Keyspace};
use caravan_store::{
    GroupCommit, GroupLimits, Leadership, LeadershipError, Revision, Store, current_leader,
    election_name,
};
use parking_lot::RwLock;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, Span};

use crate::commit::{
    Changes, CommitOutcome, Committer, Completion, PlanMarks, optimistic_layer, plan_changes,
    plan_commits,
};
use crate::config::PlanApplierConfig;
use crate::error::ApplierError;
use crate::metrics;
use crate::mutation::Target;
use crate::overlay::{Overlay, OverlayLayer, View};
use crate::queue::{PendingPlan, PlanQueue};
use crate::tokens::TokenCheck;
use crate::verify::{Verdict, plan_jobs, plan_nodes, stale_revision, validate_plan, verify_plan};

/// The knobs of the pipeline, from [`PlanApplierConfig`].
#[derive(Clone, Debug)]
pub struct Settings {
    /// Most compares plus writes per transaction.
    pub txn_max_ops: usize,
    /// Most bytes per transaction.
    pub txn_max_bytes: usize,
    /// Threads verifying one plan's nodes.
    pub verify_threads: usize,
    /// Retries of a commit after a concurrent write.
    pub conflict_retries: u32,
    /// How long a plan waits for the cache to reach its snapshot.
    pub cache_wait: Duration,
    /// Most commits under way at once (plans touching disjoint objects).
    pub max_in_flight: usize,
}

impl Settings {
    /// What one store transaction may hold.
    fn txn_limits(&self) -> GroupLimits {
        GroupLimits {
            max_ops: self.txn_max_ops,
            max_bytes: self.txn_max_bytes,
        }
    }
}

impl From<&PlanApplierConfig> for Settings {
    fn from(c: &PlanApplierConfig) -> Self {
        Settings {
            txn_max_ops: c.txn_max_ops.max(4),
            txn_max_bytes: c.txn_max_bytes.max(64 * 1024),
            verify_threads: c.verify_threads(),
            conflict_retries: c.conflict_retries,
            cache_wait: Duration::from_millis(c.cache_wait_ms),
            max_in_flight: c.max_in_flight_commits.max(1),
        }
    }
}

/// Counters of what the applier has done since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ApplierStats {
    /// Plans answered with a result (committed wholly, partly or not at all).
    pub plans: u64,
    /// Allocations placed or updated by committed plans.
    pub placements: u64,
    /// Plans answered with some node refused.
    pub partial: u64,
    /// Plans refused because their snapshot was older than the job's last change.
    pub stale: u64,
}

#[derive(Default)]
struct Counters {
    plans: AtomicU64,
    placements: AtomicU64,
    partial: AtomicU64,
    stale: AtomicU64,
}

/// The plan applier of one replica: serves `SubmitPlan` while leading.
pub struct PlanApplier {
    store: Arc<dyn Store>,
    keyspace: Keyspace,
    election: String,
    tokens: Arc<dyn TokenCheck>,
    settings: Settings,
    queue: RwLock<Option<Arc<PlanQueue>>>,
    /// The watch cache, loaded in this replica's first term and kept after
    /// it: a term won again (after a lease that went unrenewed while etcd
    /// or the machine was saturated) starts at once instead of listing
    /// every allocation again, which would load both further.
    cache: tokio::sync::Mutex<Option<Arc<Informer>>>,
    counters: Counters,
}

impl std::fmt::Debug for PlanApplier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanApplier")
            .field("election", &self.election)
            .field("leading", &self.is_leading())
            .finish_non_exhaustive()
    }
}

impl PlanApplier {
    /// An applier over the state under `prefix`, checking tokens with `tokens`.
    pub fn new(
        store: Arc<dyn Store>,
        prefix: &str,
        tokens: Arc<dyn TokenCheck>,
        settings: Settings,
    ) -> Self {
        PlanApplier {
            store,
            keyspace: Keyspace::new(prefix),
            election: election_name(prefix, PLAN_APPLIER),
            tokens,
            settings,
            queue: RwLock::new(None),
            cache: tokio::sync::Mutex::new(None),
            counters: Counters::default(),
        }
    }

    /// Whether this replica is leading and taking plans.
    pub fn is_leading(&self) -> bool {
        self.queue.read().is_some()
    }

    /// What the applier has done so far.
    pub fn stats(&self) -> ApplierStats {
        let c = &self.counters;
        ApplierStats {
            plans: c.plans.load(Ordering::Relaxed),
            placements: c.placements.load(Ordering::Relaxed),
            partial: c.partial.load(Ordering::Relaxed),
            stale: c.stale.load(Ordering::Relaxed),
        }
    }

    /// Queues a plan and waits for its answer, given after the real commit.
    pub async fn submit(&self, plan: Plan) -> Result<PlanResult, ApplierError> {
        validate_plan(&plan)?;
        let queue = self.queue.read().clone();
        let Some(queue) = queue else {
            let leader = current_leader(self.store.as_ref(), self.election.as_bytes())
                .await
                .ok()
                .flatten();
            return Err(ApplierError::NotLeader { leader });
        };
        // Checked as the plan arrives, beside the plans ahead of it rather
        // than one after another in the pipeline: the broker's answer takes
        // a round trip the pipeline does not wait out.
        if let Err(err) = self.tokens.check(&plan.eval_id, &plan.eval_token).await {
            tracing::info!(eval = %plan.eval_id, %err, "plan refused");
            metrics::failed();
            return Err(err);
        }
        let answer = queue.push(plan)?;
        answer.await.unwrap_or_else(|_| {
            Err(ApplierError::OutcomeUnknown(
                "the applier dropped the plan while committing it".into(),
            ))
        })
    }

    /// Applies plans for as long as `stop` is not cancelled (leadership held
    /// and no shutdown); then fails what is queued and waits for the commit
    /// in flight, so no clone of `leadership` outlives the term.
    pub async fn lead(self: &Arc<Self>, leadership: Arc<Leadership>, stop: CancellationToken) {
        let started = tokio::select! {
            s = self.cache() => s,
            _ = stop.cancelled() => return,
        };
        let informer = match started {
            Ok(i) => i,
            Err(err) => {
                tracing::warn!(%err, "cannot load the state; giving up this term");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    _ = stop.cancelled() => {}
                }
                return;
            }
        };
        let queue = Arc::new(PlanQueue::new());
        *self.queue.write() = Some(queue.clone());
        tracing::info!(revision = informer.revision(), "applying plans");
        let (txns, grouping) = plan_commits(leadership, self.settings.txn_limits());
        let mut pipeline = Pipeline {
            applier: self.clone(),
            txns,
            informer,
            overlay: Overlay::default(),
            in_flight: Vec::new(),
            next_seq: 0,
            resync: false,
        };
        loop {
            let next = tokio::select! {
                p = queue.pop() => p,
                _ = stop.cancelled() => None,
            };
            let Some(pending) = next else { break };
            pipeline.handle(pending).await;
            if stop.is_cancelled() {
                break;
            }
        }
        *self.queue.write() = None;
        queue.close(|| ApplierError::NotCommitted);
        pipeline.finish().await;
        // The group committer ends with the last handle, its groups answered.
        if let Err(err) = grouping.await {
            tracing::error!(%err, "the group committer failed");
        }
        tracing::info!("stopped applying plans");
    }

    /// The cache, loaded on first use and kept for later terms.
    async fn cache(&self) -> Result<Arc<Informer>, caravan_state::StateError> {
        let mut cache = self.cache.lock().await;
        if let Some(informer) = cache.as_ref() {
            return Ok(informer.clone());
        }
        let informer = Arc::new(
            Informer::start(self.store.clone(), self.keyspace.clone(), cache_config()).await?,
        );
        *cache = Some(informer.clone());
        Ok(informer)
    }

    fn count(&self, result: &PlanResult) {
        metrics::answered(result);
        let c = &self.counters;
        c.plans.fetch_add(1, Ordering::Relaxed);
        let placed: usize = result
            .node_allocation
            .values()
            .map(|l| l.allocs.len())
            .sum();
        c.placements.fetch_add(placed as u64, Ordering::Relaxed);
        if !result.rejected_nodes.is_empty() {
            c.partial.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A commit running while later plans are verified (and, when they touch
/// nothing it touches, committed alongside it).
struct InFlight {
    seq: u64,
    task: JoinHandle<CommitReport>,
    /// Every object it writes.
    targets: HashSet<Target>,
    /// The jobs whose allocations it changes.
    jobs: BTreeSet<(String, String)>,
    /// Nodes where it stops or evicts allocations: a plan verified against
    /// that room must wait for the room to be real.
    frees: HashSet<String>,
    /// Nodes where it places allocations: a plan refused there for want of
    /// that room must wait for it, so the refusal's refresh revision covers
    /// the commit that took the room (or the room comes back).
    places: HashSet<String>,
}

impl InFlight {
    /// Whether a plan with these jobs, targets and placement nodes must wait
    /// for this commit before committing.
    fn blocks(
        &self,
        jobs: &BTreeSet<(String, String)>,
        targets: &HashSet<Target>,
        placing: &HashSet<String>,
        refused: &HashSet<String>,
    ) -> bool {
        !self.jobs.is_disjoint(jobs)
            || !self.targets.is_disjoint(targets)
            || !self.frees.is_disjoint(placing)
            || !self.places.is_disjoint(refused)
    }
}

/// What the pipeline learns from a finished commit.
struct CommitReport {
    layer: OverlayLayer,
    /// Something verified was not committed: plans verified on the
    /// optimistic view must be verified again.
    fell_short: bool,
    /// A transaction's outcome is unknown: the cache must catch up with the
    /// store before the next verification.
    unknown: bool,
}

/// Answers the submitter of `plan` with what `outcome` committed (an error
/// when nothing did and the commit failed), and tells the pipeline what it
/// must do about it.
fn answer(
    applier: &PlanApplier,
    plan: &Plan,
    rejected: BTreeMap<String, String>,
    view_revision: Revision,
    mut outcome: CommitOutcome,
    pending: PendingPlan,
) -> CommitReport {
    let unknown = matches!(
        outcome.error,
        Some(ApplierError::OutcomeUnknown(_) | ApplierError::Store(_))
    );
    let fell_short = !outcome.refused.is_empty() || outcome.error.is_some();
    let answer = match outcome.error.take() {
        Some(err) if outcome.revision == 0 => {
            // A full store refuses every plan until an operator frees it;
            // the gateway reports that once, not per plan.
            if matches!(&err, ApplierError::Store(e) if e.is_no_space()) {
                tracing::debug!(eval = %plan.eval_id, %err, "plan not committed");
            } else {
                tracing::warn!(eval = %plan.eval_id, %err, "plan not committed");
            }
            Err(err)
        }
        _ => {
            let result = plan_result(plan, rejected, &outcome, view_revision);
            applier.count(&result);
            Ok(result)
        }
    };
    pending.respond(answer);
    CommitReport {
        layer: std::mem::take(&mut outcome.layer),
        fell_short,
        unknown,
    }
}

/// A plan verified, past the commits it must not overtake and not refused
/// whole: what its commit needs.
struct Cleared {
    pending: PendingPlan,
    plan: Arc<Plan>,
    verdict: Verdict,
    /// The view it commits against.
    view: View,
    changes: Changes,
    timings: Timings,
}

/// Commits a cleared plan and answers its submitter.
async fn commit_and_answer(
    applier: Arc<PlanApplier>,
    txns: GroupCommit<LeadershipError>,
    cleared: Cleared,
    marks: PlanMarks,
    seq: u64,
    now: i64,
) -> CommitReport {
    let Cleared {
        pending,
        plan,
        verdict,
        view,
        changes,
        timings,
    } = cleared;
    let committer = Committer {
        store: applier.store.as_ref(),
        txns: &txns,
        keyspace: &applier.keyspace,
        max_ops: applier.settings.txn_max_ops,
        max_bytes: applier.settings.txn_max_bytes,
        retries: applier.settings.conflict_retries,
        now,
        marks,
    };
    let committing = Instant::now();
    let outcome = committer
        .commit(&view, changes, plan.all_at_once, seq)
        .await;
    metrics::committed(committing.elapsed());
    timings.log(&plan.eval_id, committing);
    answer(
        &applier,
        &plan,
        verdict.rejected,
        view.revision(),
        outcome,
        pending,
    )
}

/// How long a plan's stages took, for its timings line.
#[derive(Clone, Copy, Debug)]
struct Timings {
    started: Instant,
    /// Until the cache had caught up.
    cache: Duration,
    /// Until the plan was verified.
    verified: Duration,
}

impl Timings {
    fn start() -> Self {
        Timings {
            started: Instant::now(),
            cache: Duration::ZERO,
            verified: Duration::ZERO,
        }
    }

    fn cache_ready(&mut self) {
        self.cache = self.started.elapsed();
    }

    fn verified(&mut self) {
        self.verified = self.started.elapsed();
    }

    /// Logs the stages of the plan of `eval`, whose commit started at
    /// `committing` and just ended.
    fn log(&self, eval: &str, committing: Instant) {
        tracing::debug!(
            eval = %eval,
            cache_ms = self.cache.as_secs_f64() * 1e3,
            verify_ms = (self.verified - self.cache).as_secs_f64() * 1e3,
            queued_ms = (committing.duration_since(self.started) - self.verified).as_secs_f64() * 1e3,
            commit_ms = committing.elapsed().as_secs_f64() * 1e3,
            "plan timings"
        );
    }
}

/// One leadership term's pipeline.
struct Pipeline {
    applier: Arc<PlanApplier>,
    /// The term's fenced transactions, grouped when they meet.
    txns: GroupCommit<LeadershipError>,
    informer: Arc<Informer>,
    overlay: Overlay,
    /// Commits under way, oldest first.
    in_flight: Vec<InFlight>,
    next_seq: u64,
    resync: bool,
}

impl Pipeline {
    /// Takes one plan from verification to a commit under way (or to its
    /// answer, when it is refused whole before committing).
    async fn handle(&mut self, pending: PendingPlan) {
        let plan = pending.plan.clone();
        let mut timings = Timings::start();
        self.reap().await;
        if let Err(err) = self.catch_up(plan.snapshot_revision).await {
            pending.respond(Err(err));
            return;
        }
        timings.cache_ready();
        let view = self.view();
        let mut verdict = self.verify_in_span(&view, &plan, &pending.span).await;
        timings.verified();
        let jobs = plan_jobs(&view, &plan);
        let unwaited = self
            .wait_for_blocking_commits(&plan, &mut verdict, &view, &jobs)
            .await;
        let first_view = view.snapshot_revision();
        let view = self.view();
        if let Some(result) = self.refusal(&plan, &verdict, &view) {
            self.applier.count(&result);
            pending.respond(Ok(result));
            return;
        }
        // Nothing settled and the cache where it was: the same view, so the
        // changes already computed stand.
        let changes = match unwaited {
            Some(changes) if view.snapshot_revision() == first_view => changes,
            _ => plan_changes(&plan, &verdict.accepted, &view),
        };
        let cleared = Cleared {
            pending,
            plan,
            verdict,
            view,
            changes,
            timings,
        };
        self.start_commit(cleared, jobs);
    }

    /// The cache plus the overlay of what is committing.
    fn view(&mut self) -> View {
        self.overlay.view(self.informer.snapshot())
    }

    /// Verifies `plan` on `view` in a `plan.verify` span under `parent`,
    /// which records how many nodes were refused.
    async fn verify_in_span(&self, view: &View, plan: &Arc<Plan>, parent: &Span) -> Verdict {
        let verifying = tracing::info_span!(
            parent: parent,
            "plan.verify",
            eval = %plan.eval_id,
            rejected = tracing::field::Empty
        );
        let verdict = self.verify(view, plan).instrument(verifying.clone()).await;
        verifying.record("rejected", verdict.rejected.len());
        verdict
    }

    /// Waits for the commits this plan must not overtake: those touching
    /// what it touches or freeing the room it was verified to fit in, and
    /// the oldest beyond the in-flight limit. A commit that fell short means
    /// verifying again on what really committed. Returns the plan's changes
    /// on `view` when nothing had to be waited for.
    async fn wait_for_blocking_commits(
        &mut self,
        plan: &Arc<Plan>,
        verdict: &mut Verdict,
        view: &View,
        jobs: &BTreeSet<(String, String)>,
    ) -> Option<Changes> {
        let mut waited = false;
        loop {
            let changes = plan_changes(plan, &verdict.accepted, view);
            let waits = self.blocking(plan, verdict, jobs, &changes.targets());
            if waits.is_empty() {
                return (!waited).then_some(changes);
            }
            waited = true;
            if self.settle_at(waits).await {
                let fresh = self.view();
                *verdict = self.verify(&fresh, plan).await;
            }
        }
    }

    /// The positions, ascending, of the commits in flight that a plan with
    /// this verdict, these jobs and these targets must wait for.
    fn blocking(
        &self,
        plan: &Plan,
        verdict: &Verdict,
        jobs: &BTreeSet<(String, String)>,
        targets: &HashSet<Target>,
    ) -> Vec<usize> {
        let placing = placing_nodes(plan, verdict);
        let refused: HashSet<String> = verdict.rejected.keys().cloned().collect();
        let limit = self.applier.settings.max_in_flight;
        let mut waits = Vec::new();
        for (i, f) in self.in_flight.iter().enumerate() {
            let over = self.in_flight.len() - waits.len() > limit.saturating_sub(1);
            if f.blocks(jobs, targets, &placing, &refused) || over {
                waits.push(i);
            }
        }
        waits
    }

    /// Settles the commits in flight at `positions` (ascending); returns
    /// whether any fell short.
    async fn settle_at(&mut self, positions: Vec<usize>) -> bool {
        let mut fell_short = false;
        for i in positions.into_iter().rev() {
            let f = self.in_flight.remove(i);
            fell_short |= self.settle(f).await;
        }
        fell_short
    }

    /// The answer to a plan refused whole before committing: one computed
    /// before the last change to one of its jobs, or an all-at-once plan
    /// with a node refused.
    fn refusal(&self, plan: &Plan, verdict: &Verdict, view: &View) -> Option<PlanResult> {
        if let Some((job, rev)) = stale_revision(view, plan) {
            self.applier.counters.stale.fetch_add(1, Ordering::Relaxed);
            let reason = format!(
                "plan is stale: job {job} changed at revision {rev}, after the snapshot the plan was computed at ({})",
                plan.snapshot_revision
            );
            tracing::debug!(eval = %plan.eval_id, %reason);
            return Some(refused_result(plan, &reason, rev.max(view.revision())));
        }
        if plan.all_at_once && !verdict.rejected.is_empty() {
            let mut rejected = verdict.rejected.clone();
            for node in &verdict.accepted {
                rejected.insert(
                    node.clone(),
                    "all-at-once plan: another node was refused".into(),
                );
            }
            let outcome = CommitOutcome::default();
            return Some(plan_result(plan, rejected, &outcome, view.revision()));
        }
        None
    }

    /// Starts committing a cleared plan of `jobs` in the background, its
    /// optimistic layer in the overlay meanwhile.
    fn start_commit(&mut self, mut cleared: Cleared, jobs: BTreeSet<(String, String)>) {
        let now = now_unix_ns();
        self.next_seq += 1;
        let seq = self.next_seq;
        if cleared.verdict.rejected.is_empty() {
            cleared.changes.completion = Completion::of(&cleared.plan);
        }
        let targets = cleared.changes.targets();
        let layer = optimistic_layer(&cleared.changes, &cleared.view, seq, now);
        let frees = layer.freed_nodes();
        let places = placing_nodes(&cleared.plan, &cleared.verdict);
        self.overlay.push_in_flight(layer);
        let marks = PlanMarks::of(&self.applier.keyspace, &jobs, &cleared.plan);
        let committing = tracing::info_span!(
            parent: &cleared.pending.span,
            "plan.commit",
            eval = %cleared.plan.eval_id,
            seq,
            nodes = cleared.verdict.accepted.len()
        );
        let (applier, txns) = (self.applier.clone(), self.txns.clone());
        let commit = commit_and_answer(applier, txns, cleared, marks, seq, now);
        let task = tokio::spawn(commit.instrument(committing));
        self.in_flight.push(InFlight {
            seq,
            task,
            targets,
            jobs,
            frees,
            places,
        });
    }

    /// Brings the cache up to what the plan was computed on (bounded: a
    /// lagging cache only makes verification stricter) and, after a commit
    /// of unknown outcome, up to the store's current revision.
    async fn catch_up(&mut self, snapshot_revision: Revision) -> Result<(), ApplierError> {
        let wait = self.applier.settings.cache_wait;
        if self.resync {
            let current = self.applier.store.current_revision().await?;
            self.informer.wait_for_revision(current, wait).await?;
            self.resync = false;
        }
        if self.informer.revision() < snapshot_revision
            && let Err(err) = self
                .informer
                .wait_for_revision(snapshot_revision, wait)
                .await
        {
            tracing::debug!(%err, "verifying on a cache older than the plan's snapshot");
        }
        Ok(())
    }

    async fn verify(&self, view: &View, plan: &Arc<Plan>) -> Verdict {
        let started = std::time::Instant::now();
        let verdict = self.verify_untimed(view, plan).await;
        metrics::verified(started.elapsed());
        verdict
    }

    async fn verify_untimed(&self, view: &View, plan: &Arc<Plan>) -> Verdict {
        let (v, p) = (view.clone(), plan.clone());
        let threads = self.applier.settings.verify_threads;
        match tokio::task::spawn_blocking(move || verify_plan(&v, &p, threads)).await {
            Ok(verdict) => verdict,
            Err(err) => {
                tracing::error!(%err, "plan verification failed");
                Verdict {
                    accepted: Vec::new(),
                    rejected: plan_nodes(plan)
                        .into_iter()
                        .map(|n| (n, "internal error while verifying".to_string()))
                        .collect(),
                }
            }
        }
    }

    /// Settles every commit that has finished, so its layer carries the
    /// revision it committed at and leaves the overlay once the cache has
    /// it. Left in flight until the limit forced them, finished commits
    /// kept `max_in_flight_commits` layers in every view, each looked up
    /// for every node and allocation a plan verifies.
    async fn reap(&mut self) {
        while let Some(i) = self.in_flight.iter().position(|f| f.task.is_finished()) {
            let finished = self.in_flight.remove(i);
            self.settle(finished).await;
        }
    }

    /// Waits for the commit in flight and replaces its optimistic layer by
    /// what it wrote; returns whether it fell short of what was verified.
    async fn settle(&mut self, in_flight: InFlight) -> bool {
        match in_flight.task.await {
            Ok(report) => {
                self.overlay.settle(in_flight.seq, report.layer);
                self.resync |= report.unknown;
                report.fell_short
            }
            Err(err) => {
                tracing::error!(%err, "a commit task failed");
                self.overlay
                    .settle(in_flight.seq, OverlayLayer::new(in_flight.seq));
                self.resync = true;
                true
            }
        }
    }

    async fn finish(mut self) {
        for in_flight in std::mem::take(&mut self.in_flight) {
            self.settle(in_flight).await;
        }
    }
}

/// The applier's watch cache keeps allocations as scheduling reads them:
/// verification needs no placement metrics nor the task states of running
/// allocations, and a commit reads the stored value of every allocation it
/// rewrites.
fn cache_config() -> InformerConfig {
    InformerConfig {
        alloc_detail: AllocDetail::Scheduling,
        ..InformerConfig::default()
    }
}

/// The accepted nodes where a plan places or updates allocations.
fn placing_nodes(plan: &Plan, verdict: &Verdict) -> HashSet<String> {
    verdict
        .accepted
        .iter()
        .filter(|n| {
            plan.node_allocation
                .get(*n)
                .is_some_and(|l| !l.allocs.is_empty())
        })
        .cloned()
        .collect()
}

/// A result committing nothing, every node refused for `reason`.
fn refused_result(plan: &Plan, reason: &str, refresh: Revision) -> PlanResult {
    let rejected = plan_nodes(plan)
        .into_iter()
        .map(|n| (n, reason.to_string()))
        .collect();
    let mut r = plan_result(plan, rejected, &CommitOutcome::default(), refresh);
    // Even a plan without nodes must send the worker to a fresher state.
    r.refresh_revision = r.refresh_revision.max(refresh);
    r
}

/// The answer to a plan: what `outcome` committed (each allocation by its
/// identity: the worker holds the plan it sent), what was refused, and
/// after a refusal the revision the worker must refresh to.
fn plan_result(
    plan: &Plan,
    mut rejected: BTreeMap<String, String>,
    outcome: &CommitOutcome,
    view_revision: Revision,
) -> PlanResult {
    let mut r = PlanResult::default();
    for node in &outcome.committed {
        if let Some(l) = plan.node_update.get(node).filter(|l| !l.allocs.is_empty()) {
            r.node_update.insert(node.clone(), identities(l, |_| true));
        }
        if let Some(l) = plan
            .node_allocation
            .get(node)
            .filter(|l| !l.allocs.is_empty())
        {
            r.node_allocation
                .insert(node.clone(), identities(l, |_| true));
        }
        if let Some(l) = plan.node_preemptions.get(node) {
            let l = identities(l, |a| !outcome.skipped_evictions.contains(&a.id));
            if !l.allocs.is_empty() {
                r.node_preemptions.insert(node.clone(), l);
            }
        }
    }
    if outcome.global_committed {
        r.deployment = plan.deployment.clone();
        r.deployment_updates = plan.deployment_updates.clone();
    }
    r.alloc_revision = outcome.revision;
    r.eval_revision = outcome.eval_revision;
    rejected.extend(outcome.refused.clone());
    if !rejected.is_empty() {
        r.refresh_revision = outcome
            .revision
            .max(outcome.refresh)
            .max(view_revision)
            .max(1);
        r.rejected_nodes = rejected.keys().cloned().collect();
        r.rejection_reasons = rejected.into_iter().collect();
    }
    r
}

/// The allocations of `list` that `keep` keeps, each reduced to its id and
/// task group (the node is the list's key): a result that echoed every
/// allocation whole would cost the applier a copy and an encoding, and the
/// worker a decoding, of every placement it sent and still holds.
fn identities(list: &AllocList, keep: impl Fn(&Allocation) -> bool) -> AllocList {
    AllocList {
        allocs: list
            .allocs
            .iter()
            .filter(|a| keep(a))
            .map(|a| Allocation {
                id: a.id.clone(),
                task_group: a.task_group.clone(),
                ..Default::default()
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use caravan_state::encode;
    use caravan_store::MemStore;

    use super::*;
    use crate::fixtures::{alloc, leader, node, place, plan};

    struct AnyToken;

    #[async_trait::async_trait]
    impl TokenCheck for AnyToken {
        async fn check(&self, _: &str, _: &str) -> Result<(), ApplierError> {
            Ok(())
        }
    }

    /// An embedded store holding node n1 under `/t`, and that keyspace.
    async fn store_with_n1() -> (Arc<dyn Store>, Keyspace) {
        let store: Arc<dyn Store> = Arc::new(MemStore::new());
        let ks = Keyspace::new("/t");
        store
            .put(&ks.node("n1"), &encode(&node("n1")), 0)
            .await
            .unwrap();
        (store, ks)
    }

    /// A pipeline of an applier leading on `store` under `/t`, its cache
    /// configured by `cache`, numbering plans from `next_seq`.
    async fn leading_pipeline(
        store: &Arc<dyn Store>,
        ks: &Keyspace,
        cache: InformerConfig,
        next_seq: u64,
    ) -> Pipeline {
        let applier = Arc::new(PlanApplier::new(
            store.clone(),
            "/t",
            Arc::new(AnyToken),
            Settings::from(&PlanApplierConfig::default()),
        ));
        let leadership = Arc::new(leader(store).await);
        let informer = Arc::new(
            Informer::start(store.clone(), ks.clone(), cache)
                .await
                .unwrap(),
        );
        let txns = plan_commits(leadership, applier.settings.txn_limits()).0;
        Pipeline {
            applier,
            txns,
            informer,
            overlay: Overlay::default(),
            in_flight: Vec::new(),
            next_seq,
            resync: false,
        }
    }

    /// Leads one term on `store` until `applier` takes plans; returns the
    /// cache it used.
    async fn one_term(applier: &Arc<PlanApplier>, store: &Arc<dyn Store>) -> Arc<Informer> {
        let leadership = Arc::new(leader(store).await);
        let stop = CancellationToken::new();
        let term = tokio::spawn({
            let (applier, leadership, stop) = (applier.clone(), leadership.clone(), stop.clone());
            async move { applier.lead(leadership, stop).await }
        });
        tokio::time::timeout(Duration::from_secs(10), async {
            while !applier.is_leading() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the term starts");
        let cache = applier.cache.lock().await.clone().expect("loaded");
        stop.cancel();
        term.await.unwrap();
        leadership.resign().await.unwrap();
        assert!(!applier.is_leading());
        cache
    }

    /// A term won again starts on the cache of the first, which kept
    /// following the store in between, instead of listing everything again.
    #[tokio::test]
    async fn a_term_won_again_keeps_the_cache_of_the_first() {
        let (store, ks) = store_with_n1().await;
        let applier = Arc::new(PlanApplier::new(
            store.clone(),
            "/t",
            Arc::new(AnyToken),
            Settings::from(&PlanApplierConfig::default()),
        ));
        let first = one_term(&applier, &store).await;
        let between = store
            .put(&ks.node("n2"), &encode(&node("n2")), 0)
            .await
            .unwrap();
        let second = one_term(&applier, &store).await;
        assert!(Arc::ptr_eq(&first, &second), "the same cache");
        let caught_up = second
            .wait_for_revision(between, Duration::from_secs(5))
            .await
            .unwrap();
        assert!(
            caught_up.node("n2").is_some(),
            "it followed the store between terms"
        );
        assert_eq!(second.stats().relists, 0);
    }

    /// A commit that finished is settled before the next plan is verified:
    /// its layer then leaves the overlay once the cache has what it wrote,
    /// instead of staying in every view until the in-flight limit forces it.
    #[tokio::test]
    async fn a_finished_commit_is_settled_before_the_next_plan() {
        let (store, ks) = store_with_n1().await;
        let mut pipeline = leading_pipeline(&store, &ks, InformerConfig::default(), 0).await;
        let queue = PlanQueue::new();
        let mut first = plan(pipeline.informer.revision());
        place(&mut first, alloc("a", "n1", 100, 64));
        let answer = queue.push(first).unwrap();
        pipeline.handle(queue.pop().await.unwrap()).await;
        let committed = answer.await.unwrap().unwrap();
        assert_eq!(committed.node_allocation.len(), 1, "{committed:?}");
        tokio::time::timeout(Duration::from_secs(5), async {
            while !pipeline.in_flight.iter().all(|f| f.task.is_finished()) {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the commit task ends");
        pipeline
            .informer
            .wait_for_revision(committed.alloc_revision, Duration::from_secs(5))
            .await
            .unwrap();
        // Another job's plan shares nothing with the first, so nothing makes
        // it wait for that commit.
        let mut second = plan(pipeline.informer.revision());
        second.eval_id = "e2".into();
        let mut other = alloc("b", "n1", 100, 64);
        other.job_id = "api".into();
        place(&mut second, other);
        let answer = queue.push(second).unwrap();
        pipeline.handle(queue.pop().await.unwrap()).await;
        let seqs: Vec<u64> = pipeline.in_flight.iter().map(|f| f.seq).collect();
        assert_eq!(seqs, vec![2], "only the second plan's commit is in flight");
        pipeline.finish().await;
        assert_eq!(answer.await.unwrap().unwrap().node_allocation.len(), 1);
    }

    /// A plan verified against room an earlier commit was freeing waits for
    /// that commit; when the commit falls short, the plan is verified again
    /// and refused instead of over-committing the node.
    #[tokio::test]
    async fn a_plan_relying_on_a_failed_stop_is_verified_again() {
        let (store, ks) = store_with_n1().await;
        let mut running = alloc("x", "n1", 3000, 64);
        running.job_id = "other".into();
        let rev = store
            .put(&ks.alloc("x"), &encode(&running), 0)
            .await
            .unwrap();
        let mut pipeline = leading_pipeline(&store, &ks, InformerConfig::default(), 1).await;
        // An earlier plan stopping x is committing; it will fall short.
        let mut stopped = running.clone();
        stopped.set_desired_status(caravan_proto::AllocDesiredStatus::Stop);
        let mut optimistic = OverlayLayer::new(1);
        optimistic.put_alloc(Arc::new(stopped));
        let frees = optimistic.freed_nodes();
        pipeline.overlay.push_in_flight(optimistic);
        pipeline.in_flight.push(InFlight {
            seq: 1,
            task: tokio::spawn(async {
                CommitReport {
                    layer: OverlayLayer::new(1),
                    fell_short: true,
                    unknown: false,
                }
            }),
            targets: [Target::Alloc("x".into())].into(),
            jobs: [("default".to_string(), "other".to_string())].into(),
            frees,
            places: HashSet::new(),
        });
        let queue = PlanQueue::new();
        let mut p = plan(rev);
        place(&mut p, alloc("y", "n1", 3000, 64));
        let answer = queue.push(p).unwrap();
        let pending = queue.pop().await.unwrap();
        pipeline.handle(pending).await;
        pipeline.finish().await;
        let result = answer.await.unwrap().unwrap();
        assert!(result.node_allocation.is_empty(), "{result:?}");
        assert_eq!(result.rejected_nodes, vec!["n1"]);
        assert!(result.rejection_reasons["n1"].contains("cpu"));
        assert!(store.get(&ks.alloc("y")).await.unwrap().is_none());
    }

    /// The cache keeps allocations lean (no metrics, no task states while
    /// they run), yet a plan stopping one writes back everything stored.
    #[tokio::test]
    async fn the_lean_cache_never_thins_what_a_commit_writes() {
        let (store, ks) = store_with_n1().await;
        let mut running = alloc("x", "n1", 100, 64);
        running.metrics = Some(Box::new(caravan_proto::AllocMetric {
            nodes_evaluated: 3,
            ..Default::default()
        }));
        running.task_states.insert(
            "web".into(),
            caravan_proto::TaskState {
                state: "running".into(),
                ..Default::default()
            },
        );
        let rev = store
            .put(&ks.alloc("x"), &encode(&running), 0)
            .await
            .unwrap();
        let mut pipeline = leading_pipeline(&store, &ks, cache_config(), 0).await;
        let cached = pipeline.informer.snapshot().alloc("x").cloned().unwrap();
        assert!(cached.metrics.is_none() && cached.task_states.is_empty());
        let queue = PlanQueue::new();
        let mut p = plan(rev);
        crate::fixtures::stop(&mut p, "n1", "x");
        let answer = queue.push(p).unwrap();
        pipeline.handle(queue.pop().await.unwrap()).await;
        pipeline.finish().await;
        let result = answer.await.unwrap().unwrap();
        assert_eq!(result.node_update.len(), 1, "{result:?}");
        let kv = store.get(&ks.alloc("x")).await.unwrap().unwrap();
        let now: caravan_proto::Allocation = caravan_state::decode(&kv).unwrap();
        assert_eq!(
            now.desired_status(),
            caravan_proto::AllocDesiredStatus::Stop
        );
        assert_eq!(now.metrics, running.metrics);
        assert_eq!(now.task_states, running.task_states);
    }

    fn in_flight(targets: &[&str], job: &str, frees: &[&str]) -> InFlight {
        InFlight {
            seq: 1,
            task: tokio::spawn(async {
                CommitReport {
                    layer: OverlayLayer::new(1),
                    fell_short: false,
                    unknown: false,
                }
            }),
            targets: targets
                .iter()
                .map(|t| Target::Alloc(t.to_string()))
                .collect(),
            jobs: [("default".to_string(), job.to_string())].into(),
            frees: frees.iter().map(|n| n.to_string()).collect(),
            places: ["n3".to_string()].into(),
        }
    }

    #[tokio::test]
    async fn a_commit_blocks_plans_that_share_objects_jobs_or_freed_room() {
        let f = in_flight(&["a1"], "web", &["n1"]);
        let jobs = |j: &str| BTreeSet::from([("default".to_string(), j.to_string())]);
        let targets = |ids: &[&str]| -> HashSet<Target> {
            ids.iter().map(|t| Target::Alloc(t.to_string())).collect()
        };
        let nodes = |ns: &[&str]| -> HashSet<String> { ns.iter().map(|n| n.to_string()).collect() };
        let none = nodes(&[]);
        assert!(!f.blocks(&jobs("api"), &targets(&["b1"]), &nodes(&["n2"]), &none));
        assert!(f.blocks(&jobs("web"), &targets(&["b1"]), &nodes(&["n2"]), &none));
        assert!(f.blocks(&jobs("api"), &targets(&["a1"]), &nodes(&["n2"]), &none));
        assert!(f.blocks(&jobs("api"), &targets(&["b1"]), &nodes(&["n1"]), &none));
        assert!(
            f.blocks(
                &jobs("api"),
                &targets(&["b1"]),
                &nodes(&["n2"]),
                &nodes(&["n3"])
            ),
            "refused where the commit places"
        );
        assert!(!f.blocks(
            &jobs("api"),
            &targets(&["b1"]),
            &nodes(&["n2"]),
            &nodes(&["n2"])
        ));
    }

    #[test]
    fn a_result_lists_what_committed_and_sends_the_worker_to_refresh() {
        let mut p = plan(10);
        place(&mut p, alloc("a", "n1", 1, 1));
        place(&mut p, alloc("b", "n2", 1, 1));
        let outcome = CommitOutcome {
            committed: vec!["n1".into()],
            revision: 14,
            ..Default::default()
        };
        let rejected = BTreeMap::from([("n2".to_string(), "cpu exhausted".to_string())]);
        let r = plan_result(&p, rejected, &outcome, 20);
        assert_eq!(r.node_allocation.keys().collect::<Vec<_>>(), vec!["n1"]);
        let placed = &p.node_allocation["n1"].allocs[0];
        assert_eq!(
            r.node_allocation["n1"].allocs,
            vec![Allocation {
                id: placed.id.clone(),
                task_group: placed.task_group.clone(),
                ..Default::default()
            }],
            "an allocation is named, not sent back whole"
        );
        assert!(!placed.task_group.is_empty() && placed.allocated_resources.is_some());
        assert_eq!(r.alloc_revision, 14);
        assert_eq!(r.refresh_revision, 20, "the newest state verified against");
        assert_eq!(r.rejected_nodes, vec!["n2"]);
        let full = plan_result(
            &p,
            BTreeMap::new(),
            &CommitOutcome {
                committed: vec!["n1".into(), "n2".into()],
                revision: 14,
                ..Default::default()
            },
            20,
        );
        assert_eq!(full.refresh_revision, 0, "a full commit needs no refresh");
        let stale = refused_result(&p, "stale", 30);
        assert_eq!(stale.refresh_revision, 30);
        assert!(stale.node_allocation.is_empty());
        assert_eq!(stale.rejected_nodes.len(), 2);
    }
}

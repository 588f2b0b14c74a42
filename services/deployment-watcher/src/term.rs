//! One leadership term of the watcher: the active deployments rebuilt from
//! the cache when the term began, followed through snapshot diffs (their
//! own changes and their allocations'), assessed when they change or a
//! progress deadline comes due, and the writes that follow (counts,
//! failure with auto-revert, success with stability, auto-promotion, the
//! batched evaluations that roll the next batch).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use caravan_model::{AllocExt, DeploymentStatusExt, now_unix_ns};
use caravan_proto::{Allocation, Deployment, DeploymentStatus, EvalStatus, Job};
use caravan_state::{Id, Informer, Snapshot, as_spec, register_txn};
use caravan_store::Revision;
use futures::TryStreamExt;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::assess::{
    DESC_SUCCESSFUL, Fact, Facts, Outcome, TimedCutoff, assess_judged, contribution, facts_of,
    health, promoted,
};
use crate::config::DeploymentWatcherConfig;
use crate::error::WatcherError;
use crate::evals::{EvalBatcher, for_deployment};
use crate::revert::{Rollback, describe, rollback_target};
use crate::writes::{Commit, DeploymentWriter};

/// Pause before retrying work the store refused for a passing reason.
const RETRY_PAUSE: Duration = Duration::from_millis(500);
/// How long a conflicted write waits for the cache to see what beat it.
const CATCH_UP: Duration = Duration::from_secs(5);
/// Attempts at marking a version stable when it keeps changing.
const STABLE_ATTEMPTS: usize = 3;
/// Writes of one kind a step keeps in flight: each is a fenced transaction
/// of its own on keys of its own, and etcd commits concurrent ones under
/// one disk sync, so a backlog (thousands of jobs registered in a burst)
/// drains at many deployments per sync instead of one.
const WRITES_IN_FLIGHT: usize = 32;

/// What a term keeps in memory, behind one lock.
#[derive(Debug)]
pub struct TermState {
    /// The deployments still followed, by id, each with what an assessment
    /// reads of each of its allocations, kept in step with the snapshots
    /// the term observes: an assessment reads these, not the cache's
    /// indexes.
    pub facts: HashMap<String, Facts>,
    /// Deployments to assess on the next step.
    pub dirty: BTreeSet<String>,
    /// Deployments whose allocations changed, assessed once their
    /// [`DeploymentWatcherConfig::assess_interval`] since the last
    /// assessment has passed (see [`TermState::take_touched`]).
    pub touched: BTreeSet<String>,
    /// When each deployment was last assessed.
    pub assessed: BTreeMap<String, Instant>,
    /// The earliest running progress deadline of each active deployment,
    /// timed from when this term first saw it.
    pub cutoffs: BTreeMap<String, TimedCutoff>,
    /// Evaluations waiting for their batch window.
    pub batcher: EvalBatcher,
    /// Job versions (namespace, job, version) to mark stable.
    pub stable: BTreeSet<(String, String, u64)>,
    /// When work the store refused is tried again.
    pub retry_at: Option<Instant>,
}

/// A leadership term: its fenced writer, its state and its signals.
pub struct LeaderTerm {
    /// Writes fenced by this term's leadership.
    pub writer: DeploymentWriter,
    /// The watch cache the term follows.
    pub informer: Arc<Informer>,
    /// The service configuration.
    pub config: Arc<DeploymentWatcherConfig>,
    /// In-memory state.
    pub state: Mutex<TermState>,
    /// Woken when the loop should look again (a steering write).
    pub wake: Notify,
    /// Cancelled when the term ends.
    pub stop: CancellationToken,
}

/// The allocations of `d`'s job placed for `d`.
pub fn allocs_of<'a>(snap: &'a Snapshot, d: &Deployment) -> Vec<&'a Allocation> {
    snap.allocs_by_job(&d.namespace, &d.job_id)
        .map(|a| a.as_ref())
        .filter(|a| a.deployment_id == d.id)
        .collect()
}

/// The job to evaluate for `d`: the current one, or a bare service job of
/// that id when it is gone (the scheduler then stops what remains).
pub fn job_for(snap: &Snapshot, d: &Deployment) -> Job {
    snap.job(&d.namespace, &d.job_id)
        .map(|j| (**j).clone())
        .unwrap_or_else(|| Job {
            id: d.job_id.clone(),
            namespace: d.namespace.clone(),
            ..Default::default()
        })
}

/// Whether a deployment found at the start of a term missed the evaluation
/// of an allocation that turned healthy: one did so after the job's latest
/// evaluation that is not blocked was created.
pub fn missed_eval(snap: &Snapshot, d: &Deployment) -> bool {
    if d.status() != DeploymentStatus::Running {
        return false;
    }
    let last_healthy = allocs_of(snap, d)
        .into_iter()
        .filter(|a| health(a) == Some(true) && !a.is_terminal())
        .filter_map(|a| a.deployment_status.as_ref().map(|s| s.timestamp_unix_ns))
        .max();
    let Some(last_healthy) = last_healthy else {
        return false;
    };
    let last_eval = snap
        .evals_by_job(&d.namespace, &d.job_id)
        .filter(|e| e.status() != EvalStatus::Blocked)
        .map(|e| e.create_time_unix_ns)
        .max()
        .unwrap_or(0);
    last_healthy > last_eval
}

impl LeaderTerm {
    /// A term with empty state; [`LeaderTerm::run`] restores it.
    pub fn new(
        writer: DeploymentWriter,
        informer: Arc<Informer>,
        config: Arc<DeploymentWatcherConfig>,
        stop: CancellationToken,
    ) -> Arc<Self> {
        let state = TermState::new(config.eval_batch_window());
        Arc::new(LeaderTerm {
            writer,
            informer,
            config,
            state: Mutex::new(state),
            wake: Notify::new(),
            stop,
        })
    }

    /// Follows deployments until the term ends; `Err` only when deposed.
    pub async fn run(&self) -> Result<(), WatcherError> {
        let mut revisions = self.informer.subscribe();
        revisions.borrow_and_update();
        let mut prev = self.informer.snapshot();
        self.restore(&prev);
        loop {
            revisions.borrow_and_update();
            let snap = self.informer.snapshot();
            self.observe(&prev, &snap);
            prev = snap.clone();
            self.step(&snap).await?;
            let next = self.next_wake();
            tokio::select! {
                changed = revisions.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                }
                _ = sleep_until(next) => {}
                _ = self.wake.notified() => {}
                _ = self.stop.cancelled() => return Ok(()),
            }
        }
    }

    /// Finds every active deployment, the evaluations a previous leader may
    /// not have written, and successful deployments whose version is not
    /// yet marked stable.
    fn restore(&self, snap: &Snapshot) {
        let now = Instant::now();
        let mut state = self.state.lock();
        for d in snap.deployments() {
            if d.status().is_followed() {
                state.follow(snap, d);
                state.dirty.insert(d.id.clone());
                if missed_eval(snap, d) {
                    state.batcher.request(&d.id, now);
                }
            } else if d.status() == DeploymentStatus::Successful
                && snap
                    .job_version(&d.namespace, &d.job_id, d.job_version)
                    .is_some_and(|v| !v.stable)
                && newest_of_job(snap, d)
            {
                state
                    .stable
                    .insert((d.namespace.clone(), d.job_id.clone(), d.job_version));
            }
        }
        tracing::info!(active = state.facts.len(), "following deployments");
    }

    /// Notes what changed between two snapshots: deployments that started,
    /// changed or ended, allocations of active deployments, and allocations
    /// that turned healthy (each asks for the next batch's evaluation).
    fn observe(&self, prev: &Snapshot, snap: &Snapshot) {
        if prev.revision() == snap.revision() {
            return;
        }
        let now = Instant::now();
        let mut state = self.state.lock();
        for change in snap.deployment_changes_since(prev) {
            match change.new() {
                Some(d) if d.status().is_followed() => {
                    state.follow(snap, d);
                    state.dirty.insert(d.id.clone());
                    if d.status() == DeploymentStatus::Paused {
                        state.batcher.forget(&d.id);
                    }
                }
                Some(d) => {
                    state.forget(&d.id);
                    let was = change.old().map(|o| o.status());
                    if d.status() == DeploymentStatus::Successful
                        && was != Some(DeploymentStatus::Successful)
                    {
                        state
                            .stable
                            .insert((d.namespace.clone(), d.job_id.clone(), d.job_version));
                    }
                }
                None => {
                    if let Some(old) = change.old() {
                        state.forget(&old.id);
                    }
                }
            }
        }
        for change in snap.alloc_changes_since(prev) {
            // A change no assessment reads (a client status from pending to
            // running, new task states: most of what clients report) leaves
            // the deployment's assessment as it was.
            let assessed_alike = match (change.old(), change.new()) {
                (Some(old), Some(new)) => contribution(old) == contribution(new),
                _ => false,
            };
            if !assessed_alike {
                for a in [change.old(), change.new()].into_iter().flatten() {
                    if state.facts.contains_key(&a.deployment_id) {
                        state.touched.insert(a.deployment_id.clone());
                    }
                }
                state.note(change.old().map(|a| &**a), change.new().map(|a| &**a));
            }
            let Some(new) = change.new() else { continue };
            let turned_healthy = health(new) == Some(true)
                && change.old().is_none_or(|old| {
                    health(old) != Some(true) || old.deployment_id != new.deployment_id
                });
            if turned_healthy
                && snap
                    .deployment(&new.deployment_id)
                    .is_some_and(|d| d.status() == DeploymentStatus::Running)
            {
                state.batcher.request(&new.deployment_id, now);
            }
        }
    }

    /// When the loop must look again without any change: the next batched
    /// evaluation, the next progress deadline, or a retry.
    fn next_wake(&self) -> Option<Instant> {
        let state = self.state.lock();
        let deadline = state.cutoffs.values().map(|c| c.at).min();
        let touched = state.next_touched_due(self.config.assess_interval());
        [state.batcher.next_due(), deadline, state.retry_at, touched]
            .into_iter()
            .flatten()
            .min()
    }

    /// Assesses what changed or came due, then writes what is owed.
    async fn step(&self, snap: &Snapshot) -> Result<(), WatcherError> {
        let now = Instant::now();
        let dirty: Vec<String> = {
            let mut state = self.state.lock();
            state.retry_at = None;
            let due: Vec<String> = state
                .cutoffs
                .iter()
                .filter(|(_, by)| by.at <= now)
                .map(|(id, _)| id.clone())
                .collect();
            state.dirty.extend(due);
            state.take_touched(now, self.config.assess_interval());
            let dirty = std::mem::take(&mut state.dirty);
            for id in &dirty {
                state.assessed.insert(id.clone(), now);
            }
            dirty.into_iter().collect()
        };
        futures::stream::iter(dirty.into_iter().map(Ok))
            .try_for_each_concurrent(WRITES_IN_FLIGHT, |id| async move {
                let done = self.assess_one(snap, &id).await;
                self.settle(&id, done).await
            })
            .await?;
        let stable: Vec<(String, String, u64)> = std::mem::take(&mut self.state.lock().stable)
            .into_iter()
            .collect();
        futures::stream::iter(stable.into_iter().map(Ok))
            .try_for_each_concurrent(
                WRITES_IN_FLIGHT,
                |(namespace, job_id, version)| async move {
                    self.mark_stable(&namespace, &job_id, version).await
                },
            )
            .await?;
        let due = self.state.lock().batcher.due(Instant::now());
        futures::stream::iter(due.into_iter().map(Ok))
            .try_for_each_concurrent(WRITES_IN_FLIGHT, |id| self.evaluate_next_batch(snap, id))
            .await
    }

    /// Creates the evaluation that places the next batch of deployment
    /// `id`, if it still runs; a failure other than deposition asks again.
    async fn evaluate_next_batch(&self, snap: &Snapshot, id: String) -> Result<(), WatcherError> {
        let Some(d) = snap.deployment(&id) else {
            return Ok(());
        };
        if d.status() != DeploymentStatus::Running {
            return Ok(());
        }
        let eval = for_deployment(d, &job_for(snap, d), now_unix_ns());
        match self.writer.create_eval(&eval).await {
            Ok(Commit::Done(revision)) => {
                tracing::info!(deployment_id = %id, eval_id = %eval.id, revision, "evaluation created for the next batch");
            }
            Ok(Commit::Conflict(_)) => {}
            Err(err) if err.is_deposed() => return Err(err),
            Err(err) => {
                tracing::warn!(deployment_id = %id, error = %err, "cannot create the evaluation; retrying");
                let mut state = self.state.lock();
                state.batcher.request(&id, Instant::now());
                state.retry_at = Some(Instant::now() + RETRY_PAUSE);
            }
        }
        Ok(())
    }

    /// Handles the result of assessing one deployment: a conflict waits for
    /// the cache and looks again, a store failure retries after a pause,
    /// losing leadership ends the term.
    async fn settle(
        &self,
        id: &str,
        done: Result<Option<Revision>, WatcherError>,
    ) -> Result<(), WatcherError> {
        match done {
            Ok(None) => Ok(()),
            Ok(Some(conflict_at)) => {
                tracing::debug!(deployment_id = %id, conflict_at, "deployment changed under the write; looking again");
                // What beat the write reaches the cache, and a later step
                // assesses it again from there.
                let _ = self.informer.wait_for_revision(conflict_at, CATCH_UP).await;
                self.state.lock().dirty.insert(id.to_string());
                Ok(())
            }
            Err(err) if err.is_deposed() => Err(err),
            Err(err) => {
                // A full store refuses every retry until an operator frees
                // it; the gateway reports that once, not every pause.
                if matches!(&err, WatcherError::Store(e) if e.is_no_space()) {
                    tracing::debug!(deployment_id = %id, error = %err, "cannot update the deployment; retrying");
                } else {
                    tracing::warn!(deployment_id = %id, error = %err, "cannot update the deployment; retrying");
                }
                let mut state = self.state.lock();
                state.dirty.insert(id.to_string());
                state.retry_at = Some(Instant::now() + RETRY_PAUSE);
                Ok(())
            }
        }
    }

    /// Assesses one deployment and writes what follows. `Ok(Some(r))` when
    /// a write conflicted with the store at revision `r`.
    async fn assess_one(
        &self,
        snap: &Snapshot,
        id: &str,
    ) -> Result<Option<Revision>, WatcherError> {
        let Some(d) = snap.deployment(id).filter(|d| d.status().is_followed()) else {
            self.state.lock().forget(id);
            return Ok(None);
        };
        let now_ns = now_unix_ns();
        let now = Instant::now();
        let (a, timed) = {
            let mut state = self.state.lock();
            let timed = state.cutoffs.get(id).copied();
            let judge = |by| TimedCutoff::judge(timed, by, now_ns, now);
            // Followed from this snapshot when a steering write asked for
            // it before the term observed it.
            state.follow(snap, d);
            (assess_judged(d, &state.facts[id], judge), timed)
        };
        {
            let mut state = self.state.lock();
            match a.cutoff {
                // A cutoff keeps the instant it was first timed at.
                Some(by) if timed.is_some_and(|t| t.unix_ns == by) => {}
                Some(by) => {
                    let timed = TimedCutoff::seen(by, now_ns, now);
                    state.cutoffs.insert(id.to_string(), timed);
                }
                None => {
                    state.cutoffs.remove(id);
                }
            }
        }
        let read_at = d.modify_revision;
        let mut next = a.deployment;
        next.modify_time_unix_ns = now_ns;
        let commit = match a.outcome {
            Outcome::Fail {
                description,
                rollback,
            } => {
                return Ok(self
                    .fail(snap, next, read_at, description, rollback)
                    .await?
                    .err());
            }
            Outcome::Succeed => {
                next.set_status(DeploymentStatus::Successful);
                next.status_description = DESC_SUCCESSFUL.to_string();
                let commit = self.writer.succeed(&next, read_at).await?;
                if let Commit::Done(revision) = commit {
                    self.state.lock().forget(id);
                    tracing::info!(deployment_id = %id, job_id = %d.job_id, version = d.job_version, revision, "deployment successful; version marked stable");
                }
                commit
            }
            Outcome::AutoPromote => {
                let next = promoted(&next, None, now_ns);
                let eval = for_deployment(&next, &job_for(snap, d), now_ns);
                let commit = self
                    .writer
                    .put_deployment(&next, read_at, Some(&eval))
                    .await?;
                if let Commit::Done(revision) = commit {
                    self.state.lock().batcher.forget(id);
                    tracing::info!(deployment_id = %id, eval_id = %eval.id, revision, "canaries healthy; promoted automatically");
                }
                commit
            }
            Outcome::Continue if a.changed => {
                self.writer.put_deployment(&next, read_at, None).await?
            }
            Outcome::Continue => return Ok(None),
        };
        Ok(match commit {
            Commit::Done(_) => None,
            Commit::Conflict(at) => Some(at),
        })
    }

    /// Fails `next` (the deployment as assessed, read at `read_at`) with
    /// `base` as the reason; with `rollback`, registers the job's latest
    /// stable version again in the same transaction. Creates the eval that
    /// lets the scheduler stop placing (and stop unpromoted canaries).
    /// `Ok(Ok((eval id, revision)))` once written, `Ok(Err(r))` on a
    /// conflict with the store at `r`.
    pub async fn fail(
        &self,
        snap: &Snapshot,
        mut next: Deployment,
        read_at: Revision,
        base: &str,
        rollback: bool,
    ) -> Result<Result<(String, Revision), Revision>, WatcherError> {
        let now_ns = now_unix_ns();
        let current = snap
            .job(&next.namespace, &next.job_id)
            .map(|j| (**j).clone());
        let mut eval_job = current.clone().unwrap_or_else(|| job_for(snap, &next));
        let mut register = None;
        let mut target = None;
        let mut reverted_to = None;
        if rollback {
            let t = rollback_target(
                current.as_ref(),
                snap.job_versions(&next.namespace, &next.job_id),
                next.job_version,
            );
            if let (Rollback::To(stable), Some(existing)) = (&t, current.as_ref()) {
                let versions: Vec<(u64, bool)> = snap
                    .job_versions(&next.namespace, &next.job_id)
                    .map(|v| (v.version, v.stable))
                    .collect();
                let w = register_txn(
                    self.writer.keyspace(),
                    Some(existing),
                    as_spec((**stable).clone()),
                    &versions,
                    now_ns,
                );
                if w.changed {
                    reverted_to = Some(stable.version);
                    eval_job = w.job.clone();
                    register = Some(w);
                }
            }
            target = Some(t);
        }
        next.set_status(DeploymentStatus::Failed);
        next.status_description = describe(base, target.as_ref(), reverted_to);
        next.modify_time_unix_ns = now_ns;
        let eval = for_deployment(&next, &eval_job, now_ns);
        match self.writer.fail(&next, read_at, register, &eval).await? {
            Commit::Done(revision) => {
                self.state.lock().forget(&next.id);
                tracing::warn!(
                    deployment_id = %next.id,
                    job_id = %next.job_id,
                    description = %next.status_description,
                    eval_id = %eval.id,
                    revision,
                    "deployment failed"
                );
                Ok(Ok((eval.id, revision)))
            }
            Commit::Conflict(at) => Ok(Err(at)),
        }
    }

    async fn mark_stable(
        &self,
        namespace: &str,
        job_id: &str,
        version: u64,
    ) -> Result<(), WatcherError> {
        for _ in 0..STABLE_ATTEMPTS {
            match self.writer.mark_stable(namespace, job_id, version).await {
                Ok(Commit::Done(revision)) => {
                    if revision != 0 {
                        tracing::info!(job_id, version, revision, "job version marked stable");
                    }
                    return Ok(());
                }
                Ok(Commit::Conflict(_)) => continue,
                Err(err) if err.is_deposed() => return Err(err),
                Err(err) => {
                    tracing::warn!(job_id, version, error = %err, "cannot mark the version stable; retrying");
                    let mut state = self.state.lock();
                    state
                        .stable
                        .insert((namespace.to_string(), job_id.to_string(), version));
                    state.retry_at = Some(Instant::now() + RETRY_PAUSE);
                    return Ok(());
                }
            }
        }
        tracing::warn!(
            job_id,
            version,
            "job version kept changing; not marked stable"
        );
        Ok(())
    }

    /// A deposed term stops at once.
    pub fn check<T>(&self, result: Result<T, WatcherError>) -> Result<T, WatcherError> {
        if let Err(err) = &result
            && err.is_deposed()
        {
            self.stop.cancel();
        }
        result
    }
}

impl TermState {
    /// A term's state before it is restored: nothing followed, evaluations
    /// batched over `eval_window`.
    pub fn new(eval_window: Duration) -> Self {
        TermState {
            facts: HashMap::new(),
            dirty: BTreeSet::new(),
            touched: BTreeSet::new(),
            assessed: BTreeMap::new(),
            cutoffs: BTreeMap::new(),
            batcher: EvalBatcher::new(eval_window),
            stable: BTreeSet::new(),
            retry_at: None,
        }
    }

    /// Follows deployment `d` from `snap` on: its facts read from the
    /// snapshot's allocations the first time, kept up to date by
    /// [`TermState::note`] afterwards.
    pub fn follow(&mut self, snap: &Snapshot, d: &Deployment) {
        if !self.facts.contains_key(&d.id) {
            self.facts
                .insert(d.id.clone(), facts_of(&d.id, allocs_of(snap, d)));
        }
    }

    /// An allocation changed from `old` to `new` (either absent): the facts
    /// of the followed deployments it left or joined follow it.
    pub fn note(&mut self, old: Option<&Allocation>, new: Option<&Allocation>) {
        if let Some(old) = old
            && let Some(facts) = self.facts.get_mut(&old.deployment_id)
        {
            facts.remove(old.id.as_str());
        }
        if let Some(new) = new
            && let Some(facts) = self.facts.get_mut(&new.deployment_id)
        {
            facts.insert(Id::from(new.id.as_str()), Fact::of(new));
        }
    }

    /// Moves the deployments whose allocations changed into `dirty` once
    /// `interval` has passed since their last assessment: a deployment
    /// whose allocations change on every revision (a thousand of them
    /// starting one node report at a time) is assessed at most once per
    /// interval, each assessment a pass over all its allocations, instead
    /// of once per revision. The first change after a quiet interval is
    /// assessed at once.
    pub fn take_touched(&mut self, now: Instant, interval: Duration) {
        let assessed = &self.assessed;
        let (ready, wait): (BTreeSet<String>, BTreeSet<String>) = std::mem::take(&mut self.touched)
            .into_iter()
            .partition(|id| assessed.get(id).is_none_or(|at| *at + interval <= now));
        self.dirty.extend(ready);
        self.touched = wait;
    }

    /// When the earliest deployment waiting in `touched` may be assessed.
    pub fn next_touched_due(&self, interval: Duration) -> Option<Instant> {
        self.touched
            .iter()
            .filter_map(|id| self.assessed.get(id))
            .min()
            .map(|at| *at + interval)
    }

    /// Stops following a deployment.
    pub fn forget(&mut self, id: &str) {
        self.facts.remove(id);
        self.dirty.remove(id);
        self.touched.remove(id);
        self.assessed.remove(id);
        self.cutoffs.remove(id);
        self.batcher.forget(id);
    }
}

/// Whether `d` is the newest deployment of its job.
fn newest_of_job(snap: &Snapshot, d: &Deployment) -> bool {
    snap.deployments_by_job(&d.namespace, &d.job_id)
        .all(|o| o.create_revision <= d.create_revision)
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_changes_are_assessed_at_once_then_at_most_once_per_interval() {
        let interval = Duration::from_millis(250);
        let t0 = Instant::now();
        let mut s = TermState::new(Duration::from_secs(1));
        // Never assessed: at once.
        s.touched.insert("d1".into());
        s.take_touched(t0, interval);
        assert!(s.dirty.contains("d1") && s.touched.is_empty());
        s.dirty.clear();
        s.assessed.insert("d1".into(), t0);
        // Touched again within the interval: held, with a wake-up at its end.
        s.touched.insert("d1".into());
        s.take_touched(t0 + Duration::from_millis(100), interval);
        assert!(s.dirty.is_empty() && s.touched.contains("d1"));
        assert_eq!(s.next_touched_due(interval), Some(t0 + interval));
        // Once the interval has passed: assessed.
        s.take_touched(t0 + interval, interval);
        assert!(s.dirty.contains("d1") && s.touched.is_empty());
        assert_eq!(s.next_touched_due(interval), None);
        // Forgetting a deployment drops what was held for it.
        s.touched.insert("d1".into());
        s.forget("d1");
        assert!(s.touched.is_empty() && s.assessed.is_empty());
    }

    /// The facts a term keeps through `follow` and `note` equal the facts
    /// read afresh from each snapshot, whatever the allocations do:
    /// placed, turning healthy or unhealthy, finishing, moving to another
    /// deployment, deleted.
    #[test]
    fn kept_facts_equal_facts_read_afresh() {
        use caravan_proto::{AllocDeploymentStatus, AllocDesiredStatus, DeploymentState};
        use caravan_state::{Change, Tables};

        let deployments = ["d1", "d2"];
        let mut tables = Tables::new();
        for id in deployments {
            let mut d = Deployment {
                id: id.into(),
                namespace: "default".into(),
                job_id: "web".into(),
                ..Default::default()
            };
            d.set_status(DeploymentStatus::Running);
            d.task_groups.insert("g".into(), DeploymentState::default());
            tables.apply(Change::Deployment {
                id: Id::from(id),
                deployment: Some(Arc::new(d)),
            });
        }
        let mut state = TermState::new(Duration::from_secs(1));
        let mut prev = Snapshot::new(tables.clone());
        state.follow(&prev, prev.deployment("d1").unwrap());
        // A small deterministic generator: the same run every time.
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut most_kept = 0;
        for step in 0..400 {
            let id = format!("a{}", next(12));
            let change = match next(6) {
                0 => None,
                kind => {
                    let mut a = Allocation {
                        id: id.clone(),
                        namespace: "default".into(),
                        job_id: "web".into(),
                        task_group: "g".into(),
                        deployment_id: deployments[next(2) as usize].into(),
                        create_time_unix_ns: 1 + next(5) as i64,
                        ..Default::default()
                    };
                    a.set_desired_status(AllocDesiredStatus::Run);
                    if kind >= 2 {
                        a.deployment_status = Some(AllocDeploymentStatus {
                            healthy: Some(kind != 5),
                            timestamp_unix_ns: next(9) as i64,
                            ..Default::default()
                        });
                    }
                    if kind == 4 {
                        a.set_desired_status(AllocDesiredStatus::Stop);
                    }
                    Some(Arc::new(a))
                }
            };
            tables.apply(Change::Alloc {
                id: Id::from(id.as_str()),
                alloc: change,
            });
            tables.advance_to(step + 1);
            let snap = Snapshot::new(tables.clone());
            for c in snap.alloc_changes_since(&prev) {
                state.note(c.old().map(|a| &**a), c.new().map(|a| &**a));
            }
            if step == 200 {
                state.follow(&snap, snap.deployment("d2").unwrap());
            }
            for d in deployments {
                if let Some(kept) = state.facts.get(d) {
                    most_kept = most_kept.max(kept.len());
                    let deployment = snap.deployment(d).unwrap();
                    assert_eq!(
                        kept,
                        &facts_of(d, allocs_of(&snap, deployment)),
                        "{d} after step {step}"
                    );
                }
            }
            prev = snap;
        }
        assert!(most_kept >= 4, "the run placed allocations: {most_kept}");
        assert!(state.facts.contains_key("d2"));
        state.forget("d1");
        assert!(!state.facts.contains_key("d1"));
    }
}

//! One leadership term's pipeline: per plan, the cache catches up, the
//! plan is verified against the cache plus the overlay of what is still
//! committing, waits for the commits it must not overtake (verified again
//! when one fell short), is refused whole when stale, and its accepted part
//! is committed in the background while the next plan is verified.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use caravan_model::now_unix_ns;
use caravan_proto::{Plan, PlanResult};
use caravan_state::Informer;
use caravan_store::{GroupCommit, LeadershipError, Revision};
use tracing::{Instrument, Span};

use super::PlanApplier;
use super::in_flight::{Cleared, InFlight, Timings, commit_and_answer};
use super::result::{plan_result, refused_result};
use crate::commit::{
    Changes, CommitOutcome, Completion, PlanMarks, optimistic_layer, plan_changes,
};
use crate::error::ApplierError;
use crate::metrics;
use crate::mutation::Target;
use crate::overlay::{Overlay, OverlayLayer, View};
use crate::queue::PendingPlan;
use crate::verify::{Verdict, plan_jobs, plan_nodes, stale_revision, verify_plan};

/// One leadership term's pipeline.
pub(super) struct Pipeline {
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
    /// The pipeline of a term of `applier`, on its cache `informer`.
    pub(super) fn new(
        applier: Arc<PlanApplier>,
        txns: GroupCommit<LeadershipError>,
        informer: Arc<Informer>,
    ) -> Self {
        Pipeline {
            applier,
            txns,
            informer,
            overlay: Overlay::default(),
            in_flight: Vec::new(),
            next_seq: 0,
            // A term starts on a cache that may not show the last commits of
            // the term before it (this process's or another's): its overlay
            // is gone, and a plan computed before those commits would pass
            // the stale-plan check and place its allocations a second time.
            // The first plan waits for the cache to reach the store.
            resync: true,
        }
    }

    /// Takes one plan from verification to a commit under way (or to its
    /// answer, when it is refused whole before committing).
    pub(super) async fn handle(&mut self, pending: PendingPlan) {
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

    pub(super) async fn finish(mut self) {
        for in_flight in std::mem::take(&mut self.in_flight) {
            self.settle(in_flight).await;
        }
    }
}

/// The accepted nodes where a plan places or updates allocations.
pub(super) fn placing_nodes(plan: &Plan, verdict: &Verdict) -> HashSet<String> {
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

#[cfg(test)]
mod tests;

//! How a plan's commit is written: the writes of each batch of parts as one
//! fenced transaction (each write compared against the revision it was
//! computed from, the plan marks against other plans of the same jobs),
//! committed through the term's group committer, recomputed from fresh
//! values and retried when a client status write got in between.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use caravan_state::Keyspace;
use caravan_store::{
    Committer as StoreCommitter, Compare, CompareOp, GroupCommit, GroupLimits, Leadership,
    LeadershipError, Op, Revision, Store, Txn, TxnResult,
};
use prost::Message;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::batches::batches;
use super::changes::{Changes, Completion, Part};
use super::marks::{PlanMarks, marks_moved};
use super::outcome::CommitOutcome;
use super::read::read_current;
use super::writes::{Currents, Expect, Stored, Write, completion_write, writes};
use crate::error::ApplierError;
use crate::mutation::Target;
use crate::overlay::{OverlayLayer, View};

/// The group committer of a term: `leadership`'s fenced transactions, the
/// commits of plans that meet going to the store as one.
pub(crate) fn plan_commits(
    leadership: Arc<Leadership>,
    limits: GroupLimits,
) -> (GroupCommit<LeadershipError>, JoinHandle<()>) {
    let commit: StoreCommitter<LeadershipError> = Arc::new(move |txn| {
        let leadership = leadership.clone();
        Box::pin(async move { leadership.fenced_txn(txn).await })
    });
    // It ends with the term's last handle, once its groups are answered.
    let gone = || LeadershipError::Lost("the term's commits have stopped".into());
    GroupCommit::start("plans", commit, limits, CancellationToken::new(), gone)
}

/// The transaction carrying `writes`: each put guarded by a compare of its
/// key with what the write expects.
pub(super) fn txn_of<'a>(writes: impl IntoIterator<Item = &'a Write>) -> Txn {
    writes.into_iter().fold(Txn::new(), |txn, w| {
        let guard = match w.expect {
            Expect::Absent => Compare::absent(w.key.clone()),
            Expect::Revision(rev) => Compare::mod_revision(w.key.clone(), CompareOp::Equal, rev),
        };
        let txn = txn
            .when(guard)
            .and_then(Op::put(w.key.clone(), w.value.encode()));
        match &w.follow {
            Some((compare, put)) => txn.when(compare.clone()).and_then(put.clone()),
            None => txn,
        }
    })
}

/// Commits the changes of a plan.
pub(crate) struct Committer<'a> {
    pub(crate) store: &'a dyn Store,
    /// The term's fenced transactions, committed alone or with others'.
    pub(crate) txns: &'a GroupCommit<LeadershipError>,
    pub(crate) keyspace: &'a Keyspace,
    pub(crate) max_ops: usize,
    pub(crate) max_bytes: usize,
    pub(crate) retries: u32,
    pub(crate) now: i64,
    pub(crate) marks: PlanMarks,
}

impl Committer<'_> {
    /// Commits `changes` batch after batch; an all-at-once plan commits in
    /// one transaction or not at all.
    pub(crate) async fn commit(
        &self,
        view: &View,
        mut changes: Changes,
        all_at_once: bool,
        seq: u64,
    ) -> CommitOutcome {
        let mut outcome = CommitOutcome {
            skipped_evictions: changes.skipped_evictions.clone(),
            layer: OverlayLayer::new(seq),
            ..Default::default()
        };
        let completion = changes.completion.take();
        let mut currents = Currents::default();
        if let Err(err) = self.read_rewritten(view, &mut changes, &mut currents).await {
            outcome.refuse(changes.parts(), &format!("not committed: {err}"));
            outcome.error = Some(err);
            return outcome;
        }
        let batches = self.batches(changes, completion.as_ref());
        if all_at_once && batches.len() > 1 {
            let reason = "all-at-once plan too large for one transaction";
            outcome.refuse(batches.iter().flatten(), reason);
            return outcome;
        }
        let mut progress = Progress {
            view,
            currents: &mut currents,
            all_at_once,
            outcome: &mut outcome,
        };
        self.commit_batches(&mut progress, batches, completion.as_ref())
            .await;
        if let Some(rev) = outcome.layer.revision {
            outcome.revision = rev;
        }
        outcome
    }

    /// Reads the stored values of the allocations `changes` rewrite into
    /// `currents`, so what is written keeps every field the cache's lean
    /// copy lacks (placement metrics, task states), and sizes the parts by
    /// them.
    async fn read_rewritten(
        &self,
        view: &View,
        changes: &mut Changes,
        currents: &mut Currents,
    ) -> Result<(), ApplierError> {
        let targets = changes.rewritten_allocs();
        if targets.is_empty() {
            return Ok(());
        }
        let job_of = |id: &str| {
            view.alloc(id)
                .map(|a| (a.namespace.clone(), a.job_id.clone()))
        };
        let fresh = read_current(self.store, self.keyspace, &targets, &job_of, self.max_ops)
            .await
            .map_err(ApplierError::Store)?;
        let mut extra = HashMap::new();
        for (target, stored) in fresh {
            if let (Target::Alloc(id), Some((Stored::Alloc(a), _))) = (&target, &stored) {
                let cached = view.alloc(id).map_or(0, |c| c.encoded_len());
                extra.insert(target.clone(), a.encoded_len().saturating_sub(cached));
            }
            currents.set(target, stored);
        }
        changes.grow(&extra);
        Ok(())
    }

    /// The parts of `changes` in transactions, every one keeping room for
    /// the plan marks and for the completion, which rides on the last.
    fn batches(&self, changes: Changes, completion: Option<&Completion>) -> Vec<Vec<Part>> {
        let (completion_ops, completion_bytes) =
            completion.map_or((0, 0), |c| (c.ops(), c.bytes()));
        let room = self
            .max_ops
            .saturating_sub(self.marks.keys.len() + completion_ops)
            .max(1);
        batches(
            changes,
            room,
            self.max_bytes.saturating_sub(completion_bytes),
        )
    }

    /// Commits `batches` in order, the completion with the last; once one
    /// fails or a plan mark moved, the rest are refused.
    async fn commit_batches(
        &self,
        progress: &mut Progress<'_>,
        batches: Vec<Vec<Part>>,
        completion: Option<&Completion>,
    ) {
        let last = batches.len().saturating_sub(1);
        let mut pending = batches.into_iter().enumerate();
        while let Some((i, parts)) = pending.next() {
            let completing = completion.filter(|_| i == last);
            let reason = match self.commit_batch(progress, parts, completing).await {
                Ok(()) if progress.outcome.refresh > 0 => marks_moved(progress.outcome.refresh),
                Ok(()) => continue,
                Err(err) => {
                    let reason = format!("not committed: {err}");
                    progress.outcome.error = Some(err);
                    reason
                }
            };
            let rest: Vec<Part> = pending.flat_map(|(_, parts)| parts).collect();
            progress.outcome.refuse(&rest, &reason);
            break;
        }
    }

    /// Commits one batch: refuses the parts that cannot be applied any more
    /// and, after a conflict, computes the writes again from fresh values,
    /// up to `retries` times. `Err` when the store or the term failed.
    async fn commit_batch(
        &self,
        progress: &mut Progress<'_>,
        mut parts: Vec<Part>,
        completion: Option<&Completion>,
    ) -> Result<(), ApplierError> {
        let mut conflicts = 0;
        loop {
            let Some(writes) = self.writes(progress, &mut parts) else {
                return Ok(());
            };
            // Only a commit of everything completes the eval: any refusal,
            // in this batch or an earlier one, leaves it to the worker.
            let completing = completion
                .filter(|_| progress.outcome.refused.is_empty())
                .and_then(|c| {
                    completion_write(c, progress.currents, progress.view, self.keyspace, self.now)
                });
            if writes.is_empty() && completing.is_none() {
                progress.outcome.record(parts, Vec::new(), None);
                return Ok(());
            }
            let prior = progress.outcome.layer.revision;
            let res = self.send(&writes, completing.as_ref(), prior).await?;
            if res.succeeded {
                progress.settle(parts, writes, completing, res.revision);
                return Ok(());
            }
            if let Some(rev) = self.marks.moved(self.store, prior).await? {
                progress.outcome.refuse(&parts, &marks_moved(rev));
                progress.outcome.refresh = rev;
                return Ok(());
            }
            conflicts += 1;
            if conflicts > self.retries {
                let reason =
                    format!("allocations kept changing under the commit ({conflicts} conflicts)");
                progress.outcome.refuse(&parts, &reason);
                return Ok(());
            }
            self.reread(progress.currents, &parts, completing.as_ref(), conflicts)
                .await?;
        }
    }

    /// The writes of `parts` given the current values, leaving out (and
    /// refusing) every part that cannot be applied any more; `None` when an
    /// all-at-once plan is refused whole for one.
    fn writes(&self, progress: &mut Progress<'_>, parts: &mut Vec<Part>) -> Option<Vec<Write>> {
        loop {
            let refusal = match writes(
                progress.view,
                self.keyspace,
                self.now,
                parts,
                progress.currents,
            ) {
                Ok(writes) => return Some(writes),
                Err(refusal) => refusal,
            };
            let refused = parts.remove(refusal.part);
            let node = refused.node.unwrap_or_default();
            if progress.all_at_once {
                let others = format!("all-at-once plan: {}", refusal.reason);
                progress.outcome.refuse(parts.iter(), &others);
                progress.outcome.refused.insert(node, refusal.reason);
                return None;
            }
            progress.outcome.refused.insert(node, refusal.reason);
        }
    }

    /// Sends `writes` and the completion's as one transaction, guarded by
    /// the plan marks as of `prior`, the revision of the plan's previous
    /// transaction.
    async fn send(
        &self,
        writes: &[Write],
        completing: Option<&Write>,
        prior: Option<Revision>,
    ) -> Result<TxnResult, ApplierError> {
        let txn = self
            .marks
            .guard(txn_of(writes.iter().chain(completing)), prior);
        self.txns
            .txn(txn)
            .await
            .map_err(ApplierError::from_leadership)
    }

    /// Reads the current values of what `parts` and the completion write
    /// again after a conflict. The eval's guard may be what failed: it is
    /// re-read too, so the next try leaves it out if it changed.
    async fn reread(
        &self,
        currents: &mut Currents,
        parts: &[Part],
        completing: Option<&Write>,
        conflicts: u32,
    ) -> Result<(), ApplierError> {
        let targets: BTreeSet<Target> = parts
            .iter()
            .flat_map(|p| p.changes.iter().map(|(t, _)| t.clone()))
            .chain(completing.map(|c| c.target.clone()))
            .collect();
        tracing::debug!(
            targets = targets.len(),
            conflicts,
            "commit conflict; re-reading"
        );
        let known = &*currents;
        let job_of = |id: &str| known.job_of(id);
        let fresh = read_current(self.store, self.keyspace, &targets, &job_of, self.max_ops)
            .await
            .map_err(ApplierError::Store)?;
        currents.extend(fresh);
        Ok(())
    }
}

/// A plan's commit under way: what its batches share.
struct Progress<'a> {
    view: &'a View,
    currents: &'a mut Currents,
    all_at_once: bool,
    outcome: &'a mut CommitOutcome,
}

impl Progress<'_> {
    /// Records a batch committed at `rev`: what it wrote becomes the
    /// current value for later batches, and goes to the overlay.
    fn settle(
        &mut self,
        parts: Vec<Part>,
        writes: Vec<Write>,
        completing: Option<Write>,
        rev: Revision,
    ) {
        let written: Vec<_> = writes.into_iter().map(|w| w.settle(rev)).collect();
        for w in &written {
            self.currents.set(w.target.clone(), w.current());
        }
        if let Some(c) = completing {
            let c = c.settle(rev);
            self.currents.set(c.target.clone(), c.current());
            self.outcome.eval_revision = rev;
        }
        self.outcome.record(parts, written, Some(rev));
    }
}

//! Committing the verified part of a plan: the changes per node, split into
//! transactions within the op and byte budget (never splitting one node's
//! part), each a fenced transaction that compares every object it rewrites,
//! recomputed from fresh values and retried when a client status write got
//! in between. The plan's eval completion rides on the last transaction when
//! nothing was refused, so a fully committed plan costs one write, not two.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use caravan_model::AllocExt;
use caravan_proto::{Allocation, Deployment, Evaluation, Plan};
use caravan_state::{Keyspace, decode as codec_decode, encode};
use caravan_store::{
    Committer as StoreCommitter, Compare, CompareOp, GroupCommit, GroupLimits, Leadership,
    LeadershipError, Op, OpResult, Revision, Store, StoreError, Txn,
};
use prost::Message;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::ApplierError;
use crate::mutation::{Change, StopSpec, Target, apply_alloc, apply_deployment, apply_eval};
use crate::overlay::{OverlayLayer, View};

/// Bytes a key and the txn framing add to a value, roughly.
const KEY_OVERHEAD: usize = 160;

/// The changes of one node (or, with `node` unset, of the plan as a whole:
/// deployment and evals), committed together or not at all.
#[derive(Debug, Default)]
pub(crate) struct Part {
    pub(crate) node: Option<String>,
    pub(crate) changes: Vec<(Target, Change)>,
    ops: usize,
    bytes: usize,
}

impl Part {
    fn push(&mut self, target: Target, change: Change, bytes: usize) {
        // A compare and a put per object.
        self.ops += 2;
        self.bytes += bytes + KEY_OVERHEAD;
        self.changes.push((target, change));
    }
}

/// A plan's accepted part as changes, ready to commit.
#[derive(Debug, Default)]
pub(crate) struct Changes {
    pub(crate) global: Part,
    pub(crate) nodes: Vec<Part>,
    /// Evictions dropped because their allocation is already terminal or gone.
    pub(crate) skipped_evictions: HashSet<String>,
    /// The plan's eval as it ends if everything above commits.
    pub(crate) completion: Option<Completion>,
}

/// The plan's own eval, completed: written in the plan's last transaction
/// when no part of the plan was refused, and only while the eval is still
/// at the revision it was delivered at, so a write by the broker or by a
/// later delivery is never overwritten. Left out otherwise; the worker then
/// writes the eval through the broker.
#[derive(Debug, Clone)]
pub(crate) struct Completion {
    /// The eval as it should be stored (revisions cleared).
    eval: Box<Evaluation>,
    /// The mod revision the eval must still have.
    expect: Revision,
}

impl Completion {
    /// The completion a plan carries, if any.
    pub(crate) fn of(plan: &Plan) -> Option<Completion> {
        let e = plan.eval_completion.as_ref()?;
        let mut eval = Box::new(e.clone());
        eval.create_revision = 0;
        eval.modify_revision = 0;
        Some(Completion {
            eval,
            expect: e.modify_revision,
        })
    }

    fn target(&self) -> Target {
        Target::Eval(self.eval.id.clone())
    }

    /// Room it takes in a transaction: a compare and a put, and its bytes.
    fn ops(&self) -> usize {
        2
    }

    fn bytes(&self) -> usize {
        self.eval.encoded_len() + KEY_OVERHEAD
    }

    /// Its guard and write, if the eval is still as delivered.
    fn guarded(
        &self,
        currents: &mut Currents,
        view: &View,
        keyspace: &Keyspace,
        now: i64,
    ) -> Option<(Compare, Op)> {
        match currents.get(&self.target(), view) {
            Some((Stored::Eval, rev)) if rev == self.expect => {}
            _ => return None,
        }
        let key = keyspace.eval(&self.eval.id);
        let mut eval = (*self.eval).clone();
        eval.modify_time_unix_ns = now;
        Some((
            Compare::mod_revision(key.clone(), CompareOp::Equal, self.expect),
            Op::put(key, encode(&eval)),
        ))
    }
}

impl Changes {
    /// Every object the changes write.
    pub(crate) fn targets(&self) -> HashSet<Target> {
        self.parts()
            .flat_map(|p| p.changes.iter().map(|(t, _)| t.clone()))
            .collect()
    }

    fn parts(&self) -> impl Iterator<Item = &Part> {
        std::iter::once(&self.global).chain(&self.nodes)
    }

    /// The existing allocations the changes rewrite (update, stop, evict or
    /// link): their values are read from the store before the commit, as
    /// the cache keeps only a lean copy of each.
    fn rewritten_allocs(&self) -> BTreeSet<Target> {
        self.parts()
            .flat_map(|p| &p.changes)
            .filter(|(t, c)| matches!(t, Target::Alloc(_)) && !matches!(c, Change::Place(_)))
            .map(|(t, _)| t.clone())
            .collect()
    }

    /// Adds `extra` bytes to every part that writes one of its targets: the
    /// stored values outweigh the cached copies the parts were sized by.
    fn grow(&mut self, extra: &HashMap<Target, usize>) {
        if extra.is_empty() {
            return;
        }
        for part in std::iter::once(&mut self.global).chain(&mut self.nodes) {
            let more: usize = part.changes.iter().filter_map(|(t, _)| extra.get(t)).sum();
            part.bytes += more;
        }
    }
}

/// Turns the accepted nodes of `plan` into changes, reading what exists
/// from `view`.
pub(crate) fn plan_changes(plan: &Plan, accepted: &[String], view: &View) -> Changes {
    let mut out = Changes::default();
    if let Some(d) = &plan.deployment {
        out.global.push(
            Target::Deployment(d.id.clone()),
            Change::Deployment(Box::new(d.clone())),
            d.encoded_len(),
        );
    }
    for u in &plan.deployment_updates {
        out.global.push(
            Target::Deployment(u.deployment_id.clone()),
            Change::DeploymentStatus(u.clone()),
            256,
        );
    }
    for e in &plan.evals {
        out.global.push(
            Target::Eval(e.id.clone()),
            Change::CreateEval(Box::new(e.clone())),
            e.encoded_len(),
        );
    }
    for node in accepted {
        let mut part = Part {
            node: Some(node.clone()),
            ..Default::default()
        };
        let mut placed: BTreeMap<(String, String), i32> = BTreeMap::new();
        for a in plan
            .node_allocation
            .get(node)
            .iter()
            .flat_map(|l| &l.allocs)
        {
            let size = a.encoded_len();
            if let Some(current) = view.alloc(&a.id) {
                // An update that moves an allocation into a deployment (one
                // updated in place for the deployment's version) is one of
                // its placements.
                if !a.deployment_id.is_empty() && a.deployment_id != current.deployment_id {
                    *placed
                        .entry((a.deployment_id.clone(), a.task_group.clone()))
                        .or_default() += 1;
                }
                part.push(
                    Target::Alloc(a.id.clone()),
                    Change::Update(Box::new(a.clone())),
                    size,
                );
                continue;
            }
            part.push(
                Target::Alloc(a.id.clone()),
                Change::Place(Box::new(a.clone())),
                size,
            );
            if !a.previous_allocation.is_empty() {
                let prev = view.alloc(&a.previous_allocation);
                part.push(
                    Target::Alloc(a.previous_allocation.clone()),
                    Change::LinkNext(a.id.clone()),
                    prev.map_or(size, |p| p.encoded_len()),
                );
            }
            if !a.deployment_id.is_empty() {
                *placed
                    .entry((a.deployment_id.clone(), a.task_group.clone()))
                    .or_default() += 1;
            }
        }
        for ((deployment, group), count) in placed {
            part.push(
                Target::Deployment(deployment),
                Change::Placed { group, count },
                512,
            );
        }
        for a in plan.node_update.get(node).iter().flat_map(|l| &l.allocs) {
            let size = view.alloc(&a.id).map_or(1024, |c| c.encoded_len());
            part.push(
                Target::Alloc(a.id.clone()),
                Change::Stop(StopSpec::stop(a)),
                size,
            );
        }
        for a in plan
            .node_preemptions
            .get(node)
            .iter()
            .flat_map(|l| &l.allocs)
        {
            match view.alloc(&a.id) {
                Some(cur) if !cur.is_terminal() => part.push(
                    Target::Alloc(a.id.clone()),
                    Change::Stop(StopSpec::evict(a)),
                    cur.encoded_len(),
                ),
                _ => {
                    out.skipped_evictions.insert(a.id.clone());
                }
            }
        }
        out.nodes.push(part);
    }
    out
}

/// Groups parts into transactions within `max_ops` and `max_bytes`; the
/// plan-wide part goes first. A part over the budget on its own gets a
/// transaction of its own.
pub(crate) fn batches(changes: Changes, max_ops: usize, max_bytes: usize) -> Vec<Vec<Part>> {
    let mut out: Vec<Vec<Part>> = Vec::new();
    let mut current: Vec<Part> = Vec::new();
    let (mut ops, mut bytes) = (0usize, 0usize);
    let global = changes.global;
    let parts = std::iter::once(global)
        .filter(|g| !g.changes.is_empty())
        .chain(changes.nodes);
    for part in parts {
        if !current.is_empty() && (ops + part.ops > max_ops || bytes + part.bytes > max_bytes) {
            out.push(std::mem::take(&mut current));
            ops = 0;
            bytes = 0;
        }
        ops += part.ops;
        bytes += part.bytes;
        current.push(part);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// What a plan writes if its commit succeeds, computed from `view`: the
/// optimistic layer the next plan is verified against meanwhile.
pub(crate) fn optimistic_layer(changes: &Changes, view: &View, seq: u64, now: i64) -> OverlayLayer {
    let mut grouped: BTreeMap<&Target, Vec<&Change>> = BTreeMap::new();
    for part in std::iter::once(&changes.global).chain(&changes.nodes) {
        for (target, change) in &part.changes {
            grouped.entry(target).or_default().push(change);
        }
    }
    let mut layer = OverlayLayer::new(seq);
    for (target, changes) in grouped {
        match target {
            Target::Alloc(id) => {
                if let Ok(Some(a)) = apply_alloc(view.alloc(id).as_deref(), &changes, now) {
                    layer.put_alloc(Arc::new(a));
                }
            }
            Target::Deployment(id) => {
                if let Ok(Some(d)) = apply_deployment(view.deployment(id).as_deref(), &changes, now)
                {
                    layer.put_deployment(Arc::new(d));
                }
            }
            Target::Eval(_) => {}
        }
    }
    layer
}

/// An object's stored value as a commit compares it.
#[derive(Clone, Debug)]
enum Stored {
    Alloc(Arc<Allocation>),
    Deployment(Arc<Deployment>),
    Eval,
}

/// The current value and mod revision of every object a commit touches:
/// first from the view, after a conflict from the store.
#[derive(Debug, Default)]
pub(crate) struct Currents {
    known: HashMap<Target, Option<(Stored, Revision)>>,
}

impl Currents {
    fn get(&mut self, target: &Target, view: &View) -> Option<(Stored, Revision)> {
        self.known
            .entry(target.clone())
            .or_insert_with(|| match target {
                Target::Alloc(id) => view.alloc(id).map(|a| {
                    let rev = a.modify_revision;
                    (Stored::Alloc(a), rev)
                }),
                Target::Deployment(id) => view.deployment(id).map(|d| {
                    let rev = d.modify_revision;
                    (Stored::Deployment(d), rev)
                }),
                Target::Eval(id) => view.eval(id).map(|e| (Stored::Eval, e.modify_revision)),
            })
            .clone()
    }
}

/// What one committed transaction wrote.
#[derive(Debug)]
struct Written {
    target: Target,
    value: WrittenValue,
}

#[derive(Debug)]
enum WrittenValue {
    Alloc(Box<Allocation>),
    Deployment(Box<Deployment>),
    Eval,
}

/// The outcome of committing a plan's accepted part.
#[derive(Debug, Default)]
pub(crate) struct CommitOutcome {
    /// Nodes whose part was committed.
    pub(crate) committed: Vec<String>,
    /// Whether the plan-wide part (deployment, evals) was committed.
    pub(crate) global_committed: bool,
    /// Nodes refused while committing, with why.
    pub(crate) refused: BTreeMap<String, String>,
    /// The revision of the last transaction that wrote; 0 if none did.
    pub(crate) revision: Revision,
    /// What was written, with revisions, for the overlay.
    pub(crate) layer: OverlayLayer,
    /// Evictions dropped because their allocation was already terminal.
    pub(crate) skipped_evictions: HashSet<String>,
    /// The revision the plan's eval completion was written at; 0 if it was
    /// not.
    pub(crate) eval_revision: Revision,
    /// Why the commit stopped early, if it did.
    pub(crate) error: Option<ApplierError>,
    /// A revision the worker must refresh to beyond what was written: a
    /// plan of the same job committed there, after this plan's snapshot.
    pub(crate) refresh: Revision,
}

/// The plan marks a plan's transactions are guarded by: one key per job the
/// plan touches (`job_plans/<ns>/<job>`), rewritten by each of them. The
/// first transaction needs every mark to be no newer than the snapshot the
/// plan was computed on, each later one the mark its predecessor wrote, so
/// a commit can never land next to a plan of the same job it did not see,
/// even one whose outcome was unknown and that the store applied late.
#[derive(Clone, Debug, Default)]
pub(crate) struct PlanMarks {
    /// The mark keys.
    pub(crate) keys: Vec<Vec<u8>>,
    /// The snapshot revision the plan was computed on.
    pub(crate) snapshot: Revision,
    /// What the marks are set to (the plan's eval).
    pub(crate) value: Vec<u8>,
}

impl PlanMarks {
    /// The marks of `plan`, over the jobs it touches.
    pub(crate) fn of<'a>(
        keyspace: &Keyspace,
        jobs: impl IntoIterator<Item = &'a (String, String)>,
        plan: &Plan,
    ) -> Self {
        PlanMarks {
            keys: jobs
                .into_iter()
                .map(|(ns, job)| keyspace.job_plan(ns, job))
                .collect(),
            snapshot: plan.snapshot_revision,
            value: plan.eval_id.clone().into_bytes(),
        }
    }

    /// Adds the guards and writes of the marks to `txn`; `prior` is the
    /// revision an earlier transaction of the same plan wrote them at.
    fn guard(&self, mut txn: Txn, prior: Option<Revision>) -> Txn {
        for key in &self.keys {
            txn = txn.when(match prior {
                None => Compare::mod_revision(key.clone(), CompareOp::Less, self.snapshot + 1),
                Some(rev) => Compare::mod_revision(key.clone(), CompareOp::Equal, rev),
            });
            txn = txn.and_then(Op::put(key.clone(), self.value.clone()));
        }
        txn
    }

    /// The newest revision a mark moved to behind the plan's back, if one
    /// did: the plan must be computed again on a snapshot that has it.
    async fn moved(
        &self,
        store: &dyn Store,
        prior: Option<Revision>,
    ) -> Result<Option<Revision>, ApplierError> {
        let mut newest = None;
        for key in &self.keys {
            let rev = store
                .get(key)
                .await
                .map_err(ApplierError::Store)?
                .map_or(0, |kv| kv.mod_revision);
            let moved = match prior {
                None => rev > self.snapshot,
                Some(p) => rev != p,
            };
            if moved {
                newest = Some(newest.unwrap_or(0).max(rev));
            }
        }
        Ok(newest)
    }
}

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
            for node in changes.parts().filter_map(|p| p.node.as_ref()) {
                outcome
                    .refused
                    .insert(node.clone(), format!("not committed: {err}"));
            }
            outcome.error = Some(err);
            return outcome;
        }
        // Every batch keeps room for the completion, which rides on the last.
        let (completion_ops, completion_bytes) =
            completion.as_ref().map_or((0, 0), |c| (c.ops(), c.bytes()));
        let room = self
            .max_ops
            .saturating_sub(self.marks.keys.len() + completion_ops)
            .max(1);
        let batches = batches(
            changes,
            room,
            self.max_bytes.saturating_sub(completion_bytes),
        );
        if all_at_once && batches.len() > 1 {
            for part in batches.iter().flatten() {
                if let Some(node) = &part.node {
                    outcome.refused.insert(
                        node.clone(),
                        "all-at-once plan too large for one transaction".into(),
                    );
                }
            }
            return outcome;
        }
        let last = batches.len().saturating_sub(1);
        let mut pending = batches.into_iter().enumerate();
        while let Some((i, batch)) = pending.next() {
            let completing = completion.as_ref().filter(|_| i == last);
            match self
                .commit_batch(
                    view,
                    batch,
                    &mut currents,
                    all_at_once,
                    completing,
                    &mut outcome,
                )
                .await
            {
                Ok(()) if outcome.refresh > 0 => {
                    let reason = format!(
                        "a plan of the same job committed at revision {}, after this plan's snapshot",
                        outcome.refresh
                    );
                    for part in pending.flat_map(|(_, b)| b) {
                        if let Some(node) = part.node {
                            outcome.refused.insert(node, reason.clone());
                        }
                    }
                    break;
                }
                Ok(()) => {}
                Err(err) => {
                    let reason = format!("not committed: {err}");
                    for part in pending.flat_map(|(_, b)| b) {
                        if let Some(node) = part.node {
                            outcome.refused.insert(node, reason.clone());
                        }
                    }
                    outcome.error = Some(err);
                    break;
                }
            }
        }
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
        let fresh = read_current(self.store, self.keyspace, &targets, self.max_ops)
            .await
            .map_err(ApplierError::Store)?;
        let mut extra = HashMap::new();
        for (target, stored) in fresh {
            if let (Target::Alloc(id), Some((Stored::Alloc(a), _))) = (&target, &stored) {
                let cached = view.alloc(id).map_or(0, |c| c.encoded_len());
                extra.insert(target.clone(), a.encoded_len().saturating_sub(cached));
            }
            currents.known.insert(target, stored);
        }
        changes.grow(&extra);
        Ok(())
    }

    async fn commit_batch(
        &self,
        view: &View,
        mut parts: Vec<Part>,
        currents: &mut Currents,
        all_at_once: bool,
        completion: Option<&Completion>,
        outcome: &mut CommitOutcome,
    ) -> Result<(), ApplierError> {
        let mut conflicts = 0;
        loop {
            let prepared = match self.prepare(view, &parts, currents) {
                Ok(p) => p,
                Err((index, reason)) => {
                    let refused = parts.remove(index);
                    let node = refused.node.unwrap_or_default();
                    if all_at_once {
                        for part in parts.iter().filter_map(|p| p.node.clone()) {
                            outcome
                                .refused
                                .insert(part, format!("all-at-once plan: {reason}"));
                        }
                        outcome.refused.insert(node, reason);
                        return Ok(());
                    }
                    outcome.refused.insert(node, reason);
                    continue;
                }
            };
            let (mut txn, written) = prepared;
            // Only a commit of everything completes the eval: any refusal,
            // in this batch or an earlier one, leaves it to the worker.
            let completing = completion
                .filter(|_| outcome.refused.is_empty())
                .and_then(|c| {
                    let (guard, put) = c.guarded(currents, view, self.keyspace, self.now)?;
                    txn = std::mem::take(&mut txn).when(guard).and_then(put);
                    Some(c)
                });
            if written.is_empty() && completing.is_none() {
                self.record(parts, Vec::new(), None, outcome);
                return Ok(());
            }
            let prior = outcome.layer.revision;
            let txn = self.marks.guard(txn, prior);
            let res = self
                .txns
                .txn(txn)
                .await
                .map_err(ApplierError::from_leadership)?;
            if res.succeeded {
                let written: Vec<Settled> = written
                    .into_iter()
                    .map(|w| w.settle(res.revision))
                    .collect();
                for w in &written {
                    currents.known.insert(w.target.clone(), w.stored());
                }
                if let Some(c) = completing {
                    currents
                        .known
                        .insert(c.target(), Some((Stored::Eval, res.revision)));
                    outcome.eval_revision = res.revision;
                }
                self.record(parts, written, Some(res.revision), outcome);
                return Ok(());
            }
            if let Some(rev) = self.marks.moved(self.store, prior).await? {
                let reason = format!(
                    "a plan of the same job committed at revision {rev}, after this plan's snapshot"
                );
                for part in parts {
                    if let Some(node) = part.node {
                        outcome.refused.insert(node, reason.clone());
                    }
                }
                outcome.refresh = rev;
                return Ok(());
            }
            conflicts += 1;
            if conflicts > self.retries {
                let reason =
                    format!("allocations kept changing under the commit ({conflicts} conflicts)");
                for part in parts {
                    if let Some(node) = part.node {
                        outcome.refused.insert(node, reason.clone());
                    }
                }
                return Ok(());
            }
            // The eval's guard may be what failed: re-read it too, so the
            // next try leaves it out if it changed.
            let targets: BTreeSet<Target> = parts
                .iter()
                .flat_map(|p| p.changes.iter().map(|(t, _)| t.clone()))
                .chain(completing.map(Completion::target))
                .collect();
            tracing::debug!(
                targets = targets.len(),
                conflicts,
                "commit conflict; re-reading"
            );
            let fresh = read_current(self.store, self.keyspace, &targets, self.max_ops)
                .await
                .map_err(ApplierError::Store)?;
            currents.known.extend(fresh);
        }
    }

    /// The transaction for `parts` given the current values, or the index of
    /// a part that cannot be applied any more.
    #[allow(clippy::type_complexity)]
    fn prepare(
        &self,
        view: &View,
        parts: &[Part],
        currents: &mut Currents,
    ) -> Result<(Txn, Vec<Written>), (usize, String)> {
        let mut grouped: BTreeMap<&Target, Vec<(usize, &Change)>> = BTreeMap::new();
        for (i, part) in parts.iter().enumerate() {
            for (target, change) in &part.changes {
                grouped.entry(target).or_default().push((i, change));
            }
        }
        let mut txn = Txn::new();
        let mut written = Vec::new();
        for (target, changes) in grouped {
            let current = currents.get(target, view);
            let refs: Vec<&Change> = changes.iter().map(|(_, c)| *c).collect();
            // Only a placement or an update can fail, and each comes from one node.
            let culprit = || {
                changes
                    .iter()
                    .find(|(_, c)| matches!(c, Change::Place(_) | Change::Update(_)))
                    .map_or(0, |(i, _)| *i)
            };
            let (key, value, stored_rev) = match (target, &current) {
                (Target::Alloc(id), cur) => {
                    let cur_alloc = match cur {
                        Some((Stored::Alloc(a), _)) => Some(a.as_ref()),
                        _ => None,
                    };
                    match apply_alloc(cur_alloc, &refs, self.now) {
                        Ok(Some(a)) => {
                            let bytes = encode(&a);
                            written.push(Written {
                                target: target.clone(),
                                value: WrittenValue::Alloc(Box::new(a)),
                            });
                            (self.keyspace.alloc(id), bytes, cur.as_ref().map(|c| c.1))
                        }
                        Ok(None) => continue,
                        Err(reason) => return Err((culprit(), reason)),
                    }
                }
                (Target::Deployment(id), cur) => {
                    let cur_dep = match cur {
                        Some((Stored::Deployment(d), _)) => Some(d.as_ref()),
                        _ => None,
                    };
                    match apply_deployment(cur_dep, &refs, self.now) {
                        Ok(Some(d)) => {
                            let bytes = encode(&d);
                            written.push(Written {
                                target: target.clone(),
                                value: WrittenValue::Deployment(Box::new(d)),
                            });
                            (
                                self.keyspace.deployment(id),
                                bytes,
                                cur.as_ref().map(|c| c.1),
                            )
                        }
                        Ok(None) => continue,
                        Err(reason) => return Err((culprit(), reason)),
                    }
                }
                (Target::Eval(id), cur) => match apply_eval(cur.is_some(), &refs, self.now) {
                    Some(e) => {
                        let bytes = encode(&e);
                        written.push(Written {
                            target: target.clone(),
                            value: WrittenValue::Eval,
                        });
                        (self.keyspace.eval(id), bytes, None)
                    }
                    None => continue,
                },
            };
            txn = match stored_rev {
                Some(rev) => txn.when(Compare::mod_revision(key.clone(), CompareOp::Equal, rev)),
                None => txn.when(Compare::absent(key.clone())),
            };
            txn = txn.and_then(Op::put(key, value));
        }
        Ok((txn, written))
    }

    fn record(
        &self,
        parts: Vec<Part>,
        written: Vec<Settled>,
        revision: Option<Revision>,
        outcome: &mut CommitOutcome,
    ) {
        for part in parts {
            match part.node {
                Some(node) => outcome.committed.push(node),
                None => outcome.global_committed = true,
            }
        }
        let Some(rev) = revision else {
            return;
        };
        outcome.layer.revision = Some(outcome.layer.revision.map_or(rev, |r| r.max(rev)));
        for w in written {
            match w.value {
                Stored::Alloc(a) => outcome.layer.put_alloc(a),
                Stored::Deployment(d) => outcome.layer.put_deployment(d),
                Stored::Eval => {}
            }
        }
    }
}

/// Fills an allocation written at `rev` as a read would.
fn settle_alloc(a: &mut Allocation, rev: Revision) {
    a.modify_revision = rev;
    if a.alloc_modify_revision == 0 {
        a.alloc_modify_revision = rev;
    }
}

/// What a committed transaction wrote, as a read at its revision would
/// return it: shared by the commit's later batches and the overlay.
struct Settled {
    target: Target,
    value: Stored,
    revision: Revision,
}

impl Settled {
    fn stored(&self) -> Option<(Stored, Revision)> {
        Some((self.value.clone(), self.revision))
    }
}

impl Written {
    fn settle(self, rev: Revision) -> Settled {
        let value = match self.value {
            WrittenValue::Alloc(mut a) => {
                settle_alloc(&mut a, rev);
                Stored::Alloc(Arc::new(*a))
            }
            WrittenValue::Deployment(mut d) => {
                d.modify_revision = rev;
                if d.create_revision == 0 {
                    d.create_revision = rev;
                }
                Stored::Deployment(Arc::new(*d))
            }
            WrittenValue::Eval => Stored::Eval,
        };
        Settled {
            target: self.target,
            value,
            revision: rev,
        }
    }
}

/// Reads the stored values of `targets`, in read-only transactions of at
/// most `max_ops` gets each.
async fn read_current(
    store: &dyn Store,
    keyspace: &Keyspace,
    targets: &BTreeSet<Target>,
    max_ops: usize,
) -> Result<Vec<(Target, Option<(Stored, Revision)>)>, StoreError> {
    let targets: Vec<&Target> = targets.iter().collect();
    let mut out = Vec::with_capacity(targets.len());
    for chunk in targets.chunks(max_ops.max(1)) {
        let mut txn = Txn::new();
        for target in chunk {
            let key = match target {
                Target::Alloc(id) => keyspace.alloc(id),
                Target::Deployment(id) => keyspace.deployment(id),
                Target::Eval(id) => keyspace.eval(id),
            };
            txn = txn.and_then(Op::get(key));
        }
        let res = store.txn(txn).await?;
        for (target, result) in chunk.iter().zip(res.results) {
            let kv = match result {
                OpResult::Get(r) => r.kvs.into_iter().next(),
                _ => None,
            };
            let stored = match kv {
                None => None,
                Some(kv) => {
                    let rev = kv.mod_revision;
                    match target {
                        Target::Alloc(_) => codec_decode::<Allocation>(&kv)
                            .ok()
                            .map(|a| (Stored::Alloc(Arc::new(a)), rev)),
                        Target::Deployment(_) => codec_decode::<Deployment>(&kv)
                            .ok()
                            .map(|d| (Stored::Deployment(Arc::new(d)), rev)),
                        Target::Eval(_) => Some((Stored::Eval, rev)),
                    }
                }
            };
            out.push(((*target).clone(), stored));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;

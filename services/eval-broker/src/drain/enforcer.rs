//! The drain-deadline enforcer of one leadership term: follows draining
//! nodes in the watch cache, and when a node's force deadline passes marks
//! what the drain still covers for migration with a `node-drain` eval per
//! job (fenced, each alloc compared on its mod revision); it completes a
//! drain once nothing on the node keeps it going.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use caravan_state::{Snapshot, StateError, encode};
use caravan_store::{Compare, CompareOp, Op};
use tokio::time::Instant;

use crate::drain::{self, ForceDeadline, completed, drain_done, forced_moves, to_migrate};
use crate::error::BrokerError;
use crate::evals::node_for_store;
use crate::queues::Now;
use crate::term::{LeaderTerm, now};
use crate::writes::GuardedUnit;

/// Longest sleep without looking at the deadlines, as a safety net.
const MAX_IDLE: Duration = Duration::from_secs(5);
/// Wait before looking at a node again after a write found it changed or
/// the store failed.
const RETRY_DELAY: Duration = Duration::from_secs(1);

/// The enforcer of one term.
pub struct DrainEnforcer {
    term: Arc<LeaderTerm>,
    seen: Snapshot,
    /// Draining nodes and their force deadlines, timed from when this term
    /// first saw each (`None` for none).
    draining: BTreeMap<String, Option<ForceDeadline>>,
    /// Nodes to look at, and from when.
    pending: BTreeMap<String, Instant>,
    /// Nodes whose passed deadline this term has enforced; after that only
    /// changes of the node or its allocs bring it back.
    enforced: BTreeSet<String>,
}

impl DrainEnforcer {
    /// An enforcer for `term`, looking at every draining node first.
    pub fn new(term: Arc<LeaderTerm>) -> Self {
        let seen = term.informer.snapshot();
        let mut draining = BTreeMap::new();
        let mut pending = BTreeMap::new();
        let clock = now();
        for node in seen.nodes() {
            if drain::drain_of(node).is_some() {
                let deadline = drain::force_deadline(node).map(|d| ForceDeadline::seen(d, clock));
                draining.insert(node.id.clone(), deadline);
                pending.insert(node.id.clone(), clock.instant);
            }
        }
        DrainEnforcer {
            term,
            seen,
            draining,
            pending,
            enforced: BTreeSet::new(),
        }
    }

    /// Enforces until the term stops; an error means leadership was lost or
    /// the cache stopped.
    pub async fn run(mut self) -> Result<(), BrokerError> {
        let mut revisions = self.term.informer.subscribe();
        revisions.borrow_and_update();
        self.catch_up();
        loop {
            if self.term.stop.is_cancelled() {
                return Ok(());
            }
            self.look_at_due().await?;
            tokio::select! {
                _ = self.term.stop.cancelled() => return Ok(()),
                changed = revisions.changed() => {
                    if changed.is_err() {
                        return Err(StateError::Closed.into());
                    }
                    self.catch_up();
                }
                _ = tokio::time::sleep_until(self.next_wakeup()) => {}
            }
        }
    }

    fn next_wakeup(&self) -> Instant {
        let mut at = Instant::now() + MAX_IDLE;
        for due in self.pending.values() {
            at = at.min(*due);
        }
        for (id, deadline) in &self.draining {
            if let Some(deadline) = deadline
                && !self.enforced.contains(id)
            {
                at = at.min(deadline.at);
            }
        }
        at
    }

    /// Notes the nodes whose drain, deadline or allocs changed.
    fn catch_up(&mut self) {
        let next = self.term.informer.snapshot();
        let seen = std::mem::replace(&mut self.seen, next.clone());
        let clock = now();
        let at = clock.instant;
        let mut touched = BTreeSet::new();
        for change in next.node_changes_since(&seen) {
            match change.new() {
                Some(node) if drain::drain_of(node).is_some() => {
                    let deadline = drain::force_deadline(node);
                    let tracked = self.draining.get(&node.id).map(|d| d.map(|d| d.unix_ns));
                    // A deadline keeps the instant it was first timed at:
                    // re-timing it on every change of the node would let a
                    // step of the wall clock move it.
                    if tracked != Some(deadline) {
                        let timed = deadline.map(|d| ForceDeadline::seen(d, clock));
                        self.draining.insert(node.id.clone(), timed);
                        self.enforced.remove(&node.id);
                    }
                    touched.insert(node.id.clone());
                }
                Some(node) => self.forget(&node.id),
                None => {
                    if let Some(old) = change.old() {
                        self.forget(&old.id);
                    }
                }
            }
        }
        // Most clusters drain nothing: then no allocation change matters,
        // and walking them is most of what a catch-up would cost.
        if !self.draining.is_empty() {
            for change in next.alloc_changes_since(&seen) {
                for alloc in [change.old(), change.new()].into_iter().flatten() {
                    if self.draining.contains_key(&alloc.node_id) {
                        touched.insert(alloc.node_id.clone());
                    }
                }
            }
        }
        for node in touched {
            self.pending.entry(node).or_insert(at);
        }
    }

    /// Whether the node's force deadline has passed, as this term timed it;
    /// a deadline the cache shows before [`DrainEnforcer::catch_up`] noted
    /// it is timed from now.
    fn deadline_passed(&self, node: &caravan_proto::Node, clock: Now) -> bool {
        let Some(unix_ns) = drain::force_deadline(node) else {
            return false;
        };
        match self.draining.get(&node.id).copied().flatten() {
            Some(timed) if timed.unix_ns == unix_ns => timed.passed(clock),
            _ => ForceDeadline::seen(unix_ns, clock).passed(clock),
        }
    }

    fn forget(&mut self, node_id: &str) {
        self.draining.remove(node_id);
        self.pending.remove(node_id);
        self.enforced.remove(node_id);
    }

    /// Looks at the nodes that are due: those touched, and those whose
    /// deadline passed.
    async fn look_at_due(&mut self) -> Result<(), BrokerError> {
        let clock = now();
        let mut due: BTreeSet<String> = self
            .pending
            .iter()
            .filter(|(_, at)| **at <= clock.instant)
            .map(|(id, _)| id.clone())
            .collect();
        for (id, deadline) in &self.draining {
            if deadline.is_some_and(|d| d.passed(clock)) && !self.enforced.contains(id) {
                due.insert(id.clone());
            }
        }
        for node_id in due {
            self.pending.remove(&node_id);
            match self.look_at(&node_id).await {
                Ok(true) => {}
                Ok(false) => {
                    self.pending.insert(node_id, Instant::now() + RETRY_DELAY);
                }
                Err(err) if err.is_deposed() => {
                    self.term.stop.cancel();
                    return Err(err);
                }
                Err(err) => {
                    tracing::warn!(node_id, error = %err, "drain enforcement failed; retrying");
                    self.pending.insert(node_id, Instant::now() + RETRY_DELAY);
                }
            }
        }
        Ok(())
    }

    /// Enforces one node's deadline and completes its drain when done;
    /// `false` when a write found something changed (look again later).
    async fn look_at(&mut self, node_id: &str) -> Result<bool, BrokerError> {
        let snap = self.term.informer.snapshot();
        let Some(node) = snap.node(node_id).cloned() else {
            return Ok(true);
        };
        if drain::drain_of(&node).is_none() {
            return Ok(true);
        }
        let clock = now();
        let now_ns = clock.unix_ns;
        let writer = &self.term.writer;
        let ks = writer.keyspace().clone();
        if self.deadline_passed(&node, clock) {
            self.enforced.insert(node_id.to_string());
            let allocs = to_migrate(&snap, &node);
            if !allocs.is_empty() {
                let limit = writer.unit_limit().saturating_sub(1).max(1);
                let mut units = Vec::new();
                for (eval, marked) in forced_moves(&snap, &node, &allocs, now_ns) {
                    for (i, chunk) in marked.chunks(limit).enumerate() {
                        let mut unit = GuardedUnit::default();
                        for a in chunk {
                            let key = ks.alloc(&a.id);
                            // The cache keeps allocs lean (no metrics, no live
                            // task states): mark the stored copy, guarded by the
                            // revision the decision was made at.
                            let Some(mut stored) = writer.read_alloc(&a.id).await? else {
                                continue;
                            };
                            drain::mark_migrate(&mut stored);
                            stored.create_revision = 0;
                            stored.modify_revision = 0;
                            unit.push(
                                Compare::mod_revision(
                                    key.clone(),
                                    CompareOp::Equal,
                                    a.modify_revision,
                                ),
                                Op::put(key, encode(&stored)),
                            );
                        }
                        // Each piece of a job too big for one txn gets its own eval.
                        let mut e = eval.clone();
                        if i > 0 {
                            e.id = caravan_model::fresh_id();
                        }
                        unit.push(
                            Compare::absent(ks.eval(&e.id)),
                            Op::put(ks.eval(&e.id), crate::evals::for_store(&e)),
                        );
                        units.push(unit);
                    }
                }
                let (ok, _) = writer.write_units(&units).await?;
                let written = ok.iter().filter(|d| **d).count();
                tracing::warn!(
                    node_id,
                    allocs = allocs.len(),
                    evals = written,
                    "drain deadline passed: remaining allocs marked to migrate"
                );
                if written < ok.len() {
                    return Ok(false);
                }
            }
        }
        if drain_done(&snap, &node) {
            let done = completed(&node, now_ns);
            let key = ks.node(node_id);
            let mut unit = GuardedUnit::default();
            unit.push(
                Compare::mod_revision(key.clone(), CompareOp::Equal, node.modify_revision),
                Op::put(key, node_for_store(&done)),
            );
            let (ok, _) = writer.write_units(&[unit]).await?;
            if !ok.first().copied().unwrap_or(false) {
                return Ok(false);
            }
            tracing::info!(node_id, "drain complete");
        }
        Ok(true)
    }
}

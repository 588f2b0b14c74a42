//! What a leader does between RPCs: restore the term's queues from the
//! store, follow the watch cache (new and changed evals, capacity changes,
//! lost heartbeats), fire timers, and make the writes the queues call for,
//! retrying those the store could not take yet.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use caravan_model::{EvalStatusExt, trigger};
use caravan_proto::{EvalStatus, Evaluation, NodeStatus};
use caravan_state::{Snapshot, StateError};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::error::BrokerError;
use crate::evals;
use crate::fan_out;
use crate::heartbeat_loss::LossWindow;
use crate::metrics;
use crate::nodes;
use crate::queues::job_key;
use crate::term::{Effect, LeaderTerm, now};
use crate::writes::GuardedEval;

/// Wait before retrying a write the store refused or that found the cache
/// behind.
const RETRY_DELAY: Duration = Duration::from_secs(1);
/// A node found up without a heartbeat when a term starts gets this long to
/// show one (its registration may be mid-flight) before it is marked down.
const RESTORE_NODE_GRACE: Duration = Duration::from_secs(2);
/// A node that lost its heartbeat goes down this much later, so the losses
/// of one moment are counted together before any is acted on.
const LOSS_SETTLE: Duration = Duration::from_secs(1);
/// How often old capacity changes are forgotten, and how long they are kept.
const PRUNE_EVERY: Duration = Duration::from_secs(300);
const KEEP_CAPACITY_CHANGES: Duration = Duration::from_secs(900);
/// Longest sleep without looking at the timers, as a safety net.
const MAX_IDLE: Duration = Duration::from_secs(5);

/// The follower of one term.
pub struct Follower {
    term: Arc<LeaderTerm>,
    effects: mpsc::UnboundedReceiver<Effect>,
    /// The snapshot whose changes have been applied.
    seen: Snapshot,
    backlog: VecDeque<Effect>,
    retries: Vec<(Instant, Effect)>,
    suspects: BTreeMap<String, Instant>,
    /// Recent heartbeat losses, to tell a mass loss.
    losses: LossWindow,
    next_failed_unblock: Instant,
    next_prune: Instant,
    /// The queues' ready counter when pollers were last woken.
    readied_seen: u64,
}

fn status_of(eval: &Evaluation) -> EvalStatus {
    EvalStatus::try_from(eval.status).unwrap_or(EvalStatus::Unspecified)
}

impl Follower {
    /// Rebuilds the term's queues from the cache: pending evals ready (or
    /// delayed, or waiting behind their job), blocked evals held, up nodes
    /// without a heartbeat suspected.
    pub fn restore(term: Arc<LeaderTerm>, effects: mpsc::UnboundedReceiver<Effect>) -> Follower {
        let snapshot = term.informer.snapshot();
        let now = now();
        let mut backlog = VecDeque::new();
        {
            let mut state = term.state.lock();
            for (class, revision) in nodes::capacity_revisions(&snapshot) {
                state
                    .blocked
                    .note_capacity_change(&class, revision, now.instant);
            }
            let mut pending: Vec<Arc<Evaluation>> = snapshot
                .evals()
                .filter(|e| status_of(e) == EvalStatus::Pending)
                .cloned()
                .collect();
            pending.sort_by_key(|e| e.create_revision);
            for eval in pending {
                state.queues.upsert(eval, now);
            }
            let mut blocked: Vec<Arc<Evaluation>> = snapshot
                .evals()
                .filter(|e| status_of(e) == EvalStatus::Blocked)
                .cloned()
                .collect();
            blocked.sort_by_key(|e| e.create_revision);
            let (mut cancel, mut unblock) = (Vec::new(), Vec::new());
            for eval in blocked {
                let out = state.blocked.block(eval);
                cancel.extend(out.cancel);
                unblock.extend(out.unblock);
            }
            if !cancel.is_empty() {
                backlog.push_back(Effect::Cancel(
                    cancel,
                    evals::CANCELED_DUPLICATE_BLOCKED.to_string(),
                ));
            }
            if !unblock.is_empty() {
                backlog.push_back(Effect::Unblock(unblock));
            }
            let stats = state.queues.stats();
            tracing::info!(
                revision = snapshot.revision(),
                ready = stats.ready,
                delayed = stats.delayed,
                waiting = stats.pending_by_job,
                blocked = state.blocked.len(),
                "restored the eval queues from the store"
            );
        }
        backlog.extend(
            nodes::owing_fan_outs(&snapshot)
                .into_iter()
                .map(Effect::FinishFanOuts),
        );
        let suspects = nodes::without_heartbeat(&snapshot)
            .into_iter()
            .chain(nodes::disconnected_without_heartbeat(&snapshot))
            .map(|id| (id, now.instant + RESTORE_NODE_GRACE))
            .collect();
        let next_failed_unblock = now.instant + term.config.failed_unblock_interval();
        Follower {
            term,
            effects,
            seen: snapshot,
            backlog,
            retries: Vec::new(),
            suspects,
            losses: LossWindow::default(),
            next_failed_unblock,
            next_prune: now.instant + PRUNE_EVERY,
            readied_seen: 0,
        }
    }

    /// Follows the cache and the timers until the term stops; returns an
    /// error when leadership was lost or the cache stopped.
    pub async fn run(mut self) -> Result<(), BrokerError> {
        let mut revisions = self.term.informer.subscribe();
        revisions.borrow_and_update();
        // Changes between the restore's snapshot and now.
        self.catch_up();
        loop {
            if self.term.stop.is_cancelled() {
                return Ok(());
            }
            while let Some(effect) = self.backlog.pop_front() {
                self.execute(effect).await?;
            }
            self.fire_timers();
            if !self.backlog.is_empty() {
                continue;
            }
            let wake_at = self.next_wakeup();
            tokio::select! {
                _ = self.term.stop.cancelled() => return Ok(()),
                changed = revisions.changed() => {
                    if changed.is_err() {
                        return Err(StateError::Closed.into());
                    }
                    self.catch_up();
                }
                Some(effect) = self.effects.recv() => self.backlog.push_back(effect),
                _ = self.term.wake.notified() => {}
                _ = tokio::time::sleep_until(wake_at) => {}
            }
        }
    }

    fn next_wakeup(&self) -> Instant {
        let mut at = Instant::now() + MAX_IDLE;
        if let Some(deadline) = self.term.state.lock().queues.next_deadline() {
            at = at.min(deadline);
        }
        for (due, _) in &self.retries {
            at = at.min(*due);
        }
        for due in self.suspects.values() {
            at = at.min(*due);
        }
        at.min(self.next_failed_unblock).min(self.next_prune)
    }

    /// Applies what changed in the cache since the last snapshot seen.
    fn catch_up(&mut self) {
        let next = self.term.informer.snapshot();
        let now = now();
        let (mut cancel, mut unblock, mut satisfied) = (Vec::new(), Vec::new(), Vec::new());
        let readied = {
            let mut state = self.term.state.lock();
            let mut pending = Vec::new();
            for change in next.eval_changes_since(&self.seen) {
                match change.new() {
                    Some(eval) if status_of(eval) == EvalStatus::Pending => {
                        state.blocked.remove(&eval.id);
                        pending.push(Arc::clone(eval));
                    }
                    Some(eval)
                        if status_of(eval) == EvalStatus::Complete
                            && eval.failed_tg_allocs.is_empty() =>
                    {
                        state.queues.settle(&eval.id);
                        state.blocked.remove(&eval.id);
                        satisfied.extend(
                            state
                                .blocked
                                .untrack_satisfied(&job_key(eval), eval.snapshot_revision),
                        );
                    }
                    Some(eval) if status_of(eval) == EvalStatus::Blocked => {
                        state.queues.settle(&eval.id);
                        let out = state.blocked.block(Arc::clone(eval));
                        cancel.extend(out.cancel);
                        unblock.extend(out.unblock);
                    }
                    _ => {
                        if let Some(id) = change.old().or(change.new()).map(|e| e.id.as_str()) {
                            state.queues.settle(id);
                            state.blocked.remove(id);
                        }
                    }
                }
            }
            pending.sort_by_key(|e| e.create_revision);
            for eval in pending {
                if !eval.trace_context.is_empty() && !state.queues.contains(&eval.id) {
                    let span = tracing::info_span!("broker.enqueue", eval = %eval.id, job = %eval.job_id, triggered_by = %eval.triggered_by);
                    caravan_runtime::trace::follow(&span, &eval.trace_context);
                }
                state.queues.upsert(eval, now);
            }
            for class in nodes::classes_with_new_capacity(&self.seen, &next) {
                let released = state
                    .blocked
                    .unblock_class(&class, next.revision(), now.instant);
                if !released.is_empty() {
                    tracing::info!(
                        class,
                        evals = released.len(),
                        "capacity changed; unblocking evals"
                    );
                }
                unblock.extend(released);
            }
            state.queues.readied()
        };
        let lost = nodes::heartbeats_lost(&self.seen, &next);
        let grace = self.mass_loss_grace(&next, lost.len(), now.instant);
        for node_id in lost {
            tracing::info!(node_id, "heartbeat lost");
            metrics::heartbeat_missed();
            self.suspects
                .insert(node_id, grace.unwrap_or(now.instant + LOSS_SETTLE));
        }
        if let Some(until) = grace {
            // The nodes lost just before are part of the same loss.
            for at in self.suspects.values_mut() {
                *at = (*at).max(until);
            }
        }
        for node_id in nodes::fan_outs_added(&self.seen, &next) {
            self.backlog.push_back(Effect::FinishFanOuts(node_id));
        }
        if !cancel.is_empty() {
            self.backlog.push_back(Effect::Cancel(
                cancel,
                evals::CANCELED_DUPLICATE_BLOCKED.to_string(),
            ));
        }
        if !satisfied.is_empty() {
            self.backlog.push_back(Effect::Cancel(
                satisfied,
                evals::CANCELED_SATISFIED.to_string(),
            ));
        }
        if !unblock.is_empty() {
            self.backlog.push_back(Effect::Unblock(unblock));
        }
        self.seen = next;
        self.wake_pollers(readied);
    }

    /// Notes `lost` heartbeat losses; when they make a mass loss, the time
    /// until which the lost nodes may heartbeat again before going down.
    fn mass_loss_grace(&mut self, next: &Snapshot, lost: usize, now: Instant) -> Option<Instant> {
        if lost == 0 {
            return None;
        }
        self.losses.note(lost, now);
        let config = &self.term.config;
        let up = next.nodes().filter(|n| evals::node_counts_as_up(n)).count();
        if !self.losses.is_mass(
            up,
            config.mass_heartbeat_loss_nodes,
            config.mass_heartbeat_loss_percent,
        ) {
            return None;
        }
        let grace = config.mass_heartbeat_loss_grace();
        tracing::warn!(
            lost,
            up,
            grace_ms = grace.as_millis() as u64,
            "many nodes lost their heartbeat at once: giving them a grace before marking them down"
        );
        Some(now + grace)
    }

    /// Wakes long polls if an eval entered a ready queue since last time.
    fn wake_pollers(&mut self, readied: u64) {
        if readied != self.readied_seen {
            self.readied_seen = readied;
            self.term.ready.notify_waiters();
        }
    }

    /// Fires what is due: queue timers, periodic unblocks of plan failures,
    /// node suspects and retries.
    fn fire_timers(&mut self) {
        let now = Instant::now();
        let (expired, failed_unblocked, ready) = {
            let mut state = self.term.state.lock();
            let expired = state.queues.expire(now);
            for eval_id in &expired.timed_out {
                if let Some((_, scheduler)) = state.delivered_at.remove(eval_id) {
                    metrics::nacked(&scheduler);
                }
            }
            let mut failed_unblocked = Vec::new();
            if now >= self.next_failed_unblock {
                failed_unblocked = state.blocked.unblock_failed();
                self.next_failed_unblock = now + self.term.config.failed_unblock_interval();
            }
            if now >= self.next_prune {
                state.blocked.prune(now, KEEP_CAPACITY_CHANGES);
                self.next_prune = now + PRUNE_EVERY;
            }
            (expired, failed_unblocked, state.queues.readied())
        };
        for eval_id in &expired.timed_out {
            tracing::info!(eval_id, "nack timeout: the delivery counts as nacked");
        }
        if !expired.canceled.is_empty() {
            self.backlog.push_back(Effect::Cancel(
                expired.canceled,
                evals::CANCELED_SUPERSEDED.to_string(),
            ));
        }
        self.backlog
            .extend(expired.failed.into_iter().map(Effect::Fail));
        if !failed_unblocked.is_empty() {
            tracing::info!(
                evals = failed_unblocked.len(),
                "retrying evals blocked by plan failures"
            );
            self.backlog.push_back(Effect::Unblock(failed_unblocked));
        }
        let due: Vec<String> = self
            .suspects
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            self.suspects.remove(&id);
            self.backlog.push_back(Effect::NodeDown(id));
        }
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.retries)
            .into_iter()
            .partition(|(at, _)| *at <= now);
        self.retries = later;
        self.backlog
            .extend(due.into_iter().map(|(_, effect)| effect));
        self.wake_pollers(ready);
    }

    /// Makes one write; failures other than lost leadership are retried.
    async fn execute(&mut self, effect: Effect) -> Result<(), BrokerError> {
        let result = match &effect {
            Effect::Cancel(evals, reason) => self.cancel(evals, reason).await,
            Effect::Fail(eval) => self.fail(eval).await,
            Effect::Unblock(evals) => self.unblock(evals).await,
            Effect::NodeDown(node_id) => self.node_down(node_id).await,
            Effect::FinishFanOuts(node_id) => self.finish_fan_outs(node_id).await,
        };
        match result {
            Ok(None) => Ok(()),
            Ok(Some(retry)) => {
                self.retries.push((Instant::now() + RETRY_DELAY, retry));
                Ok(())
            }
            Err(err) if err.is_deposed() => {
                self.term.stop.cancel();
                Err(err)
            }
            Err(err) => {
                // A full store refuses every retry until an operator frees
                // it; the gateway reports that once, not every retry.
                if matches!(&err, BrokerError::Store(e) if e.is_no_space()) {
                    tracing::debug!(error = %err, write = effect.describe(), "broker write failed; retrying");
                } else {
                    tracing::warn!(error = %err, write = effect.describe(), "broker write failed; retrying");
                }
                self.retries.push((Instant::now() + RETRY_DELAY, effect));
                Ok(())
            }
        }
    }

    /// Cancels evals the queues dropped, unless they are back in a queue or
    /// already done.
    async fn cancel(
        &self,
        evals: &[Arc<Evaluation>],
        reason: &str,
    ) -> Result<Option<Effect>, BrokerError> {
        let snapshot = self.term.informer.snapshot();
        let now_ns = now().unix_ns;
        let writes: Vec<GuardedEval> = {
            let state = self.term.state.lock();
            evals
                .iter()
                .filter_map(|e| snapshot.eval(&e.id))
                .filter(|e| {
                    status_of(e).is_waiting()
                        && !state.queues.contains(&e.id)
                        && !state.blocked.contains(&e.id)
                })
                .map(|e| {
                    GuardedEval::rewrite(evals::canceled(e, reason, now_ns), e.modify_revision)
                })
                .collect()
        };
        if writes.is_empty() {
            return Ok(None);
        }
        let outcome = self.term.writer.put_evals(writes).await?;
        if !outcome.written.is_empty() {
            tracing::info!(evals = ?outcome.written, reason, "evals canceled");
        }
        if outcome.conflicted.is_empty() {
            return Ok(None);
        }
        let again = evals
            .iter()
            .filter(|e| outcome.conflicted.contains(&e.id))
            .cloned()
            .collect();
        Ok(Some(Effect::Cancel(again, reason.to_string())))
    }

    /// Fails an eval at the delivery limit with its follow-up, then frees
    /// its job.
    async fn fail(&self, eval: &Arc<Evaluation>) -> Result<Option<Effect>, BrokerError> {
        let current = self.term.informer.snapshot().eval(&eval.id).cloned();
        let current = match current {
            Some(e) if status_of(&e) == EvalStatus::Pending => e,
            // Finished, blocked or gone meanwhile: nothing to fail.
            _ => {
                let released = self.term.state.lock().queues.finish_failed(&eval.id);
                self.term.released(released);
                return Ok(None);
            }
        };
        let now_ns = now().unix_ns;
        let config = &self.term.config;
        let follow_up = evals::failed_follow_up(&current, config.failed_follow_up_wait(), now_ns);
        let failed = evals::failed_at_limit(&current, &follow_up.id, config.delivery_limit, now_ns);
        let write = GuardedEval::rewrite(failed, current.modify_revision);
        if !self
            .term
            .writer
            .fail_with_follow_up(&write, &follow_up)
            .await?
        {
            return Ok(Some(Effect::Fail(Arc::clone(eval))));
        }
        tracing::warn!(
            eval_id = %eval.id,
            follow_up = %follow_up.id,
            wait_until_unix_ns = follow_up.wait_until_unix_ns,
            "eval failed at the delivery limit; follow-up created"
        );
        let released = self.term.state.lock().queues.finish_failed(&eval.id);
        self.term.released(released);
        Ok(None)
    }

    /// Writes released blocked evals back to pending; the cache then
    /// enqueues them.
    async fn unblock(&self, evals: &[Arc<Evaluation>]) -> Result<Option<Effect>, BrokerError> {
        let snapshot = self.term.informer.snapshot();
        let now_ns = now().unix_ns;
        let writes: Vec<GuardedEval> = {
            let state = self.term.state.lock();
            evals
                .iter()
                .filter_map(|e| snapshot.eval(&e.id))
                .filter(|e| status_of(e) == EvalStatus::Blocked && !state.blocked.contains(&e.id))
                .map(|e| GuardedEval::rewrite(evals::unblocked(e, now_ns), e.modify_revision))
                .collect()
        };
        if writes.is_empty() {
            return Ok(None);
        }
        // A guard that fails means a newer copy is on its way through the
        // cache, which blocks or enqueues it again on its own.
        let outcome = self.term.writer.put_evals(writes).await?;
        tracing::debug!(written = ?outcome.written, conflicted = ?outcome.conflicted, "unblocked evals");
        Ok(None)
    }

    /// Marks a node down with node-update evals for its jobs, if it is still
    /// up without a heartbeat. The evals that do not fit the transaction are
    /// owed by a fan-out on the node, finished once the cache shows it.
    async fn node_down(&mut self, node_id: &str) -> Result<Option<Effect>, BrokerError> {
        let snapshot = self.term.informer.snapshot();
        let Some(node) = snapshot.node(node_id) else {
            return Ok(None);
        };
        let disconnected = node.status() == NodeStatus::Disconnected;
        if !(evals::node_counts_as_up(node) || disconnected) || snapshot.heartbeat_live(node_id) {
            return Ok(None);
        }
        let now = now();
        let now_ns = now.unix_ns;
        let window = nodes::disconnect_window(&snapshot, node_id, now_ns);
        if let Some(ends) = window {
            // Looked at again when the window ends: down then, unless it came back.
            let wait = Duration::from_nanos(u64::try_from(ends - now_ns).unwrap_or(0));
            self.suspects
                .insert(node_id.to_string(), now.instant + wait + LOSS_SETTLE);
            if disconnected {
                return Ok(None);
            }
        }
        let owed = fan_out::node_down(trigger::NODE_UPDATE, now_ns);
        let mut evals = fan_out::evals(&snapshot, node, &owed);
        let count = evals.len();
        let mut down = match window {
            Some(_) => evals::node_disconnected(node, now_ns),
            None => evals::node_down(node, now_ns),
        };
        let room = self.term.writer.node_down_room();
        if evals.len() > room {
            evals.truncate(room);
            down.pending_fan_outs.push(owed);
        }
        if self.term.writer.node_down(&down, &evals).await? {
            if window.is_some() {
                tracing::warn!(
                    node_id,
                    evals = count,
                    "node marked disconnected: heartbeat missed"
                );
            } else {
                tracing::warn!(node_id, evals = count, "node marked down: heartbeat missed");
            }
            return Ok(None);
        }
        self.suspects.remove(node_id);
        // The node changed or its heartbeat is back; look again once the
        // cache has caught up.
        Ok(Some(Effect::NodeDown(node_id.to_string())))
    }

    /// Creates the evals a node's pending fan-outs owe (those an earlier try
    /// made already are skipped), then clears the fan-outs; tries again
    /// later when the node changed meanwhile.
    async fn finish_fan_outs(&self, node_id: &str) -> Result<Option<Effect>, BrokerError> {
        let snapshot = self.term.informer.snapshot();
        let Some(node) = snapshot.node(node_id) else {
            return Ok(None);
        };
        if node.pending_fan_outs.is_empty() {
            return Ok(None);
        }
        let mut finished = Vec::new();
        for owed in &node.pending_fan_outs {
            let writes = fan_out::evals(&snapshot, node, owed)
                .into_iter()
                .map(GuardedEval::create)
                .collect();
            let outcome = self.term.writer.put_evals(writes).await?;
            tracing::info!(
                node_id,
                fan_out = owed.id,
                created = outcome.written.len(),
                existed = outcome.conflicted.len(),
                "finished a node's eval fan-out"
            );
            finished.push(owed.id.clone());
        }
        if self
            .term
            .writer
            .rewrite_node(&fan_out::cleared(node, &finished))
            .await?
        {
            return Ok(None);
        }
        Ok(Some(Effect::FinishFanOuts(node_id.to_string())))
    }
}

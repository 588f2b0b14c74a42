//! One leadership term of the broker: the queues and blocked evals rebuilt
//! from the store when the term began, and what the RPCs do with them
//! (dequeue, ack, nack, reset, and the eval writes of workers checked
//! against their delivery). What must be written in reaction goes to the
//! term's follower as [`Effect`]s.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use caravan_model::now_unix_ns;
use caravan_proto::{BrokerStatsResponse, EvalStatus, Evaluation};
use caravan_state::Informer;
use caravan_store::Revision;
use parking_lot::Mutex;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::blocked::BlockedEvals;
use crate::config::EvalBrokerConfig;
use crate::error::BrokerError;
use crate::evals;
use crate::metrics;
use crate::queues::{Delivery, EvalQueues, Nacked, Now, Released};
use crate::writes::{EvalWriter, GuardedEval};

/// Attempts at a worker's eval write when the eval keeps changing under it.
const CONFLICT_RETRIES: usize = 5;

/// A write the term's follower makes on behalf of the queues.
#[derive(Clone, Debug)]
pub enum Effect {
    /// Cancel evals dropped from the queues, saying why.
    Cancel(Vec<Arc<Evaluation>>, String),
    /// Mark an eval failed at the delivery limit and create its follow-up.
    Fail(Arc<Evaluation>),
    /// Write blocked evals back to pending so they are scheduled again.
    Unblock(Vec<Arc<Evaluation>>),
    /// Mark a node whose heartbeat vanished down, with evals for its jobs.
    NodeDown(String),
    /// Create the evals a node's pending fan-outs owe, then clear them.
    FinishFanOuts(String),
}

impl Effect {
    /// A short description for logs.
    pub fn describe(&self) -> String {
        match self {
            Effect::Cancel(evals, reason) => format!("cancel {} evals ({reason})", evals.len()),
            Effect::Fail(eval) => format!("fail eval {} at the delivery limit", eval.id),
            Effect::Unblock(evals) => format!("unblock {} evals", evals.len()),
            Effect::NodeDown(node) => format!("mark node {node} down"),
            Effect::FinishFanOuts(node) => format!("finish the eval fan-outs of node {node}"),
        }
    }
}

/// The in-memory state of a term, behind one lock.
#[derive(Debug)]
pub struct TermState {
    /// Pending evals: ready, waiting, delayed, unacked.
    pub queues: EvalQueues,
    /// Blocked evals.
    pub blocked: BlockedEvals,
    /// When each unacked eval was delivered, and its scheduler type: how
    /// long its worker held it is recorded on ack.
    pub delivered_at: HashMap<String, (Instant, String)>,
}

/// A leadership term: its state, its fenced writer and its signals.
pub struct LeaderTerm {
    /// Writes fenced by this term's leadership.
    pub writer: EvalWriter,
    /// The watch cache the term follows.
    pub informer: Arc<Informer>,
    /// Queues and blocked evals.
    pub state: Mutex<TermState>,
    /// Woken when evals may have become ready.
    pub ready: Notify,
    /// Woken when the follower should look at its timers again.
    pub wake: Notify,
    /// Cancelled when the term ends.
    pub stop: CancellationToken,
    /// The service configuration.
    pub config: Arc<EvalBrokerConfig>,
    /// Held by a garbage collection sweep, so sweeps take turns.
    pub gc_turn: tokio::sync::Mutex<()>,
    /// Dequeue long polls waiting for an eval (`dequeues_waiting`).
    pub polls_waiting: AtomicU64,
    effects: mpsc::UnboundedSender<Effect>,
}

/// A dequeue counted in [`LeaderTerm::polls_waiting`] while it lives.
struct PollWaiting<'a>(&'a AtomicU64);

impl<'a> PollWaiting<'a> {
    fn new(count: &'a AtomicU64) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        PollWaiting(count)
    }
}

impl Drop for PollWaiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The present time on both clocks.
pub fn now() -> Now {
    Now {
        instant: Instant::now(),
        unix_ns: now_unix_ns(),
    }
}

/// A dequeue names at least one scheduler type, none empty.
pub fn check_schedulers(schedulers: &[String]) -> Result<(), BrokerError> {
    if schedulers.is_empty() || schedulers.iter().any(String::is_empty) {
        return Err(BrokerError::InvalidArgument {
            field: "schedulers".into(),
            problem: "must name at least one scheduler type, none empty".into(),
        });
    }
    Ok(())
}

fn require(field: &str, value: &str) -> Result<(), BrokerError> {
    if value.is_empty() {
        return Err(BrokerError::InvalidArgument {
            field: field.to_string(),
            problem: "must not be empty".into(),
        });
    }
    Ok(())
}

/// A revision a worker reports its writes reached: 0 for none, never
/// negative.
pub(crate) fn written(field: &str, revision: Revision) -> Result<Revision, BrokerError> {
    if revision < 0 {
        return Err(BrokerError::InvalidArgument {
            field: field.to_string(),
            problem: format!("must not be negative, got {revision}"),
        });
    }
    Ok(revision)
}

impl LeaderTerm {
    /// A term with empty queues; the follower restores them.
    pub fn new(
        writer: EvalWriter,
        informer: Arc<Informer>,
        config: Arc<EvalBrokerConfig>,
        stop: CancellationToken,
    ) -> (Arc<LeaderTerm>, mpsc::UnboundedReceiver<Effect>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let term = Arc::new(LeaderTerm {
            writer,
            informer,
            state: Mutex::new(TermState {
                queues: EvalQueues::new(config.queue_config()),
                blocked: BlockedEvals::new(),
                delivered_at: HashMap::new(),
            }),
            ready: Notify::new(),
            wake: Notify::new(),
            stop,
            config,
            gc_turn: tokio::sync::Mutex::new(()),
            polls_waiting: AtomicU64::new(0),
            effects: tx,
        });
        (term, rx)
    }

    /// Hands a write to the follower.
    pub fn send(&self, effect: Effect) {
        // The receiver lives as long as the term's follower; once it is
        // gone the term is over and nothing should be written anyway.
        let _ = self.effects.send(effect);
        self.wake.notify_one();
    }

    /// Reacts to a job's slot being freed.
    pub fn released(&self, released: Released) {
        if !released.canceled.is_empty() {
            self.send(Effect::Cancel(
                released.canceled,
                evals::CANCELED_SUPERSEDED.to_string(),
            ));
        }
        if released.promoted.is_some() {
            self.ready.notify_waiters();
        }
        self.wake.notify_one();
    }

    /// A deposed term stops at once.
    fn check<T>(&self, result: Result<T, BrokerError>) -> Result<T, BrokerError> {
        if let Err(err) = &result
            && err.is_deposed()
        {
            self.stop.cancel();
        }
        result
    }

    /// Long-polls for an eval of the given scheduler types until `timeout`.
    pub async fn dequeue(
        &self,
        schedulers: &[String],
        timeout: Duration,
    ) -> Result<Option<Delivery>, BrokerError> {
        check_schedulers(schedulers)?;
        let deadline = Instant::now() + timeout.min(self.config.max_dequeue_timeout());
        let mut waiting = None;
        loop {
            let notified = self.ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(delivery) = self.try_dequeue(schedulers) {
                self.wake.notify_one();
                return Ok(Some(delivery));
            }
            // Counted only now: an eval readied from here on wakes this poll.
            waiting.get_or_insert_with(|| PollWaiting::new(&self.polls_waiting));
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep_until(deadline) => return Ok(None),
                _ = self.stop.cancelled() => return Err(BrokerError::Deposed),
            }
        }
    }

    fn try_dequeue(&self, schedulers: &[String]) -> Option<Delivery> {
        let mut state = self.state.lock();
        // Taken under the lock: the follower enqueues only evals of
        // snapshots it took before locking, so this one is at least as new.
        let snapshot = self.informer.snapshot();
        let pending = |e: &Evaluation| {
            snapshot
                .eval(&e.id)
                .is_some_and(|s| s.status() == EvalStatus::Pending)
        };
        let delivery =
            state
                .queues
                .dequeue(schedulers, Instant::now(), snapshot.revision(), pending)?;
        let eval = snapshot
            .eval(&delivery.eval.id)
            .cloned()
            .unwrap_or_else(|| Arc::clone(&delivery.eval));
        metrics::delivered(&eval);
        state
            .delivered_at
            .insert(eval.id.clone(), (Instant::now(), eval.r#type.clone()));
        tracing::debug!(
            eval_id = %eval.id,
            job_id = %eval.job_id,
            deliveries = delivery.deliveries,
            wait_revision = delivery.wait_revision,
            "eval delivered"
        );
        Some(Delivery { eval, ..delivery })
    }

    /// The worker finished the eval; its writes reached `written`.
    pub fn ack(&self, eval_id: &str, token: &str, written: Revision) -> Result<(), BrokerError> {
        require("eval_id", eval_id)?;
        require("token", token)?;
        let written = self::written("written_revision", written)?;
        let released = {
            let mut state = self.state.lock();
            let released = state.queues.ack(eval_id, token, written)?;
            if let Some((since, scheduler)) = state.delivered_at.remove(eval_id) {
                metrics::acked(&scheduler, since);
            }
            released
        };
        tracing::debug!(eval_id, "eval acked");
        self.released(released);
        Ok(())
    }

    /// The worker gave the eval up; its writes reached `written`.
    pub fn nack(&self, eval_id: &str, token: &str, written: Revision) -> Result<(), BrokerError> {
        require("eval_id", eval_id)?;
        require("token", token)?;
        let written = self::written("written_revision", written)?;
        let outcome = self
            .state
            .lock()
            .queues
            .nack(eval_id, token, Instant::now(), written)?;
        self.nacked(eval_id, outcome);
        Ok(())
    }

    /// Reacts to a nack or a nack timeout.
    pub fn nacked(&self, eval_id: &str, outcome: Nacked) {
        if let Some((_, scheduler)) = self.state.lock().delivered_at.remove(eval_id) {
            metrics::nacked(&scheduler);
        }
        match outcome {
            Nacked::Requeued { delay } => {
                tracing::info!(eval_id, ?delay, "eval nacked; re-enqueued after a backoff");
                if delay.is_zero() {
                    self.ready.notify_waiters();
                }
                self.wake.notify_one();
            }
            Nacked::Released(released) => self.released(released),
            Nacked::DeliveryLimit(eval) => {
                tracing::warn!(eval_id, "eval reached the delivery limit; failing it");
                self.send(Effect::Fail(eval));
            }
        }
    }

    /// The worker is making progress on the eval.
    pub fn outstanding_reset(&self, eval_id: &str, token: &str) -> Result<(), BrokerError> {
        require("eval_id", eval_id)?;
        require("token", token)?;
        self.state
            .lock()
            .queues
            .outstanding_reset(eval_id, token, Instant::now())?;
        Ok(())
    }

    /// The eval and wait revision of the live delivery `token` names, which
    /// must be of `eval_id` when given. Restarts its nack timer: a write is
    /// progress.
    fn delivery(
        &self,
        eval_id: Option<&str>,
        token: &str,
    ) -> Result<(Arc<Evaluation>, Revision), BrokerError> {
        require("token", token)?;
        let mut state = self.state.lock();
        let (delivered, wait_revision) = match state.queues.outstanding(token) {
            Ok(found) => found,
            Err(err) => {
                return Err(match eval_id {
                    Some(id) => state
                        .queues
                        .check_delivery(id, token)
                        .err()
                        .unwrap_or(err)
                        .into(),
                    None => err.into(),
                });
            }
        };
        if let Some(named) = eval_id
            && named != delivered.id
        {
            return Err(BrokerError::WrongEval {
                delivered: delivered.id.clone(),
                named: named.to_string(),
            });
        }
        state
            .queues
            .outstanding_reset(&delivered.id, token, Instant::now())?;
        Ok((delivered, wait_revision))
    }

    /// Writes the worker's outcome into the eval it is processing.
    pub async fn update_eval(
        &self,
        eval: Evaluation,
        token: &str,
    ) -> Result<Revision, BrokerError> {
        require("eval.id", &eval.id)?;
        self.delivery(Some(&eval.id), token)?;
        let result = self
            .rewrite(&eval.id, |stored| {
                evals::merge_update(stored, &eval, now().unix_ns)
            })
            .await;
        self.check(result)
    }

    /// Puts the eval being processed back among the blocked.
    pub async fn reblock_eval(
        &self,
        eval: Evaluation,
        token: &str,
    ) -> Result<Revision, BrokerError> {
        require("eval.id", &eval.id)?;
        let (_, wait_revision) = self.delivery(Some(&eval.id), token)?;
        let result = self
            .rewrite(&eval.id, |stored| {
                evals::merge_reblock(stored, &eval, wait_revision, now().unix_ns)
            })
            .await;
        self.check(result)
    }

    /// Writes `change` of an eval, guarded by the revision it was read at,
    /// until the guard holds: first from the cache (usually current, as the
    /// worker writes after the broker delivered the eval), then re-read from
    /// the store after a conflict.
    async fn rewrite(
        &self,
        eval_id: &str,
        change: impl Fn(&Evaluation) -> Result<Evaluation, BrokerError>,
    ) -> Result<Revision, BrokerError> {
        let mut cached = self
            .informer
            .snapshot()
            .eval(eval_id)
            .map(|e| Evaluation::clone(e));
        for _ in 0..CONFLICT_RETRIES {
            let (stored, from_cache) = match cached.take() {
                Some(eval) => (eval, true),
                None => (
                    self.writer
                        .read_eval(eval_id)
                        .await?
                        .ok_or_else(|| BrokerError::EvalNotFound(eval_id.to_string()))?,
                    false,
                ),
            };
            let updated = match change(&stored) {
                Ok(updated) => updated,
                // The cache may lag the store: only the stored eval refuses.
                Err(_) if from_cache => continue,
                Err(err) => return Err(err),
            };
            let write = GuardedEval::rewrite(updated, stored.modify_revision);
            if let Some(revision) = self.writer.put_eval(&write).await? {
                return Ok(revision);
            }
        }
        Err(BrokerError::Conflict(eval_id.to_string()))
    }

    /// Creates an eval on behalf of the worker processing a delivery: a
    /// follow-up, rolling or blocked eval.
    pub async fn create_eval(
        &self,
        eval: Evaluation,
        token: &str,
    ) -> Result<Revision, BrokerError> {
        let (_, wait_revision) = self.delivery(None, token)?;
        evals::check_new(&eval)?;
        let eval = evals::prepare_new(eval, wait_revision, now().unix_ns);
        let result = self.create(eval).await;
        self.check(result)
    }

    async fn create(&self, eval: Evaluation) -> Result<Revision, BrokerError> {
        if let Some(revision) = self
            .writer
            .put_eval(&GuardedEval::create(eval.clone()))
            .await?
        {
            return Ok(revision);
        }
        // A retry of a create that committed is not a conflict.
        match self.writer.read_eval(&eval.id).await? {
            Some(existing)
                if existing.job_id == eval.job_id
                    && existing.namespace == eval.namespace
                    && existing.triggered_by == eval.triggered_by
                    && existing.previous_eval == eval.previous_eval =>
            {
                Ok(existing.modify_revision)
            }
            _ => Err(BrokerError::EvalExists(eval.id)),
        }
    }

    /// Counts of the term's queues.
    pub fn stats(&self) -> BrokerStatsResponse {
        let state = self.state.lock();
        let q = state.queues.stats();
        BrokerStatsResponse {
            ready_by_scheduler: q.ready_by_scheduler,
            total_ready: q.ready,
            total_unacked: q.unacked,
            total_blocked: state.blocked.len() as u64,
            total_waiting: q.delayed,
            total_pending_by_job: q.pending_by_job,
            dequeues_waiting: self.polls_waiting.load(Ordering::Relaxed),
        }
    }
}

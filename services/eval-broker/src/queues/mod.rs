//! The ready side of the broker for one leadership term: ready queues per
//! scheduler type ordered by priority then create revision, at most one eval
//! per job ready or unacked with the others waiting, delivery tokens, the
//! nack timeout, nack backoff, the delivery limit and delayed evals. Pure:
//! no I/O, and the caller passes the time in, so tests drive it with a fake
//! clock.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use caravan_proto::Evaluation;
use caravan_store::Revision;
use tokio::time::Instant;

#[cfg(test)]
mod tests;

/// A job as the broker serializes it: (namespace, job id).
pub type JobKey = (String, String);

/// Adds one to `key`'s count, copying the key only the first time it is
/// counted (the queue stats are refreshed every second under the term lock).
pub(crate) fn count_one(counts: &mut BTreeMap<String, u64>, key: &str) {
    match counts.get_mut(key) {
        Some(n) => *n += 1,
        None => {
            counts.insert(key.to_string(), 1);
        }
    }
}

/// The job an eval belongs to.
pub fn job_key(eval: &Evaluation) -> JobKey {
    (eval.namespace.clone(), eval.job_id.clone())
}

/// The knobs of delivery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    /// How long a delivery may go without an ack, nack or reset before it
    /// counts as nacked.
    pub nack_timeout: Duration,
    /// Deliveries after which a nack fails the eval instead of re-enqueuing it.
    pub delivery_limit: u32,
    /// Wait before a first nacked eval is ready again.
    pub initial_nack_delay: Duration,
    /// Wait per earlier delivery before a later nacked eval is ready again.
    pub subsequent_nack_delay: Duration,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            nack_timeout: Duration::from_secs(60),
            delivery_limit: 3,
            initial_nack_delay: Duration::from_secs(1),
            subsequent_nack_delay: Duration::from_secs(20),
        }
    }
}

impl QueueConfig {
    /// How long an eval nacked after `deliveries` deliveries waits before it
    /// is ready again: nothing before any delivery, the initial delay after
    /// the first, then the subsequent delay per earlier delivery.
    pub fn nack_delay(&self, deliveries: u32) -> Duration {
        match deliveries {
            0 => Duration::ZERO,
            1 => self.initial_nack_delay,
            n => self.subsequent_nack_delay.saturating_mul(n - 1),
        }
    }
}

/// The present time on both clocks the queues use.
#[derive(Clone, Copy, Debug)]
pub struct Now {
    /// Monotonic time, for timers.
    pub instant: Instant,
    /// Wall-clock time in Unix nanoseconds, for `wait_until_unix_ns`.
    pub unix_ns: i64,
}

/// Why a delivery-bound call was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    /// The eval is not handed out right now.
    #[error(
        "eval {eval_id} is not outstanding (it was acked, nacked, timed out, or delivered by an earlier broker leader)"
    )]
    NotOutstanding {
        /// The eval named.
        eval_id: String,
    },
    /// The eval is handed out, under another token.
    #[error("token does not match the outstanding delivery of eval {eval_id}")]
    TokenMismatch {
        /// The eval named.
        eval_id: String,
    },
    /// No delivery has this token.
    #[error(
        "token is not outstanding (the eval was acked, nacked, timed out, or delivered by an earlier broker leader)"
    )]
    UnknownToken,
}

/// An eval handed out to a worker.
#[derive(Clone, Debug)]
pub struct Delivery {
    /// The eval as the broker last saw it.
    pub eval: Arc<Evaluation>,
    /// The token every later call about this delivery must carry.
    pub token: String,
    /// How many times the eval has been handed out in this term, this one
    /// included.
    pub deliveries: u32,
    /// The revision the worker's cache must reach before scheduling.
    pub wait_revision: Revision,
}

/// What freeing a job's slot did.
#[derive(Clone, Debug, Default)]
pub struct Released {
    /// The waiting eval of the job that became ready.
    pub promoted: Option<String>,
    /// Older waiting evals of the job, now dropped; the caller cancels them
    /// in the store.
    pub canceled: Vec<Arc<Evaluation>>,
}

/// What a nack (or a nack timeout) did.
#[derive(Clone, Debug)]
pub enum Nacked {
    /// The eval will be ready again after `delay`, still holding its job.
    Requeued {
        /// The backoff.
        delay: Duration,
    },
    /// The eval had already left the pending state in the store, so there
    /// is nothing to redeliver: its job is free, as after an ack.
    Released(Released),
    /// The eval reached the delivery limit; the caller marks it failed with
    /// a follow-up and then calls [`EvalQueues::finish_failed`].
    DeliveryLimit(Arc<Evaluation>),
}

/// What the timers that came due did.
#[derive(Clone, Debug, Default)]
pub struct Expired {
    /// Evals whose nack timeout fired.
    pub timed_out: Vec<String>,
    /// Waiting evals dropped because their job's eval was released.
    pub canceled: Vec<Arc<Evaluation>>,
    /// Evals past the delivery limit, for the caller to fail.
    pub failed: Vec<Arc<Evaluation>>,
}

/// Counts for the broker's stats.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Ready evals per scheduler type.
    pub ready_by_scheduler: BTreeMap<String, u64>,
    /// Ready evals in all.
    pub ready: u64,
    /// Evals handed out and not yet acked or nacked.
    pub unacked: u64,
    /// Evals waiting for a time: `wait_until` or nack backoff.
    pub delayed: u64,
    /// Evals waiting behind another eval of their job.
    pub pending_by_job: u64,
    /// Evals past the delivery limit whose failure is being written.
    pub failing: u64,
    /// Unacked evals per scheduler type.
    pub unacked_by_scheduler: BTreeMap<String, u64>,
    /// Delayed evals per scheduler type.
    pub delayed_by_scheduler: BTreeMap<String, u64>,
}

/// Where a tracked eval is.
#[derive(Clone, Debug)]
enum Place {
    /// In its scheduler's ready queue, holding its job.
    Ready,
    /// Behind another eval of its job.
    Waiting,
    /// Until its `wait_until`; holds nothing.
    Delayed(Instant),
    /// Handed out, holding its job.
    Unacked {
        token: String,
        deadline: Instant,
        wait_revision: Revision,
    },
    /// Nacked, ready again at the instant; holds its job.
    Backoff(Instant),
    /// Past the delivery limit, its failure being written; holds its job.
    Failing,
}

#[derive(Clone, Debug)]
struct Entry {
    eval: Arc<Evaluation>,
    place: Place,
    deliveries: u32,
    /// The store no longer has the eval pending (terminal, blocked or
    /// gone) while it is handed out: never redeliver it.
    settled: bool,
}

/// Priority high first, then create revision old first.
type ReadyKey = (Reverse<i32>, Revision, String);
/// Priority high first, then create revision new first.
type WaitKey = (Reverse<i32>, Reverse<Revision>, String);

fn ready_key(eval: &Evaluation) -> ReadyKey {
    (
        Reverse(eval.priority),
        eval.create_revision,
        eval.id.clone(),
    )
}

fn wait_key(eval: &Evaluation) -> WaitKey {
    (
        Reverse(eval.priority),
        Reverse(eval.create_revision),
        eval.id.clone(),
    )
}

/// The queues of pending evals of one leadership term.
#[derive(Debug, Default)]
pub struct EvalQueues {
    config: QueueConfig,
    entries: HashMap<String, Entry>,
    ready: HashMap<String, BTreeSet<ReadyKey>>,
    waiting: HashMap<JobKey, BTreeSet<WaitKey>>,
    /// The eval holding each job: ready, unacked, in backoff or failing.
    slots: HashMap<JobKey, String>,
    tokens: HashMap<String, String>,
    timers: BTreeSet<(Instant, String)>,
    /// Turns among scheduler types whose best evals tie on priority.
    turn: usize,
    /// Counts evals entering a ready queue, so callers wake pollers only
    /// when there is something new.
    readied: u64,
    /// Per job, the highest revision an acked or nacked delivery of it
    /// wrote at, while the broker's view may not have reached it: the job's
    /// next delivery waits for it.
    floors: HashMap<JobKey, Revision>,
    /// The same floors by revision, to forget them once passed.
    floors_by_revision: BTreeSet<(Revision, JobKey)>,
}

impl EvalQueues {
    /// Empty queues.
    pub fn new(config: QueueConfig) -> Self {
        EvalQueues {
            config,
            ..Default::default()
        }
    }

    /// Whether the eval is tracked in any state.
    pub fn contains(&self, eval_id: &str) -> bool {
        self.entries.contains_key(eval_id)
    }

    /// Number of ready evals.
    #[cfg(test)]
    pub fn ready_len(&self) -> usize {
        self.ready.values().map(BTreeSet::len).sum()
    }

    /// How many times an eval entered a ready queue: a change means
    /// long polls have something new to look at.
    pub fn readied(&self) -> u64 {
        self.readied
    }

    /// The earliest timer: a delayed eval, a backoff or a nack timeout.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.timers.first().map(|(at, _)| *at)
    }

    /// A pending eval as the store has it: tracks a new one (ready, waiting
    /// behind its job, or delayed until `wait_until`), or refreshes the copy
    /// of a tracked one.
    pub fn upsert(&mut self, eval: Arc<Evaluation>, now: Now) {
        let id = eval.id.clone();
        if let Some(entry) = self.entries.get(&id) {
            let place = entry.place.clone();
            let old = Arc::clone(&entry.eval);
            match place {
                Place::Ready => {
                    self.remove_ready_key(&old);
                    self.insert_ready_key(&eval);
                }
                Place::Waiting => {
                    let job = job_key(&old);
                    if let Some(set) = self.waiting.get_mut(&job) {
                        set.remove(&wait_key(&old));
                        set.insert(wait_key(&eval));
                    }
                }
                _ => {}
            }
            if let Some(entry) = self.entries.get_mut(&id) {
                entry.eval = eval;
                entry.settled = false;
            }
            return;
        }
        let delay = eval.wait_until_unix_ns.saturating_sub(now.unix_ns);
        let place = if delay > 0 {
            let at = now.instant + Duration::from_nanos(delay.unsigned_abs());
            self.timers.insert((at, id.clone()));
            Place::Delayed(at)
        } else {
            Place::Waiting
        };
        let delayed = matches!(place, Place::Delayed(_));
        self.entries.insert(
            id.clone(),
            Entry {
                eval,
                place,
                deliveries: 0,
                settled: false,
            },
        );
        if !delayed {
            self.admit(&id);
        }
    }

    /// Makes a tracked eval ready if its job is free (or already its own),
    /// else puts it behind the job's eval.
    fn admit(&mut self, eval_id: &str) {
        let Some(entry) = self.entries.get(eval_id) else {
            return;
        };
        let eval = Arc::clone(&entry.eval);
        let job = job_key(&eval);
        let holder = self.slots.get(&job).cloned();
        let place = match holder {
            Some(h) if h != eval_id => {
                self.waiting.entry(job).or_default().insert(wait_key(&eval));
                Place::Waiting
            }
            _ => {
                self.slots.insert(job, eval_id.to_string());
                self.insert_ready_key(&eval);
                Place::Ready
            }
        };
        if let Some(entry) = self.entries.get_mut(eval_id) {
            entry.place = place;
        }
    }

    fn insert_ready_key(&mut self, eval: &Evaluation) {
        self.readied = self.readied.wrapping_add(1);
        self.ready
            .entry(eval.r#type.clone())
            .or_default()
            .insert(ready_key(eval));
    }

    fn remove_ready_key(&mut self, eval: &Evaluation) {
        if let Some(set) = self.ready.get_mut(&eval.r#type) {
            set.remove(&ready_key(eval));
            if set.is_empty() {
                self.ready.remove(&eval.r#type);
            }
        }
    }

    /// Hands out the best ready eval of the given scheduler types: highest
    /// priority first, taking turns among types that tie, oldest first
    /// within a type. `is_pending` is asked about each candidate; one the
    /// store no longer has pending is dropped instead of delivered.
    pub fn dequeue(
        &mut self,
        schedulers: &[String],
        now: Instant,
        wait_revision: Revision,
        mut is_pending: impl FnMut(&Evaluation) -> bool,
    ) -> Option<Delivery> {
        self.forget_floors(wait_revision);
        loop {
            let scheduler = self.pick_scheduler(schedulers)?;
            let set = self.ready.get_mut(&scheduler)?;
            let (_, _, id) = set.pop_first()?;
            if set.is_empty() {
                self.ready.remove(&scheduler);
            }
            let Some(entry) = self.entries.get(&id) else {
                continue;
            };
            if !is_pending(&entry.eval) {
                // Out of the ready queue already; this frees its job.
                self.drop_entry(&id);
                continue;
            }
            let wait_revision = match self.floors.get(&job_key(&entry.eval)) {
                Some(floor) => wait_revision.max(*floor),
                None => wait_revision,
            };
            let token = uuid::Uuid::new_v4().to_string();
            let deadline = now + self.config.nack_timeout;
            let entry = self.entries.get_mut(&id)?;
            entry.deliveries = entry.deliveries.saturating_add(1);
            entry.place = Place::Unacked {
                token: token.clone(),
                deadline,
                wait_revision,
            };
            let delivery = Delivery {
                eval: Arc::clone(&entry.eval),
                token: token.clone(),
                deliveries: entry.deliveries,
                wait_revision,
            };
            self.timers.insert((deadline, id.clone()));
            self.tokens.insert(token, id);
            return Some(delivery);
        }
    }

    fn pick_scheduler(&mut self, schedulers: &[String]) -> Option<String> {
        let mut best: Option<i32> = None;
        let mut tied: Vec<&String> = Vec::new();
        for name in schedulers {
            let Some((Reverse(priority), _, _)) = self.ready.get(name).and_then(|s| s.first())
            else {
                continue;
            };
            if tied.contains(&name) {
                continue;
            }
            match best {
                Some(b) if *priority < b => {}
                Some(b) if *priority == b => tied.push(name),
                _ => {
                    best = Some(*priority);
                    tied.clear();
                    tied.push(name);
                }
            }
        }
        if tied.is_empty() {
            return None;
        }
        let chosen = tied[self.turn % tied.len()].clone();
        self.turn = self.turn.wrapping_add(1);
        Some(chosen)
    }

    /// The outstanding delivery a token names: its eval and the revision
    /// the worker was told to wait for.
    pub fn outstanding(&self, token: &str) -> Result<(Arc<Evaluation>, Revision), QueueError> {
        let id = self.tokens.get(token).ok_or(QueueError::UnknownToken)?;
        match self.entries.get(id) {
            Some(Entry {
                eval,
                place:
                    Place::Unacked {
                        token: held,
                        wait_revision,
                        ..
                    },
                ..
            }) if held == token => Ok((Arc::clone(eval), *wait_revision)),
            _ => Err(QueueError::UnknownToken),
        }
    }

    /// Whether `token` is the live delivery of `eval_id`, and if not, why.
    pub fn check_delivery(&self, eval_id: &str, token: &str) -> Result<(), QueueError> {
        match self.entries.get(eval_id).map(|e| &e.place) {
            Some(Place::Unacked { token: held, .. }) if held == token => Ok(()),
            Some(Place::Unacked { .. }) => Err(QueueError::TokenMismatch {
                eval_id: eval_id.to_string(),
            }),
            _ => Err(QueueError::NotOutstanding {
                eval_id: eval_id.to_string(),
            }),
        }
    }

    /// The worker is done with the eval: frees its job, makes the newest
    /// waiting eval of the job ready and drops the older ones. The job's
    /// next delivery waits for `written`, the revision the worker's writes
    /// reached.
    pub fn ack(
        &mut self,
        eval_id: &str,
        token: &str,
        written: Revision,
    ) -> Result<Released, QueueError> {
        self.check_delivery(eval_id, token)?;
        let Some(entry) = self.remove_entry(eval_id) else {
            return Err(QueueError::NotOutstanding {
                eval_id: eval_id.to_string(),
            });
        };
        let job = job_key(&entry.eval);
        self.raise_floor(&job, written);
        Ok(self.release(&job, true))
    }

    /// The worker gave the eval up: it is ready again after a backoff, or
    /// fails past the delivery limit. Its redelivery, or the job's next
    /// eval, waits for `written` as after an ack.
    pub fn nack(
        &mut self,
        eval_id: &str,
        token: &str,
        now: Instant,
        written: Revision,
    ) -> Result<Nacked, QueueError> {
        self.check_delivery(eval_id, token)?;
        if let Some(entry) = self.entries.get(eval_id) {
            let job = job_key(&entry.eval);
            self.raise_floor(&job, written);
        }
        Ok(self.nack_unchecked(eval_id, now))
    }

    /// The lowest wait revision of `job`'s next delivery becomes at least
    /// `revision`.
    fn raise_floor(&mut self, job: &JobKey, revision: Revision) {
        if revision <= 0 {
            return;
        }
        match self.floors.get_mut(job) {
            Some(floor) if *floor >= revision => {}
            Some(floor) => {
                let old = std::mem::replace(floor, revision);
                self.floors_by_revision.remove(&(old, job.clone()));
                self.floors_by_revision.insert((revision, job.clone()));
            }
            None => {
                self.floors.insert(job.clone(), revision);
                self.floors_by_revision.insert((revision, job.clone()));
            }
        }
    }

    /// Drops the floors a delivery at `revision` already satisfies.
    fn forget_floors(&mut self, revision: Revision) {
        while let Some((floor, _)) = self.floors_by_revision.first()
            && *floor <= revision
        {
            if let Some((_, job)) = self.floors_by_revision.pop_first() {
                self.floors.remove(&job);
            }
        }
    }

    /// The floor of `job`'s next delivery, if one is held.
    #[cfg(test)]
    pub fn floor(&self, job: &JobKey) -> Option<Revision> {
        self.floors.get(job).copied()
    }

    fn nack_unchecked(&mut self, eval_id: &str, now: Instant) -> Nacked {
        let Some(entry) = self.entries.get(eval_id) else {
            return Nacked::Released(Released::default());
        };
        let (settled, deliveries) = (entry.settled, entry.deliveries);
        let eval = Arc::clone(&entry.eval);
        self.clear_place(eval_id);
        if settled {
            self.entries.remove(eval_id);
            return Nacked::Released(self.release(&job_key(&eval), true));
        }
        let place = if deliveries >= self.config.delivery_limit {
            Place::Failing
        } else {
            let delay = self.config.nack_delay(deliveries);
            if delay.is_zero() {
                self.insert_ready_key(&eval);
                Place::Ready
            } else {
                let at = now + delay;
                self.timers.insert((at, eval_id.to_string()));
                Place::Backoff(at)
            }
        };
        let outcome = match &place {
            Place::Failing => Nacked::DeliveryLimit(Arc::clone(&eval)),
            _ => Nacked::Requeued {
                delay: self.config.nack_delay(deliveries),
            },
        };
        if let Some(entry) = self.entries.get_mut(eval_id) {
            entry.place = place;
        }
        outcome
    }

    /// Restarts the nack timer of an outstanding delivery: the worker is
    /// making progress.
    pub fn outstanding_reset(
        &mut self,
        eval_id: &str,
        token: &str,
        now: Instant,
    ) -> Result<(), QueueError> {
        self.check_delivery(eval_id, token)?;
        let deadline = now + self.config.nack_timeout;
        let Some(entry) = self.entries.get_mut(eval_id) else {
            return Ok(());
        };
        if let Place::Unacked { deadline: old, .. } = &mut entry.place {
            self.timers.remove(&(*old, eval_id.to_string()));
            *old = deadline;
            self.timers.insert((deadline, eval_id.to_string()));
        }
        Ok(())
    }

    /// The store no longer has the eval pending (it is terminal, blocked or
    /// deleted): drop it from every queue. A handed-out eval stays until its
    /// worker acks or nacks, but is never delivered again.
    pub fn settle(&mut self, eval_id: &str) {
        let Some(entry) = self.entries.get_mut(eval_id) else {
            return;
        };
        match entry.place {
            Place::Unacked { .. } | Place::Failing => entry.settled = true,
            _ => self.drop_entry(eval_id),
        }
    }

    /// The failure of an eval past its delivery limit is written (or turned
    /// out moot): frees its job as an ack does.
    pub fn finish_failed(&mut self, eval_id: &str) -> Released {
        match self.entries.get(eval_id).map(|e| &e.place) {
            Some(Place::Failing) => {}
            _ => return Released::default(),
        }
        match self.remove_entry(eval_id) {
            Some(entry) => self.release(&job_key(&entry.eval), true),
            None => Released::default(),
        }
    }

    /// Fires every timer due at `now`: delayed evals and backoffs become
    /// ready, expired deliveries count as nacked.
    pub fn expire(&mut self, now: Instant) -> Expired {
        let mut out = Expired::default();
        while let Some((at, id)) = self.timers.first().cloned() {
            if at > now {
                break;
            }
            self.timers.remove(&(at, id.clone()));
            let Some(entry) = self.entries.get(&id) else {
                continue;
            };
            match entry.place {
                Place::Delayed(_) => self.admit(&id),
                Place::Backoff(_) => {
                    let eval = Arc::clone(&entry.eval);
                    self.insert_ready_key(&eval);
                    if let Some(entry) = self.entries.get_mut(&id) {
                        entry.place = Place::Ready;
                    }
                }
                Place::Unacked { deadline, .. } if deadline <= now => {
                    out.timed_out.push(id.clone());
                    match self.nack_unchecked(&id, now) {
                        Nacked::Requeued { .. } => {}
                        Nacked::Released(released) => out.canceled.extend(released.canceled),
                        Nacked::DeliveryLimit(eval) => out.failed.push(eval),
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// Counts of what the queues hold.
    pub fn stats(&self) -> QueueStats {
        let mut stats = QueueStats::default();
        for (scheduler, set) in &self.ready {
            stats
                .ready_by_scheduler
                .insert(scheduler.clone(), set.len() as u64);
            stats.ready += set.len() as u64;
        }
        for entry in self.entries.values() {
            let scheduler = &entry.eval.r#type;
            match entry.place {
                Place::Unacked { .. } => {
                    stats.unacked += 1;
                    count_one(&mut stats.unacked_by_scheduler, scheduler);
                }
                Place::Delayed(_) | Place::Backoff(_) => {
                    stats.delayed += 1;
                    count_one(&mut stats.delayed_by_scheduler, scheduler);
                }
                Place::Waiting => stats.pending_by_job += 1,
                Place::Failing => stats.failing += 1,
                Place::Ready => {}
            }
        }
        stats
    }

    /// Removes the eval from its queue or timer, leaving the entry.
    fn clear_place(&mut self, eval_id: &str) {
        let Some(entry) = self.entries.get(eval_id) else {
            return;
        };
        let eval = Arc::clone(&entry.eval);
        match entry.place.clone() {
            Place::Ready => self.remove_ready_key(&eval),
            Place::Waiting => {
                let job = job_key(&eval);
                if let Some(set) = self.waiting.get_mut(&job) {
                    set.remove(&wait_key(&eval));
                    if set.is_empty() {
                        self.waiting.remove(&job);
                    }
                }
            }
            Place::Delayed(at) | Place::Backoff(at) => {
                self.timers.remove(&(at, eval_id.to_string()));
            }
            Place::Unacked {
                token, deadline, ..
            } => {
                self.timers.remove(&(deadline, eval_id.to_string()));
                self.tokens.remove(&token);
            }
            Place::Failing => {}
        }
    }

    fn remove_entry(&mut self, eval_id: &str) -> Option<Entry> {
        self.clear_place(eval_id);
        self.entries.remove(eval_id)
    }

    /// Forgets an eval that was not processed; if it held its job, the next
    /// waiting eval gets the job and the others keep waiting.
    fn drop_entry(&mut self, eval_id: &str) {
        let Some(entry) = self.remove_entry(eval_id) else {
            return;
        };
        let job = job_key(&entry.eval);
        if self.slots.get(&job).is_some_and(|h| h == eval_id) {
            self.release(&job, false);
        }
    }

    /// Frees a job's slot: the top waiting eval (highest priority, then
    /// newest) becomes ready; with `cancel_older`, the rest are dropped and
    /// returned for canceling, as they are superseded by the eval just
    /// processed and the one promoted.
    fn release(&mut self, job: &JobKey, cancel_older: bool) -> Released {
        self.slots.remove(job);
        let mut released = Released::default();
        let Some(mut set) = self.waiting.remove(job) else {
            return released;
        };
        if let Some((_, _, top)) = set.pop_first()
            && let Some(entry) = self.entries.get(&top)
        {
            let eval = Arc::clone(&entry.eval);
            self.slots.insert(job.clone(), top.clone());
            self.insert_ready_key(&eval);
            if let Some(entry) = self.entries.get_mut(&top) {
                entry.place = Place::Ready;
            }
            released.promoted = Some(top);
        }
        if cancel_older {
            for (_, _, id) in set {
                if let Some(entry) = self.entries.remove(&id) {
                    released.canceled.push(entry.eval);
                }
            }
        } else if !set.is_empty() {
            self.waiting.insert(job.clone(), set);
        }
        released
    }
}

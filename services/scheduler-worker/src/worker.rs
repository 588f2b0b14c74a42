//! The worker loops of a replica: dequeue an evaluation, wait for the cache
//! to reach its wait revision, run the scheduler on a snapshot on a blocking
//! thread while heartbeating the delivery token, then nack it or ack it with
//! the next dequeue (one call to the broker per evaluation, not two). Pausing
//! stops dequeuing; evaluations in flight finish.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use caravan_model::now_unix_ns;
use caravan_proto::Evaluation;
use caravan_state::Informer;
use caravan_store::Store;
use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::budget::PlacementBudget;
use crate::clients::{ApplierClient, BrokerClient, Delivery};
use crate::config::Timing;
use crate::error::WorkerError;
use crate::metrics;
use crate::planner::{Tally, WorkerPlanner};
use crate::state::SnapshotState;

/// Dequeue errors are only logged after this long: leaders are still being
/// elected right after start.
const QUIET_START: Duration = Duration::from_secs(10);
/// How long an ack or nack may take once the shutdown grace is over; an
/// eval whose nack is lost is redelivered after the broker's nack timeout.
const LAST_CALL_AFTER_ABORT: Duration = Duration::from_secs(1);

/// Counters of a replica.
#[derive(Debug, Default)]
pub struct WorkerCounters {
    /// Evaluations processed and acked.
    pub acked: AtomicU64,
    /// Evaluations nacked.
    pub nacked: AtomicU64,
    /// Plans submitted.
    pub plans: AtomicU64,
}

/// What the worker loops of one replica share.
pub struct WorkerPool {
    pub(crate) broker: BrokerClient,
    pub(crate) applier: ApplierClient,
    pub(crate) informer: Arc<Informer>,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) schedulers: Vec<String>,
    pub(crate) timing: Timing,
    pub(crate) workers: usize,
    /// How much the loops schedule at once.
    budget: PlacementBudget,
    paused: watch::Sender<bool>,
    /// Cancelled on shutdown: no more dequeues.
    pub(crate) shutdown: CancellationToken,
    /// Cancelled when the shutdown grace is over: running evals give up.
    pub(crate) abort: CancellationToken,
    /// What the replica has done.
    pub counters: WorkerCounters,
    started: tokio::time::Instant,
}

impl std::fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerPool")
            .field("workers", &self.workers)
            .field("paused", &self.is_paused())
            .finish_non_exhaustive()
    }
}

impl WorkerPool {
    /// A pool of `workers` loops over `informer`, scheduling at most
    /// `large_evals` large evaluations at once.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        broker: BrokerClient,
        applier: ApplierClient,
        informer: Arc<Informer>,
        store: Arc<dyn Store>,
        schedulers: Vec<String>,
        timing: Timing,
        workers: usize,
        large_evals: usize,
        paused: bool,
        shutdown: CancellationToken,
    ) -> Self {
        WorkerPool {
            broker,
            applier,
            informer,
            store,
            schedulers,
            timing,
            workers,
            budget: PlacementBudget::new(large_evals),
            paused: watch::Sender::new(paused),
            shutdown,
            abort: CancellationToken::new(),
            counters: WorkerCounters::default(),
            started: tokio::time::Instant::now(),
        }
    }

    /// Pauses or resumes dequeuing.
    pub fn set_paused(&self, paused: bool) {
        self.paused.send_replace(paused);
        tracing::info!(paused, "worker pause changed");
    }

    /// Whether dequeuing is paused.
    pub fn is_paused(&self) -> bool {
        *self.paused.borrow()
    }

    /// Number of worker loops.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// The revision the replica's cache has reached.
    pub fn cache_revision(&self) -> i64 {
        self.informer.revision()
    }

    /// Evaluations processed (acked or nacked).
    pub fn processed(&self) -> u64 {
        self.counters.acked.load(Ordering::Relaxed) + self.counters.nacked.load(Ordering::Relaxed)
    }

    /// Waits while paused; false once shutting down.
    async fn wait_unpaused(&self) -> bool {
        let mut rx = self.paused.subscribe();
        loop {
            if self.shutdown.is_cancelled() {
                return false;
            }
            if !*rx.borrow_and_update() {
                return true;
            }
            tokio::select! {
                changed = rx.changed() => if changed.is_err() { return false },
                _ = self.shutdown.cancelled() => return false,
            }
        }
    }

    /// One worker loop, until shutdown. A delivery it finished is acked by
    /// its next dequeue, in the same call; when no dequeue follows at once
    /// (paused, shutting down) it is acked on its own.
    pub(crate) async fn run_worker(self: Arc<Self>, index: usize) {
        let mut pause = Duration::from_millis(20);
        let mut finished: Option<Delivery> = None;
        loop {
            if self.is_paused() || self.shutdown.is_cancelled() {
                self.ack_alone(finished.take(), false).await;
            }
            if !self.wait_unpaused().await {
                break;
            }
            let dequeuing = std::time::Instant::now();
            let acking = finished.take();
            let polled = tokio::select! {
                r = self.broker.dequeue(&self.schedulers, self.timing.dequeue_timeout, acking.as_ref()) => r,
                _ = self.shutdown.cancelled() => {
                    // The poll may or may not have reached the broker:
                    // the ack goes again, and a refusal means it had.
                    self.ack_alone(acking, true).await;
                    break;
                }
            };
            let result = match &polled {
                Ok(r) if r.eval.is_some() => "eval",
                Ok(_) => "empty",
                Err(_) => "error",
            };
            metrics::dequeued(result, dequeuing.elapsed());
            let resp = match polled {
                Ok(r) => r,
                Err(err) => {
                    if let Some(d) = &acking {
                        tracing::warn!(worker = index, eval = %d.eval_id, %err, "ack with dequeue failed; the broker's nack timeout will redeliver");
                    } else if self.started.elapsed() > QUIET_START {
                        tracing::warn!(worker = index, %err, "dequeue failed");
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(pause) => {}
                        _ = self.shutdown.cancelled() => break,
                    }
                    pause = (pause * 2).min(Duration::from_secs(2));
                    continue;
                }
            };
            if let Some(d) = &acking {
                if resp.ack_error.is_empty() {
                    tracing::debug!(eval = %d.eval_id, "eval acked with the next dequeue");
                } else {
                    tracing::warn!(eval = %d.eval_id, err = %resp.ack_error, "ack refused; the broker's nack timeout will redeliver");
                }
            }
            pause = Duration::from_millis(20);
            let Some(eval) = resp.eval else { continue };
            let mut delivery = Delivery {
                eval_id: eval.id.clone(),
                token: resp.token,
                written_revision: 0,
            };
            if self.process(eval, &mut delivery, resp.wait_revision).await {
                finished = Some(delivery);
            }
        }
        self.ack_alone(finished, false).await;
    }

    /// Processes one dequeued evaluation, noting in `delivery` the revision
    /// its writes reached; true when it is to be acked, false when it was
    /// nacked.
    async fn process(&self, eval: Evaluation, delivery: &mut Delivery, wait_revision: i64) -> bool {
        let span = tracing::info_span!(
            "eval",
            id = %eval.id,
            r#type = %eval.r#type,
            job = %eval.job_id,
            triggered_by = %eval.triggered_by,
            plans = tracing::field::Empty,
            placements = tracing::field::Empty,
            preemptions = tracing::field::Empty,
            blocked = tracing::field::Empty,
        );
        // The eval's trace: the request (or launch, or step) that created it.
        caravan_runtime::trace::follow(&span, &eval.trace_context);
        let (ok, written) = self
            .schedule(eval, &delivery.token, wait_revision)
            .instrument(span)
            .await;
        delivery.written_revision = written;
        if ok {
            self.counters.acked.fetch_add(1, Ordering::Relaxed);
        } else {
            self.nack(delivery).await;
        }
        ok
    }

    /// Schedules one evaluation: whether it ran to the end, and the highest
    /// revision its writes committed at (0 for none).
    async fn schedule(&self, eval: Evaluation, token: &str, wait_revision: i64) -> (bool, i64) {
        let started = tokio::time::Instant::now();
        let wanted = wait_revision.max(eval.modify_revision);
        let snapshot = match self
            .informer
            .wait_for_revision(wanted, self.timing.wait_revision)
            .instrument(tracing::info_span!("snapshot.wait", revision = wanted))
            .await
        {
            Ok(s) => s,
            Err(err) => {
                tracing::warn!(%err, "cache did not reach the eval's revision; nacking");
                return (false, 0);
            }
        };
        metrics::cache_waited(started.elapsed());
        let scheduler = eval.r#type.clone();
        let heartbeat = self.heartbeat(eval.id.clone(), token.to_string());
        // The eval's share of the budget; then a snapshot of the moment it
        // was granted, not of the moment it was asked for.
        let weight =
            PlacementBudget::weight(snapshot.job(&eval.namespace, &eval.job_id).map(|j| &**j));
        let budgeting = std::time::Instant::now();
        let share = tokio::select! {
            share = self.budget.acquire(weight).instrument(tracing::info_span!("budget.wait", weight)) => share,
            // Past the shutdown grace an eval still waiting is handed back.
            _ = self.abort.cancelled() => None,
        };
        if share.is_none() {
            heartbeat.cancel();
            tracing::debug!("shutting down before the eval's share of the budget came; nacking");
            return (false, 0);
        }
        metrics::budget_waited(budgeting.elapsed());
        let snapshot = self.informer.snapshot();
        let waited = started.elapsed();
        let mut planner = WorkerPlanner {
            handle: Handle::current(),
            broker: self.broker.clone(),
            applier: self.applier.clone(),
            informer: self.informer.clone(),
            store: self.store.clone(),
            token: token.to_string(),
            snapshot_revision: snapshot.revision(),
            wait_revision: self.timing.wait_revision,
            abort: self.abort.clone(),
            tally: Tally::default(),
        };
        let state = SnapshotState::new(snapshot);
        let now = now_unix_ns();
        let scheduling =
            tracing::info_span!("schedule", snapshot_revision = planner.snapshot_revision);
        let ran = tokio::task::spawn_blocking(move || {
            // Entered on the scheduler's thread: the planner's calls to the
            // applier and the broker run inside it and carry it on.
            let _entered = scheduling.enter();
            let outcome = caravan_scheduler::process(&eval, state, &mut planner, now);
            (outcome, planner.tally)
        })
        .await;
        heartbeat.cancel();
        let scheduled = started.elapsed() - waited;
        let (ok, written) = match ran {
            Ok((Ok(()), tally)) => {
                tally.record(&self.counters, &tracing::Span::current());
                (true, tally.written_revision)
            }
            Ok((Err(err), tally)) => {
                tally.record(&self.counters, &tracing::Span::current());
                tracing::warn!(%err, "scheduling failed; nacking");
                (false, tally.written_revision)
            }
            Err(err) => {
                tracing::error!(%err, "the scheduler thread failed; nacking");
                (false, 0)
            }
        };
        metrics::invoked(&scheduler, ok, scheduled);
        tracing::debug!(
            wait_ms = waited.as_secs_f64() * 1e3,
            schedule_ms = scheduled.as_secs_f64() * 1e3,
            total_ms = started.elapsed().as_secs_f64() * 1e3,
            "eval timings"
        );
        (ok, written)
    }

    /// Hands a delivery back for redelivery.
    async fn nack(&self, delivery: &Delivery) {
        self.counters.nacked.fetch_add(1, Ordering::Relaxed);
        let sent = self.unless_aborted(self.broker.nack(delivery)).await;
        match sent {
            Ok(()) => tracing::debug!(eval = %delivery.eval_id, "eval nacked"),
            Err(err) => {
                tracing::warn!(eval = %delivery.eval_id, %err, "nack failed; the broker's nack timeout will redeliver")
            }
        }
    }

    /// Acks a finished delivery that no dequeue will carry. After a dequeue
    /// carrying it was cut short (`maybe_sent`), a refusal of the token
    /// means that dequeue's ack had arrived.
    async fn ack_alone(&self, delivery: Option<Delivery>, maybe_sent: bool) {
        let Some(d) = delivery else { return };
        match self.unless_aborted(self.broker.ack(&d)).await {
            Ok(()) => tracing::debug!(eval = %d.eval_id, "eval acked"),
            Err(WorkerError::Broker(status))
                if maybe_sent
                    && matches!(
                        status.code(),
                        tonic::Code::FailedPrecondition | tonic::Code::PermissionDenied
                    ) =>
            {
                tracing::debug!(eval = %d.eval_id, "eval already acked by its dequeue");
            }
            Err(err) => {
                tracing::warn!(eval = %d.eval_id, %err, "ack failed; the broker's nack timeout will redeliver")
            }
        }
    }

    /// Awaits a call to the broker; once the shutdown grace is over it gets
    /// [`LAST_CALL_AFTER_ABORT`] more, not the RPC timeout and leader wait
    /// (a broker that cannot reach etcd would hold the exit for minutes).
    async fn unless_aborted<T>(
        &self,
        call: impl Future<Output = Result<T, WorkerError>>,
    ) -> Result<T, WorkerError> {
        caravan_runtime::shutdown::within_grace(
            "an ack or nack to the broker",
            call,
            &self.abort,
            LAST_CALL_AFTER_ABORT,
        )
        .await
        .unwrap_or(Err(WorkerError::ShuttingDown))
    }

    /// Resets the eval's nack timer at the broker while it runs.
    fn heartbeat(&self, eval_id: String, token: String) -> CancellationToken {
        let stop = CancellationToken::new();
        let (broker, every, stopped) = (self.broker.clone(), self.timing.heartbeat, stop.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = stopped.cancelled() => return,
                }
                if let Err(err) = broker.outstanding_reset(&eval_id, &token).await {
                    tracing::warn!(eval = %eval_id, %err, "token heartbeat failed");
                }
            }
        });
        stop
    }
}

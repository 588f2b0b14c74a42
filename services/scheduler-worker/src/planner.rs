//! The scheduler's [`Planner`] in a worker: plans go to the plan applier,
//! eval writes to the eval broker with the delivery token (save the
//! completion a fully committed plan writes with itself), and after a
//! partial commit the worker's cache is brought to the refresh revision and
//! a fresh snapshot handed back. The scheduler runs on a blocking thread;
//! each call blocks on the async client through the runtime handle.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use caravan_proto::{Evaluation, Plan, PlanResult};
use caravan_scheduler::{PlanOutcome, Planner, PlannerError};
use caravan_state::Informer;
use caravan_store::Store;
use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

use crate::clients::{ApplierClient, BrokerClient, Submitted};
use crate::error::WorkerError;
use crate::state::SnapshotState;
use crate::worker::WorkerCounters;

/// The planner of one evaluation's run.
pub struct WorkerPlanner {
    pub(crate) handle: Handle,
    pub(crate) broker: BrokerClient,
    pub(crate) applier: ApplierClient,
    pub(crate) informer: Arc<Informer>,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) token: String,
    /// The revision of the snapshot the eval was first scheduled on; eval
    /// writes carry it as Nomad's SnapshotIndex.
    pub(crate) snapshot_revision: i64,
    pub(crate) wait_revision: Duration,
    /// Cancelled once the shutdown grace is over: calls fail and the eval is
    /// nacked.
    pub(crate) abort: CancellationToken,
    /// What the run submitted, for the replica's counters and the eval's span.
    pub(crate) tally: Tally,
}

/// What one evaluation's run submitted.
#[derive(Debug, Default, Clone, Copy)]
pub struct Tally {
    /// Plans submitted.
    pub plans: u64,
    /// Allocations the plans placed or updated.
    pub placements: u64,
    /// Allocations the plans evicted to make room.
    pub preemptions: u64,
    /// Blocked evaluations created for what did not fit.
    pub blocked: u64,
    /// The highest revision its plans and eval writes committed at (or,
    /// after an unknown outcome, that the store had reached); 0 for none.
    pub written_revision: i64,
}

impl Tally {
    /// Adds the run to the replica's counters and to the eval's `span`.
    pub(crate) fn record(self, counters: &WorkerCounters, span: &tracing::Span) {
        counters.plans.fetch_add(self.plans, Ordering::Relaxed);
        span.record("plans", self.plans);
        span.record("placements", self.placements);
        span.record("preemptions", self.preemptions);
        span.record("blocked", self.blocked);
    }

    /// Adds `plan`; returns its placements.
    fn add_plan(&mut self, plan: &Plan) -> u64 {
        let placements = count(&plan.node_allocation);
        self.plans += 1;
        self.placements += placements;
        self.preemptions += count(&plan.node_preemptions);
        placements
    }
}

fn count(lists: &std::collections::BTreeMap<String, caravan_proto::AllocList>) -> u64 {
    lists.values().map(|l| l.allocs.len() as u64).sum()
}

impl WorkerPlanner {
    /// Notes that a write committed at `revision`.
    fn wrote(&mut self, revision: i64) {
        self.tally.written_revision = self.tally.written_revision.max(revision);
    }

    fn run<T>(
        &self,
        fut: impl std::future::Future<Output = Result<T, WorkerError>>,
    ) -> Result<T, PlannerError> {
        if self.abort.is_cancelled() {
            return Err(PlannerError(Box::new(WorkerError::ShuttingDown)));
        }
        // Once the grace is over, a call still waiting (say on a leader that
        // cannot reach etcd, for up to the RPC timeout and the leader wait)
        // must not keep this thread, and so the process, alive.
        let abort = self.abort.clone();
        self.handle
            .block_on(async {
                tokio::select! {
                    out = fut => out,
                    () = abort.cancelled() => Err(WorkerError::ShuttingDown),
                }
            })
            .map_err(|e| PlannerError(Box::new(e)))
    }

    fn stamp(&self, mut eval: Evaluation) -> Evaluation {
        if eval.snapshot_revision == 0 {
            eval.snapshot_revision = self.snapshot_revision;
        }
        // Follow-up and blocked evals continue the trace of this run.
        if eval.trace_context.is_empty() {
            eval.trace_context = caravan_runtime::trace::capture();
        }
        eval
    }

    async fn refreshed(&self, revision: i64) -> Result<SnapshotState, WorkerError> {
        let snapshot = self
            .informer
            .wait_for_revision(revision, self.wait_revision)
            .await?;
        Ok(SnapshotState::new(snapshot))
    }

    async fn submit(&self, plan: Plan) -> Result<PlanOutcome<SnapshotState>, WorkerError> {
        let eval_id = plan.eval_id.clone();
        let sent = std::time::Instant::now();
        let placements: usize = plan.node_allocation.values().map(|l| l.allocs.len()).sum();
        let submitted = self.applier.submit(plan).await?;
        tracing::debug!(
            eval = %eval_id,
            placements,
            submit_ms = sent.elapsed().as_secs_f64() * 1e3,
            "plan answered"
        );
        match submitted {
            Submitted::Result(result) => {
                let refreshed = if result.refresh_revision > 0 {
                    tracing::debug!(
                        eval = %eval_id,
                        revision = result.refresh_revision,
                        rejected = result.rejected_nodes.len(),
                        "partial commit; refreshing"
                    );
                    Some(self.refreshed(result.refresh_revision).await?)
                } else {
                    None
                };
                Ok(PlanOutcome {
                    result: *result,
                    refreshed,
                })
            }
            Submitted::Unknown(status) => {
                tracing::warn!(eval = %eval_id, %status, "plan outcome unknown; refreshing to plan again");
                self.applier.await_leader().await?;
                let current = self.store.current_revision().await?;
                Ok(PlanOutcome {
                    result: PlanResult::default(),
                    refreshed: Some(self.refreshed(current).await?),
                })
            }
        }
    }
}

impl Planner for WorkerPlanner {
    type State = SnapshotState;

    fn submit_plan(&mut self, mut plan: Plan) -> Result<PlanOutcome<SnapshotState>, PlannerError> {
        plan.eval_token = self.token.clone();
        let placements = self.tally.add_plan(&plan);
        let span =
            tracing::info_span!("plan.submit", placements, stops = count(&plan.node_update),);
        let _entered = span.enter();
        // The client's start of each placed alloc joins this trace.
        let context = caravan_runtime::trace::capture();
        if !context.is_empty() {
            for list in plan.node_allocation.values_mut() {
                for alloc in &mut list.allocs {
                    alloc.trace_context = Some(Box::new(caravan_proto::TraceContext {
                        fields: context.clone(),
                    }));
                }
            }
            for eval in plan.evals.iter_mut().filter(|e| e.trace_context.is_empty()) {
                eval.trace_context.clone_from(&context);
            }
        }
        let outcome = self.run(self.submit(plan))?;
        let result = &outcome.result;
        self.wrote(result.alloc_revision.max(result.eval_revision));
        if let Some(refreshed) = &outcome.refreshed {
            // After an unknown outcome the plan may have committed at any
            // revision up to the one refreshed to.
            self.wrote(refreshed.snapshot().revision());
        }
        Ok(outcome)
    }

    fn submit_plan_completing(
        &mut self,
        mut plan: Plan,
        completion: Evaluation,
    ) -> Result<PlanOutcome<SnapshotState>, PlannerError> {
        // The applier guards the write with the revision the eval was
        // delivered at; without one the broker writes it, as before.
        if completion.modify_revision > 0 {
            // Stamped as an update through the broker would be, so the
            // final eval is the same whichever path writes it.
            plan.eval_completion = Some(self.stamp(completion));
        }
        self.submit_plan(plan)
    }

    fn create_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError> {
        if eval.status() == caravan_proto::EvalStatus::Blocked {
            self.tally.blocked += 1;
        }
        let eval = self.stamp(eval);
        let revision = self.run(self.broker.create_eval(eval, &self.token))?;
        self.wrote(revision);
        Ok(())
    }

    fn update_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError> {
        let eval = self.stamp(eval);
        let revision = self.run(self.broker.update_eval(eval, &self.token))?;
        self.wrote(revision);
        Ok(())
    }

    fn reblock_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError> {
        let eval = self.stamp(eval);
        let revision = self.run(self.broker.reblock_eval(eval, &self.token))?;
        self.wrote(revision);
        Ok(())
    }
}

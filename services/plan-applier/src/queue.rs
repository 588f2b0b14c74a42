//! The plan queue: plans waiting for the applier, highest priority first,
//! then in arrival order; each with the channel its answer goes back on.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;

use caravan_metrics::IntGauge;
use caravan_proto::{Plan, PlanResult};
use parking_lot::Mutex;
use tokio::sync::{Notify, oneshot};

use crate::error::ApplierError;
use crate::metrics;

/// The answer to one plan.
pub(crate) type PlanAnswer = Result<PlanResult, ApplierError>;

/// A plan waiting in the queue.
pub(crate) struct PendingPlan {
    pub(crate) plan: Arc<Plan>,
    pub(crate) seq: u64,
    /// The submitter's request span: verification and commit are its
    /// children, so they join the evaluation's trace.
    pub(crate) span: tracing::Span,
    respond: oneshot::Sender<PlanAnswer>,
}

impl PendingPlan {
    /// Answers the submitter (who may have gone away; then nobody listens).
    pub(crate) fn respond(self, answer: PlanAnswer) {
        if answer.is_err() {
            metrics::failed();
        }
        let _ignored_if_gone = self.respond.send(answer);
    }
}

impl PartialEq for PendingPlan {
    fn eq(&self, other: &Self) -> bool {
        self.seq == other.seq
    }
}

impl Eq for PendingPlan {}

impl PartialOrd for PendingPlan {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PendingPlan {
    /// The max-heap's top is the highest priority, then the oldest.
    fn cmp(&self, other: &Self) -> Ordering {
        self.plan
            .priority
            .cmp(&other.plan.priority)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

#[derive(Default)]
struct QueueState {
    heap: BinaryHeap<PendingPlan>,
    closed: bool,
    next_seq: u64,
}

/// Plans waiting for one leadership term of the applier.
pub(crate) struct PlanQueue {
    state: Mutex<QueueState>,
    /// One consumer: a stored permit covers a push made before it waits.
    ready: Notify,
    /// Where the number of waiting plans is published.
    depth: IntGauge,
}

impl Default for PlanQueue {
    fn default() -> Self {
        PlanQueue::with_depth_gauge(metrics::queue_depth_gauge())
    }
}

impl PlanQueue {
    /// An open, empty queue publishing its depth as `caravan_plan_queue_depth`.
    pub(crate) fn new() -> Self {
        PlanQueue::default()
    }

    /// An open, empty queue publishing its depth to `depth`.
    fn with_depth_gauge(depth: IntGauge) -> Self {
        PlanQueue {
            state: Mutex::default(),
            ready: Notify::new(),
            depth,
        }
    }

    fn publish_depth(&self, depth: usize) {
        self.depth.set(i64::try_from(depth).unwrap_or(i64::MAX));
    }

    /// Queues a plan; the receiver gets its answer. A closed queue (the term
    /// ended) refuses it.
    pub(crate) fn push(&self, plan: Plan) -> Result<oneshot::Receiver<PlanAnswer>, ApplierError> {
        let (tx, rx) = oneshot::channel();
        {
            let mut state = self.state.lock();
            if state.closed {
                return Err(ApplierError::NotCommitted);
            }
            state.next_seq += 1;
            let seq = state.next_seq;
            state.heap.push(PendingPlan {
                plan: Arc::new(plan),
                seq,
                span: tracing::Span::current(),
                respond: tx,
            });
            self.publish_depth(state.heap.len());
        }
        self.ready.notify_one();
        Ok(rx)
    }

    /// The next plan, waiting for one; `None` once closed.
    pub(crate) async fn pop(&self) -> Option<PendingPlan> {
        loop {
            {
                let mut state = self.state.lock();
                if state.closed {
                    return None;
                }
                if let Some(p) = state.heap.pop() {
                    self.publish_depth(state.heap.len());
                    return Some(p);
                }
            }
            self.ready.notified().await;
        }
    }

    /// Closes the queue and fails every plan still in it with `error()`.
    pub(crate) fn close(&self, error: impl Fn() -> ApplierError) {
        let drained: Vec<PendingPlan> = {
            let mut state = self.state.lock();
            state.closed = true;
            // A replica that is not leader holds no plans: its gauge says so.
            self.publish_depth(0);
            std::mem::take(&mut state.heap).into_vec()
        };
        for p in drained {
            p.respond(Err(error()));
        }
        self.ready.notify_one();
    }

    /// Plans waiting.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.state.lock().heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(eval: &str, priority: i32) -> Plan {
        Plan {
            eval_id: eval.into(),
            priority,
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn priority_first_then_arrival() {
        let q = PlanQueue::new();
        let _a = q.push(plan("low", 10)).unwrap();
        let _b = q.push(plan("high-1", 90)).unwrap();
        let _c = q.push(plan("mid", 50)).unwrap();
        let _d = q.push(plan("high-2", 90)).unwrap();
        assert_eq!(q.len(), 4);
        let mut order = Vec::new();
        for _ in 0..4 {
            order.push(q.pop().await.unwrap().plan.eval_id.clone());
        }
        assert_eq!(order, vec!["high-1", "high-2", "mid", "low"]);
    }

    #[tokio::test]
    async fn close_fails_waiting_plans_and_refuses_new_ones() {
        let q = Arc::new(PlanQueue::new());
        let rx = q.push(plan("a", 50)).unwrap();
        q.close(|| ApplierError::NotCommitted);
        assert!(matches!(rx.await.unwrap(), Err(ApplierError::NotCommitted)));
        assert!(q.push(plan("b", 50)).is_err());
        assert!(q.pop().await.is_none());
    }

    #[tokio::test]
    async fn the_depth_gauge_follows_the_queue_and_drops_to_zero_when_the_term_ends() {
        let gauge = IntGauge::new("depth", "plans waiting").unwrap();
        let q = PlanQueue::with_depth_gauge(gauge.clone());
        let _a = q.push(plan("a", 50)).unwrap();
        let _b = q.push(plan("b", 50)).unwrap();
        assert_eq!(gauge.get(), 2);
        let _popped = q.pop().await.unwrap();
        assert_eq!(gauge.get(), 1);
        // A replica that lost its term holds nothing: its gauge must not
        // keep reporting the plans it failed back to their submitters.
        q.close(|| ApplierError::NotCommitted);
        assert_eq!(gauge.get(), 0);
    }

    #[tokio::test]
    async fn a_waiting_pop_wakes_on_push() {
        let q = Arc::new(PlanQueue::new());
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.pop().await.map(|p| p.plan.eval_id.clone()) }
        });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let _rx = q.push(plan("x", 50)).unwrap();
        assert_eq!(waiter.await.unwrap().as_deref(), Some("x"));
    }
}

//! Scheduler workers end to end: a fake eval broker, the real plan applier
//! in-process, against the embedded store and a real etcd.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use caravan_plan_applier::{ApplierError, PlanApplier, PlanApplierConfig, Settings, TokenCheck};
use caravan_proto::plan_applier_service_server::{PlanApplierService, PlanApplierServiceServer};
use caravan_proto::{
    AllocDesiredStatus, EvalStatus, Plan, SubmitPlanRequest, SubmitPlanResponse,
    WorkerStatusRequest,
};
use caravan_store::{Leadership, Store, election_name};
use caravan_testkit::wait::PATIENCE;
use parking_lot::Mutex;
use support::*;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

caravan_testkit::backend_cases!(store_and_prefix => crate;
    a_pending_eval_places_its_allocations_and_completes,
    a_stored_eval_is_completed_by_its_plan_not_by_an_update,
    a_job_that_does_not_fit_gets_a_blocked_eval,
    a_partial_commit_makes_the_worker_refresh_and_plan_again,
    an_unknown_plan_outcome_makes_the_worker_refresh_and_plan_again,
    a_plan_refused_before_any_write_is_resubmitted_as_it_was,
    a_paused_worker_dequeues_nothing,
);

async fn a_pending_eval_places_its_allocations_and_completes(
    store: Arc<dyn Store>,
    prefix: String,
) {
    let broker = start_broker(&store, &prefix).await;
    let job = job("web", 3, 500);
    seed(
        &store,
        &prefix,
        &[node("n1", 4000, 8192), node("n2", 4000, 8192)],
        &job,
    )
    .await;
    let applier = start_applier(&store, &prefix).await;
    let (worker, pool) = start_worker(&store, &prefix, 2).await;
    broker.broker.enqueue(eval("e1", &job));
    wait_for(&broker.broker, "the eval to be acked", |l| {
        l.acked.contains(&"e1".to_string())
    })
    .await;
    let placed = allocs(&store, &prefix).await;
    assert_eq!(placed.len(), 3, "{placed:?}");
    let names: BTreeSet<&str> = placed.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names.len(), 3, "no alloc placed twice");
    for a in &placed {
        assert_eq!(a.desired_status(), AllocDesiredStatus::Run);
        assert_eq!(a.eval_id, "e1");
        assert!(["n1", "n2"].contains(&a.node_id.as_str()));
    }
    {
        let log = broker.broker.log.lock();
        let update = log.updated.last().expect("the eval was updated");
        assert_eq!(update.id, "e1");
        assert_eq!(update.status(), EvalStatus::Complete);
        assert!(update.snapshot_revision > 0);
        assert!(log.nacked.is_empty());
        assert!(log.created.is_empty());
        assert_eq!(log.ack_calls, 0, "acked by the worker's next dequeue");
    }
    caravan_testkit::wait::until("the pool to count the eval", PATIENCE, || {
        pool.processed() == 1
    })
    .await;
    worker.shutdown().await;
    applier.shutdown().await;
}

/// An eval stored as the api-gateway writes it: the plan that places its
/// allocations completes it in the same transaction, and the worker sends
/// no separate update.
async fn a_stored_eval_is_completed_by_its_plan_not_by_an_update(
    store: Arc<dyn Store>,
    prefix: String,
) {
    let broker = start_broker(&store, &prefix).await;
    let job = job("web", 3, 500);
    seed(
        &store,
        &prefix,
        &[node("n1", 4000, 8192), node("n2", 4000, 8192)],
        &job,
    )
    .await;
    let mut delivered = eval("e1", &job);
    let key = caravan_state::Keyspace::new(&prefix).eval("e1");
    let rev = store
        .put(&key, &caravan_state::encode(&delivered), 0)
        .await
        .unwrap();
    delivered.create_revision = rev;
    delivered.modify_revision = rev;
    let applier = start_applier(&store, &prefix).await;
    let (worker, _pool) = start_worker(&store, &prefix, 1).await;
    broker.broker.enqueue(delivered);
    wait_for(&broker.broker, "the eval to be acked", |l| {
        l.acked.contains(&"e1".to_string())
    })
    .await;
    {
        let log = broker.broker.log.lock();
        assert!(log.updated.is_empty(), "{:?}", log.updated);
        assert!(log.nacked.is_empty());
    }
    let kv = store.get(&key).await.unwrap().unwrap();
    let stored: caravan_proto::Evaluation = caravan_state::decode(&kv).unwrap();
    assert_eq!(stored.status(), EvalStatus::Complete);
    assert_eq!(stored.queued_allocations.get("web"), Some(&0));
    assert!(stored.snapshot_revision >= rev);
    let placed = allocs(&store, &prefix).await;
    assert_eq!(placed.len(), 3);
    for a in &placed {
        assert_eq!(a.modify_revision, stored.modify_revision, "one write");
    }
    worker.shutdown().await;
    applier.shutdown().await;
}

async fn a_job_that_does_not_fit_gets_a_blocked_eval(store: Arc<dyn Store>, prefix: String) {
    let broker = start_broker(&store, &prefix).await;
    let job = job("huge", 1, 10_000);
    seed(&store, &prefix, &[node("n1", 4000, 8192)], &job).await;
    let applier = start_applier(&store, &prefix).await;
    let (worker, _pool) = start_worker(&store, &prefix, 1).await;
    broker.broker.enqueue(eval("e1", &job));
    wait_for(&broker.broker, "the eval to be acked", |l| {
        l.acked.contains(&"e1".to_string())
    })
    .await;
    assert!(allocs(&store, &prefix).await.is_empty());
    {
        let log = broker.broker.log.lock();
        let blocked = log.created.first().expect("a blocked eval was created");
        assert_eq!(blocked.status(), EvalStatus::Blocked);
        assert_eq!(blocked.previous_eval, "e1");
        assert_eq!(blocked.job_id, "huge");
        let update = log.updated.last().unwrap();
        assert_eq!(update.status(), EvalStatus::Complete);
        assert_eq!(update.blocked_eval, blocked.id);
        assert!(update.failed_tg_allocs.contains_key("web"));
    }
    worker.shutdown().await;
    applier.shutdown().await;
}

/// Trusts every token (the broker is checked elsewhere).
struct AnyToken;

#[async_trait::async_trait]
impl TokenCheck for AnyToken {
    async fn check(&self, _: &str, _: &str) -> Result<(), ApplierError> {
        Ok(())
    }
}

/// More refusals in a row than the service scheduler's plan attempts (5), so
/// counting them as attempts would fail the eval.
const NOT_APPLIED_REFUSALS: usize = 6;

/// How [`RefusesOnce`] fails the first plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Commit all but the first node (a partial commit).
    RefuseNode,
    /// UNAVAILABLE with nothing to say whether it committed.
    Unknown,
    /// UNAVAILABLE, marked as refused before anything was written, for the
    /// first [`NOT_APPLIED_REFUSALS`] submissions.
    NotApplied,
}

/// The real applier, except that the first plan goes wrong once.
struct RefusesOnce {
    inner: Arc<PlanApplier>,
    store: Arc<dyn Store>,
    refused: AtomicBool,
    /// How the first plan goes wrong.
    fault: Fault,
    /// Plans refused so far under [`Fault::NotApplied`].
    not_applied: AtomicUsize,
    plans: Arc<Mutex<Vec<(Plan, caravan_proto::PlanResult)>>>,
}

#[async_trait::async_trait]
impl PlanApplierService for RefusesOnce {
    async fn submit_plan(
        &self,
        req: Request<SubmitPlanRequest>,
    ) -> Result<Response<SubmitPlanResponse>, Status> {
        let plan = req.into_inner().plan.unwrap();
        if self.fault == Fault::NotApplied
            && self.not_applied.fetch_add(1, Ordering::SeqCst) < NOT_APPLIED_REFUSALS
        {
            self.plans
                .lock()
                .push((plan, caravan_proto::PlanResult::default()));
            return Err(caravan_runtime::status::unavailable_not_applied(
                "plan-applier: eval broker unavailable",
            ));
        }
        if self.fault == Fault::Unknown && !self.refused.swap(true, Ordering::SeqCst) {
            self.plans
                .lock()
                .push((plan, caravan_proto::PlanResult::default()));
            return Err(Status::unavailable(
                "plan-applier: transport error after sending",
            ));
        }
        let mut forwarded = plan.clone();
        let refused_node =
            if self.fault != Fault::RefuseNode || self.refused.swap(true, Ordering::SeqCst) {
                None
            } else {
                let first = forwarded.node_allocation.keys().next().cloned();
                if let Some(n) = &first {
                    forwarded.node_allocation.remove(n);
                }
                first
            };
        let mut result = self.inner.submit(forwarded).await.map_err(Status::from)?;
        if let Some(n) = refused_node {
            result.rejected_nodes.push(n.clone());
            result
                .rejection_reasons
                .insert(n, "cpu exhausted (injected)".into());
            result.refresh_revision = result
                .alloc_revision
                .max(self.store.current_revision().await.unwrap());
        }
        self.plans.lock().push((plan, result.clone()));
        Ok(Response::new(SubmitPlanResponse {
            result: Some(result),
        }))
    }
}

/// Runs a job of 3 on 2 nodes through a worker and an applier that goes
/// wrong once; returns the plans it saw with their results.
async fn through_a_faulty_applier(
    store: Arc<dyn Store>,
    prefix: String,
    fault: Fault,
) -> Vec<(Plan, caravan_proto::PlanResult)> {
    let broker = start_broker(&store, &prefix).await;
    let job = job("web", 3, 500);
    seed(
        &store,
        &prefix,
        &[node("n1", 4000, 8192), node("n2", 4000, 8192)],
        &job,
    )
    .await;
    let inner = Arc::new(PlanApplier::new(
        store.clone(),
        &prefix,
        Arc::new(AnyToken),
        Settings::from(&PlanApplierConfig::default()),
    ));
    let plans = Arc::new(Mutex::new(Vec::new()));
    let stop = CancellationToken::new();
    let router =
        caravan_runtime::grpc::server().add_service(PlanApplierServiceServer::new(RefusesOnce {
            inner: inner.clone(),
            store: store.clone(),
            refused: AtomicBool::new(false),
            fault,
            not_applied: AtomicUsize::new(0),
            plans: plans.clone(),
        }));
    let addr = serve_router(router, stop.clone()).await;
    let leadership = Arc::new(
        Leadership::campaign(
            store.clone(),
            &election_name(&prefix, caravan_runtime::names::PLAN_APPLIER),
            &addr,
            Duration::from_secs(10),
        )
        .await
        .unwrap(),
    );
    let lead = tokio::spawn({
        let (inner, stop) = (inner.clone(), stop.clone());
        async move { inner.lead(leadership, stop).await }
    });
    caravan_testkit::wait::until("the applier to lead", PATIENCE, || inner.is_leading()).await;
    let (worker, _pool) = start_worker(&store, &prefix, 1).await;
    broker.broker.enqueue(eval("e1", &job));
    wait_for(&broker.broker, "the eval to be acked", |l| {
        l.acked.contains(&"e1".to_string())
    })
    .await;
    let seen = plans.lock().clone();
    let placed = allocs(&store, &prefix).await;
    assert_eq!(placed.len(), 3);
    let names: BTreeSet<&str> = placed.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names.len(), 3, "no alloc placed twice");
    {
        let log = broker.broker.log.lock();
        assert_eq!(log.updated.last().unwrap().status(), EvalStatus::Complete);
        assert!(log.nacked.is_empty());
    }
    worker.shutdown().await;
    stop.cancel();
    lead.await.unwrap();
    seen
}

async fn a_partial_commit_makes_the_worker_refresh_and_plan_again(
    store: Arc<dyn Store>,
    prefix: String,
) {
    let seen = through_a_faulty_applier(store, prefix, Fault::RefuseNode).await;
    assert_eq!(seen.len(), 2, "one partial commit, one retry: {seen:?}");
    let (first_plan, first) = &seen[0];
    let (second_plan, second) = &seen[1];
    assert_eq!(first.rejected_nodes.len(), 1);
    assert!(
        second_plan.snapshot_revision >= first.refresh_revision,
        "the retry was planned on the refreshed state"
    );
    assert!(second.rejected_nodes.is_empty());
    let refused = &first.rejected_nodes[0];
    let retried: usize = second_plan
        .node_allocation
        .values()
        .map(|l| l.allocs.len())
        .sum();
    assert_eq!(retried, first_plan.node_allocation[refused].allocs.len());
}

async fn an_unknown_plan_outcome_makes_the_worker_refresh_and_plan_again(
    store: Arc<dyn Store>,
    prefix: String,
) {
    let seen = through_a_faulty_applier(store, prefix, Fault::Unknown).await;
    assert_eq!(seen.len(), 2, "one failure, one new plan: {seen:?}");
    assert!(
        seen[1].0.snapshot_revision >= seen[0].0.snapshot_revision,
        "planned again on a state at least as new"
    );
    assert!(seen[1].1.rejected_nodes.is_empty());
}

async fn a_plan_refused_before_any_write_is_resubmitted_as_it_was(
    store: Arc<dyn Store>,
    prefix: String,
) {
    // More refusals than the scheduler's plan attempts: the eval still
    // completes (checked inside), so none of them counted as an attempt.
    let seen = through_a_faulty_applier(store, prefix, Fault::NotApplied).await;
    assert_eq!(seen.len(), NOT_APPLIED_REFUSALS + 1, "{seen:?}");
    assert!(
        seen.iter().all(|(plan, _)| *plan == seen[0].0),
        "the same plan each time, not new attempts on refreshed states"
    );
    assert!(seen.last().unwrap().1.rejected_nodes.is_empty());
}

async fn a_paused_worker_dequeues_nothing(store: Arc<dyn Store>, prefix: String) {
    let broker = start_broker(&store, &prefix).await;
    let job = job("web", 1, 500);
    seed(&store, &prefix, &[node("n1", 4000, 8192)], &job).await;
    let applier = start_applier(&store, &prefix).await;
    let (worker, pool) = start_worker(&store, &prefix, 1).await;
    pool.set_paused(true);
    // A poll already under way may still return an eval: wait until none
    // is (a worker past its pause check as it paused may still send one;
    // the short wait covers that step).
    tokio::time::sleep(Duration::from_millis(50)).await;
    caravan_testkit::wait::until("the polls under way to end", PATIENCE, || {
        broker.broker.log.lock().polls_in_flight == 0
    })
    .await;
    broker.broker.enqueue(eval("e1", &job));
    // Only a wait can show "nothing dequeued": it covers two of the
    // worker's 300 ms polls, had it not paused.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(broker.broker.log.lock().ready.len(), 1, "still queued");
    let grpc = caravan_scheduler_worker::SchedulerWorkerGrpc::new(pool.clone());
    use caravan_proto::scheduler_worker_service_server::SchedulerWorkerService;
    let status = grpc
        .status(Request::new(WorkerStatusRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert!(status.paused);
    assert_eq!(status.workers, 1);
    assert!(status.cache_revision > 0);
    pool.set_paused(false);
    wait_for(&broker.broker, "the eval to be acked", |l| {
        l.acked.contains(&"e1".to_string())
    })
    .await;
    assert_eq!(allocs(&store, &prefix).await.len(), 1);
    worker.shutdown().await;
    applier.shutdown().await;
}

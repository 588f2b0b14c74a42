//! What a job registration reads: a job new to the cluster is written
//! against the cache's view with no read of the store, and such a write
//! that meets an unavailable store goes the read's way rather than failing
//! the caller.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::common::{Backend, TestGateway, job, register};
use async_trait::async_trait;
use caravan_proto::job_service_client::JobServiceClient;
use caravan_store::{Op, Range, RangeResult, Result, Store, StoreError};
use caravan_testkit::faults::{Fault, FaultyStore};
use caravan_testkit::layered::{Layered, StoreLayer};

/// Counts the reads of job `default/fresh`'s key.
#[derive(Default)]
struct JobReads(AtomicUsize);

#[async_trait]
impl StoreLayer for JobReads {
    async fn range(&self, inner: &Arc<dyn Store>, range: Range) -> Result<RangeResult> {
        if range.start.ends_with(b"/jobs/default/fresh") {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        inner.range(range).await
    }
}

async fn a_new_job_is_written_without_a_read(backend: Backend) {
    let store = Layered::wrap(backend.store().await, JobReads::default());
    let gw = TestGateway::start_with(store.clone(), "register-reads", |_| {}).await;
    let mut jobs = JobServiceClient::new(gw.channel().await);
    let answer = jobs
        .register_job(register(job("fresh", 2)))
        .await
        .unwrap()
        .into_inner();
    assert!(!answer.eval_id.is_empty());
    assert_eq!(store.0.load(Ordering::SeqCst), 0, "no read of the job key");
    let stored = gw.job("fresh").await.unwrap();
    assert_eq!((stored.version, stored.task_groups[0].count), (0, 2));

    // The same job again: its versions are read, and the write builds on
    // the version the cache showed.
    jobs.register_job(register(job("fresh", 3))).await.unwrap();
    let stored = gw.job("fresh").await.unwrap();
    assert_eq!((stored.version, stored.task_groups[0].count), (1, 3));
    gw.stop().await;
}

async fn an_unavailable_store_sends_the_write_the_reads_way(backend: Backend) {
    let failed = Arc::new(AtomicUsize::new(0));
    let fails = Arc::clone(&failed);
    let store = FaultyStore::new(
        backend.store().await,
        Box::new(move |txn| {
            let registers = txn.success.iter().any(|op| {
                matches!(op, Op::Put { key, .. }
                    if String::from_utf8_lossy(key).ends_with("/jobs/default/flaky"))
            });
            (registers && fails.fetch_add(1, Ordering::SeqCst) == 0)
                .then(|| Fault::Fail(StoreError::Unavailable("leader changed".into())))
        }),
    );
    let gw = TestGateway::start_with(store, "register-unavailable", |_| {}).await;
    let mut jobs = JobServiceClient::new(gw.channel().await);
    let answer = jobs
        .register_job(register(job("flaky", 1)))
        .await
        .unwrap()
        .into_inner();
    assert!(!answer.eval_id.is_empty());
    assert_eq!(
        failed.load(Ordering::SeqCst),
        2,
        "failed once, then written"
    );
    let stored = gw.job("flaky").await.unwrap();
    assert_eq!(stored.version, 0);
    assert_eq!(gw.evals().await.len(), 1, "one evaluation");
    gw.stop().await;
}

/// Watches that never open, as behind a partition: the gateway's cache
/// hears nothing after its first list.
struct NoWatches;

#[async_trait]
impl StoreLayer for NoWatches {
    async fn watch(
        &self,
        _inner: &Arc<dyn Store>,
        _prefix: &[u8],
        _start_revision: caravan_store::Revision,
    ) -> Result<caravan_store::Watch> {
        Err(StoreError::Unavailable("watches cut by the test".into()))
    }
}

async fn a_gateway_cut_off_from_the_store_refuses_a_write_without_a_second_try(backend: Backend) {
    let attempts = Arc::new(AtomicUsize::new(0));
    let tried = Arc::clone(&attempts);
    let faulty = FaultyStore::new(
        backend.store().await,
        Box::new(move |txn| {
            let registers = txn.success.iter().any(|op| {
                matches!(op, Op::Put { key, .. }
                    if String::from_utf8_lossy(key).ends_with("/jobs/default/cut"))
            });
            registers.then(|| {
                tried.fetch_add(1, Ordering::SeqCst);
                Fault::Fail(StoreError::Unavailable("partitioned".into()))
            })
        }),
    );
    let store = Layered::wrap(faulty, NoWatches);
    let gw = TestGateway::start_with(store, "register-cut-off", |_| {}).await;
    // Its view goes stale: it stops claiming a known leader.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while gw
        .http("GET", "/v1/jobs", b"")
        .await
        .header("X-Nomad-KnownLeader")
        != Some("false")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the view never went stale"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let mut jobs = JobServiceClient::new(gw.channel().await);
    let refused = jobs
        .register_job(register(job("cut", 1)))
        .await
        .expect_err("the store is unavailable");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        1,
        "one try, no read-and-retry"
    );
    gw.stop().await;
}

caravan_testkit::backend_cases!(backend => crate::register_reads;
    a_new_job_is_written_without_a_read,
    an_unavailable_store_sends_the_write_the_reads_way,
    a_gateway_cut_off_from_the_store_refuses_a_write_without_a_second_try
);

//! Blocking reads over gRPC: a read at a revision waits until something
//! changes or its wait runs out.

use std::time::Duration;

use caravan_proto::job_service_client::JobServiceClient;
use caravan_proto::{GetJobRequest, QueryOptions};
use tonic::transport::Channel;

use crate::common::{Backend, TestGateway};
use crate::fixtures::{job, register};

type Jobs = JobServiceClient<Channel>;

/// Registers job `web` and returns the revision a read of it carries.
async fn web_at_revision(jobs: &mut Jobs) -> i64 {
    jobs.register_job(register(job("web", 1))).await.unwrap();
    let now = jobs
        .get_job(GetJobRequest {
            job_id: "web".into(),
            options: None,
        })
        .await
        .unwrap()
        .into_inner();
    let revision = now.meta.unwrap().revision;
    assert!(revision > 0);
    revision
}

/// A read of job `web` that blocks past `revision` for up to `wait_ns`.
fn blocking_get(revision: i64, wait_ns: i64) -> GetJobRequest {
    GetJobRequest {
        job_id: "web".into(),
        options: Some(QueryOptions {
            min_revision: revision,
            wait_ns,
            ..Default::default()
        }),
    }
}

pub async fn an_idle_blocking_read_times_out_at_the_same_revision(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-blocking-idle").await;
    let mut jobs = JobServiceClient::new(gw.channel().await);
    let revision = web_at_revision(&mut jobs).await;
    // Nothing changes: the wait runs out (plus at most 1/16) and the revision stays.
    let started = tokio::time::Instant::now();
    let idle = jobs
        .get_job(blocking_get(revision, 400_000_000))
        .await
        .unwrap()
        .into_inner();
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(390), "{waited:?}");
    assert!(waited < Duration::from_secs(3), "{waited:?}");
    assert_eq!(idle.meta.unwrap().revision, revision);
    gw.stop().await;
}

pub async fn a_change_wakes_a_blocking_read_with_the_new_job(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-blocking-wake").await;
    let channel = gw.channel().await;
    let mut jobs = JobServiceClient::new(channel.clone());
    let revision = web_at_revision(&mut jobs).await;
    // A change wakes it long before the wait ends.
    let mut blocked = JobServiceClient::new(channel);
    let waiter = tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        let r = blocked
            .get_job(blocking_get(revision, 30_000_000_000))
            .await
            .unwrap()
            .into_inner();
        (r, started.elapsed())
    });
    // The write comes once the query waits: it must wake it, not meet it.
    gw.wait_blocked(1).await;
    assert!(!waiter.is_finished(), "the query waits for a change");
    jobs.register_job(register(job("web", 4))).await.unwrap();
    let (r, waited) = waiter.await.unwrap();
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    assert!(r.meta.unwrap().revision > revision);
    assert_eq!(r.job.unwrap().task_groups[0].count, 4);
    gw.stop().await;
}

//! Compare-and-swap writes under a concurrent writer: a store wrapper slips
//! another writer's put in right before the gateway's transaction, so the
//! first attempt always loses; the gateway must re-read and retry (or, with
//! an enforced index, refuse).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use crate::common::{Backend, TestGateway, node_secret};
use caravan_proto::job_service_client::JobServiceClient;
use caravan_proto::node_client_service_client::NodeClientServiceClient;
use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, AllocUpdate, Allocation, Job, RegisterJobRequest,
    RegisterNodeRequest, UpdateAllocationsRequest,
};
use caravan_state::encode;
use caravan_testkit::faults::{Fault, FaultyStore};
use parking_lot::Mutex;
use tonic::Code;

/// A concurrent writer, once armed, writes one key right before the
/// gateway's next transaction: the interleaving made certain.
#[derive(Default)]
struct Racer {
    armed: Mutex<Option<(Vec<u8>, Vec<u8>)>>,
    races: Mutex<u32>,
}

impl Racer {
    fn arm(&self, key: Vec<u8>, value: Vec<u8>) {
        *self.armed.lock() = Some((key, value));
    }
}

async fn racing(backend: Backend, name: &str) -> (TestGateway, Arc<Racer>) {
    let racer = Arc::new(Racer::default());
    let slips = Arc::clone(&racer);
    let store = FaultyStore::new(
        backend.store().await,
        Box::new(move |_| {
            let (key, value) = slips.armed.lock().take()?;
            *slips.races.lock() += 1;
            Some(Fault::WriteFirst { key, value })
        }),
    );
    let gw = TestGateway::start_with(store, name, |_| {}).await;
    (gw, racer)
}

/// The service job `web` with `count` instances.
fn job(count: i32) -> Job {
    crate::common::job("web", count)
}

async fn register_retries_from_a_fresh_read(backend: Backend) {
    let (gw, racer) = racing(backend, "conflict-register").await;
    let mut jobs = JobServiceClient::new(gw.channel().await);
    let first = jobs
        .register_job(RegisterJobRequest {
            job: Some(job(1)),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    // Another gateway registers version 1 between our read and our txn.
    let mut theirs = gw.job("web").await.unwrap();
    theirs.version = 1;
    theirs.task_groups[0].count = 2;
    theirs.job_modify_revision = 0;
    racer.arm(gw.keys.job("default", "web"), encode(&theirs));
    jobs.register_job(RegisterJobRequest {
        job: Some(job(5)),
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(*racer.races.lock(), 1);
    let stored = gw.job("web").await.unwrap();
    assert_eq!(stored.version, 2, "built on the concurrent version");
    assert_eq!(stored.task_groups[0].count, 5);

    // With an enforced index, losing the race is an error, and nothing is written.
    let before = gw.evals().await.len();
    let current = gw.job("web").await.unwrap();
    let mut theirs = current.clone();
    theirs.task_groups[0].count = 7;
    racer.arm(gw.keys.job("default", "web"), encode(&theirs));
    let err = jobs
        .register_job(RegisterJobRequest {
            job: Some(job(9)),
            enforce_revision: true,
            job_modify_revision: current.job_modify_revision,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(gw.evals().await.len(), before);
    assert_eq!(gw.job("web").await.unwrap().task_groups[0].count, 7);
    assert!(first.job_modify_revision > 0);
    gw.stop().await;
}

async fn alloc_updates_retry_on_conflict(backend: Backend) {
    let (gw, racer) = racing(backend, "conflict-allocs").await;
    let channel = gw.channel().await;
    let mut client = NodeClientServiceClient::new(channel.clone());
    client
        .register_node(RegisterNodeRequest {
            node: Some(caravan_proto::Node {
                id: "n1".into(),
                name: "n1".into(),
                datacenter: "dc1".into(),
                ..Default::default()
            }),
            secret_id: node_secret("n1"),
        })
        .await
        .unwrap();
    let mut alloc = Allocation {
        id: "a1".into(),
        namespace: "default".into(),
        job_id: "web".into(),
        task_group: "web".into(),
        node_id: "n1".into(),
        ..Default::default()
    };
    alloc.set_desired_status(AllocDesiredStatus::Run);
    alloc.set_client_status(AllocClientStatus::Pending);
    gw.store
        .put(&gw.keys.alloc("a1"), &encode(&alloc), 0)
        .await
        .unwrap();
    // Let the gateway's cache see the alloc, so its first attempt compares
    // against what is about to be overwritten.
    let mut stream = client
        .watch_allocations(caravan_proto::WatchAllocationsRequest {
            node_id: "n1".into(),
            min_revision: 0,
            secret_id: node_secret("n1"),
        })
        .await
        .unwrap()
        .into_inner();
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(5), stream.message())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if !msg.allocs.is_empty() {
            break;
        }
    }
    // The plan-applier rewrites the alloc in the meantime.
    let mut server_side = alloc.clone();
    server_side.desired_description = "rewritten by the servers".into();
    racer.arm(gw.keys.alloc("a1"), encode(&server_side));
    let mut update = AllocUpdate {
        alloc_id: "a1".into(),
        client_description: "Tasks are running".into(),
        ..Default::default()
    };
    update.set_client_status(AllocClientStatus::Running);
    client
        .update_allocations(UpdateAllocationsRequest {
            node_id: "n1".into(),
            updates: vec![update],
            secret_id: node_secret("n1"),
        })
        .await
        .unwrap();
    assert_eq!(*racer.races.lock(), 1);
    let stored: Vec<Allocation> = gw.allocs().await;
    assert_eq!(stored[0].client_status(), AllocClientStatus::Running);
    assert_eq!(stored[0].client_description, "Tasks are running");
    assert_eq!(
        stored[0].desired_description, "rewritten by the servers",
        "the retry starts from the servers' version"
    );
    gw.stop().await;
}

caravan_testkit::backend_cases!(backend => crate::conflicts;
    register_retries_from_a_fresh_read,
    alloc_updates_retry_on_conflict
);

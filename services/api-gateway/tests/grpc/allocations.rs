//! Allocations on the node-facing API: the alloc stream a node watches, and
//! the status reports it sends back.

use std::time::Duration;

use caravan_proto::job_service_client::JobServiceClient;
use caravan_proto::node_client_service_client::NodeClientServiceClient;
use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, AllocUpdate, Allocation, NodeAllocations,
    RegisterNodeRequest, UpdateAllocationsRequest, WatchAllocationsRequest,
};
use caravan_state::encode;
use tonic::transport::Channel;
use tonic::{Code, Streaming};

use crate::common::{Backend, TestGateway, node_secret};
use crate::fixtures::{job, node, placed, register};

/// A gateway with node `n1` registered and job `web` registered, and a node
/// client to it.
struct OnN1 {
    gw: TestGateway,
    client: NodeClientServiceClient<Channel>,
}

impl OnN1 {
    async fn start(backend: Backend, name: &str) -> OnN1 {
        let gw = TestGateway::start(backend, name).await;
        let channel = gw.channel().await;
        let mut client = NodeClientServiceClient::new(channel.clone());
        client
            .register_node(RegisterNodeRequest {
                node: Some(node("n1")),
                secret_id: node_secret("n1"),
            })
            .await
            .unwrap();
        JobServiceClient::new(channel)
            .register_job(register(job("web", 1)))
            .await
            .unwrap();
        OnN1 { gw, client }
    }

    /// Watches n1's allocations; returns the stream and its first message.
    async fn watch(&mut self) -> (Streaming<NodeAllocations>, NodeAllocations) {
        let mut stream = self
            .client
            .watch_allocations(WatchAllocationsRequest {
                node_id: "n1".into(),
                min_revision: 0,
                secret_id: node_secret("n1"),
            })
            .await
            .unwrap()
            .into_inner();
        let first = stream.message().await.unwrap().unwrap();
        (stream, first)
    }

    /// Watches n1's allocations past the first message, with `a1` placed
    /// and streamed.
    async fn watch_with_a1(&mut self) -> Streaming<NodeAllocations> {
        let (mut stream, _) = self.watch().await;
        self.put(&placed("a1", "n1", "web")).await;
        next(&mut stream).await;
        stream
    }

    /// Writes `alloc` as the plan applier would.
    async fn put(&self, alloc: &Allocation) {
        self.gw
            .store
            .put(&self.gw.keys.alloc(&alloc.id), &encode(alloc), 0)
            .await
            .unwrap();
    }

    /// Reports, as `node_id`, that `a1` is now `status`.
    async fn report(
        &mut self,
        node_id: &str,
        status: AllocClientStatus,
        description: &str,
    ) -> Result<(), tonic::Status> {
        let mut update = AllocUpdate {
            alloc_id: "a1".into(),
            client_description: description.into(),
            ..Default::default()
        };
        update.set_client_status(status);
        self.client
            .update_allocations(UpdateAllocationsRequest {
                node_id: node_id.into(),
                updates: vec![update],
                secret_id: node_secret(node_id),
            })
            .await
            .map(drop)
    }

    /// The one stored allocation.
    async fn stored_alloc(&self) -> Allocation {
        self.gw.allocs().await.remove(0)
    }
}

/// The stream's next message, within five seconds.
async fn next(stream: &mut Streaming<NodeAllocations>) -> NodeAllocations {
    tokio::time::timeout(Duration::from_secs(5), stream.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
}

pub async fn an_alloc_stream_starts_with_the_whole_empty_set(backend: Backend) {
    let mut n1 = OnN1::start(backend, "grpc-allocs-first").await;
    let (_stream, first) = n1.watch().await;
    assert!(first.full, "a stream starts with the whole set");
    assert!(first.allocs.is_empty());
    n1.gw.stop().await;
}

/// A node that has seen revision R (through another gateway, or an earlier
/// stream) gets its whole set from a view at R or later, never an older one:
/// it stops whatever a whole set leaves out.
pub async fn a_stream_asked_from_a_revision_starts_from_a_view_that_new(backend: Backend) {
    let mut n1 = OnN1::start(backend, "grpc-allocs-min-revision").await;
    n1.put(&placed("a1", "n1", "web")).await;
    // A write outside the gateway's keyspace: the store moves on and no
    // event of the cache's says so; the gateway must find out it is there.
    let outside = format!("{}-outside", n1.gw.keys.prefix());
    let seen = n1.gw.store.put(outside.as_bytes(), b"x", 0).await.unwrap();
    let mut stream = n1
        .client
        .watch_allocations(WatchAllocationsRequest {
            node_id: "n1".into(),
            min_revision: seen,
            secret_id: node_secret("n1"),
        })
        .await
        .unwrap()
        .into_inner();
    let first = next(&mut stream).await;
    assert!(first.full, "a stream starts with the whole set");
    assert!(
        first.revision >= seen,
        "a set at {} for a node that saw {seen}",
        first.revision
    );
    let ids: Vec<&str> = first.allocs.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, vec!["a1"]);
    n1.gw
        .store
        .delete(caravan_store::Range::key(outside.as_bytes()))
        .await
        .unwrap();
    n1.gw.stop().await;
}

pub async fn a_placed_alloc_is_streamed_with_the_job_version_it_runs(backend: Backend) {
    let mut n1 = OnN1::start(backend, "grpc-allocs-placed").await;
    let (mut stream, _) = n1.watch().await;
    // The plan-applier's write, simulated.
    n1.put(&placed("a1", "n1", "web")).await;
    let next = next(&mut stream).await;
    assert!(!next.full, "then only what changed");
    assert_eq!(next.allocs.len(), 1);
    assert_eq!(next.allocs[0].id, "a1");
    assert_eq!(next.jobs.len(), 1, "the job version the alloc runs");
    assert_eq!(next.jobs[0].id, "web");
    n1.gw.stop().await;
}

pub async fn a_nodes_own_status_report_is_not_streamed_back(backend: Backend) {
    let mut n1 = OnN1::start(backend, "grpc-allocs-own-report").await;
    let mut stream = n1.watch_with_a1().await;
    n1.report("n1", AllocClientStatus::Running, "Tasks are running")
        .await
        .unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(500), stream.message())
            .await
            .is_err(),
        "a node's own status report is no news to it"
    );
    n1.gw.stop().await;
}

pub async fn a_job_version_is_streamed_once_per_stream(backend: Backend) {
    let mut n1 = OnN1::start(backend, "grpc-allocs-job-once").await;
    let mut stream = n1.watch_with_a1().await;
    n1.put(&placed("a2", "n1", "web")).await;
    let placed_msg = next(&mut stream).await;
    assert_eq!(placed_msg.allocs.len(), 1);
    assert_eq!(placed_msg.allocs[0].id, "a2");
    assert!(
        placed_msg.jobs.is_empty(),
        "a job version is sent once per stream"
    );
    n1.gw.stop().await;
}

pub async fn a_stopped_alloc_is_streamed_with_its_desired_stop(backend: Backend) {
    let mut n1 = OnN1::start(backend, "grpc-allocs-stop").await;
    let mut stream = n1.watch_with_a1().await;
    let mut stopped = placed("a1", "n1", "web");
    stopped.set_desired_status(AllocDesiredStatus::Stop);
    n1.put(&stopped).await;
    let stop_msg = next(&mut stream).await;
    assert_eq!(stop_msg.allocs.len(), 1);
    assert_eq!(
        stop_msg.allocs[0].desired_status(),
        AllocDesiredStatus::Stop
    );
    n1.gw.stop().await;
}

pub async fn a_deleted_alloc_is_streamed_as_removed(backend: Backend) {
    let mut n1 = OnN1::start(backend, "grpc-allocs-delete").await;
    let mut stream = n1.watch_with_a1().await;
    n1.gw
        .store
        .delete(caravan_store::Range::key(n1.gw.keys.alloc("a1")))
        .await
        .unwrap();
    let gone = next(&mut stream).await;
    assert!(gone.allocs.is_empty());
    assert_eq!(gone.removed_alloc_ids, vec!["a1"]);
    n1.gw.stop().await;
}

pub async fn a_failed_report_is_stored_with_its_description(backend: Backend) {
    let mut n1 = OnN1::start(backend, "grpc-allocs-failed").await;
    n1.put(&placed("a1", "n1", "web")).await;
    n1.report("n1", AllocClientStatus::Failed, "Failed tasks")
        .await
        .unwrap();
    let alloc = n1.stored_alloc().await;
    assert_eq!(alloc.client_status(), AllocClientStatus::Failed);
    assert_eq!(alloc.client_description, "Failed tasks");
    n1.gw.stop().await;
}

/// The gateway's cache keeps no placement metrics; a status report rewrites
/// the stored allocation, metrics and all.
pub async fn a_report_keeps_the_placement_metrics(backend: Backend) {
    let mut n1 = OnN1::start(backend, "grpc-allocs-metrics").await;
    let mut a1 = placed("a1", "n1", "web");
    a1.metrics = Some(Box::new(caravan_proto::AllocMetric {
        nodes_evaluated: 4,
        ..Default::default()
    }));
    let (mut stream, _) = n1.watch().await;
    n1.put(&a1).await;
    // Streamed: the cache holds it, without its metrics.
    assert!(next(&mut stream).await.allocs[0].metrics.is_none());
    n1.report("n1", AllocClientStatus::Running, "")
        .await
        .unwrap();
    let alloc = n1.stored_alloc().await;
    assert_eq!(alloc.client_status(), AllocClientStatus::Running);
    assert_eq!(alloc.metrics, a1.metrics);
    n1.gw.stop().await;
}

pub async fn a_failed_report_writes_an_alloc_failure_eval_in_the_same_txn(backend: Backend) {
    let mut n1 = OnN1::start(backend, "grpc-allocs-failure-eval").await;
    n1.put(&placed("a1", "n1", "web")).await;
    let evals_before = n1.gw.evals().await.len();
    n1.report("n1", AllocClientStatus::Failed, "Failed tasks")
        .await
        .unwrap();
    let alloc = n1.stored_alloc().await;
    let evals = n1.gw.evals().await;
    assert_eq!(evals.len(), evals_before + 1);
    let failure = evals
        .iter()
        .find(|e| e.triggered_by == "alloc-failure")
        .expect("an alloc-failure eval");
    assert_eq!(failure.job_id, "web");
    assert_eq!(failure.related_alloc_ids, vec!["a1"]);
    assert_eq!(
        failure.create_revision, alloc.client_modify_revision,
        "same txn"
    );
    n1.gw.stop().await;
}

pub async fn a_report_on_another_nodes_alloc_is_refused(backend: Backend) {
    let mut n1 = OnN1::start(backend, "grpc-allocs-wrong-node").await;
    n1.put(&placed("a1", "n1", "web")).await;
    // n2 is a node in good standing, with its own secret…
    n1.client
        .register_node(RegisterNodeRequest {
            node: Some(node("n2")),
            secret_id: node_secret("n2"),
        })
        .await
        .unwrap();
    // …yet its update of n1's alloc is refused and writes nothing.
    let err = n1
        .report("n2", AllocClientStatus::Complete, "")
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    assert!(
        err.message().starts_with("updates[0].alloc_id")
            && err.message().contains("not placed on node n2"),
        "{}",
        err.message()
    );
    assert_eq!(
        n1.stored_alloc().await.client_status(),
        AllocClientStatus::Pending
    );
    n1.gw.stop().await;
}

pub async fn a_finished_alloc_is_never_reported_running_again(backend: Backend) {
    let mut n1 = OnN1::start(backend, "grpc-allocs-terminal").await;
    n1.put(&placed("a1", "n1", "web")).await;
    n1.report("n1", AllocClientStatus::Complete, "done")
        .await
        .unwrap();
    // A late (or lying) report of the same alloc running is dropped: the
    // alloc would hold its node's resources again.
    n1.report("n1", AllocClientStatus::Running, "back from the dead")
        .await
        .unwrap();
    let stored = n1.stored_alloc().await;
    assert_eq!(stored.client_status(), AllocClientStatus::Complete);
    assert_eq!(stored.client_description, "done");
    n1.gw.stop().await;
}

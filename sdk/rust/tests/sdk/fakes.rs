//! The client against a scripted gateway, for what a real cluster does not
//! do on demand: an event stream that ends mid-way or fails, and a write
//! refused by a replica that does not lead.

#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use caravan_client::proto::event_service_server::{EventService, EventServiceServer};
use caravan_client::proto::job_service_client::JobServiceClient;
use caravan_client::proto::node_service_server::{NodeService, NodeServiceServer};
use caravan_client::proto::{
    EvaluateNodeRequest, Event, EventBatch, EventStreamRequest, GetNodeRequest, GetNodeResponse,
    ListAllocationsResponse, ListNodesRequest, ListNodesResponse, NodeAllocationsRequest,
    NodeUpdateResponse, PurgeNodeRequest, UpdateDrainRequest, UpdateEligibilityRequest,
};
use caravan_client::{Client, Error, RetryPolicy};
use futures::StreamExt;
use futures::stream::BoxStream;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

/// One scripted answer to a subscription.
#[derive(Clone)]
enum Script {
    /// These batches, then the stream ends.
    Batches(Vec<EventBatch>),
    /// These batches, then the stream stays open.
    BatchesThenHold(Vec<EventBatch>),
    /// This status instead of a stream.
    Refuse(Status),
    /// These batches, then this error on the stream.
    BatchesThenFail(Vec<EventBatch>, Status),
}

/// A gateway that answers subscriptions and node updates from a script and
/// records what it was asked.
#[derive(Clone, Default)]
struct Scripted {
    streams: Arc<Mutex<Vec<Script>>>,
    /// The answers to drains and eligibility updates, in order.
    updates: Arc<Mutex<Vec<Result<NodeUpdateResponse, Status>>>>,
    indexes: Arc<Mutex<Vec<i64>>>,
    update_calls: Arc<Mutex<usize>>,
}

impl Scripted {
    fn update(&self) -> Result<Response<NodeUpdateResponse>, Status> {
        *self.update_calls.lock().unwrap() += 1;
        self.updates.lock().unwrap().remove(0).map(Response::new)
    }

    fn calls(&self) -> usize {
        *self.update_calls.lock().unwrap()
    }
}

#[tonic::async_trait]
impl EventService for Scripted {
    type StreamStream = BoxStream<'static, Result<EventBatch, Status>>;

    async fn stream(
        &self,
        request: Request<EventStreamRequest>,
    ) -> Result<Response<Self::StreamStream>, Status> {
        self.indexes.lock().unwrap().push(request.get_ref().index);
        let script = self.streams.lock().unwrap().remove(0);
        let batches = |b: Vec<EventBatch>| futures::stream::iter(b.into_iter().map(Ok));
        let stream: Self::StreamStream = match script {
            Script::Batches(b) => batches(b).boxed(),
            Script::BatchesThenHold(b) => batches(b).chain(futures::stream::pending()).boxed(),
            Script::BatchesThenFail(b, status) => batches(b)
                .chain(futures::stream::once(async move { Err(status) }))
                .boxed(),
            Script::Refuse(status) => return Err(status),
        };
        Ok(Response::new(stream))
    }
}

#[tonic::async_trait]
impl NodeService for Scripted {
    async fn get_node(
        &self,
        _: Request<GetNodeRequest>,
    ) -> Result<Response<GetNodeResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }

    async fn list_nodes(
        &self,
        _: Request<ListNodesRequest>,
    ) -> Result<Response<ListNodesResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }

    async fn node_allocations(
        &self,
        _: Request<NodeAllocationsRequest>,
    ) -> Result<Response<ListAllocationsResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }

    async fn update_eligibility(
        &self,
        _: Request<UpdateEligibilityRequest>,
    ) -> Result<Response<NodeUpdateResponse>, Status> {
        self.update()
    }

    async fn update_drain(
        &self,
        _: Request<UpdateDrainRequest>,
    ) -> Result<Response<NodeUpdateResponse>, Status> {
        self.update()
    }

    async fn evaluate_node(
        &self,
        _: Request<EvaluateNodeRequest>,
    ) -> Result<Response<NodeUpdateResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }

    async fn purge_node(
        &self,
        _: Request<PurgeNodeRequest>,
    ) -> Result<Response<NodeUpdateResponse>, Status> {
        Err(Status::unimplemented("not scripted"))
    }
}

async fn serve(scripted: Scripted) -> SocketAddr {
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = incoming.local_addr().unwrap();
    tokio::spawn(
        Server::builder()
            .add_service(EventServiceServer::new(scripted.clone()))
            .add_service(NodeServiceServer::new(scripted))
            .serve_with_incoming(incoming),
    );
    addr
}

fn batch(index: i64, key: &str) -> EventBatch {
    EventBatch {
        index,
        events: vec![Event {
            topic: "Job".into(),
            r#type: "JobRegistered".into(),
            key: key.into(),
            index,
            ..Default::default()
        }],
        heartbeat: false,
    }
}

fn heartbeat() -> EventBatch {
    EventBatch {
        heartbeat: true,
        ..Default::default()
    }
}

fn quick() -> RetryPolicy {
    RetryPolicy {
        rounds: 3,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(10),
    }
}

#[tokio::test]
async fn the_event_stream_resumes_from_the_last_index_seen() {
    let scripted = Scripted::default();
    *scripted.streams.lock().unwrap() = vec![
        Script::Batches(vec![batch(5, "a"), heartbeat(), batch(6, "b")]),
        // The gateway is briefly unable to serve: the client tries again.
        Script::Refuse(Status::unavailable("store: down")),
        Script::BatchesThenHold(vec![batch(9, "c")]),
    ];
    let addr = serve(scripted.clone()).await;
    let client = Client::builder()
        .address(addr.to_string())
        .retry(quick())
        .build()
        .unwrap();
    let events = client.events().stream(["Job"]).await.unwrap();
    let keys: Vec<String> = events.take(3).map(|e| e.unwrap().key).collect().await;
    assert_eq!(keys, ["a", "b", "c"], "no heartbeat, nothing twice");
    assert_eq!(*scripted.indexes.lock().unwrap(), [0, 6, 6]);
}

#[tokio::test]
async fn a_failed_stream_yields_its_error_and_ends() {
    let scripted = Scripted::default();
    *scripted.streams.lock().unwrap() = vec![Script::BatchesThenFail(
        vec![batch(3, "a")],
        Status::out_of_range("index: compacted"),
    )];
    let addr = serve(scripted.clone()).await;
    let client = Client::builder()
        .address(addr.to_string())
        .retry(quick())
        .build()
        .unwrap();
    let mut events = client.events().stream_from(["Job"], 2).await.unwrap();
    assert_eq!(events.next().await.unwrap().unwrap().key, "a");
    let err = events.next().await.unwrap().unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument { field: Some(f), .. } if f == "index"),
        "{err:?}"
    );
    assert!(events.next().await.is_none());
    assert_eq!(*scripted.indexes.lock().unwrap(), [2]);
}

#[tokio::test]
async fn a_stream_that_keeps_ending_gives_up() {
    let scripted = Scripted::default();
    *scripted.streams.lock().unwrap() = vec![Script::Batches(Vec::new()); 4];
    let addr = serve(scripted.clone()).await;
    let client = Client::builder()
        .address(addr.to_string())
        .retry(quick())
        .build()
        .unwrap();
    let mut events = client.events().stream(["Job"]).await.unwrap();
    let err = events.next().await.unwrap().unwrap_err();
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    assert!(events.next().await.is_none());
    // The first subscription and one per round of the policy.
    assert_eq!(scripted.indexes.lock().unwrap().len(), 4);
}

fn updated(revision: i64) -> Result<NodeUpdateResponse, Status> {
    Ok(NodeUpdateResponse {
        eval_ids: Vec::new(),
        revision,
    })
}

#[tokio::test]
async fn a_write_is_sent_again_only_when_it_was_not_acted_on() {
    let refused = || {
        Err(caravan_runtime::status::not_leader(
            "eval-broker",
            Some("10.0.0.7:4648"),
        ))
    };
    let outcome_unknown = || Err(Status::unavailable("store: request timed out"));
    let scripted = Scripted::default();
    *scripted.updates.lock().unwrap() = vec![
        // A drain refused by a replica that does not lead did nothing: sent again.
        refused(),
        updated(7),
        // A drain whose outcome is unknown is not.
        outcome_unknown(),
        // Eligibility may be set twice: retried on any UNAVAILABLE.
        outcome_unknown(),
        updated(8),
        // Refused in every round: the leader is named.
        refused(),
        refused(),
        refused(),
    ];
    let addr = serve(scripted.clone()).await;
    let client = Client::builder()
        .address(addr.to_string())
        .retry(quick())
        .build()
        .unwrap();
    let nodes = client.nodes();
    assert_eq!(nodes.drain("n1", None, false).await.unwrap().revision, 7);
    assert_eq!(scripted.calls(), 2);
    let err = nodes.drain("n1", None, false).await.unwrap_err();
    assert!(
        matches!(err, Error::Unavailable { leader: None, .. }),
        "{err:?}"
    );
    assert_eq!(scripted.calls(), 3, "not sent twice");
    assert_eq!(nodes.set_eligibility("n1", true).await.unwrap().revision, 8);
    assert_eq!(scripted.calls(), 5);
    match nodes.drain("n1", None, false).await.unwrap_err() {
        Error::Unavailable { leader, .. } => assert_eq!(leader.as_deref(), Some("10.0.0.7:4648")),
        other => panic!("not Unavailable: {other:?}"),
    }
    assert_eq!(scripted.calls(), 8, "one try per round");

    // The raw channel reaches the same gateway, without retries.
    let err = JobServiceClient::new(client.grpc_channel())
        .list_jobs(caravan_client::proto::ListJobsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unimplemented);
}

//! The event stream over HTTP and gRPC, in-process, against the embedded
//! store and etcd.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use crate::common::{Backend, TestGateway};
use caravan_proto::event::Payload;
use caravan_proto::event_service_client::EventServiceClient;
use caravan_proto::job_service_client::JobServiceClient;
use caravan_proto::{
    EventBatch, EventStreamRequest, Job, JobType, RegisterJobRequest, Resources, Task, TaskGroup,
};
use caravan_store::{MemStore, Store};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tonic::{Code, Streaming};

fn job(id: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"Job": {
        "ID": id,
        "Type": "batch",
        "TaskGroups": [{"Name": "g", "Count": 1, "Tasks": [{
            "Name": "t", "Driver": "mock", "Resources": {"CPU": 100, "MemoryMB": 32}
        }]}]
    }}))
    .unwrap()
}

/// Reads the NDJSON event stream until `want` events arrived or the time
/// is up.
pub(crate) async fn read_events(stream: &mut TcpStream, want: usize) -> Vec<Value> {
    let mut raw = Vec::new();
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while events.len() < want && tokio::time::Instant::now() < deadline {
        let mut buf = [0u8; 8192];
        let n = tokio::time::timeout(Duration::from_millis(200), stream.read(&mut buf))
            .await
            .unwrap_or(Ok(0))
            .unwrap();
        raw.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&raw);
        events = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
            .filter(|v| v.get("Events").is_some())
            .flat_map(|v| v["Events"].as_array().cloned().unwrap_or_default())
            .collect();
    }
    events
}

async fn job_and_eval_events_stream(backend: Backend) {
    let gw = TestGateway::start(backend, "http-events").await;
    let bad = gw.http("GET", "/v1/event/stream?topic=Bogus", b"").await;
    assert_eq!(bad.status, 400);
    let mut stream = TcpStream::connect(gw.bound.http).await.unwrap();
    // From the revision before the writes: the stream sees them however
    // late its watch opens.
    let from = gw.revision().await;
    stream
        .write_all(
            format!(
                "GET /v1/event/stream?topic=Job:web&topic=Evaluation&index={from} HTTP/1.1\r\nHost: x\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    gw.http("PUT", "/v1/jobs", &job("web")).await;
    gw.http("PUT", "/v1/jobs", &job("other")).await;
    let events = read_events(&mut stream, 3).await;
    let jobs: Vec<&Value> = events.iter().filter(|e| e["Topic"] == "Job").collect();
    assert_eq!(jobs.len(), 1, "only job web: {events:#?}");
    assert_eq!(jobs[0]["Type"], "JobRegistered");
    assert_eq!(jobs[0]["Key"], "web");
    assert_eq!(jobs[0]["Payload"]["Job"]["ID"], "web");
    let evals: Vec<&Value> = events
        .iter()
        .filter(|e| e["Topic"] == "Evaluation")
        .collect();
    assert_eq!(evals.len(), 2, "both jobs' evals: {events:#?}");
    assert_eq!(evals[0]["Payload"]["Evaluation"]["Status"], "pending");
    assert!(jobs[0]["Index"].as_u64().unwrap() > 0);
    drop(stream);
    gw.stop().await;
}

fn proto_job(id: &str) -> RegisterJobRequest {
    let mut job = Job {
        id: id.into(),
        task_groups: vec![TaskGroup {
            name: "g".into(),
            count: 1,
            tasks: vec![Task {
                name: "t".into(),
                driver: "mock".into(),
                resources: Some(Resources {
                    cpu_mhz: 100,
                    memory_mb: 32,
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    job.set_type(JobType::Batch);
    RegisterJobRequest {
        job: Some(job),
        ..Default::default()
    }
}

fn subscription(topics: &[&str], index: i64) -> EventStreamRequest {
    EventStreamRequest {
        topics: topics.iter().map(|t| t.to_string()).collect(),
        index,
        ..Default::default()
    }
}

/// The next batch with events, skipping heartbeats; none if `wait` passes
/// first.
async fn next_events(stream: &mut Streaming<EventBatch>, wait: Duration) -> Option<EventBatch> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let batch = tokio::time::timeout_at(deadline, stream.message())
            .await
            .ok()?
            .unwrap()
            .expect("the stream ended");
        if !batch.heartbeat {
            return Some(batch);
        }
    }
}

async fn grpc_stream_filters_and_resumes(backend: Backend) {
    let gw = TestGateway::start(backend, "grpc-events").await;
    let mut events = EventServiceClient::new(gw.channel().await);
    let mut jobs = JobServiceClient::new(gw.channel().await);
    let bad = events
        .stream(subscription(&["Bogus"], 0))
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(bad.message().starts_with("topics[0]: "), "{bad:?}");
    let bad = events.stream(subscription(&[], -1)).await.unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(bad.message().starts_with("index: "), "{bad:?}");

    // From the revision before the writes: the stream sees them however
    // late its watch opens.
    let from = gw.revision().await;
    let mut stream = events
        .stream(subscription(&["Job:web"], from))
        .await
        .unwrap()
        .into_inner();
    let web = jobs
        .register_job(proto_job("web"))
        .await
        .unwrap()
        .into_inner();
    let other = jobs
        .register_job(proto_job("other"))
        .await
        .unwrap()
        .into_inner();
    let batch = next_events(&mut stream, Duration::from_secs(10))
        .await
        .expect("no event for job web");
    assert_eq!(batch.index, web.job_modify_revision);
    assert_eq!(batch.events.len(), 1, "{batch:#?}");
    let event = &batch.events[0];
    assert_eq!(
        (
            event.topic.as_str(),
            event.r#type.as_str(),
            event.key.as_str()
        ),
        ("Job", "JobRegistered", "web")
    );
    assert_eq!(event.namespace, "default");
    assert_eq!(event.index, web.job_modify_revision);
    let Some(Payload::Job(job)) = &event.payload else {
        panic!("no decoded job: {event:#?}");
    };
    assert_eq!(job.id, "web");
    assert_eq!(job.task_groups[0].tasks[0].driver, "mock");
    // Job other's registration came between; a later change of web is the
    // next batch: other's was left out, with no quiet window to wait out.
    let mut again = proto_job("web");
    again.job.as_mut().unwrap().task_groups[0].count = 2;
    let web_again = jobs.register_job(again).await.unwrap().into_inner();
    let batch = next_events(&mut stream, Duration::from_secs(10))
        .await
        .expect("no event for web's change");
    assert_eq!(
        batch.index, web_again.job_modify_revision,
        "only job web is wanted: {batch:#?}"
    );

    // Resuming after web's revision replays only what came later.
    let mut resumed = events
        .stream(subscription(&["Job"], web.job_modify_revision))
        .await
        .unwrap()
        .into_inner();
    let batch = next_events(&mut resumed, Duration::from_secs(10))
        .await
        .expect("no event after the index");
    assert_eq!(batch.index, other.job_modify_revision);
    assert_eq!(batch.events.len(), 1, "{batch:#?}");
    assert_eq!(batch.events[0].key, "other");
    assert_eq!(batch.events[0].r#type, "JobRegistered");
    drop((stream, resumed));
    gw.stop().await;
}

/// Compaction is only exercised on the embedded store: compacting the shared
/// test etcd would pull history from under other tests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mem_grpc_stream_from_a_compacted_index_is_out_of_range() {
    let store = Arc::new(MemStore::new());
    let gw = TestGateway::start_with(store.clone(), "grpc-events-compacted", |_| {}).await;
    let mut jobs = JobServiceClient::new(gw.channel().await);
    jobs.register_job(proto_job("a")).await.unwrap();
    let b = jobs
        .register_job(proto_job("b"))
        .await
        .unwrap()
        .into_inner();
    store.compact(b.job_modify_revision).await.unwrap();
    let mut events = EventServiceClient::new(gw.channel().await);
    let err = match events.stream(subscription(&[], 1)).await {
        Err(status) => status,
        Ok(response) => response.into_inner().message().await.unwrap_err(),
    };
    assert_eq!(err.code(), Code::OutOfRange, "{err:?}");
    gw.stop().await;
}

caravan_testkit::backend_cases!(backend => crate::events;
    job_and_eval_events_stream,
    grpc_stream_filters_and_resumes,
);

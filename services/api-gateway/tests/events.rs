//! The HTTP event stream, in-process, against the embedded store and etcd.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{Backend, TestGateway};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

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

/// Reads the stream until `want` events arrived or the time is up.
async fn read_events(stream: &mut TcpStream, want: usize) -> Vec<Value> {
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
    stream
        .write_all(
            b"GET /v1/event/stream?topic=Job:web&topic=Evaluation HTTP/1.1\r\nHost: x\r\n\r\n",
        )
        .await
        .unwrap();
    // Let the watch open before the writes it should see.
    tokio::time::sleep(Duration::from_millis(300)).await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mem_job_and_eval_events_stream() {
    job_and_eval_events_stream(Backend::Mem).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_job_and_eval_events_stream() {
    job_and_eval_events_stream(Backend::Etcd).await;
}

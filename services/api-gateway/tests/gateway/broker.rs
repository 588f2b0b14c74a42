//! Work forwarded to the eval-broker leader, against a real broker running
//! in-process on the same store: `job periodic force` and `system gc` over
//! HTTP and gRPC, and what the gateway answers while no broker leads.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::common::{Backend, TestGateway};
use caravan_eval_broker::{EvalBrokerConfig, EvalBrokerService};
use caravan_proto::job_service_client::JobServiceClient;
use caravan_proto::system_service_client::SystemServiceClient;
use caravan_proto::{
    EvalStatus, Evaluation, ForcePeriodicJobRequest, GarbageCollectRequest, Job, JobType,
};
use caravan_runtime::service::Running;
use caravan_state::encode;
use caravan_testkit::wait::holds_within;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn body(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

fn batch_job(id: &str, periodic: Option<Value>) -> Value {
    let mut job = json!({
        "ID": id,
        "Name": id,
        "Type": "batch",
        "Datacenters": ["dc1"],
        "TaskGroups": [{
            "Name": "run",
            "Count": 1,
            "Tasks": [{
                "Name": "app",
                "Driver": "mock",
                "Config": {"run_for": "1s"},
                "Resources": {"CPU": 100, "MemoryMB": 64}
            }]
        }]
    });
    if let Some(p) = periodic {
        job["Periodic"] = p;
    }
    json!({ "Job": job })
}

/// A broker leading on the gateway's store and prefix.
struct Broker {
    shutdown: CancellationToken,
    running: Running<EvalBrokerService>,
}

impl Broker {
    async fn start(gw: &TestGateway) -> Broker {
        let mut config = EvalBrokerConfig {
            grpc_addr: "127.0.0.1:0".into(),
            leader_ttl_ms: 2_000,
            ..Default::default()
        };
        config.store.prefix = gw.keys.prefix().to_string();
        let shutdown = CancellationToken::new();
        let running = caravan_runtime::service::start(
            EvalBrokerService,
            config,
            gw.store.clone(),
            shutdown.clone(),
        )
        .await
        .expect("start the broker");
        Broker { shutdown, running }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.running.stopped())
            .await
            .expect("broker did not stop in time")
            .expect("broker failed");
    }
}

/// A stopped job whose only eval is complete: garbage for a forced sweep.
async fn put_dead_job(gw: &TestGateway, id: &str) -> Evaluation {
    let job = Job {
        id: id.into(),
        name: id.into(),
        namespace: "default".into(),
        r#type: JobType::Batch as i32,
        stop: true,
        ..Default::default()
    };
    gw.store
        .put(&gw.keys.job_version("default", id, 0), &encode(&job), 0)
        .await
        .unwrap();
    gw.store
        .put(&gw.keys.job("default", id), &encode(&job), 0)
        .await
        .unwrap();
    let eval = Evaluation {
        id: uuid::Uuid::new_v4().to_string(),
        namespace: "default".into(),
        job_id: id.into(),
        r#type: "batch".into(),
        status: EvalStatus::Complete as i32,
        ..Default::default()
    };
    gw.store
        .put(&gw.keys.eval(&eval.id), &encode(&eval), 0)
        .await
        .unwrap();
    eval
}

async fn forwarded_to_the_broker_leader(backend: Backend) {
    let gw = TestGateway::start(backend, "gw-broker").await;
    let r = gw.http("PUT", "/v1/system/gc", b"").await;
    assert_eq!(r.status, 503, "no broker leads yet: {}", r.text());
    let r = gw.http("PUT", "/v1/job/nightly/periodic/force", b"").await;
    assert_eq!(r.status, 503, "{}", r.text());

    let broker = Broker::start(&gw).await;
    let led = holds_within(Duration::from_secs(10), || async {
        gw.http("PUT", "/v1/system/gc", b"").await.status == 200
    })
    .await;
    assert!(led, "the broker never led");

    let periodic = json!({"Enabled": true, "Spec": "0 3 * * *", "ProhibitOverlap": true});
    for job in [
        batch_job("nightly", Some(periodic)),
        batch_job("plain", None),
    ] {
        let r = gw.http("PUT", "/v1/jobs", &body(&job)).await;
        assert_eq!(r.status, 200, "{}", r.text());
    }

    // HTTP: Nomad's answer, the eval readable at once through the gateway.
    let r = gw.http("PUT", "/v1/job/nightly/periodic/force", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let answer = r.json();
    let eval_id = answer["EvalID"].as_str().unwrap().to_string();
    let index = answer["Index"].as_u64().unwrap();
    assert!(index > 0);
    assert_eq!(answer["EvalCreateIndex"].as_u64(), Some(index));
    assert_eq!(r.header("X-Nomad-Index"), Some(index.to_string().as_str()));
    let eval = gw
        .http("GET", &format!("/v1/evaluation/{eval_id}"), b"")
        .await;
    assert_eq!(eval.status, 200, "{}", eval.text());
    let child = eval.json()["JobID"].as_str().unwrap().to_string();
    assert!(child.starts_with("nightly/periodic-"), "{child}");
    assert_eq!(eval.json()["TriggeredBy"], "periodic-job");
    let child_job = gw.job(&child).await.expect("the child job");
    assert_eq!(child_job.parent_id, "nightly");
    assert!(child_job.periodic.is_none());

    // The broker's refusals come through as Nomad's status codes.
    let r = gw.http("POST", "/v1/job/plain/periodic/force", b"").await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("non-periodic"), "{}", r.text());
    let r = gw.http("POST", "/v1/job/nope/periodic/force", b"").await;
    assert_eq!(r.status, 404, "{}", r.text());

    // gRPC twin: a second child, a second later (children are named by
    // the second they launch in).
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let channel = gw.channel().await;
    let launched = JobServiceClient::new(channel.clone())
        .force_periodic_job(ForcePeriodicJobRequest {
            namespace: String::new(),
            job_id: "nightly".into(),
        })
        .await
        .expect("forced over gRPC")
        .into_inner();
    assert!(launched.dispatched_job_id.starts_with("nightly/periodic-"));
    assert_ne!(launched.dispatched_job_id, child);
    assert!(launched.eval_create_revision > i64::try_from(index).unwrap());
    let err = JobServiceClient::new(channel.clone())
        .force_periodic_job(ForcePeriodicJobRequest {
            namespace: "default".into(),
            job_id: String::new(),
        })
        .await
        .expect_err("no job id");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);

    // Garbage collection over HTTP: the dead job and its eval go, the
    // periodic parent and its running children stay.
    let dead = put_dead_job(&gw, "finished").await;
    let r = gw.http("PUT", "/v1/system/gc", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.body.is_empty(), "Nomad answers nothing: {}", r.text());
    assert!(gw.job("finished").await.is_none());
    assert!(
        gw.store
            .get(&gw.keys.eval(&dead.id))
            .await
            .unwrap()
            .is_none()
    );
    assert!(gw.job("nightly").await.is_some());
    assert!(gw.job(&child).await.is_some());

    // And over gRPC, with the counts.
    put_dead_job(&gw, "finished-too").await;
    let counts = SystemServiceClient::new(channel)
        .garbage_collect(GarbageCollectRequest {})
        .await
        .expect("gc over gRPC")
        .into_inner();
    assert_eq!((counts.jobs, counts.evals), (1, 1), "{counts:?}");
    assert!(gw.job("finished-too").await.is_none());

    broker.stop().await;
    gw.stop().await;
}

mod mem {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn forwarded_to_the_broker_leader() {
        super::forwarded_to_the_broker_leader(super::Backend::Mem).await;
    }
}

mod etcd {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn forwarded_to_the_broker_leader() {
        super::forwarded_to_the_broker_leader(super::Backend::Etcd).await;
    }
}

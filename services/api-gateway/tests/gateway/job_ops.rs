//! Revert, stability, scaling and dispatch over HTTP and gRPC, against the
//! embedded store and etcd.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use crate::common::{Backend, TestGateway};
use caravan_proto::DispatchJobRequest;
use caravan_proto::job_service_client::JobServiceClient;
use caravan_state::Kind;
use serde_json::{Value, json};
use tonic::Code;

fn job(count: i64) -> Vec<u8> {
    serde_json::to_vec(&json!({"Job": {
        "ID": "web",
        "Type": "service",
        "TaskGroups": [{"Name": "web", "Count": count, "Tasks": [{
            "Name": "app", "Driver": "mock", "Resources": {"CPU": 100, "MemoryMB": 32}
        }]}]
    }}))
    .unwrap()
}

fn body(v: Value) -> Vec<u8> {
    serde_json::to_vec(&v).unwrap()
}

async fn revert_stable_and_scale(backend: Backend) {
    let gw = TestGateway::start(backend, "job-ops").await;
    gw.http("PUT", "/v1/jobs", &job(1)).await;
    gw.http("PUT", "/v1/jobs", &job(2)).await;
    assert_eq!(gw.job("web").await.unwrap().version, 1);

    let r = gw
        .http(
            "POST",
            "/v1/job/web/revert",
            &body(json!({"JobVersion": 1})),
        )
        .await;
    assert_eq!(r.status, 400, "the current version: {}", r.text());
    let r = gw
        .http(
            "POST",
            "/v1/job/web/revert",
            &body(json!({"JobVersion": 0, "EnforcePriorVersion": 7})),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text());
    let r = gw
        .http(
            "POST",
            "/v1/job/web/revert",
            &body(json!({"JobVersion": 0, "EnforcePriorVersion": 1})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let reverted = gw.job("web").await.unwrap();
    assert_eq!(reverted.version, 2);
    assert_eq!(reverted.task_groups[0].count, 1);

    let r = gw
        .http(
            "POST",
            "/v1/job/web/stable",
            &body(json!({"JobVersion": 2, "Stable": true})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let stable = gw.job("web").await.unwrap();
    assert!(stable.stable);
    assert_eq!(stable.job_modify_revision, reverted.job_modify_revision);

    let r = gw
        .http(
            "POST",
            "/v1/job/web/scale",
            &body(json!({"Count": 5, "Target": {"Group": "web"}})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let eval_id = r.json()["EvalID"].as_str().unwrap().to_string();
    let scaled = gw.job("web").await.unwrap();
    assert_eq!((scaled.version, scaled.task_groups[0].count), (3, 5));
    let evals = gw.evals().await;
    let e = evals.iter().find(|e| e.id == eval_id).unwrap();
    assert_eq!(e.triggered_by, "job-scaling");
    let status = gw.http("GET", "/v1/job/web/scale", b"").await.json();
    assert_eq!(status["TaskGroups"]["web"]["Desired"], 5);
    assert_eq!(
        r.json()["JobModifyIndex"].as_i64(),
        Some(scaled.job_modify_revision)
    );
    let stale = scaled.job_modify_revision - 1;
    for bad in [
        json!({"Count": 5, "Target": {"Group": "nope"}}),
        json!({"Count": -1, "Target": {"Group": "web"}}),
        json!({"Count": 5}),
        json!({"Count": 6, "Target": {"Group": "web", "Job": "other"}}),
        json!({"Count": 6, "Target": {"Group": "web"}, "PolicyOverride": true}),
        json!({"Count": 6, "Target": {"Group": "web"}, "Error": true}),
        json!({"Count": 6, "Target": {"Group": "web"}, "Meta": {"reason": "load"}}),
        json!({"Count": 6, "Target": {"Group": "web"}, "JobModifyIndex": stale}),
    ] {
        let r = gw.http("POST", "/v1/job/web/scale", &body(bad)).await;
        assert_eq!(r.status, 400, "{}", r.text());
    }
    assert_eq!(
        gw.job("web").await.unwrap().version,
        3,
        "refusals write nothing"
    );
    gw.stop().await;
}

async fn dispatch_creates_a_child(backend: Backend) {
    let gw = TestGateway::start(backend, "job-dispatch").await;
    let parent = json!({"Job": {
        "ID": "report",
        "Type": "batch",
        "ParameterizedJob": {"Payload": "required", "MetaRequired": ["who"]},
        "TaskGroups": [{"Name": "g", "Count": 1, "Tasks": [{
            "Name": "t", "Driver": "mock", "Resources": {"CPU": 100, "MemoryMB": 32}
        }]}]
    }});
    let r = gw.http("PUT", "/v1/jobs", &body(parent)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json()["EvalID"],
        "",
        "a parameterized parent is not evaluated"
    );
    assert!(gw.evals().await.is_empty());

    let r = gw
        .http(
            "POST",
            "/v1/job/report/dispatch",
            &body(json!({"Meta": {"who": "me"}})),
        )
        .await;
    assert_eq!(r.status, 400, "payload is required: {}", r.text());
    let r = gw
        .http(
            "POST",
            "/v1/job/report/dispatch",
            &body(json!({"Payload": "aGVsbG8=", "Meta": {"who": "me"}})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let child_id = r.json()["DispatchedJobID"].as_str().unwrap().to_string();
    assert!(child_id.starts_with("report/dispatch-"), "{child_id}");
    let child = gw.job(&child_id).await.unwrap();
    assert_eq!(child.payload, b"hello");
    assert_eq!(child.parent_id, "report");
    assert!(child.dispatched);
    assert_eq!(child.meta["who"], "me");
    let evals = gw.evals().await;
    assert_eq!(evals.len(), 1);
    assert_eq!(evals[0].job_id, child_id);
    let escaped = child_id.replace('/', "%2F");
    let read = gw.http("GET", &format!("/v1/job/{escaped}"), b"").await;
    assert_eq!(read.status, 200, "{}", read.text());
    assert_eq!(read.json()["ParentID"], "report");

    let mut jobs = JobServiceClient::new(gw.channel().await);
    let d = jobs
        .dispatch_job(DispatchJobRequest {
            namespace: String::new(),
            job_id: "report".into(),
            payload: b"x".to_vec(),
            meta: BTreeMap::from([("who".to_string(), "grpc".to_string())]),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(d.dispatched_job_id.starts_with("report/dispatch-"));
    assert!(!d.eval_id.is_empty());
    let err = jobs
        .dispatch_job(DispatchJobRequest {
            namespace: String::new(),
            job_id: "report".into(),
            payload: b"x".to_vec(),
            meta: BTreeMap::new(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("who"), "{}", err.message());

    // An idempotency token answers its child again rather than make
    // another; the id prefix template goes into the child's id.
    let once = json!({"Payload": "aGk=", "Meta": {"who": "me"}, "IdPrefixTemplate": "nightly"});
    let path = "/v1/job/report/dispatch?idempotency_token=tok-1";
    let first = gw.http("POST", path, &body(once.clone())).await;
    assert_eq!(first.status, 200, "{}", first.text());
    let first_id = first.json()["DispatchedJobID"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        first_id.starts_with("report/dispatch-nightly-"),
        "{first_id}"
    );
    let again = gw.http("POST", path, &body(once)).await;
    assert_eq!(again.status, 200, "{}", again.text());
    assert_eq!(again.json()["DispatchedJobID"], first_id.as_str());
    assert_eq!(again.json()["EvalID"], "");
    assert_eq!(
        again.json()["JobCreateIndex"],
        first.json()["JobCreateIndex"]
    );
    let bogus = json!({"Payload": "aGk=", "Meta": {"who": "me"}, "Priority": 1});
    let r = gw
        .http("POST", "/v1/job/report/dispatch", &body(bogus))
        .await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("Priority"), "{}", r.text());
    let jobs_now: Vec<caravan_proto::Job> = gw.objects(gw.keys.prefix_of(Kind::Jobs)).await;
    // The parent, the two children, and the one child of the token.
    assert_eq!(jobs_now.len(), 4);
    gw.stop().await;
}

caravan_testkit::backend_cases!(backend => crate::job_ops;
revert_stable_and_scale, dispatch_creates_a_child);

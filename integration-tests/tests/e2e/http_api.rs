//! Scenario 6: register, run and stop a job through the Nomad-compatible
//! HTTP API with Nomad's JSON job format.

use caravan_integration_tests::{Cluster, HttpApi, Progress, jobs, wait_for};
use serde_json::Value;

use crate::STEP;

/// Waits until `GET path` answers JSON for which `done` holds.
async fn wait_http(http: &HttpApi, what: &str, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    wait_for(what, STEP, async || {
        let v = http.get_json(path).await?;
        Ok(if done(&v) {
            Progress::Done(v)
        } else {
            Progress::Waiting(v.to_string())
        })
    })
    .await
    .unwrap()
}

fn field<'a>(v: &'a Value, name: &str) -> &'a str {
    v.get(name).and_then(Value::as_str).unwrap_or_default()
}

fn all_allocs(v: &Value, count: usize, pred: impl Fn(&Value) -> bool) -> bool {
    v.as_array()
        .is_some_and(|a| a.len() == count && a.iter().all(&pred))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_run_and_stop_through_the_nomad_http_api() {
    let mut c = Cluster::new("http-api").await.unwrap();
    c.start_control_plane().await.unwrap();
    c.start_client("http-node", &[("drivers", "mock")])
        .await
        .unwrap();
    let http = c.http().unwrap();

    let job = jobs::service_job("web", 2, jobs::mock_task(100, 64));
    let reply = http.put_json("/v1/jobs", &job).await.unwrap();
    let body = reply.ok_json().unwrap();
    let register = jobs::eval_id(&body).unwrap();
    assert!(
        body.get("JobModifyIndex")
            .and_then(Value::as_u64)
            .unwrap_or(0)
            > 0,
        "{body}"
    );

    let eval = wait_http(
        &http,
        "the register eval to complete",
        &format!("/v1/evaluation/{register}"),
        |e| field(e, "Status") == "complete",
    )
    .await;
    assert_eq!(field(&eval, "TriggeredBy"), "job-register");
    assert_eq!(field(&eval, "JobID"), "web");

    let allocs = wait_http(
        &http,
        "two running allocations",
        "/v1/job/web/allocations",
        |a| {
            all_allocs(a, 2, |a| {
                field(a, "DesiredStatus") == "run" && field(a, "ClientStatus") == "running"
            })
        },
    )
    .await;
    let mut names: Vec<&str> = allocs
        .as_array()
        .unwrap()
        .iter()
        .map(|a| field(a, "Name"))
        .collect();
    names.sort();
    assert_eq!(names, ["web.g[0]", "web.g[1]"]);
    let running = http.get_json("/v1/job/web").await.unwrap();
    assert_eq!(field(&running, "Status"), "running", "{running}");

    let reply = http.delete("/v1/job/web").await.unwrap();
    let deregister = jobs::eval_id(&reply.ok_json().unwrap()).unwrap();
    let eval = wait_http(
        &http,
        "the deregister eval to complete",
        &format!("/v1/evaluation/{deregister}"),
        |e| field(e, "Status") == "complete",
    )
    .await;
    assert_eq!(field(&eval, "TriggeredBy"), "job-deregister");

    wait_http(
        &http,
        "both allocations stopped and complete",
        "/v1/job/web/allocations",
        |a| {
            all_allocs(a, 2, |a| {
                field(a, "DesiredStatus") == "stop" && field(a, "ClientStatus") == "complete"
            })
        },
    )
    .await;
    let stopped = wait_http(&http, "the job to be dead", "/v1/job/web", |j| {
        field(j, "Status") == "dead"
    })
    .await;
    assert_eq!(stopped.get("Stop"), Some(&Value::Bool(true)), "{stopped}");
    let evals = http.get_json("/v1/job/web/evaluations").await.unwrap();
    let evals = evals.as_array().unwrap();
    assert_eq!(evals.len(), 2, "{evals:?}");
    assert!(
        evals.iter().all(|e| field(e, "Status") == "complete"),
        "{evals:?}"
    );
}

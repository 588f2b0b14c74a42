//! Scaling policies from the jobs' `Scaling` blocks: listed as Nomad's
//! stubs, read by an id that stays the same across job versions.

use serde_json::{Value, json};

use crate::common::{Backend, TestGateway};
use crate::fixtures::{body, nomad_job};

/// Job `id` whose group `web` has `count` instances and a scaling policy.
fn scaled_job(id: &str, count: i64) -> Value {
    let mut job = nomad_job(id, count);
    job["Job"]["TaskGroups"][0]["Scaling"] = json!({
        "Min": 1,
        "Max": 5,
        "Policy": {"cooldown": "1m"},
    });
    job
}

async fn register(gw: &TestGateway, job: &Value) {
    let r = gw.http("PUT", "/v1/jobs", &body(job)).await;
    assert_eq!(r.status, 200, "{}", r.text());
}

pub async fn without_scaling_blocks_there_are_no_policies(backend: Backend) {
    let gw = TestGateway::start(backend, "http-scaling-none").await;
    register(&gw, &nomad_job("plain", 1)).await;
    let r = gw.http("GET", "/v1/scaling/policies", b"").await;
    assert_eq!(r.status, 200);
    assert!(r.header("X-Nomad-Index").is_some());
    assert_eq!(r.json(), json!([]));
    let r = gw.http("GET", "/v1/scaling/policy/example", b"").await;
    assert_eq!(r.status, 404);
    assert_eq!(r.text(), "policy not found");
    gw.stop().await;
}

pub async fn a_groups_policy_is_listed_and_read_by_a_stable_id(backend: Backend) {
    let gw = TestGateway::start(backend, "http-scaling-policy").await;
    register(&gw, &scaled_job("web", 2)).await;
    let stubs = gw.http("GET", "/v1/scaling/policies", b"").await.json();
    let stubs = stubs.as_array().unwrap();
    assert_eq!(stubs.len(), 1);
    let stub = &stubs[0];
    assert_eq!(
        stub["Target"],
        json!({"Namespace": "default", "Job": "web", "Group": "web"})
    );
    assert_eq!(stub["Type"], "horizontal");
    assert_eq!(stub["Enabled"], true);
    assert!(stub.get("Min").is_none() && stub.get("Policy").is_none());
    let id = stub["ID"].as_str().unwrap().to_string();
    let policy = gw
        .http("GET", &format!("/v1/scaling/policy/{id}"), b"")
        .await
        .json();
    assert_eq!(
        (policy["Min"].clone(), policy["Max"].clone()),
        (json!(1), json!(5))
    );
    assert_eq!(policy["Policy"], json!({"cooldown": "1m"}));
    // A new version of the job keeps the policy's id.
    register(&gw, &scaled_job("web", 4)).await;
    let stubs = gw.http("GET", "/v1/scaling/policies", b"").await.json();
    assert_eq!(stubs[0]["ID"], id.as_str());
    // The job's own JSON carries the same policy.
    let job = gw.http("GET", "/v1/job/web", b"").await.json();
    assert_eq!(job["TaskGroups"][0]["Scaling"]["ID"], id.as_str());
    gw.stop().await;
}

pub async fn policies_filter_by_job_and_type(backend: Backend) {
    let gw = TestGateway::start(backend, "http-scaling-filter").await;
    register(&gw, &scaled_job("web", 1)).await;
    register(&gw, &scaled_job("api", 1)).await;
    for (query, want) in [
        ("", 2),
        ("?job=web", 1),
        ("?job=nope", 0),
        ("?type=horiz", 2),
        ("?type=vertical", 0),
        ("?job=api&type=horizontal", 1),
    ] {
        let r = gw
            .http("GET", &format!("/v1/scaling/policies{query}"), b"")
            .await;
        assert_eq!(r.status, 200);
        assert_eq!(r.json().as_array().unwrap().len(), want, "{query}");
    }
    gw.stop().await;
}

pub async fn a_scaling_block_out_of_bounds_is_400_and_writes_nothing(backend: Backend) {
    let gw = TestGateway::start(backend, "http-scaling-bad").await;
    let r = gw
        .http("PUT", "/v1/jobs", &body(&scaled_job("web", 9)))
        .await;
    assert_eq!(r.status, 400);
    assert!(
        r.text().contains("must not be greater than maximum count"),
        "{}",
        r.text()
    );
    assert_eq!(gw.key_count().await, 0);
    gw.stop().await;
}

pub async fn scaling_outside_the_policy_bounds_is_400(backend: Backend) {
    let gw = TestGateway::start(backend, "http-scaling-bounds").await;
    register(&gw, &scaled_job("web", 2)).await;
    for (count, want) in [
        (0, "group count was less than scaling policy minimum: 0 < 1"),
        (
            6,
            "group count was greater than scaling policy maximum: 6 > 5",
        ),
    ] {
        let r = gw
            .http(
                "POST",
                "/v1/job/web/scale",
                &body(&json!({"Count": count, "Target": {"Group": "web"}})),
            )
            .await;
        assert_eq!(r.status, 400, "{count}");
        assert!(r.text().contains(want), "{}", r.text());
    }
    assert_eq!(gw.job("web").await.unwrap().task_groups[0].count, 2);
    let r = gw
        .http(
            "POST",
            "/v1/job/web/scale",
            &body(&json!({"Count": 5, "Target": {"Group": "web"}})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    gw.stop().await;
}

//! Looking at a job without writing it: HCL parsing, validation and plans.

use serde_json::{Value, json};

use crate::common::{Backend, TestGateway};
use crate::fixtures::{body, client_node, nomad_job, register_node};

const WEB_HCL: &str = r#"
job "web" {
  datacenters = ["dc1"]
  group "web" {
    count = 3
    task "app" {
      driver = "mock"
      config { run_for = "10s" }
      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
"#;

/// Parses [`WEB_HCL`] into canonical Nomad JSON.
async fn parse_web(gw: &TestGateway) -> Value {
    let r = gw
        .http(
            "POST",
            "/v1/jobs/parse",
            &body(&json!({"JobHCL": WEB_HCL, "Canonicalize": true})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

/// Plans the parsed [`WEB_HCL`] with its diff, with one node to place on.
async fn plan_web(gw: &TestGateway) -> Value {
    let parsed = parse_web(gw).await;
    register_node(gw, client_node("n1", "")).await;
    let plan = gw
        .http(
            "POST",
            "/v1/job/web/plan",
            &body(&json!({"Job": parsed, "Diff": true})),
        )
        .await;
    assert_eq!(plan.status, 200, "{}", plan.text());
    plan.json()
}

pub async fn hcl_parses_to_nomad_json(backend: Backend) {
    let gw = TestGateway::start(backend, "http-parse").await;
    let parsed = parse_web(&gw).await;
    assert_eq!(parsed["ID"], "web");
    assert_eq!(parsed["TaskGroups"][0]["Count"], 3);
    gw.stop().await;
}

pub async fn parse_answers_the_job_as_written_unless_canonicalized(backend: Backend) {
    let gw = TestGateway::start(backend, "http-parse-canonical").await;
    let as_written = gw
        .http("POST", "/v1/jobs/parse", &body(&json!({"JobHCL": WEB_HCL})))
        .await;
    assert_eq!(as_written.status, 200, "{}", as_written.text());
    let job = as_written.json();
    assert_eq!(
        (job["ID"].clone(), job["Name"].clone()),
        (json!("web"), json!("web"))
    );
    assert!(job.get("Type").is_none_or(Value::is_null), "{job}");
    assert!(job.get("Priority").is_none_or(Value::is_null), "{job}");
    assert!(job.get("Job").is_none(), "the job is the answer itself");
    let canonical = gw
        .http(
            "POST",
            "/v1/jobs/parse",
            &body(&json!({"JobHCL": WEB_HCL, "Canonicalize": true})),
        )
        .await
        .json();
    assert_eq!(canonical["Type"], "service");
    assert_eq!(canonical["Priority"], 50);
    assert_eq!(canonical["Name"], "web");
    let r = gw
        .http("POST", "/v1/jobs/parse", &body(&json!({"JobHCL": ""})))
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.text(), "JobHCL: Job spec is empty");
    gw.stop().await;
}

/// [`WEB_HCL`] with a `vault` block, which Caravan refuses: it has no Vault integration.
const WEB_WITH_VAULT_HCL: &str = r#"
job "web" {
  group "web" {
    task "app" {
      driver = "mock"
      vault {
        policies = ["app"]
      }
    }
  }
}
"#;

pub async fn a_refused_block_is_400_from_parse_register_and_validate(backend: Backend) {
    let gw = TestGateway::start(backend, "http-parse-refused").await;
    let want = "vault is not supported by Caravan";
    for canonicalize in [false, true] {
        let r = gw
            .http(
                "POST",
                "/v1/jobs/parse",
                &body(&json!({"JobHCL": WEB_WITH_VAULT_HCL, "Canonicalize": canonicalize})),
            )
            .await;
        assert_eq!(r.status, 400, "{}", r.text());
        assert!(r.text().contains(want), "{}", r.text());
    }
    let mut job = nomad_job("web", 1);
    job["Job"]["TaskGroups"][0]["Tasks"][0]["Vault"] = json!({"Policies": ["app"]});
    let r = gw.http("POST", "/v1/jobs", &body(&job)).await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains(want), "{}", r.text());
    assert_eq!(gw.job("web").await, None);
    let r = gw.http("POST", "/v1/validate/job", &body(&job)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let errors = r.json()["ValidationErrors"].clone();
    assert!(
        errors.to_string().contains("is not supported by Caravan"),
        "{errors}"
    );
    gw.stop().await;
}

pub async fn unparseable_hcl_is_400(backend: Backend) {
    let gw = TestGateway::start(backend, "http-parse-bad").await;
    let r = gw
        .http("POST", "/v1/jobs/parse", &body(&json!({"JobHCL": "job {"})))
        .await;
    assert_eq!(r.status, 400, "{}", r.text());
    gw.stop().await;
}

pub async fn a_plan_places_every_instance_and_diffs_the_job_as_added(backend: Backend) {
    let gw = TestGateway::start(backend, "http-plan").await;
    let plan = plan_web(&gw).await;
    assert_eq!(
        plan["Annotations"]["DesiredTGUpdates"]["web"]["Place"], 3,
        "{plan:#}"
    );
    assert_eq!(plan["Diff"]["Type"], "Added");
    assert_eq!(plan["FailedTGAllocs"], Value::Null);
    gw.stop().await;
}

pub async fn a_plan_writes_no_job_and_no_eval(backend: Backend) {
    let gw = TestGateway::start(backend, "http-plan-writes").await;
    plan_web(&gw).await;
    assert_eq!(gw.job("web").await, None, "a plan writes nothing");
    assert!(gw.evals().await.is_empty());
    gw.stop().await;
}

pub async fn validation_reports_problems_in_a_200_and_writes_nothing(backend: Backend) {
    let gw = TestGateway::start(backend, "http-validate-bad").await;
    let r = gw
        .http("POST", "/v1/validate/job", &body(&nomad_job("web", -1)))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert!(!v["ValidationErrors"].as_array().unwrap().is_empty());
    assert!(v["Error"].as_str().unwrap().contains("count"));
    assert_eq!(gw.key_count().await, 0);
    gw.stop().await;
}

pub async fn validation_of_a_good_job_has_no_errors_and_writes_nothing(backend: Backend) {
    let gw = TestGateway::start(backend, "http-validate-ok").await;
    let ok = gw
        .http("POST", "/v1/validate/job", &body(&nomad_job("web", 1)))
        .await
        .json();
    assert_eq!(ok["ValidationErrors"], json!([]));
    assert_eq!(gw.key_count().await, 0);
    gw.stop().await;
}

//! A job's source kept per version (`Submission` in the register body,
//! `GET /v1/job/:id/submission?version=`), and `/v1/jobs/parse` with the
//! `Variables` of a variables file.

use serde_json::json;

use crate::common::{Backend, TestGateway};
use crate::fixtures::{body, nomad_job};

const SOURCE: &str = r#"
variable "count" {
  default = 1
}
job "web" {
  group "web" {
    count = var.count
    task "app" {
      driver = "mock"
    }
  }
}
"#;

pub async fn a_submission_is_kept_with_its_version(backend: Backend) {
    let gw = TestGateway::start(backend, "http-submission").await;
    let mut registration = nomad_job("web", 2);
    registration["Submission"] = json!({
        "Source": SOURCE,
        "Format": "hcl2",
        "VariableFlags": {"count": "2"},
        "Variables": "region = \"eu\"\n",
    });
    let r = gw.http("PUT", "/v1/jobs", &body(&registration)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let job_modify = r.json()["JobModifyIndex"].as_u64().unwrap();

    let r = gw
        .http("GET", "/v1/job/web/submission?version=0", b"")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let sub = r.json();
    assert_eq!(sub["Source"], SOURCE);
    assert_eq!(sub["Format"], "hcl2");
    assert_eq!(sub["VariableFlags"], json!({"count": "2"}));
    assert_eq!(sub["Variables"], "region = \"eu\"\n");
    assert_eq!(sub["JobID"], "web");
    assert_eq!(sub["Namespace"], "default");
    assert_eq!(sub["Version"], 0);
    assert_eq!(sub["JobModifyIndex"].as_u64(), Some(job_modify));

    // A new version sent without one has none; the old one keeps its own.
    let r = gw
        .http("PUT", "/v1/jobs", &body(&nomad_job("web", 3)))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = gw
        .http("GET", "/v1/job/web/submission?version=1", b"")
        .await;
    assert_eq!((r.status, r.text().as_str()), (404, "job source not found"));
    let r = gw
        .http("GET", "/v1/job/web/submission?version=0", b"")
        .await;
    assert_eq!(r.status, 200);
    let r = gw.http("GET", "/v1/job/web/submission", b"").await;
    assert_eq!(r.status, 400);
    assert!(
        r.text()
            .contains("Unable to parse job submission version parameter")
    );

    let mut bad = nomad_job("web", 2);
    bad["Submission"] = json!({"Source": "x", "Format": "yaml"});
    let r = gw.http("PUT", "/v1/jobs", &body(&bad)).await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("Submission.Format"), "{}", r.text());

    // A purge takes the job's submissions with it.
    let r = gw.http("DELETE", "/v1/job/web?purge=true", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = gw
        .http("GET", "/v1/job/web/submission?version=0", b"")
        .await;
    assert_eq!(r.status, 404);
}

pub async fn parse_applies_the_variables_file(backend: Backend) {
    let gw = TestGateway::start(backend, "http-parse-vars").await;
    let request = json!({"JobHCL": SOURCE, "Variables": "count = 5\n", "Canonicalize": true});
    let r = gw.http("POST", "/v1/jobs/parse", &body(&request)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["TaskGroups"][0]["Count"], 5);
    let request = json!({"JobHCL": SOURCE});
    let r = gw.http("POST", "/v1/jobs/parse", &body(&request)).await;
    assert_eq!(r.json()["TaskGroups"][0]["Count"], 1);
    let request = json!({"JobHCL": SOURCE, "HCLv1": true});
    let r = gw.http("POST", "/v1/jobs/parse", &body(&request)).await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("HCLv1"));
}

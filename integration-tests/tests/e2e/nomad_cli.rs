//! The `caravan` CLI as a Nomad user runs it: nothing set but `NOMAD_ADDR`
//! (the gateway's HTTP API) and `NOMAD_TOKEN`, ACLs on. It runs, inspects,
//! scales, stops and purges a job; `-json` prints what the HTTP API answers
//! and `-t` runs Go templates over it; `job plan` exits 0 without changes,
//! 1 with them and 255 on error, as Nomad's does.

use caravan_integration_tests::{Cluster, HttpApi};
use hyper::Method;
use serde_json::Value;

use crate::wait_running;

const JOB: &str = r#"
job "web" {
  datacenters = ["*"]

  # No deployments: each count change is placed at once.
  update {
    max_parallel = 0
  }

  group "web" {
    count = COUNT

    task "sleep" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["300"]
      }

      resources {
        cpu    = 20
        memory = 20
      }
    }
  }
}
"#;

fn text(out: &std::process::Output) -> String {
    format!(
        "status {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A `key = value` line's value in the CLI's output.
fn field(out: &str, key: &str) -> String {
    out.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(" = ")?;
            (k.trim() == key).then(|| v.trim().to_string())
        })
        .unwrap_or_default()
}

/// `GET path` of the HTTP API with the token, as JSON.
async fn api_json(http: &HttpApi, token: &str, path: &str) -> Value {
    let reply = http
        .request_with(Method::GET, path, None, &[("X-Nomad-Token", token)])
        .await
        .unwrap();
    reply.ok_json().unwrap()
}

/// The HTTP API's answer without what changes between two reads of an
/// unchanged cluster (the index the gateway's cache reached and the time the
/// gateway last heard from its store).
fn settled(mut v: Value) -> Value {
    if let Value::Object(map) = &mut v {
        map.remove("LastContact");
        map.remove("Index");
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_with_only_nomads_environment_runs_scales_stops_and_purges_a_job() {
    let mut c = Cluster::new("nomad-cli").await.unwrap();
    c.start_gateway(&[("acl.enabled", "true")]).await.unwrap();
    c.start_broker(&[]).await.unwrap();
    c.start_applier(&[]).await.unwrap();
    c.start_worker(&[]).await.unwrap();
    c.start_deployment_watcher(&[]).await.unwrap();
    c.start_client("node-a", &[("drivers", "raw_exec")])
        .await
        .unwrap();
    let addr = c.nomad_addr().unwrap();
    let http = c.http().unwrap();
    let file = |count: u32, name: &str| {
        let path = c.dir().join(name);
        std::fs::write(&path, JOB.replace("COUNT", &count.to_string())).unwrap();
        path.to_str().unwrap().to_string()
    };
    let one = file(1, "web.nomad.hcl");
    let three = file(3, "web3.nomad.hcl");

    // The token comes from `acl bootstrap`, itself over NOMAD_ADDR alone.
    let anonymous = [("NOMAD_ADDR", addr.as_str())];
    let out = c
        .cli_nomad_env(&["acl", "bootstrap"], &anonymous)
        .await
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let secret = field(&stdout(&out), "Secret ID");
    assert_eq!(secret.len(), 36, "{}", text(&out));
    let out = c
        .cli_nomad_env(&["job", "status"], &anonymous)
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("Permission denied"), "{}", text(&out));
    let env = [
        ("NOMAD_ADDR", addr.as_str()),
        ("NOMAD_TOKEN", secret.as_str()),
    ];
    let cli = |args: &'static [&'static str]| c.cli_nomad_env(args, &env);

    // Run.
    let out = c.cli_nomad_env(&["job", "run", &one], &env).await.unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        stdout(&out).contains("finished with status \"complete\""),
        "{}",
        text(&out)
    );
    wait_running(&c, "web", 1).await;

    // Inspect: the table, Nomad's JSON as the HTTP API answers it, a template.
    let out = cli(&["job", "status", "web"]).await.unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(field(&stdout(&out), "Status"), "running");
    let out = cli(&["job", "inspect", "-json", "web"]).await.unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed, api_json(&http, &secret, "/v1/job/web").await);
    let out = cli(&["job", "status", "-json", "web"]).await.unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let expected = serde_json::json!([{
        "Summary": api_json(&http, &secret, "/v1/job/web/summary").await,
        "Allocations": api_json(&http, &secret, "/v1/job/web/allocations?all=false").await,
        "LatestDeployment": api_json(&http, &secret, "/v1/job/web/deployment").await,
        "Evaluations": api_json(&http, &secret, "/v1/job/web/evaluations").await,
    }]);
    assert_eq!(printed, expected);
    let out = cli(&["alloc", "status", "-json"]).await.unwrap();
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed, api_json(&http, &secret, "/v1/allocations").await);
    let out = cli(&["node", "status", "-json"]).await.unwrap();
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed, api_json(&http, &secret, "/v1/nodes").await);
    let out = cli(&["operator", "scheduler", "get-config", "-json"])
        .await
        .unwrap();
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let answer = api_json(&http, &secret, "/v1/operator/scheduler/configuration").await;
    assert_eq!(settled(printed), settled(answer));
    let out = cli(&[
        "job",
        "status",
        "-t",
        "{{ range . }}{{ .Summary.JobID }}:{{ range $g, $s := .Summary.Summary }}{{ $g }}={{ $s.Running }}{{ end }}{{ end }}",
    ])
    .await
    .unwrap();
    assert_eq!(stdout(&out).trim(), "web:web=1", "{}", text(&out));
    let out = cli(&[
        "job",
        "allocs",
        "-t",
        r#"{{ range . }}{{ printf "%s %s\n" .TaskGroup .ClientStatus }}{{ end }}"#,
        "web",
    ])
    .await
    .unwrap();
    assert_eq!(stdout(&out).trim(), "web running", "{}", text(&out));

    // Scale, monitored to the end.
    let out = cli(&["job", "scale", "web", "3"]).await.unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        stdout(&out).contains("finished with status \"complete\""),
        "{}",
        text(&out)
    );
    wait_running(&c, "web", 3).await;
    let out = cli(&["job", "allocs", "-json", "web"]).await.unwrap();
    let allocs: Value = serde_json::from_slice(&out.stdout).unwrap();
    let running = allocs
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["ClientStatus"] == "running")
        .count();
    assert_eq!(running, 3, "{allocs}");

    // Plan: 0 when nothing would change, 1 when allocations would, 255 on error.
    let out = c
        .cli_nomad_env(&["job", "plan", &three], &env)
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = c.cli_nomad_env(&["job", "plan", &one], &env).await.unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(stdout(&out).contains("(2 destroy"), "{}", text(&out));
    let missing = c.dir().join("missing.hcl");
    let out = c
        .cli_nomad_env(&["job", "plan", missing.to_str().unwrap()], &env)
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(255), "{}", text(&out));

    // Stop, then purge.
    let out = cli(&["job", "stop", "web"]).await.unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let out = cli(&["job", "status", "-short", "web"]).await.unwrap();
    assert_eq!(
        field(&stdout(&out), "Status"),
        "dead (stopped)",
        "{}",
        text(&out)
    );
    let out = cli(&["job", "stop", "-purge", "web"]).await.unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let out = cli(&["job", "status", "web"]).await.unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("No job(s) with prefix or ID \"web\" found"),
        "{}",
        text(&out)
    );
    assert!(c.exited().is_empty(), "{:?}", c.exited());
}

//! Issue 44's workload identity with a real client: a raw_exec task with
//! `identity { env = true file = true }` finds its token in `NOMAD_TOKEN`
//! and `secrets/nomad_token` (the owner's only), reads its own job's
//! Variable with it through the HTTP API (ACLs on) and not another job's,
//! and the token stops working once the job is stopped. An identity with a
//! `ttl` is signed again while the task runs; a template reads the job's
//! Variable with the task's identity.

use std::path::Path;

use caravan_integration_tests::{Cluster, HttpApi, Progress, jobs, wait_for};
use hyper::Method;
use serde_json::{Value, json};

use crate::{STEP, wait_running};

/// A variables key for the test's gateway (base64 of 32 bytes).
const VARIABLES_KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

async fn send(
    http: &HttpApi,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, String) {
    let reply = http
        .request_with(
            method,
            path,
            body.map(|b| b.to_string().into_bytes()),
            &[("X-Nomad-Token", token)],
        )
        .await
        .unwrap();
    (reply.status, reply.text())
}

/// A task that copies what it was given into `dir/<alloc id>.*`, then sleeps.
fn reporting_task(dir: &Path) -> Value {
    let out = format!("{}/$NOMAD_ALLOC_ID", dir.display());
    let script = format!(
        "printf %s \"$NOMAD_TOKEN\" > {out}.env.partial && mv {out}.env.partial {out}.env; \
         cp \"$NOMAD_SECRETS_DIR/nomad_token\" {out}.file.partial && mv {out}.file.partial {out}.file; \
         cp local/owner.txt {out}.tmpl.partial && mv {out}.tmpl.partial {out}.tmpl; \
         stat -c %a \"$NOMAD_SECRETS_DIR/nomad_token\" > {out}.mode; \
         while sleep 0.2; do cp \"$NOMAD_SECRETS_DIR/nomad_short.jwt\" {out}.short.partial && \
         mv {out}.short.partial {out}.short; done"
    );
    let mut task = jobs::raw_exec_task(&script);
    task["Identity"] = json!({"Env": true, "File": true});
    // A template reads the job's Variable with the task's identity.
    task["Templates"] = json!([{
        "EmbeddedTmpl": "{{ with nomadVar \"nomad/jobs/idjob\" }}{{ .owner }}{{ end }}\n",
        "DestPath": "local/owner.txt",
        "ChangeMode": "noop",
    }]);
    // An identity for another audience that lives 2 s: renewed as it runs.
    task["Identities"] = json!([{
        "Name": "short",
        "Audience": ["example.com"],
        "File": true,
        "TTL": 2_000_000_000i64,
        "ChangeMode": "noop",
    }]);
    task
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_uses_its_identity_until_its_job_stops() {
    let mut c = Cluster::new("workload-identity").await.unwrap();
    c.start_gateway(&[("acl.enabled", "true"), ("variables_key", VARIABLES_KEY)])
        .await
        .unwrap();
    c.start_broker(&[]).await.unwrap();
    c.start_applier(&[]).await.unwrap();
    c.start_worker(&[]).await.unwrap();
    c.start_deployment_watcher(&[]).await.unwrap();
    c.start_client("node-a", &[("drivers", "raw_exec")])
        .await
        .unwrap();
    let http = c.http().unwrap();
    let boot = http
        .request_with(Method::POST, "/v1/acl/bootstrap", Some(Vec::new()), &[])
        .await
        .unwrap();
    assert_eq!(boot.status, 200, "{}", boot.text());
    let root = boot.json().unwrap()["SecretID"]
        .as_str()
        .unwrap()
        .to_string();
    for path in ["nomad/jobs/idjob", "nomad/jobs/other"] {
        let (status, text) = send(
            &http,
            Method::PUT,
            &format!("/v1/var/{path}"),
            &root,
            Some(json!({"Items": {"owner": path}})),
        )
        .await;
        assert_eq!(status, 200, "{text}");
    }
    let dir = c.dir().join("identity-out");
    std::fs::create_dir_all(&dir).unwrap();
    let job = jobs::service_job("idjob", 1, reporting_task(&dir));
    let (status, text) = send(&http, Method::PUT, "/v1/jobs", &root, Some(job)).await;
    assert_eq!(status, 200, "{text}");
    let alloc = wait_running(&c, "idjob", 1).await.remove(0);

    // The task's environment and secrets dir hold the same token.
    let base = dir.join(&alloc.id);
    let (env, file, mode) = wait_for("the task's report", STEP, async || {
        let read = |ext: &str| std::fs::read_to_string(base.with_extension(ext)).ok();
        Ok(match (read("env"), read("file"), read("mode")) {
            (Some(env), Some(file), Some(mode)) => Progress::Done((env, file, mode)),
            _ => Progress::Waiting("no report yet".into()),
        })
    })
    .await
    .unwrap();
    assert_eq!(env.split('.').count(), 3, "a JWT: {env:?}");
    assert_eq!(env, file, "NOMAD_TOKEN and secrets/nomad_token");
    assert_eq!(mode.trim(), "600");
    let rendered = std::fs::read_to_string(base.with_extension("tmpl")).unwrap();
    assert_eq!(
        rendered.trim(),
        "nomad/jobs/idjob",
        "the template read the Variable"
    );

    // Its own job's Variable, not another's, and nothing else.
    let (status, text) = send(&http, Method::GET, "/v1/var/nomad/jobs/idjob", &env, None).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("nomad/jobs/idjob"), "{text}");
    let (status, _) = send(&http, Method::GET, "/v1/var/nomad/jobs/other", &env, None).await;
    assert_eq!(status, 403);
    let (status, _) = send(&http, Method::GET, "/v1/jobs", &env, None).await;
    assert_eq!(status, 403);
    let jwks = http.get_json("/.well-known/jwks.json").await.unwrap();
    assert_eq!(jwks["keys"][0]["alg"], "EdDSA");

    // The short-lived identity is signed again while the task runs, and
    // its file rewritten in place; it is not for the API.
    let short = base.with_extension("short");
    let first = wait_for("the short-lived token", STEP, async || {
        Ok(match std::fs::read_to_string(&short) {
            Ok(t) if t.split('.').count() == 3 => Progress::Done(t),
            _ => Progress::Waiting("no token yet".into()),
        })
    })
    .await
    .unwrap();
    wait_for("a renewed short-lived token", STEP, async || {
        Ok(match std::fs::read_to_string(&short) {
            Ok(t) if t.split('.').count() == 3 && t != first => Progress::Done(()),
            _ => Progress::Waiting("the first token still".into()),
        })
    })
    .await
    .unwrap();
    let (status, text) = send(&http, Method::GET, "/v1/var/nomad/jobs/idjob", &first, None).await;
    assert_eq!(status, 403, "another audience: {text}");
    assert!(text.contains("audience"), "{text}");

    // The job stops: the token is refused from then on.
    let (status, text) = send(&http, Method::DELETE, "/v1/job/idjob", &root, None).await;
    assert_eq!(status, 200, "{text}");
    wait_for("the stopped alloc's token refused", STEP, async || {
        let (status, text) = send(&http, Method::GET, "/v1/var/nomad/jobs/idjob", &env, None).await;
        Ok(if status == 403 {
            assert!(text.contains("allocation is stopped"), "{text}");
            Progress::Done(())
        } else {
            Progress::Waiting(format!("{status}: {text}"))
        })
    })
    .await
    .unwrap();
}

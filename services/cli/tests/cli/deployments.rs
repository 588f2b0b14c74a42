//! Deployments, versions and the lifecycle verbs end to end on `caravan
//! dev`: a deployment followed by the watcher to success, canaries promoted,
//! a deployment paused, resumed and failed, history with diffs, a revert, a
//! dispatch, a forced periodic launch and a garbage collection.

#![allow(clippy::unwrap_used)]

use crate::common::{WAIT, cli, eventually_some, options};
use caravan_cli::{Api, DevCluster, DevOptions};

const WEB_HCL: &str = r#"
job "web" {
  type = "service"
  group "web" {
    count = COUNT
    update {
      max_parallel      = 1
      min_healthy_time  = "1s"
      healthy_deadline  = "30s"
      progress_deadline = "1m"
    }
    task "web" {
      driver = "mock"
      config {
        run_for = "10m"
      }
      resources {
        cpu    = 10
        memory = 10
      }
    }
  }
}
"#;

const RENDER_HCL: &str = r#"
job "render" {
  type = "batch"
  parameterized {
    payload       = "optional"
    meta_optional = ["who"]
  }
  group "render" {
    task "render" {
      driver = "mock"
      config {
        run_for = "1s"
      }
      resources {
        cpu    = 10
        memory = 10
      }
    }
  }
}
"#;

const CRON_HCL: &str = r#"
job "cron" {
  type = "batch"
  periodic {
    crons            = ["0 0 1 1 *"]
    prohibit_overlap = true
  }
  group "cron" {
    task "cron" {
      driver = "mock"
      config {
        run_for = "1s"
      }
      resources {
        cpu    = 10
        memory = 10
      }
    }
  }
}
"#;

/// A service job's deployment followed to success by the dev cluster's
/// deployment watcher, then its versions, a revert, a dispatch, a forced
/// periodic launch and a garbage collection.
async fn deploy_revert_and_dispatch(options: DevOptions) {
    let cluster = DevCluster::start(options)
        .await
        .expect("dev cluster starts");
    let address = cluster.http_address();
    let dir = tempfile::tempdir().unwrap();
    let web = dir.path().join("web.hcl");
    std::fs::write(&web, WEB_HCL.replace("COUNT", "1")).unwrap();
    let web = web.to_str().unwrap();

    let (code, out, err) = cli(&address, &["job", "run", web]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("Evaluation within deployment: \""), "{out}");

    // The watcher sees the alloc healthy and marks the deployment successful.
    let list = eventually_some("the deployment to succeed", WAIT, || async {
        let (code, out, _) = cli(&address, &["deployment", "list"]).await;
        (code == 0 && out.contains("successful")).then_some(out)
    })
    .await;
    assert!(
        list.starts_with("ID        Job ID  Job Version  Status      Description\n"),
        "{list}"
    );
    let short = list.lines().nth(1).unwrap()[..8].to_string();
    let (code, out, _) = cli(&address, &["deployment", "status", &short]).await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with(&format!(
            "ID          = {short}\nJob ID      = web\nJob Version = 0\nStatus      = successful\n"
        )),
        "{out}"
    );
    assert!(
        out.contains("\n\nDeployed\nTask Group  Desired  Placed  Healthy  Unhealthy  Progress Deadline\nweb         1        1       1        0          "),
        "{out}"
    );
    let (code, out, _) = cli(&address, &["job", "status", "web"]).await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "Latest Deployment\nID          = {short}\nStatus      = successful\n"
        )),
        "{out}"
    );
    let (code, _, err) = cli(&address, &["deployment", "status", "ffffffff"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("No deployment(s) with prefix or id"), "{err}");

    // A second version, its diff in the history, and a revert to the first.
    let web2 = dir.path().join("web2.hcl");
    std::fs::write(&web2, WEB_HCL.replace("COUNT", "2")).unwrap();
    let (code, out, err) = cli(&address, &["job", "run", "-detach", web2.to_str().unwrap()]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let (code, out, err) = cli(&address, &["job", "history", "-p", "web"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("Version     = 1\nStable      = false\n"),
        "{out}"
    );
    assert!(out.contains("Count: \"1\" => \"2\""), "{out}");
    assert!(
        out.contains("\n\nVersion     = 0\nStable      = true\n"),
        "{out}"
    );
    let (code, out, err) = cli(&address, &["job", "revert", "-detach", "web", "0"]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.starts_with("Evaluation ID: "), "{out}");
    let (code, out, _) = cli(&address, &["job", "history", "-version", "2", "web"]).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("Version     = 2\n"), "{out}");
    let (code, _, err) = cli(&address, &["job", "revert", "web", "zero"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("must be an integer"), "{err}");

    // A parameterized job dispatched with a payload and meta.
    let render = dir.path().join("render.hcl");
    std::fs::write(&render, RENDER_HCL).unwrap();
    let (code, out, err) = cli(&address, &["job", "run", render.to_str().unwrap()]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let payload = dir.path().join("payload");
    std::fs::write(&payload, b"frame 1").unwrap();
    let (code, out, err) = cli(
        &address,
        &[
            "job",
            "dispatch",
            "-detach",
            "-meta",
            "who=me",
            "render",
            payload.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.starts_with("Dispatched Job ID = render/dispatch-"),
        "{out}"
    );
    assert!(out.contains("\nEvaluation ID     = "), "{out}");
    // An idempotency token dispatches once; a second dispatch with it answers
    // the same child (without an evaluation), over HTTP and over gRPC.
    let once = [
        "job",
        "dispatch",
        "-detach",
        "-idempotency-token",
        "nightly-42",
        "-id-prefix-template",
        "nightly",
        "render",
    ];
    let (code, out, err) = cli(&address, &once).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.starts_with("Dispatched Job ID = render/dispatch-nightly-"),
        "{out}"
    );
    assert!(out.contains("\nEvaluation ID     = "), "{out}");
    let child = out.lines().next().unwrap().to_string();
    let (code, again, err) = cli(&address, &once).await;
    assert_eq!(code, 0, "stdout:\n{again}\nstderr:\n{err}");
    assert_eq!(again.trim_end(), child);
    let grpc = cluster.address();
    let line: Vec<&str> = ["-grpc-address", grpc.as_str()]
        .into_iter()
        .chain(once)
        .collect();
    let (code, again, err) = crate::common::run(&line).await;
    assert_eq!(code, 0, "stdout:\n{again}\nstderr:\n{err}");
    assert_eq!(again.trim_end(), child);
    let mut twice = once;
    twice[4] = "nightly-43";
    let line: Vec<&str> = ["-grpc-address", grpc.as_str()]
        .into_iter()
        .chain(twice)
        .collect();
    let (code, other, err) = crate::common::run(&line).await;
    assert_eq!(code, 0, "stdout:\n{other}\nstderr:\n{err}");
    assert!(
        other.starts_with("Dispatched Job ID = render/dispatch-nightly-")
            && !other.starts_with(&child),
        "{other}"
    );

    let (code, _, err) = cli(&address, &["job", "dispatch", "-meta", "nope", "render"]).await;
    assert_eq!(code, 1);
    assert_eq!(err.trim_end(), "Error parsing meta value: nope");

    // A periodic job launched now, then a garbage collection.
    let cron = dir.path().join("cron.hcl");
    std::fs::write(&cron, CRON_HCL).unwrap();
    let (code, out, err) = cli(&address, &["job", "run", cron.to_str().unwrap()]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let (code, out, err) = cli(&address, &["job", "periodic", "force", "-detach", "cron"]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.starts_with("Force periodic successful\nEvaluation ID: "),
        "{out}"
    );
    let children = Api::new(&cluster.address(), "default")
        .unwrap()
        .list_jobs("cron/periodic-")
        .await
        .unwrap();
    assert_eq!(children.len(), 1, "{children:?}");
    let (code, _, err) = cli(&address, &["job", "periodic", "force", "web"]).await;
    assert_eq!(code, 1);
    assert!(
        err.contains("No periodic job(s) with prefix or ID \"web\""),
        "{err}"
    );
    let (code, out, err) = cli(&address, &["system", "gc"]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.is_empty(), "{out}");

    cluster.stop().await.expect("dev cluster stops cleanly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dev_follows_deployments_and_reverts_and_dispatches_on_the_embedded_store() {
    let dir = tempfile::tempdir().unwrap();
    deploy_revert_and_dispatch(options(dir.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dev_follows_deployments_and_reverts_and_dispatches_on_etcd() {
    let dir = tempfile::tempdir().unwrap();
    let options = DevOptions {
        etcd: caravan_testkit::etcd_endpoints(),
        prefix: caravan_testkit::unique_prefix("cli-deploy"),
        ..options(dir.path())
    };
    deploy_revert_and_dispatch(options).await;
}

const CANARY_HCL: &str = r#"
job "canary" {
  type = "service"
  group "canary" {
    count = 2
    update {
      canary            = 1
      max_parallel      = 1
      min_healthy_time  = "1s"
      healthy_deadline  = "30s"
      progress_deadline = "1m"
    }
    task "canary" {
      driver = "mock"
      config {
        run_for = "RUN_FOR"
      }
      resources {
        cpu    = 10
        memory = 10
      }
    }
  }
}
"#;

/// The short id of job `job`'s deployment of `version` once `ready` holds.
async fn deployment_of(
    api: &Api,
    job: &str,
    version: u64,
    what: &str,
    ready: impl Fn(&caravan_proto::Deployment) -> bool,
) -> String {
    eventually_some(what, WAIT, || async {
        let deployments = api.list_deployments().await.ok()?;
        deployments
            .into_iter()
            .find(|d| d.job_id == job && d.job_version == version && ready(d))
            .map(|d| d.id[..8].to_string())
    })
    .await
}

/// Canaries wait for `deployment promote`; a deployment is paused, resumed
/// and failed by hand.
async fn promote_pause_resume_and_fail(options: DevOptions) {
    let cluster = DevCluster::start(options)
        .await
        .expect("dev cluster starts");
    let address = cluster.http_address();
    let api = Api::new(&cluster.address(), "default").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let version = |n: u64, run_for: &str| {
        let path = dir.path().join(format!("canary-{n}.hcl"));
        std::fs::write(&path, CANARY_HCL.replace("RUN_FOR", run_for)).unwrap();
        path.to_str().unwrap().to_string()
    };
    let successful =
        |d: &caravan_proto::Deployment| d.status() == caravan_proto::DeploymentStatus::Successful;

    let v0 = version(0, "10m");
    let (code, out, err) = cli(&address, &["job", "run", "-detach", &v0]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    deployment_of(&api, "canary", 0, "version 0 to deploy", successful).await;

    // Version 1 places one canary and waits for promotion.
    let v1 = version(1, "11m");
    let (code, out, err) = cli(&address, &["job", "run", "-detach", &v1]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let id = deployment_of(&api, "canary", 1, "a healthy canary", |d| {
        d.task_groups
            .get("canary")
            .is_some_and(|g| g.healthy_allocs >= 1)
    })
    .await;
    let (code, out, _) = cli(&address, &["deployment", "status", &id]).await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("Task Group  Promoted  Desired  Canaries  Placed  Healthy  Unhealthy  Progress Deadline\ncanary      false     2        1         1       1        0"),
        "{out}"
    );
    let (code, out, err) = cli(&address, &["deployment", "pause", &id]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(out, format!("Deployment \"{id}\" paused\n"));
    let (code, out, _) = cli(&address, &["deployment", "status", &id]).await;
    assert_eq!(code, 0);
    assert!(out.contains("\nStatus      = paused\n"), "{out}");
    let (code, out, err) = cli(&address, &["deployment", "resume", "-detach", &id]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.starts_with(&format!("Deployment \"{id}\" resumed\n")),
        "{out}"
    );
    let (code, out, err) = cli(&address, &["deployment", "promote", "-detach", &id]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    // The monitor follows it to its end.
    let (code, out, err) = tokio::time::timeout(
        crate::common::WAIT,
        cli(&address, &["deployment", "status", "-monitor", &id]),
    )
    .await
    .expect("the monitor returns when the deployment ends");
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains(&format!(": Monitoring deployment \"{id}\"\n")),
        "{out}"
    );
    assert!(out.contains("\nStatus      = successful\n"), "{out}");
    let (code, out, _) = cli(&address, &["deployment", "status", &id]).await;
    assert_eq!(code, 0);
    assert!(
        out.contains("\ncanary      true      2        1   "),
        "{out}"
    );

    // Version 2 is failed by hand while its canary waits.
    let v2 = version(2, "12m");
    let (code, out, err) = cli(&address, &["job", "run", "-detach", &v2]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let id = deployment_of(&api, "canary", 2, "version 2's deployment", |d| {
        d.status() == caravan_proto::DeploymentStatus::Running
    })
    .await;
    let (code, out, err) = cli(&address, &["deployment", "fail", "-detach", &id]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.starts_with(&format!("Deployment \"{id}\" failed.\n")),
        "{out}"
    );
    let (code, out, _) = cli(&address, &["deployment", "status", &id]).await;
    assert_eq!(code, 0);
    assert!(out.contains("\nStatus      = failed\n"), "{out}");
    let (code, out, _) = cli(&address, &["status", &id]).await;
    assert_eq!(code, 0);
    assert!(out.contains("\nJob ID      = canary\n"), "{out}");

    cluster.stop().await.expect("dev cluster stops cleanly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn canaries_are_promoted_and_deployments_paused_resumed_and_failed_on_the_embedded_store() {
    let dir = tempfile::tempdir().unwrap();
    promote_pause_resume_and_fail(options(dir.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn canaries_are_promoted_and_deployments_paused_resumed_and_failed_on_etcd() {
    let dir = tempfile::tempdir().unwrap();
    let options = DevOptions {
        etcd: caravan_testkit::etcd_endpoints(),
        prefix: caravan_testkit::unique_prefix("cli-canary"),
        ..options(dir.path())
    };
    promote_pause_resume_and_fail(options).await;
}

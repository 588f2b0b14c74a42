//! `caravan dev` end to end, in process: the dev cluster on free ports, the
//! CLI's own commands against it, and a real process started and stopped by
//! the client node. Once on the embedded store, once on etcd.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use caravan_cli::{Api, DevCluster, DevOptions, Ui, run_args};
use caravan_proto::AllocClientStatus;

const WAIT: Duration = Duration::from_secs(30);

fn hello_hcl() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hello.hcl")
}

/// Runs one CLI command line against `address`; returns exit code, stdout, stderr.
async fn cli(address: &str, line: &[&str]) -> (u8, String, String) {
    let (mut ui, captured) = Ui::captured();
    let head = ["caravan", "-address", address];
    let args: Vec<String> = head
        .iter()
        .chain(line.iter())
        .map(|s| s.to_string())
        .collect();
    let code = run_args(args, &mut ui).await;
    (code, captured.stdout(), captured.stderr())
}

/// The pids of processes whose environment says they run `alloc_id`.
fn processes_of(alloc_id: &str) -> Vec<u32> {
    let needle = format!("NOMAD_ALLOC_ID={alloc_id}");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| env.split(|b| *b == 0).any(|v| v == needle.as_bytes()))
                .unwrap_or(false)
        })
        .collect()
}

async fn eventually<T, F, Fut>(what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn run_hello_and_stop_it(options: DevOptions) {
    let cluster = DevCluster::start(options)
        .await
        .expect("dev cluster starts");
    let address = cluster.address();
    let api = Api::new(&address, "default").unwrap();
    let hello = hello_hcl();
    let hello = hello.to_str().unwrap();

    // Register and monitor the example job.
    let (code, out, err) = cli(&address, &["job", "run", hello]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains(": Monitoring evaluation \""), "{out}");
    assert!(
        out.contains("Evaluation triggered by job \"hello\""),
        "{out}"
    );
    assert!(out.contains("created: node \""), "{out}");
    assert!(out.contains("finished with status \"complete\""), "{out}");

    // The allocation runs a real process.
    let alloc = eventually("the alloc to run", || async {
        let allocs = api.job_allocations("hello").await.ok()?;
        allocs
            .into_iter()
            .find(|a| a.client_status() == AllocClientStatus::Running)
    })
    .await;
    let pids = eventually("the task's process", || async {
        let pids = processes_of(&alloc.id);
        (!pids.is_empty()).then_some(pids)
    })
    .await;
    assert!(!pids.is_empty());
    let short = &alloc.id[..8];

    // Its output is readable through the gateway by short id.
    let logs = eventually("the task's output", || async {
        let (code, out, _) = cli(&address, &["alloc", "logs", short]).await;
        (code == 0 && out.contains("hello from hello.hello[0] (0)")).then_some(out)
    })
    .await;
    assert!(logs.lines().count() >= 1);

    let (code, out, _) = cli(&address, &["job", "status", "hello"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("Status        = running"), "{out}");
    assert!(out.contains(&format!("{short}  ")), "{out}");
    let (code, out, _) = cli(&address, &["alloc", "status", short]).await;
    assert_eq!(code, 0);
    assert!(out.contains("Task \"hello\" is \"running\""), "{out}");
    let (code, out, _) = cli(&address, &["node", "status"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("eligible     ready"), "{out}");

    // A job that fits nowhere reports its failed placements and exit 2.
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.hcl");
    std::fs::write(
        &big,
        std::fs::read_to_string(hello_hcl())
            .unwrap()
            .replace("job \"hello\"", "job \"big\"")
            .replace("memory = 32", "memory = 90000000"),
    )
    .unwrap();
    let (code, out, _) = cli(&address, &["job", "run", big.to_str().unwrap()]).await;
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("but failed to place all allocations:"),
        "{out}"
    );
    assert!(
        out.contains("Task Group \"hello\" (failed to place 1 allocation):"),
        "{out}"
    );
    assert!(
        out.contains("* Dimension \"memory\" exhausted on 1 nodes"),
        "{out}"
    );
    assert!(
        out.contains("waiting for additional capacity to place remainder"),
        "{out}"
    );

    // A job the gateway would refuse is refused before it is sent.
    let bad = dir.path().join("bad.hcl");
    std::fs::write(
        &bad,
        std::fs::read_to_string(hello_hcl())
            .unwrap()
            .replace("job \"hello\"", "job \"bad\"")
            .replace("count = 1", "count = -1"),
    )
    .unwrap();
    let (code, out, err) = cli(&address, &["job", "run", bad.to_str().unwrap()]).await;
    assert_eq!(code, 1, "{out}");
    assert!(err.contains("count"), "{err}");
    assert!(api.job("bad").await.is_err());

    // Stopping the job stops the process.
    let (code, out, err) = cli(&address, &["job", "stop", "hello"]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("finished with status \"complete\""), "{out}");
    eventually("the process to exit", || async {
        processes_of(&alloc.id).is_empty().then_some(())
    })
    .await;
    let (code, out, _) = cli(&address, &["job", "status"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("dead (stopped)"), "{out}");

    cluster.stop().await.expect("dev cluster stops cleanly");
}

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
    let address = cluster.address();
    let dir = tempfile::tempdir().unwrap();
    let web = dir.path().join("web.hcl");
    std::fs::write(&web, WEB_HCL.replace("COUNT", "1")).unwrap();
    let web = web.to_str().unwrap();

    let (code, out, err) = cli(&address, &["job", "run", web]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("Evaluation within deployment: \""), "{out}");

    // The watcher sees the alloc healthy and marks the deployment successful.
    let list = eventually("the deployment to succeed", || async {
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
    let children = Api::new(&address, "default")
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

fn options(dir: &Path) -> DevOptions {
    DevOptions {
        data_dir: Some(dir.join("client")),
        grpc_port: 0,
        http_port: 0,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dev_on_the_embedded_store_runs_logs_and_stops_a_job() {
    let dir = tempfile::tempdir().unwrap();
    run_hello_and_stop_it(options(dir.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dev_on_etcd_runs_logs_and_stops_a_job() {
    let dir = tempfile::tempdir().unwrap();
    let options = DevOptions {
        etcd: caravan_testkit::etcd_endpoints(),
        prefix: caravan_testkit::unique_prefix("cli-dev"),
        ..options(dir.path())
    };
    run_hello_and_stop_it(options).await;
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

#[tokio::test]
async fn an_unreachable_gateway_is_one_clear_line() {
    let (code, out, err) = cli("http://127.0.0.1:1", &["job", "status"]).await;
    assert_eq!(code, 1);
    assert!(out.is_empty());
    assert!(
        err.starts_with("Error connecting to the api-gateway at http://127.0.0.1:1"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

#[tokio::test]
async fn usage_errors_and_help_do_not_touch_the_network() {
    let (code, _, err) = cli("http://127.0.0.1:1", &["job", "frobnicate"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("frobnicate"), "{err}");
    let (code, out, _) = cli("http://127.0.0.1:1", &["job", "--help"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("run"), "{out}");
    let (code, _, err) = cli("http://127.0.0.1:1", &["job", "run", "/nonexistent.hcl"]).await;
    assert_eq!(code, 1);
    assert!(err.starts_with("Error reading job file"), "{err}");
}

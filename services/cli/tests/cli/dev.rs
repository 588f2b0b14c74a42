//! `caravan dev` end to end, in process: the dev cluster on free ports, the
//! CLI's own commands against it, and a real process started and stopped by
//! the client node. Once on the embedded store, once on etcd.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use crate::common::{self, WAIT, cli, eventually_some, options};
use caravan_cli::{Api, DevCluster, DevOptions};
use caravan_proto::AllocClientStatus;

fn hello_hcl() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hello.hcl")
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

async fn run_hello_and_stop_it(options: DevOptions) {
    let cluster = DevCluster::start(options)
        .await
        .expect("dev cluster starts");
    let address = cluster.http_address();
    let api = Api::new(&cluster.address(), "default").unwrap();
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
    let alloc = eventually_some("the alloc to run", WAIT, || async {
        let allocs = api.job_allocations("hello").await.ok()?;
        allocs
            .into_iter()
            .find(|a| a.client_status() == AllocClientStatus::Running)
    })
    .await;
    let pids = eventually_some("the task's process", WAIT, || async {
        let pids = processes_of(&alloc.id);
        (!pids.is_empty()).then_some(pids)
    })
    .await;
    assert!(!pids.is_empty());
    let short = &alloc.id[..8];

    // Its output is readable through the gateway by short id.
    let logs = eventually_some("the task's output", WAIT, || async {
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

    // The same pages over Caravan's gRPC API; -json there names the HTTP API.
    let grpc = cluster.address();
    let over_grpc = |line: &'static [&'static str]| {
        let grpc = grpc.clone();
        async move {
            let args: Vec<&str> = ["-grpc-address", grpc.as_str()]
                .into_iter()
                .chain(line.iter().copied())
                .collect();
            common::run(&args).await
        }
    };
    let (code, out, err) = over_grpc(&["job", "status", "hello"]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("Status        = running"), "{out}");
    let (code, _, err) = over_grpc(&["job", "status", "-json", "hello"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("needs Nomad's HTTP API"), "{err}");

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
    eventually_some("the process to exit", WAIT, || async {
        processes_of(&alloc.id).is_empty().then_some(())
    })
    .await;
    let (code, out, _) = cli(&address, &["job", "status"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("dead (stopped)"), "{out}");

    cluster.stop().await.expect("dev cluster stops cleanly");
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

#[tokio::test]
async fn validate_without_a_gateway_warns_of_a_consul_service() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("consul.hcl");
    std::fs::write(
        &path,
        r#"job "c" {
  group "g" {
    network {
      port "http" {}
    }
    service {
      port = "http"
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "sleep"
      }
    }
  }
}
"#,
    )
    .unwrap();
    let (code, out, err) = cli(
        "http://127.0.0.1:1",
        &["job", "validate", path.to_str().unwrap()],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("Job Warnings:")
            && out.contains(r#"service "c-g" has provider "consul" (the default)"#),
        "{out}"
    );
    assert!(out.contains("Job validation successful"), "{out}");
}

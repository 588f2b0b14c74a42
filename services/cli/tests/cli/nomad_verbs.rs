//! The verbs Nomad's CLI has beside run/status/stop, against `caravan dev`
//! over the HTTP API: `job init` and `job validate`, `job allocs`, `job
//! restart` (in place and `-reschedule`), `job promote`, `operator scheduler`,
//! the generic `status`, the refused `operator snapshot`, and completion.

#![allow(clippy::unwrap_used)]

use caravan_cli::DevCluster;
use caravan_proto::AllocClientStatus;
use serde_json::Value;

use crate::common::{self, WAIT, cli, eventually_some, options};

const SERVICE: &str = r#"
job "svc" {
  # No deployments: each restart is followed by its replacement only.
  update {
    max_parallel = 0
  }
  group "web" {
    count = 2
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn init_validate_allocs_restart_promote_scheduler_and_status() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = DevCluster::start(options(dir.path()))
        .await
        .expect("dev cluster starts");
    let address = cluster.http_address();
    let api = caravan_cli::Api::new(&cluster.address(), "default").unwrap();

    // job init writes Nomad's example once; job validate accepts it.
    let example = dir.path().join("example.nomad.hcl");
    let path = example.to_str().unwrap();
    let (code, out, err) = cli(&address, &["job", "init", path]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(out.trim(), format!("Example job file written to {path}"));
    let (code, _, err) = cli(&address, &["job", "init", path]).await;
    assert_eq!(code, 1);
    assert!(err.contains("already exists"), "{err}");
    let (code, out, err) = cli(&address, &["job", "validate", path]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.trim_end().ends_with("Job validation successful"),
        "{out}"
    );
    let short = dir.path().join("short.nomad.hcl");
    let (code, _, _) = cli(
        &address,
        &["job", "init", "-short", short.to_str().unwrap()],
    )
    .await;
    assert_eq!(code, 0);
    assert!(std::fs::read_to_string(&short).unwrap().contains("redis:7"));

    // A service job of two allocations.
    let job = dir.path().join("svc.hcl");
    std::fs::write(&job, SERVICE).unwrap();
    let (code, out, err) = cli(&address, &["job", "run", job.to_str().unwrap()]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let running = || async {
        let allocs = api.job_allocations("svc").await.ok()?;
        let n = allocs
            .iter()
            .filter(|a| a.client_status() == AllocClientStatus::Running)
            .count();
        (n == 2).then_some(allocs)
    };
    eventually_some("two running allocations", WAIT, running).await;

    let (code, out, _) = cli(&address, &["job", "allocs", "svc"]).await;
    assert_eq!(code, 0);
    assert!(out.starts_with("ID  "), "{out}");
    assert_eq!(out.matches(" running ").count(), 2, "{out}");
    let (code, out, _) = cli(&address, &["job", "allocs", "-json", "svc"]).await;
    assert_eq!(code, 0);
    let stubs: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(stubs.as_array().unwrap().len(), 2, "{out}");

    // Restarts in place, both at once, then replaces each.
    let (code, out, err) = cli(
        &address,
        &["job", "restart", "-yes", "-batch-size", "2", "svc"],
    )
    .await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("Restarting 1st batch of 2 allocations"),
        "{out}"
    );
    assert!(out.ends_with("Job restarted successfully!\n"), "{out}");
    let (code, out, err) = cli(&address, &["job", "restart", "-yes", "-reschedule", "svc"]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(out.matches("Rescheduling allocation").count(), 2, "{out}");
    let (code, _, err) = cli(
        &address,
        &["job", "restart", "-task", "x", "-reschedule", "-yes", "svc"],
    )
    .await;
    assert_eq!(code, 1);
    assert!(
        err.contains("The -reschedule option cannot be used with -task"),
        "{err}"
    );

    // No deployment to promote.
    let (code, _, err) = cli(&address, &["job", "promote", "svc"]).await;
    assert_eq!(code, 1);
    assert!(
        err.contains("Job \"svc\" has no deployment to promote"),
        "{err}"
    );

    // The scheduler configuration, changed field by field.
    let (code, out, err) = cli(
        &address,
        &[
            "operator",
            "scheduler",
            "set-config",
            "-scheduler-algorithm",
            "spread",
            "-preempt-batch-scheduler=true",
        ],
    )
    .await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(out.trim(), "Scheduler configuration updated!");
    let (code, out, _) = cli(&address, &["operator", "scheduler", "get-config"]).await;
    assert_eq!(code, 0);
    assert!(
        out.contains("Scheduler Algorithm           = spread"),
        "{out}"
    );
    assert!(
        out.contains("Preemption Batch Scheduler    = true"),
        "{out}"
    );
    assert!(
        out.contains("Preemption System Scheduler   = true"),
        "{out}"
    );
    let (_, out, _) = cli(
        &address,
        &[
            "operator",
            "scheduler",
            "get-config",
            "-t",
            "{{ .SchedulerConfig.SchedulerAlgorithm }}",
        ],
    )
    .await;
    assert_eq!(out.trim(), "spread");

    // The generic status finds an allocation by prefix, and says when nothing matches.
    let alloc = api.job_allocations("svc").await.unwrap().remove(0);
    let (code, out, err) = cli(&address, &["status", &alloc.id[..8]]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let first = out.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("ID ") && first.ends_with(&alloc.id),
        "{out}"
    );
    let (code, out, _) = cli(&address, &["status", "svc"]).await;
    assert_eq!(code, 0);
    assert!(out.starts_with("ID            = svc"), "{out}");
    let (code, _, err) = cli(&address, &["status", "zzzz"]).await;
    assert_eq!(code, 1);
    assert_eq!(err.trim(), "Unable to resolve ID: \"zzzz\"");

    // job scale -check-index scales from a known job modify index only, over
    // the HTTP API and over gRPC.
    let modify_index = || async {
        let line = ["job", "inspect", "-t", "{{ .JobModifyIndex }}", "svc"];
        let (code, out, err) = cli(&address, &line).await;
        assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
        out.trim().parse::<u64>().unwrap()
    };
    let before = modify_index().await;
    let stale = (before - 1).to_string();
    let line = [
        "job",
        "scale",
        "-check-index",
        &stale,
        "-detach",
        "svc",
        "web",
        "1",
    ];
    let (code, out, err) = cli(&address, &line).await;
    assert_eq!(code, 1, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.starts_with("Error submitting scaling request: "),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "enforcing job modify index {stale}: job exists with conflicting job modify index: {before}"
        )),
        "{err}"
    );
    let current = before.to_string();
    let line = [
        "job",
        "scale",
        "-check-index",
        &current,
        "-detach",
        "svc",
        "web",
        "1",
    ];
    let (code, out, err) = cli(&address, &line).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.starts_with("Job scale successful\nEvaluation ID: "),
        "{out}"
    );
    let after = modify_index().await;
    assert!(after > before, "{before} -> {after}");
    let grpc = cluster.address();
    let over_grpc = |index: u64| {
        let grpc = grpc.clone();
        async move {
            let index = index.to_string();
            let line = [
                "-grpc-address",
                &grpc,
                "job",
                "scale",
                "-check-index",
                &index,
                "-detach",
                "svc",
                "2",
            ];
            common::run(&line).await
        }
    };
    let (code, _, err) = over_grpc(before).await;
    assert_eq!(code, 1);
    assert!(err.contains("conflicting job modify index"), "{err}");
    let (code, out, err) = over_grpc(after).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.starts_with("Job scale successful\n"), "{out}");

    // Snapshots are etcd's.
    let (code, _, err) = cli(&address, &["operator", "snapshot", "save", "x.snap"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("etcdctl snapshot save"), "{err}");

    // Completion scripts need no cluster.
    let (code, out, _) = cli(&address, &["completions", "bash"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("_caravan()"), "{out}");
    cluster.stop().await.unwrap();
}

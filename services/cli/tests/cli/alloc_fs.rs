//! `alloc fs`, `alloc signal`, `alloc restart` and `alloc logs -tail` against
//! a dev cluster running a real process that counts lines and traps SIGUSR1.

#![allow(clippy::unwrap_used)]

use crate::common::{WAIT, cli, eventually_some, options};
use caravan_cli::{Api, DevCluster};
use caravan_proto::AllocClientStatus;

/// Prints lines 1..=30, notes a SIGUSR1 in the alloc dir, then idles.
const JOB: &str = r#"
job "counter" {
  type        = "service"
  datacenters = ["*"]
  group "counter" {
    task "count" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args = ["-c", <<EOT
trap 'echo got-usr1 >> "$NOMAD_ALLOC_DIR/signals"' USR1
echo run >> "$NOMAD_ALLOC_DIR/runs"
i=1; while [ $i -le 30 ]; do echo "line $i"; i=$((i+1)); done
printf 'abc\ndef\n' > "$NOMAD_TASK_DIR/note.txt"
while true; do sleep 0.1; done
EOT
        ]
      }
      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn alloc_fs_signal_restart_and_log_tails() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = DevCluster::start(options(dir.path()))
        .await
        .expect("dev cluster starts");
    let address = cluster.http_address();
    let api = Api::new(&cluster.address(), "default").unwrap();
    let job = dir.path().join("counter.hcl");
    std::fs::write(&job, JOB).unwrap();
    let (code, out, err) = cli(&address, &["job", "run", "-detach", job.to_str().unwrap()]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let alloc = eventually_some("the alloc to run", WAIT, || async {
        let allocs = api.job_allocations("counter").await.ok()?;
        allocs
            .into_iter()
            .find(|a| a.client_status() == AllocClientStatus::Running)
    })
    .await;
    let short = alloc.id[..8].to_string();
    let short = short.as_str();

    // The whole log is there; -tail -n keeps its last lines, -c its last bytes.
    eventually_some("the task's output", WAIT, || async {
        let (code, out, _) = cli(&address, &["alloc", "logs", short]).await;
        (code == 0 && out.contains("line 30\n")).then_some(())
    })
    .await;
    let (code, out, err) = cli(&address, &["alloc", "logs", "-tail", "-n", "3", short]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "line 28\nline 29\nline 30\n");
    let (code, out, _) = cli(&address, &["alloc", "logs", "-tail", short, "count"]).await;
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 10, "{out}");
    assert!(out.starts_with("line 21\n"), "{out}");
    let (code, out, _) = cli(&address, &["alloc", "logs", "-tail", "-c", "8", short]).await;
    assert_eq!(code, 0);
    assert_eq!(out, "line 30\n");
    let (code, _, err) = cli(
        &address,
        &["alloc", "logs", "-tail", "-n", "1", "-c", "1", short],
    )
    .await;
    assert_eq!(code, 1);
    assert!(err.contains("Both -n and -c are not allowed"), "{err}");

    // The file system: the alloc dir, a listing, a file, its details, a tail.
    let (code, out, err) = cli(&address, &["alloc", "fs", short]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("Mode"), "{out}");
    assert!(
        out.contains(" alloc/\n") && out.contains(" count/"),
        "{out}"
    );
    let (code, out, _) = cli(&address, &["alloc", "fs", short, "alloc/logs"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("count.stdout.0"), "{out}");
    let note = eventually_some("the task's file", WAIT, || async {
        let (code, out, _) = cli(&address, &["alloc", "fs", short, "count/local/note.txt"]).await;
        (code == 0).then_some(out)
    })
    .await;
    assert_eq!(note, "abc\ndef\n");
    let (code, out, _) = cli(
        &address,
        &["alloc", "fs", "-stat", "-H", short, "count/local/note.txt"],
    )
    .await;
    assert_eq!(code, 0);
    assert!(out.contains("Content Type"), "{out}");
    assert!(out.contains("  8  ") && out.contains("note.txt"), "{out}");
    let (code, out, _) = cli(
        &address,
        &[
            "alloc",
            "fs",
            "-tail",
            "-n",
            "1",
            short,
            "count/local/note.txt",
        ],
    )
    .await;
    assert_eq!(code, 0);
    assert_eq!(out, "def\n");
    let (code, _, err) = cli(&address, &["alloc", "fs", short, "../../etc/passwd"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("escapes the alloc directory"), "{err}");

    // A signal reaches the process; a bad one is refused.
    let (code, out, err) = cli(
        &address,
        &["alloc", "signal", "-s", "SIGUSR1", short, "count"],
    )
    .await;
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    eventually_some("the task traps SIGUSR1", WAIT, || async {
        let (code, out, _) = cli(&address, &["alloc", "fs", short, "alloc/signals"]).await;
        (code == 0 && out.contains("got-usr1")).then_some(())
    })
    .await;
    let (code, _, err) = cli(&address, &["alloc", "signal", "-s", "SIGNOPE", short]).await;
    assert_eq!(code, 1);
    assert!(err.contains("invalid signal"), "{err}");

    // A restart runs the task again in the same alloc.
    let (code, _, err) = cli(&address, &["alloc", "restart", short]).await;
    assert_eq!(code, 0, "{err}");
    eventually_some("the task runs again", WAIT, || async {
        let (code, out, _) = cli(&address, &["alloc", "fs", short, "alloc/runs"]).await;
        (code == 0 && out == "run\nrun\n").then_some(())
    })
    .await;
    let status = eventually_some("the restart is reported", WAIT, || async {
        let (code, out, _) = cli(&address, &["alloc", "status", short]).await;
        (code == 0 && out.contains("Total Restarts = 1")).then_some(out)
    })
    .await;
    assert!(status.contains("Restart Signaled"), "{status}");

    cluster.stop().await.expect("dev cluster stops cleanly");
}

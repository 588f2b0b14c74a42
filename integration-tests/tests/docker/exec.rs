//! `alloc exec` into a container, through the CLI as a Nomad user runs it
//! (`NOMAD_ADDR`, Nomad's WebSocket endpoint), the gateway and the node's
//! docker exec: output, stdin echoed back, stderr apart, the command's exit
//! code as the CLI's, a terminal when asked; the gRPC transport refuses it.

use std::process::Output;

use caravan_integration_tests::Cluster;
use caravan_integration_tests::docker::ContainerSweeper;

use crate::{docker_cluster, docker_job, docker_task, register, running};

fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout: {:?}\nstderr: {:?}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `caravan alloc exec ARGS…` with `stdin`: its exit code and output.
pub async fn exec_cli(
    c: &Cluster,
    env: &[(&str, &str)],
    args: &[&str],
    stdin: &[u8],
) -> (Option<i32>, Output) {
    let mut all = vec!["alloc", "exec"];
    all.extend_from_slice(args);
    let out = c.cli_nomad_env_stdin(&all, env, stdin).await.unwrap();
    (out.status.code(), out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alloc_exec_runs_commands_in_the_container() {
    let sweeper = ContainerSweeper::default();
    let (c, _) = docker_cluster("docker-exec", "exec-a", &[], &sweeper).await;
    let mut task = docker_task("busybox:1", "exec sleep 300");
    task["Env"] = serde_json::json!({"GREETING": "from-the-task"});
    register(&c.http().unwrap(), &docker_job("exec", task)).await;
    let alloc = running(&c, "exec").await;
    let addr = c.nomad_addr().unwrap();
    let env = [("NOMAD_ADDR", addr.as_str())];
    let exec = async |args: Vec<&str>, stdin: &[u8]| exec_cli(&c, &env, &args, stdin).await;

    // Output, and the task's environment inside the container.
    let (code, out) = exec(vec![&alloc.id, "sh", "-c", "echo $GREETING"], b"").await;
    assert_eq!(code, Some(0), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "from-the-task\n");

    // Stdin reaches the command and comes back; its end ends `cat`.
    let (code, out) = exec(vec![&alloc.id, "cat"], b"ping\npong\n").await;
    assert_eq!(code, Some(0), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ping\npong\n");

    // Stderr apart from stdout; the exit code is the CLI's.
    let (code, out) = exec(
        vec![&alloc.id, "sh", "-c", "echo out; echo err >&2; exit 3"],
        b"",
    )
    .await;
    assert_eq!(code, Some(3), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "err\n");

    // -i=false: the command gets no input at all.
    let (code, out) = exec(vec!["-i=false", &alloc.id, "cat"], b"ignored\n").await;
    assert_eq!(code, Some(0), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");

    // -t: the command runs on a terminal.
    let (code, out) = exec(vec!["-t", &alloc.id, "tty"], b"").await;
    assert_eq!(code, Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("/dev/pts/"),
        "{}",
        text(&out)
    );

    // The command's own flags are left to it.
    let (code, out) = exec(vec![&alloc.id, "ls", "-d", "/local"], b"").await;
    assert_eq!(code, Some(0), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "/local\n");

    // A task that is not in the alloc is named.
    let (code, out) = exec(vec!["-task", "nope", &alloc.id, "true"], b"").await;
    assert_eq!(code, Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nope"),
        "{}",
        text(&out)
    );

    // Caravan's gRPC transport has no exec: it says which address to use.
    let out = c.cli(&["alloc", "exec", &alloc.id, "true"]).await.unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("needs Nomad's HTTP API"),
        "{}",
        text(&out)
    );
}

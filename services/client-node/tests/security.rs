//! The client node's security defaults against a fake api-gateway: the node
//! secret it keeps and presents, tasks that inherit nothing of the client's
//! environment, and tasks run as their `user`.

// Helpers outside #[test] functions may unwrap too: a failure is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use caravan_proto::{AllocClientStatus, JobType, Task};
use common::*;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(15);

/// What the task `task` of `alloc_id` wrote to stdout.
fn stdout_of(data_dir: &Path, alloc_id: &str, task: &str) -> String {
    let log = data_dir
        .join("allocs")
        .join(alloc_id)
        .join(format!("alloc/logs/{task}.stdout.0"));
    std::fs::read_to_string(&log).unwrap_or_default()
}

/// Runs `tasks` as one batch alloc on the client's node and waits until it
/// reaches `status`; returns the alloc's id.
async fn run_batch(
    fake: &FakeGateway,
    node_id: &str,
    tasks: Vec<Task>,
    status: AllocClientStatus,
) -> String {
    let job = job("sec", JobType::Batch, tasks);
    let a = alloc(&job, 0);
    fake.push(node_id, vec![a.clone()], vec![job]);
    until("the alloc finishes", WAIT, || {
        fake.status(&a.id) == Some(status)
    })
    .await;
    a.id
}

#[tokio::test]
async fn every_call_presents_the_secret_kept_in_the_data_dir() {
    let stop_fake = CancellationToken::new();
    let fake = FakeGateway::new(Duration::from_millis(600));
    let addr = fake.serve(stop_fake.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let client = start(config(addr, dir.path()), shutdown.clone())
        .await
        .unwrap();
    let node_id = client.ready.node_ids[0].clone();
    let work = task("work", "mock", vec![("run_for", s("10ms"))]);
    run_batch(&fake, &node_id, vec![work], AllocClientStatus::Complete).await;
    until("a heartbeat", WAIT, || {
        fake.seen.lock().heartbeats.contains_key(&node_id)
    })
    .await;
    stop(client, shutdown).await;

    let kept = std::fs::read_to_string(dir.path().join("client/secret-id")).unwrap();
    let kept = kept.trim();
    assert!(!kept.is_empty());
    assert_ne!(kept, node_id, "the secret is not the public id");
    {
        let seen = fake.seen.lock();
        for call in ["register", "heartbeat", "watch", "update"] {
            assert!(
                seen.secrets.iter().any(|(c, _)| *c == call),
                "no {call} call seen"
            );
        }
        for (call, secret) in &seen.secrets {
            assert_eq!(secret, kept, "{call} presented another secret");
        }
    }
    // A restart on the same data dir is the same node with the same secret.
    let before = fake.seen.lock().secrets.len();
    let shutdown = CancellationToken::new();
    let client = start(config(addr, dir.path()), shutdown.clone())
        .await
        .unwrap();
    assert_eq!(client.ready.node_ids[0], node_id);
    until("a second registration", WAIT, || {
        fake.seen.lock().registrations.len() == 2
    })
    .await;
    stop(client, shutdown).await;
    let seen = fake.seen.lock();
    assert!(seen.secrets[before..].iter().all(|(_, s)| s == kept));
    drop(seen);
    stop_fake.cancel();
}

/// The client-node binary, run as its own process with a secret in its
/// environment and `data_dir` as its data dir, against `gateway`.
fn spawn_client_binary(gateway: std::net::SocketAddr, data_dir: &Path) -> tokio::process::Child {
    let stderr = std::fs::File::create(data_dir.join("client.log")).unwrap();
    tokio::process::Command::new(env!("CARGO_BIN_EXE_caravan-client-node"))
        .args([
            "--set",
            &format!("servers={gateway}"),
            "--set",
            &format!("data_dir={}", data_dir.display()),
            "--set",
            "grpc_addr=127.0.0.1:0",
            "--set",
            "name=env-test",
            "--set",
            "drivers=raw_exec,mock",
            "--set",
            "stop_tasks_on_shutdown=true",
        ])
        .env("CARAVAN_TEST_SECRET", "the-clients-own-secret")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

#[tokio::test]
async fn a_task_sees_neither_the_clients_environment_nor_its_path() {
    let stop_fake = CancellationToken::new();
    let fake = FakeGateway::new(Duration::from_secs(5));
    let addr = fake.serve(stop_fake.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let mut client = spawn_client_binary(addr, dir.path());
    let registered = tokio::time::timeout(WAIT, async {
        loop {
            if let Some(n) = fake.seen.lock().registrations.first() {
                return n.id.clone();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let Ok(node_id) = registered else {
        let log = std::fs::read_to_string(dir.path().join("client.log")).unwrap_or_default();
        panic!("the client binary never registered; its log:\n{log}");
    };

    let mut plain = sh_task("plain", "env");
    plain.env.insert("FROM_THE_JOB".into(), "yes".into());
    let mut own_path = sh_task("own-path", "echo \"PATH=$PATH\"");
    own_path
        .env
        .insert("PATH".into(), "/opt/task/bin:/usr/bin:/bin".into());
    let alloc_id = run_batch(
        &fake,
        &node_id,
        vec![plain, own_path],
        AllocClientStatus::Complete,
    )
    .await;

    let env = stdout_of(dir.path(), &alloc_id, "plain");
    assert!(
        !env.contains("the-clients-own-secret") && !env.contains("CARAVAN_TEST_SECRET"),
        "the client's environment leaked into the task:\n{env}"
    );
    let lines: Vec<&str> = env.lines().collect();
    assert!(
        lines.contains(&"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
        "{env}"
    );
    assert!(lines.contains(&"FROM_THE_JOB=yes"), "{env}");
    assert!(
        lines.contains(&format!("NOMAD_ALLOC_ID={alloc_id}").as_str()),
        "{env}"
    );
    assert_eq!(
        stdout_of(dir.path(), &alloc_id, "own-path").trim(),
        "PATH=/opt/task/bin:/usr/bin:/bin"
    );

    if let Some(pid) = client.id().and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    let ended = tokio::time::timeout(Duration::from_secs(20), client.wait()).await;
    assert!(ended.is_ok(), "the client binary stops on SIGTERM");
    stop_fake.cancel();
}

/// Starts an in-process client against a fresh fake; returns what a test needs.
async fn in_process_client(
    dir: &Path,
) -> (
    FakeGateway,
    CancellationToken,
    Client,
    CancellationToken,
    String,
) {
    let stop_fake = CancellationToken::new();
    let fake = FakeGateway::new(Duration::from_secs(5));
    let addr = fake.serve(stop_fake.clone()).await;
    let shutdown = CancellationToken::new();
    let client = start(config(addr, dir), shutdown.clone()).await.unwrap();
    let node_id = client.ready.node_ids[0].clone();
    (fake, stop_fake, client, shutdown, node_id)
}

/// Running a task as another user needs a client running as root: these
/// tests fail rather than pass unchecked elsewhere (`scripts/test` and CI
/// run as root).
fn require_root() {
    let uid = nix::unistd::Uid::effective();
    assert!(
        uid.is_root(),
        "running a task as another user needs a client running as root; \
         this test runs as uid {uid}: run it as root (scripts/test in CI does)"
    );
}

#[tokio::test]
async fn a_task_runs_as_its_user_with_its_groups_home_and_name() {
    require_root();
    let nobody = nix::unistd::User::from_name("nobody")
        .unwrap()
        .expect("user nobody exists on this machine");
    let dir = tempfile::tempdir().unwrap();
    let (fake, stop_fake, client, shutdown, node_id) = in_process_client(dir.path()).await;
    let mut t = sh_task(
        "who",
        "id -u; id -g; echo \"HOME=$HOME USER=$USER\"; touch \"$NOMAD_TASK_DIR/mine\" mine \
         \"$NOMAD_ALLOC_DIR/data/mine\" && echo wrote",
    );
    t.user = "nobody".into();
    let alloc_id = run_batch(&fake, &node_id, vec![t], AllocClientStatus::Complete).await;
    let out = stdout_of(dir.path(), &alloc_id, "who");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.first().copied(), Some("65534"), "{out}");
    assert_eq!(lines[0], nobody.uid.to_string());
    assert_eq!(lines[1], nobody.gid.to_string(), "{out}");
    assert_eq!(
        lines[2],
        format!("HOME={} USER=nobody", nobody.dir.display())
    );
    assert_eq!(
        lines[3], "wrote",
        "the task writes in its own local dir: {out}"
    );
    // Whatever the umask, the task's dirs are the user's and the shared ones
    // open to all, as /tmp is.
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let alloc_dir = dir.path().join("allocs").join(&alloc_id);
    for own in ["who", "who/local", "who/secrets", "who/tmp"] {
        let meta = std::fs::metadata(alloc_dir.join(own)).unwrap();
        assert_eq!(meta.uid(), nobody.uid.as_raw(), "{own}");
    }
    for shared in ["alloc/data", "alloc/tmp"] {
        let mode = std::fs::metadata(alloc_dir.join(shared))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o1777, "{shared}: {mode:o}");
    }
    stop(client, shutdown).await;
    stop_fake.cancel();
}

#[tokio::test]
async fn an_unknown_user_fails_the_task_naming_the_user() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, stop_fake, client, shutdown, node_id) = in_process_client(dir.path()).await;
    let mut t = sh_task("ghost", "echo should not run");
    t.user = "caravan-no-such-user".into();
    let alloc_id = run_batch(&fake, &node_id, vec![t], AllocClientStatus::Failed).await;
    let update = fake.update(&alloc_id).unwrap();
    let state = &update.task_states["ghost"];
    assert!(state.failed);
    let failure = state
        .events
        .iter()
        .find(|e| e.r#type == "Driver Failure")
        .expect("a driver failure event");
    assert!(
        failure
            .message
            .contains("\"caravan-no-such-user\" not found"),
        "{}",
        failure.message
    );
    assert!(stdout_of(dir.path(), &alloc_id, "ghost").is_empty());
    stop(client, shutdown).await;
    stop_fake.cancel();
}

#[tokio::test]
async fn a_task_run_as_its_user_that_cannot_start_is_a_driver_failure() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let (fake, stop_fake, client, shutdown, node_id) = in_process_client(dir.path()).await;
    let mut t = task(
        "missing",
        "raw_exec",
        vec![("command", s("/caravan/no/such/command"))],
    );
    t.user = "nobody".into();
    let alloc_id = run_batch(&fake, &node_id, vec![t], AllocClientStatus::Failed).await;
    let update = fake.update(&alloc_id).unwrap();
    let state = &update.task_states["missing"];
    assert!(state.failed);
    // As without a user: the start failed, nothing ran and exited 127.
    let failure = state
        .events
        .iter()
        .find(|e| e.r#type == "Driver Failure")
        .unwrap_or_else(|| panic!("a driver failure event: {:?}", state.events));
    assert!(
        failure.message.contains("/caravan/no/such/command")
            && failure.message.contains("No such file"),
        "{}",
        failure.message
    );
    assert!(
        !state.events.iter().any(|e| e.r#type == "Terminated"),
        "{:?}",
        state.events
    );
    stop(client, shutdown).await;
    stop_fake.cancel();
}

//! Nomad's client endpoints end to end: a real client node in-process runs a
//! `raw_exec` task placed on it, and the gateway reads the task's files,
//! streams one, reports host and alloc usage, signals the task (which traps
//! the signal and says so in a file), restarts it in place (it runs again)
//! and garbage-collects the alloc once it has finished.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use caravan_client_node::{ClientConfig, ClientNodeService};
use caravan_proto::{AllocClientStatus, AllocDesiredStatus, Allocation};
use caravan_runtime::service::{NoStore, Running};
use caravan_state::encode;
use caravan_testkit::wait::eventually_some;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{Backend, TestGateway};

const ALLOC: &str = "c0ffee00-0000-4000-8000-000000000001";
const WAIT: Duration = Duration::from_secs(30);

/// The client-node binary, which supervises `raw_exec` tasks, built next to
/// this test's `deps/`.
fn supervisor() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("caravan-client-node");
    assert!(
        bin.exists(),
        "{} is missing: build it first (cargo build -p caravan-client-node --bins)",
        bin.display()
    );
    bin
}

/// A task that notes each run and each SIGUSR1 in the shared alloc dir,
/// writes a file to its local dir, and runs until stopped.
const SCRIPT: &str = r#"trap 'echo got-usr1 >> "$NOMAD_ALLOC_DIR/signals"' USR1
echo run >> "$NOMAD_ALLOC_DIR/runs"
echo hello-stdout
echo hello > "$NOMAD_TASK_DIR/hello.txt"
echo token > "$NOMAD_SECRETS_DIR/token"
while true; do sleep 0.1; done"#;

fn job() -> Vec<u8> {
    serde_json::to_vec(&json!({"Job": {
        "ID": "fs",
        "Type": "service",
        "TaskGroups": [{"Name": "fs", "Count": 1, "Tasks": [{
            "Name": "app",
            "Driver": "raw_exec",
            "KillTimeout": 2_000_000_000u64,
            "Config": {"command": "/bin/sh", "args": ["-c", SCRIPT]},
            "Resources": {"CPU": 100, "MemoryMB": 32}
        }]}]
    }}))
    .unwrap()
}

fn alloc(node_id: &str, desired: AllocDesiredStatus) -> Allocation {
    let mut a = Allocation {
        id: ALLOC.into(),
        name: "fs.fs[0]".into(),
        namespace: "default".into(),
        job_id: "fs".into(),
        task_group: "fs".into(),
        node_id: node_id.into(),
        ..Default::default()
    };
    a.set_desired_status(desired);
    a.set_client_status(AllocClientStatus::Pending);
    a
}

async fn start_client(gw: &TestGateway, dir: &Path) -> (Running<ClientNodeService>, String) {
    let config = ClientConfig {
        servers: vec![gw.bound.grpc.to_string()],
        grpc_addr: "127.0.0.1:0".into(),
        data_dir: dir.to_path_buf(),
        name: "fs-node".into(),
        drivers: vec!["raw_exec".into()],
        stop_tasks_on_shutdown: true,
        task_supervisor: supervisor(),
        ..Default::default()
    };
    let shutdown = gw.shutdown.child_token();
    let client = caravan_runtime::service::start(ClientNodeService, config, NoStore, shutdown)
        .await
        .expect("client node starts");
    let node_id = client.ready.node_ids[0].clone();
    (client, node_id)
}

fn read(dir: &Path, rel: &str) -> String {
    std::fs::read_to_string(dir.join("allocs").join(ALLOC).join(rel)).unwrap_or_default()
}

/// Reads a followed stream until its body holds `needle`.
async fn follow_until(gw: &TestGateway, path: &str, needle: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(gw.bound.http).await.unwrap();
    let head = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let read = async {
        loop {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "stream ended: {}", String::from_utf8_lossy(&seen));
            seen.extend_from_slice(&buf[..n]);
            if String::from_utf8_lossy(&seen).contains(needle) {
                return String::from_utf8_lossy(&seen).into_owned();
            }
        }
    };
    tokio::time::timeout(WAIT, read)
        .await
        .expect("the followed stream sends what was appended")
}

pub async fn files_stats_signal_restart_and_gc(backend: Backend) {
    let gw = TestGateway::start(backend, "client-fs").await;
    let dir = tempfile::tempdir().unwrap();
    let (client, node_id) = start_client(&gw, dir.path()).await;
    eventually_some("the node registers", WAIT, || async {
        gw.node(&node_id).await
    })
    .await;
    let r = gw.http("PUT", "/v1/jobs", &job()).await;
    assert_eq!(r.status, 200, "{}", r.text());
    gw.store
        .put(
            &gw.keys.alloc(ALLOC),
            &encode(&alloc(&node_id, AllocDesiredStatus::Run)),
            0,
        )
        .await
        .unwrap();
    eventually_some("the task runs", WAIT, || async {
        // The supervisor copies the task's output to its log file on its
        // own time, so the log is waited for as well as the task's files.
        let ran = read(dir.path(), "alloc/runs").lines().count() == 1
            && read(dir.path(), "app/local/hello.txt") == "hello\n"
            && read(dir.path(), "alloc/logs/app.stdout.0") == "hello-stdout\n";
        ran.then_some(())
    })
    .await;

    // The file system.
    let r = gw
        .http("GET", &format!("/v1/client/fs/ls/{ALLOC}"), b"")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let names: Vec<Value> = r
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["Name"].clone())
        .collect();
    assert_eq!(names, vec![json!("alloc"), json!("app")]);
    let r = gw
        .http(
            "GET",
            &format!("/v1/client/fs/ls/{ALLOC}?path=alloc/logs"),
            b"",
        )
        .await;
    let logs = r.json();
    assert!(
        logs.as_array()
            .unwrap()
            .iter()
            .any(|f| f["Name"] == "app.stdout.0" && f["IsDir"] == false),
        "{logs}"
    );
    let r = gw
        .http(
            "GET",
            &format!("/v1/client/fs/stat/{ALLOC}?path=app/local/hello.txt"),
            b"",
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let stat = r.json();
    assert_eq!(stat["Name"], "hello.txt");
    assert_eq!(stat["Size"], 6);
    assert_eq!(stat["ContentType"], "text/plain; charset=utf-8");
    assert!(
        stat["FileMode"].as_str().unwrap().starts_with("-rw"),
        "{stat}"
    );
    let r = gw
        .http(
            "GET",
            &format!("/v1/client/fs/cat/{ALLOC}?path=app/local/hello.txt"),
            b"",
        )
        .await;
    assert_eq!((r.status, r.text().as_str()), (200, "hello\n"));
    let r = gw
        .http(
            "GET",
            &format!("/v1/client/fs/readat/{ALLOC}?path=app/local/hello.txt&offset=1&limit=3"),
            b"",
        )
        .await;
    assert_eq!((r.status, r.text().as_str()), (200, "ell"));
    let r = gw
        .http("GET", &format!("/v1/client/fs/stream/{ALLOC}?path=app/local/hello.txt&follow=false&origin=end&offset=3"), b"")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let frame = r.json();
    assert_eq!(frame["Data"], "bG8K", "the last 3 bytes, lo\\n: {frame}");
    assert_eq!(frame["Offset"], 3);
    assert_eq!(frame["File"], "app/local/hello.txt");
    // What python-nomad expects of a missing file, and refusals.
    for (path, want) in [
        (
            format!("/v1/client/fs/stream/{ALLOC}?path=/app/nope&offset=1&origin=start"),
            "no such file",
        ),
        (
            format!("/v1/client/fs/cat/{ALLOC}?path=../../etc/passwd"),
            "escapes the alloc directory",
        ),
        (
            format!("/v1/client/fs/ls/{ALLOC}?path=app/../.."),
            "escapes the alloc directory",
        ),
        (
            format!("/v1/client/fs/cat/{ALLOC}?path=app/secrets/token"),
            "Reading secret file prohibited",
        ),
        (
            format!("/v1/client/fs/stream/{ALLOC}?path=alloc&origin=middle"),
            "origin must be start or end",
        ),
    ] {
        let r = gw.http("GET", &path, b"").await;
        assert_eq!(r.status, 400, "{path}: {}", r.text());
        assert!(r.text().contains(want), "{path}: {}", r.text());
    }
    let r = gw
        .http(
            "GET",
            &format!("/v1/client/fs/stat/{ALLOC}?path=app/nope"),
            b"",
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.text());
    let r = gw.http("GET", "/v1/client/fs/cat/?path=x", b"").await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.text().contains("must provide a valid alloc id"),
        "{}",
        r.text()
    );
    let r = gw.http("GET", "/v1/client/fs/ls/no-such-alloc", b"").await;
    assert_eq!(r.status, 404, "{}", r.text());

    // The task's log read back from its end (Nomad's origin=end).
    let r = gw
        .http(
            "GET",
            &format!(
                "/v1/client/fs/logs/{ALLOC}?task=app&type=stdout&plain=true&origin=end&offset=7"
            ),
            b"",
        )
        .await;
    assert_eq!((r.status, r.text().as_str()), (200, "stdout\n"));

    // Usage of the host and of the task's processes.
    let r = gw.http("GET", "/v1/client/stats", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let host = r.json();
    assert!(host["Memory"]["Total"].as_u64().unwrap() > 0, "{host}");
    assert!(!host["CPU"].as_array().unwrap().is_empty(), "{host}");
    assert!(
        host["AllocDirStats"]["Size"].as_u64().unwrap() > 0,
        "{host}"
    );
    assert!(host["Uptime"].as_u64().unwrap() > 0, "{host}");
    let r = gw
        .http("GET", &format!("/v1/client/stats?node_id={node_id}"), b"")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = gw.http("GET", "/v1/client/stats?node_id=nope", b"").await;
    assert_eq!(r.status, 404, "{}", r.text());
    let r = gw
        .http("GET", &format!("/v1/client/allocation/{ALLOC}/stats"), b"")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let usage = r.json();
    let task = &usage["Tasks"]["app"];
    assert!(
        task["ResourceUsage"]["MemoryStats"]["RSS"]
            .as_u64()
            .unwrap()
            > 0,
        "{usage}"
    );
    assert!(!task["Pids"].as_object().unwrap().is_empty(), "{usage}");

    // A followed stream sends what the task appends when signalled.
    std::fs::write(
        dir.path().join("allocs").join(ALLOC).join("alloc/signals"),
        b"",
    )
    .unwrap();
    let stream_path =
        format!("/v1/client/fs/stream/{ALLOC}?path=alloc/signals&origin=start&offset=0");
    // base64 of "got-usr1".
    let followed = follow_until(&gw, &stream_path, "Z290LXVzcjE");
    let signalled = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let r = gw
            .http(
                "POST",
                &format!("/v1/client/allocation/{ALLOC}/signal"),
                br#"{"Signal":"SIGUSR1","Task":"app"}"#,
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
    };
    let (seen, ()) = tokio::join!(followed, signalled);
    assert!(seen.contains("\"File\":\"alloc/signals\""), "{seen}");
    eventually_some("the task traps SIGUSR1", WAIT, || async {
        read(dir.path(), "alloc/signals")
            .contains("got-usr1")
            .then_some(())
    })
    .await;
    let r = gw
        .http(
            "PUT",
            &format!("/v1/client/allocation/{ALLOC}/signal"),
            br#"{"Signal":"SIGNOPE"}"#,
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("invalid signal"), "{}", r.text());

    // A restart runs the task again in the same alloc.
    let r = gw
        .http(
            "POST",
            &format!("/v1/client/allocation/{ALLOC}/restart"),
            b"",
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    eventually_some("the task runs again", WAIT, || async {
        (read(dir.path(), "alloc/runs").lines().count() == 2).then_some(())
    })
    .await;
    let state = eventually_some("the restart is reported", WAIT, || async {
        let a = gw
            .http("GET", &format!("/v1/allocation/{ALLOC}"), b"")
            .await
            .json();
        let s = a["TaskStates"]["app"].clone();
        (s["Restarts"] == 1 && s["State"] == "running").then_some(s)
    })
    .await;
    let kinds: Vec<&str> = state["Events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["Type"].as_str())
        .collect();
    assert!(
        kinds.contains(&"Signaling")
            && kinds.contains(&"Restart Signaled")
            && kinds.contains(&"Restarting"),
        "{kinds:?}"
    );
    let r = gw
        .http(
            "POST",
            &format!("/v1/client/allocation/{ALLOC}/restart"),
            br#"{"TaskName":"nope"}"#,
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text());

    // A running alloc is not collected; a finished one keeps its files
    // until it is.
    let r = gw
        .http("GET", &format!("/v1/client/allocation/{ALLOC}/gc"), b"")
        .await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("not eligible for GC"), "{}", r.text());
    gw.store
        .put(
            &gw.keys.alloc(ALLOC),
            &encode(&alloc(&node_id, AllocDesiredStatus::Stop)),
            0,
        )
        .await
        .unwrap();
    eventually_some("the alloc finishes", WAIT, || async {
        let a = gw
            .http("GET", &format!("/v1/allocation/{ALLOC}"), b"")
            .await
            .json();
        (a["ClientStatus"] == "complete").then_some(())
    })
    .await;
    let r = gw
        .http(
            "GET",
            &format!("/v1/client/fs/ls/{ALLOC}?path=app/local"),
            b"",
        )
        .await;
    assert_eq!(
        r.status,
        200,
        "a finished alloc keeps its files: {}",
        r.text()
    );
    let r = gw
        .http("PUT", &format!("/v1/client/gc?node_id={node_id}"), b"")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        !dir.path().join("allocs").join(ALLOC).exists(),
        "the dir is collected"
    );
    let r = gw
        .http("GET", &format!("/v1/client/fs/ls/{ALLOC}"), b"")
        .await;
    assert_eq!(r.status, 404, "{}", r.text());

    gw.shutdown.cancel();
    let _ = tokio::time::timeout(WAIT, client.stopped()).await;
}

#[tokio::test]
async fn client_fs_on_the_embedded_store() {
    files_stats_signal_restart_and_gc(Backend::Mem).await;
}

#[tokio::test]
async fn client_fs_on_etcd() {
    files_stats_signal_restart_and_gc(Backend::Etcd).await;
}

//! `alloc exec` into a `raw_exec` task with ACLs on, through the CLI over
//! `NOMAD_ADDR` and through the WebSocket as the web UI speaks it (token in
//! the handshake frame): the command runs with the task's environment and
//! directory, its exit code is the CLI's, a terminal when asked; a token
//! without `alloc-exec` is refused with 403, and one without
//! `alloc-node-exec` may not exec into a task that shares the node's file
//! system.

use std::process::Output;

use caravan_integration_tests::{Cluster, HttpApi, jobs};
use futures::{SinkExt, StreamExt};
use hyper::Method;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::wait_running;

fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout: {:?}\nstderr: {:?}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `caravan alloc exec ARGS…` as `token` with `stdin`.
async fn exec(c: &Cluster, token: &str, args: &[&str], stdin: &[u8]) -> Output {
    let addr = c.nomad_addr().unwrap();
    let env = [("NOMAD_ADDR", addr.as_str()), ("NOMAD_TOKEN", token)];
    let mut all = vec!["alloc", "exec"];
    all.extend_from_slice(args);
    c.cli_nomad_env_stdin(&all, &env, stdin).await.unwrap()
}

/// A write of the HTTP API as the management token `root`; its JSON
/// answer (`null` for none).
async fn put(http: &HttpApi, root: &str, path: &str, body: Value) -> Value {
    let reply = http
        .request_with(
            Method::PUT,
            path,
            Some(body.to_string().into_bytes()),
            &[("X-Nomad-Token", root)],
        )
        .await
        .unwrap();
    assert_eq!(reply.status, 200, "PUT {path}: {}", reply.text());
    reply.json().unwrap_or(Value::Null)
}

/// A client token of a new policy `name` with `rules`.
async fn token_with(http: &HttpApi, root: &str, name: &str, rules: &str) -> String {
    put(
        http,
        root,
        &format!("/v1/acl/policy/{name}"),
        json!({"Name": name, "Rules": rules}),
    )
    .await;
    let token = put(
        http,
        root,
        "/v1/acl/token",
        json!({"Name": name, "Type": "client", "Policies": [name]}),
    )
    .await;
    token["SecretID"].as_str().unwrap().to_string()
}

/// The frames of an exec over the WebSocket, as the web UI opens it: no
/// header, the token in the first frame. The output and exit code, or the
/// close frame's code and reason.
async fn ui_exec(addr: &str, alloc_id: &str, token: &str) -> Result<(String, i64), (u16, String)> {
    let host = addr.trim_start_matches("http://");
    let command = "%5B%22sh%22%2C%22-c%22%2C%22echo%20hs%3B%20exit%205%22%5D";
    let url = format!(
        "ws://{host}/v1/client/allocation/{alloc_id}/exec?task=t&tty=false&ws_handshake=true&command={command}"
    );
    let tcp = tokio::net::TcpStream::connect(host).await.unwrap();
    let (mut ws, _) = tokio_tungstenite::client_async(url, tcp).await.unwrap();
    let hello = json!({"version": 1, "auth_token": token}).to_string();
    ws.send(Message::Text(hello.into())).await.unwrap();
    let mut out = String::new();
    while let Some(msg) = ws.next().await {
        match msg.unwrap() {
            Message::Text(t) => {
                let frame: Value = serde_json::from_str(t.as_str()).unwrap();
                if let Some(data) = frame.pointer("/stdout/data").and_then(Value::as_str) {
                    use base64::Engine;
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(data)
                        .unwrap();
                    out.push_str(&String::from_utf8_lossy(&bytes));
                }
                if frame["exited"] == json!(true) {
                    return Ok((out, frame["result"]["exit_code"].as_i64().unwrap()));
                }
            }
            Message::Close(Some(frame)) => {
                return Err((frame.code.into(), frame.reason.to_string()));
            }
            _ => {}
        }
    }
    Err((0, "closed without a close frame".into()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alloc_exec_into_raw_exec_with_acls() {
    let mut c = Cluster::new("alloc-exec").await.unwrap();
    c.start_gateway(&[("acl.enabled", "true")]).await.unwrap();
    c.start_broker(&[]).await.unwrap();
    c.start_applier(&[]).await.unwrap();
    c.start_worker(&[]).await.unwrap();
    c.start_deployment_watcher(&[]).await.unwrap();
    c.start_client("node-a", &[("drivers", "raw_exec")])
        .await
        .unwrap();
    let http = c.http().unwrap();
    let addr = c.nomad_addr().unwrap();
    let boot = c
        .cli_nomad_env(&["acl", "bootstrap"], &[("NOMAD_ADDR", addr.as_str())])
        .await
        .unwrap();
    let root = String::from_utf8_lossy(&boot.stdout)
        .lines()
        .find_map(|l| {
            l.strip_prefix("Secret ID")
                .map(|v| v.trim_start_matches([' ', '=']).trim().to_string())
        })
        .unwrap();
    let mut task = jobs::raw_exec_task("exec sleep 300");
    task["Env"] = json!({"GREETING": "from-the-task"});
    put(
        &http,
        &root,
        "/v1/jobs",
        jobs::service_job("shell", 1, task),
    )
    .await;
    let alloc = wait_running(&c, "shell", 1).await.remove(0);

    // The task's environment and directory; stdin; the exit code.
    let out = exec(
        &c,
        &root,
        &[&alloc.id, "sh", "-c", "echo $GREETING; pwd"],
        b"",
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(printed.starts_with("from-the-task\n"), "{}", text(&out));
    assert!(
        printed.contains(&alloc.id),
        "runs in the task dir: {}",
        text(&out)
    );
    let out = exec(&c, &root, &[&alloc.id, "cat"], b"echoed\n").await;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "echoed\n",
        "{}",
        text(&out)
    );
    let out = exec(&c, &root, &[&alloc.id, "sh", "-c", "exit 3"], b"").await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    // A terminal: the command's stdin is one, and input typed reaches it.
    let out = exec(
        &c,
        &root,
        &["-t", &alloc.id, "sh", "-c", "tty; read x; echo got-$x"],
        b"typed\n",
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    // The command's stdin is a pseudo-terminal, whose line discipline
    // ends lines with "\r\n" (the echo of what is typed may come before
    // or after the command's first line).
    assert!(printed.contains("/dev/pts/"), "{}", text(&out));
    assert!(printed.contains("typed\r\n"), "{}", text(&out));
    assert!(printed.contains("got-typed"), "{}", text(&out));

    // A token that may read the job but not exec: 403 before any upgrade.
    let reader = token_with(
        &http,
        &root,
        "reader",
        r#"namespace "default" { policy = "read" }"#,
    )
    .await;
    let out = exec(&c, &reader, &[&alloc.id, "true"], b"").await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        said.contains("403") && said.contains("Permission denied"),
        "{}",
        text(&out)
    );

    // alloc-exec without alloc-node-exec: not into a raw_exec task.
    let exec_only = token_with(
        &http,
        &root,
        "exec-only",
        r#"namespace "default" { capabilities = ["alloc-exec", "read-job", "list-jobs"] }"#,
    )
    .await;
    let out = exec(&c, &exec_only, &[&alloc.id, "true"], b"").await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
        "{}",
        text(&out)
    );
    let node_exec = token_with(
        &http,
        &root,
        "node-exec",
        r#"namespace "default" { capabilities = ["alloc-exec", "alloc-node-exec", "read-job", "list-jobs"] }"#,
    )
    .await;
    let out = exec(&c, &node_exec, &[&alloc.id, "echo", "allowed"], b"").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "allowed\n");

    // The web UI's way: the token in the handshake frame.
    assert_eq!(
        ui_exec(&addr, &alloc.id, &node_exec).await,
        Ok(("hs\n".to_string(), 5))
    );
    let refused = ui_exec(&addr, &alloc.id, &reader).await.unwrap_err();
    assert_eq!(refused, (1008, "Permission denied".to_string()));
}

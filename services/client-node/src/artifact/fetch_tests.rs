use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex};

use sha2::Digest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// One canned answer of the loopback server.
#[derive(Clone)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

fn ok(body: &[u8]) -> Reply {
    Reply {
        status: 200,
        headers: Vec::new(),
        body: body.to_vec(),
    }
}

/// A tiny HTTP/1.1 server on 127.0.0.1 answering by path and keeping
/// every request's head.
struct Server {
    base: String,
    requests: Arc<Mutex<Vec<String>>>,
}

async fn serve(routes: Vec<(&str, Reply)>) -> Server {
    let routes: HashMap<String, Reply> = routes
        .into_iter()
        .map(|(p, r)| (p.to_string(), r))
        .collect();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            let routes = routes.clone();
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&head).to_string();
                let path = head.split(' ').nth(1).unwrap_or("/").to_string();
                seen.lock().unwrap().push(head);
                let reply = routes.get(&path).cloned().unwrap_or(Reply {
                    status: 404,
                    headers: Vec::new(),
                    body: b"not found".to_vec(),
                });
                let mut out = format!(
                    "HTTP/1.1 {} X\r\nContent-Length: {}\r\nConnection: close\r\n",
                    reply.status,
                    reply.body.len()
                );
                for (k, v) in &reply.headers {
                    out.push_str(&format!("{k}: {v}\r\n"));
                }
                out.push_str("\r\n");
                let _ = conn.write_all(out.as_bytes()).await;
                let _ = conn.write_all(&reply.body).await;
                let _ = conn.shutdown().await;
            });
        }
    });
    Server { base, requests }
}

fn tar_gz(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (path, data) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        b.append_data(&mut h, path, *data).unwrap();
    }
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(&b.into_inner().unwrap()).unwrap();
    e.finish().unwrap()
}

fn sha256(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn artifact(source: &str) -> Artifact {
    Artifact {
        source: source.to_string(),
        ..Default::default()
    }
}

fn with_option(mut a: Artifact, k: &str, v: &str) -> Artifact {
    a.options.insert(k.to_string(), v.to_string());
    a
}

#[tokio::test]
async fn a_checksummed_tar_gz_over_http_unpacks_into_local() {
    let archive = tar_gz(&[("app/hello.txt", b"hello from the archive\n")]);
    let srv = serve(vec![("/dl/app.tar.gz", ok(&archive))]).await;
    let task = tempfile::tempdir().unwrap();
    let a = with_option(
        artifact(&format!("{}/dl/app.tar.gz", srv.base)),
        "checksum",
        &format!("sha256:{}", sha256(&archive)),
    );
    ArtifactFetcher::default()
        .fetch(&a, task.path(), None, "")
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(task.path().join("local/app/hello.txt")).unwrap(),
        "hello from the archive\n"
    );
    // The scratch directory is gone.
    let left: Vec<_> = std::fs::read_dir(task.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["local"]);
}

#[tokio::test]
async fn a_checksum_mismatch_fails_and_leaves_nothing() {
    let srv = serve(vec![("/tool.bin", ok(b"tampered"))]).await;
    let task = tempfile::tempdir().unwrap();
    let want = sha256(b"original");
    let a = with_option(
        artifact(&format!("{}/tool.bin", srv.base)),
        "checksum",
        &format!("sha256:{want}"),
    );
    let err = ArtifactFetcher::default()
        .fetch(&a, task.path(), None, "")
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        format!(
            "Checksums did not match for tool.bin.\nExpected: {want}\nGot: {}\n*sha256.digest",
            sha256(b"tampered")
        )
    );
    assert!(!task.path().join("local/tool.bin").exists());
}

#[tokio::test]
async fn headers_are_sent_and_a_file_lands_in_the_destination_dir() {
    let srv = serve(vec![("/file.txt", ok(b"x"))]).await;
    let task = tempfile::tempdir().unwrap();
    let mut a = artifact(&format!("{}/file.txt", srv.base));
    a.headers.insert("X-Token".into(), "secret-1".into());
    a.destination = "local/sub".into();
    ArtifactFetcher::default()
        .fetch(&a, task.path(), None, "")
        .await
        .unwrap();
    assert_eq!(
        std::fs::read(task.path().join("local/sub/file.txt")).unwrap(),
        b"x"
    );
    let reqs = srv.requests.lock().unwrap().clone();
    assert!(
        reqs[0].to_ascii_lowercase().contains("x-token: secret-1"),
        "{reqs:?}"
    );
}

#[tokio::test]
async fn file_mode_puts_the_file_at_the_destination_and_redirects_are_followed() {
    let srv = serve(vec![
        (
            "/old",
            Reply {
                status: 302,
                headers: vec![("Location".into(), "/new/data.json".into())],
                body: Vec::new(),
            },
        ),
        ("/new/data.json", ok(b"{}")),
    ])
    .await;
    let task = tempfile::tempdir().unwrap();
    let mut a = artifact(&format!("{}/old", srv.base));
    a.mode = "file".into();
    a.destination = "local/config.json".into();
    ArtifactFetcher::default()
        .fetch(&a, task.path(), None, "")
        .await
        .unwrap();
    assert_eq!(
        std::fs::read(task.path().join("local/config.json")).unwrap(),
        b"{}"
    );
}

#[tokio::test]
async fn http_failures_and_the_size_limit_are_errors() {
    let srv = serve(vec![("/big", ok(&[0u8; 4096]))]).await;
    let task = tempfile::tempdir().unwrap();
    let err = ArtifactFetcher::default()
        .fetch(
            &artifact(&format!("{}/missing", srv.base)),
            task.path(),
            None,
            "",
        )
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(err, "bad response code: 404");
    let small = ArtifactFetcher::new(ArtifactLimits {
        http_max_size: Some(1000),
        ..ArtifactLimits::default()
    });
    let err = small
        .fetch(
            &artifact(&format!("{}/big", srv.base)),
            task.path(),
            None,
            "",
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("http_max_size of 1000 bytes"), "{err}");
    let err = ArtifactFetcher::default()
        .fetch(&artifact("http://127.0.0.1:1/x"), task.path(), None, "")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("GET http://127.0.0.1:1/x: "), "{err}");
    // TLS is spoken to an https URL: a server answering in plain text
    // fails the handshake.
    let plain = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let https = format!("https://{}", plain.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = plain.accept().await {
            let _ = conn.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
            let _ = conn.shutdown().await;
        }
    });
    let err = ArtifactFetcher::default()
        .fetch(&artifact(&format!("{https}/big")), task.path(), None, "")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.starts_with(&format!("GET {https}/big: ")), "{err}");
}

#[tokio::test]
async fn node_files_and_directories_are_copied() {
    let src = tempfile::tempdir().unwrap();
    std::fs::write(src.path().join("one.txt"), b"1").unwrap();
    std::fs::create_dir(src.path().join("tree")).unwrap();
    std::fs::write(src.path().join("tree/two.txt"), b"2").unwrap();
    std::os::unix::fs::symlink("two.txt", src.path().join("tree/alias")).unwrap();
    let task = tempfile::tempdir().unwrap();
    let f = ArtifactFetcher::default();
    let one = src.path().join("one.txt");
    f.fetch(
        &artifact(&format!("file://{}", one.display())),
        task.path(),
        None,
        "",
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read(task.path().join("local/one.txt")).unwrap(),
        b"1"
    );
    let mut dir = artifact(&src.path().join("tree").display().to_string());
    dir.destination = "local/tree".into();
    f.fetch(&dir, task.path(), None, "").await.unwrap();
    assert_eq!(
        std::fs::read(task.path().join("local/tree/alias")).unwrap(),
        b"2"
    );
    let dir = with_option(dir, "checksum", &format!("sha256:{}", sha256(b"")));
    let err = f
        .fetch(&dir, task.path(), None, "")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("checksum cannot be specified for directory download"),
        "{err}"
    );
}

#[tokio::test]
async fn relative_sources_read_the_task_dir_and_destinations_may_reach_the_alloc_dir() {
    let alloc = tempfile::tempdir().unwrap();
    let task = alloc.path().join("web");
    std::fs::create_dir_all(task.join("local")).unwrap();
    std::fs::write(task.join("local/seed.txt"), b"seed").unwrap();
    let mut a = artifact("local/seed.txt");
    a.destination = "../alloc/data".into();
    ArtifactFetcher::default()
        .fetch(&a, &task, None, "")
        .await
        .unwrap();
    assert_eq!(
        std::fs::read(alloc.path().join("alloc/data/seed.txt")).unwrap(),
        b"seed"
    );
}

#[tokio::test]
async fn bad_blocks_are_refused_naming_the_field() {
    let task = tempfile::tempdir().unwrap();
    let f = ArtifactFetcher::default();
    let mut a = artifact("/etc/hostname");
    a.destination = "../../outside".into();
    let err = f
        .fetch(&a, task.path(), None, "")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("destination: "), "{err}");
    a.destination = "../alloc/../../outside".into();
    let err = f
        .fetch(&a, task.path(), None, "")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("destination: "), "{err}");
    let mut a = artifact("/etc/hostname");
    a.mode = "folder".into();
    let err = f
        .fetch(&a, task.path(), None, "")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("mode: "), "{err}");
    let err = f
        .fetch(
            &artifact("git::https://example.com/r.git"),
            task.path(),
            None,
            "",
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("\"git\" getter is not supported"), "{err}");
}

#[tokio::test]
async fn the_hook_fetches_once_per_alloc_and_reports_events() {
    let archive = tar_gz(&[("f.txt", b"F")]);
    let srv = serve(vec![("/a.tgz", ok(&archive))]).await;
    let alloc = tempfile::tempdir().unwrap();
    let alloc_dir = crate::alloc_dir::AllocDir::new(alloc.path(), "a1").unwrap();
    alloc_dir.build(["web", "api"]).unwrap();
    let dirs = alloc_dir.task("web").unwrap();
    let task = caravan_proto::Task {
        name: "web".into(),
        artifacts: vec![artifact(&format!("{}/a.tgz", srv.base))],
        ..Default::default()
    };
    let hook = ArtifactHook::new(Arc::new(ArtifactFetcher::default()));
    let mut events = Vec::new();
    hook.fetch_all(&task, Some(&dirs), None, "", &mut |e| events.push(e))
        .await
        .unwrap();
    hook.fetch_all(&task, Some(&dirs), None, "", &mut |e| events.push(e))
        .await
        .unwrap();
    assert_eq!(
        srv.requests.lock().unwrap().len(),
        1,
        "fetched again on a restart"
    );
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].r#type, "Downloading Artifacts");
    assert_eq!(
        std::fs::read(dirs.task_dir.join("local/f.txt")).unwrap(),
        b"F"
    );

    let bad = caravan_proto::Task {
        name: "api".into(),
        artifacts: vec![artifact(&format!("{}/gone.tgz", srv.base))],
        ..Default::default()
    };
    let dirs = alloc_dir.task("api").unwrap();
    let err = hook
        .fetch_all(&bad, Some(&dirs), None, "", &mut |_| {})
        .await
        .unwrap_err();
    assert_eq!(
        err,
        format!(
            "failed to download artifact \"{}/gone.tgz\": bad response code: 404",
            srv.base
        )
    );
}

#[tokio::test]
async fn chown_gives_the_files_to_the_task_user_when_root() {
    use std::os::unix::fs::MetadataExt;
    let src = tempfile::tempdir().unwrap();
    std::fs::create_dir(src.path().join("tree")).unwrap();
    std::fs::write(src.path().join("tree/f"), b"x").unwrap();
    let task = tempfile::tempdir().unwrap();
    let mut a = artifact(&src.path().join("tree").display().to_string());
    a.destination = "local/tree".into();
    a.chown = true;
    let nobody = nix::unistd::User::from_name("nobody").unwrap().unwrap();
    ArtifactFetcher::default()
        .fetch(&a, task.path(), None, "nobody")
        .await
        .unwrap();
    let owner = std::fs::metadata(task.path().join("local/tree/f"))
        .unwrap()
        .uid();
    if nix::unistd::geteuid().is_root() {
        assert_eq!(owner, nobody.uid.as_raw());
    } else {
        // Only root can give files away: they stay the client's.
        assert_eq!(owner, nix::unistd::geteuid().as_raw());
    }
    a.chown = true;
    let err = ArtifactFetcher::default()
        .fetch(&a, task.path(), None, "no-such-user-xyz")
        .await;
    if nix::unistd::geteuid().is_root() {
        assert!(err.unwrap_err().to_string().starts_with("chown: "));
    }
}

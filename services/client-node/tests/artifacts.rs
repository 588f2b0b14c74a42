//! Tasks' artifacts against a fake api-gateway: a raw_exec task reads a file
//! from a checksummed .tar.gz served over loopback HTTP, and a bad checksum
//! fails the task's starts (a `Failed Artifact Download` event each) until
//! the restart policy gives up.

// Helpers outside #[test] functions may unwrap too: a failure is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use caravan_proto::{AllocClientStatus, Artifact, JobType};
use common::*;
use sha2::Digest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const WAIT: Duration = Duration::from_secs(20);

/// Serves `body` at every path on 127.0.0.1; counts the requests.
async fn serve(body: Vec<u8>) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let body = body.clone();
            let counted = counted.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                counted.fetch_add(1, Ordering::SeqCst);
                let status = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn.write_all(status.as_bytes()).await;
                let _ = conn.write_all(&body).await;
                let _ = conn.shutdown().await;
            });
        }
    });
    (base, hits)
}

fn tar_gz(path: &str, data: &[u8]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    b.append_data(&mut h, path, data).unwrap();
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

fn artifact(source: String, checksum: String) -> Artifact {
    Artifact {
        source,
        options: [("checksum".to_string(), checksum)].into_iter().collect(),
        ..Default::default()
    }
}

#[tokio::test]
async fn raw_exec_task_reads_a_file_from_a_checksummed_tar_gz_artifact() {
    let archive = tar_gz("app/greeting.txt", b"hello from the artifact\n");
    let (base, hits) = serve(archive.clone()).await;
    let scene = Scene::start().await;
    let (fake, node_id, dir) = (&scene.fake, &scene.node_id, &scene.dir);

    let mut web = sh_task(
        "web",
        "cat \"$NOMAD_TASK_DIR/app/greeting.txt\" > \"$NOMAD_ALLOC_DIR/read\"",
    );
    web.artifacts = vec![artifact(
        format!("{base}/releases/app.tar.gz"),
        format!("sha256:{}", sha256(&archive)),
    )];
    let job = job("fetcher", JobType::Batch, vec![web]);
    let a = alloc(&job, 0);
    fake.push(node_id, vec![a.clone()], vec![job]);
    until("alloc complete", WAIT, || {
        fake.status(&a.id) == Some(AllocClientStatus::Complete)
    })
    .await;

    let read = dir.path().join("allocs").join(&a.id).join("alloc/read");
    assert_eq!(
        std::fs::read_to_string(read).unwrap(),
        "hello from the artifact\n"
    );
    let u = fake.update(&a.id).unwrap();
    let kinds: Vec<&str> = u.task_states["web"]
        .events
        .iter()
        .map(|e| e.r#type.as_str())
        .collect();
    let downloading = kinds.iter().position(|k| *k == "Downloading Artifacts");
    let started = kinds.iter().position(|k| *k == "Started");
    assert!(
        downloading.is_some() && downloading < started,
        "events: {kinds:?}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    scene.stop().await;
}

#[tokio::test]
async fn a_bad_artifact_checksum_fails_each_start_until_the_restart_policy_gives_up() {
    let archive = tar_gz("app/greeting.txt", b"tampered\n");
    let (base, hits) = serve(archive).await;
    let scene = Scene::start().await;
    let (fake, node_id, dir) = (&scene.fake, &scene.node_id, &scene.dir);

    let expected = sha256(b"what the job author built");
    let mut web = sh_task("web", "echo never > \"$NOMAD_ALLOC_DIR/ran\"");
    web.artifacts = vec![artifact(
        format!("{base}/app.tar.gz"),
        format!("sha256:{expected}"),
    )];
    // The shared job builder's policy: 2 attempts, then fail.
    let job = job("tampered", JobType::Service, vec![web]);
    let a = alloc(&job, 0);
    fake.push(node_id, vec![a.clone()], vec![job]);
    until("alloc failed", WAIT, || {
        fake.status(&a.id) == Some(AllocClientStatus::Failed)
    })
    .await;

    let u = fake.update(&a.id).unwrap();
    let web = &u.task_states["web"];
    assert!(web.failed);
    assert_eq!(web.restarts, 2);
    let failures: Vec<&str> = web
        .events
        .iter()
        .filter(|e| e.r#type == "Failed Artifact Download")
        .map(|e| e.message.as_str())
        .collect();
    assert_eq!(failures.len(), 3, "events: {:?}", web.events);
    let want = format!(
        "failed to download artifact \"{base}/app.tar.gz\": Checksums did not match for \
         app.tar.gz.\nExpected: {expected}\n"
    );
    assert!(failures[0].starts_with(&want), "{}", failures[0]);
    assert_eq!(web.events.last().unwrap().r#type, "Not Restarting");
    // Each start fetched again (nothing was recorded as fetched) and the
    // task itself never ran.
    assert_eq!(hits.load(Ordering::SeqCst), 3);
    assert!(
        !dir.path()
            .join("allocs")
            .join(&a.id)
            .join("alloc/ran")
            .exists()
    );
    scene.stop().await;
}

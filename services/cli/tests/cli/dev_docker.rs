//! `caravan dev` with the Docker daemon: the job `nomad job init` writes
//! (examples/redis.nomad.hcl) runs unchanged, and Redis answers on the port
//! the allocation names. Needs the daemon and the `redis:7` image
//! `scripts/test-images` builds (scripts/test builds it).

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{WAIT, cli, eventually_some, options};
use caravan_cli::{Api, DevCluster};
use caravan_proto::AllocClientStatus;

/// Removes the containers of a dev node, however the test ends.
struct Containers(String);

impl Drop for Containers {
    fn drop(&mut self) {
        let filter = format!("label=com.hashicorp.nomad.node_id={}", self.0);
        if let Ok(out) = std::process::Command::new("docker")
            .args(["ps", "-aq", "--filter", &filter])
            .output()
        {
            for id in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                let _ = std::process::Command::new("docker")
                    .args(["rm", "-f", id])
                    .output();
            }
        }
    }
}

/// Redis's answer to `PING` at `addr`, if it answers.
async fn ping(addr: &str) -> Option<String> {
    let mut c = tokio::net::TcpStream::connect(addr).await.ok()?;
    c.write_all(b"PING\r\n").await.ok()?;
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(2), c.read(&mut buf))
        .await
        .ok()?
        .ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dev_runs_the_job_nomad_job_init_writes() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = DevCluster::start(options(dir.path()))
        .await
        .expect("dev cluster starts");
    let _containers = Containers(cluster.addresses.node_id.clone());
    assert_eq!(
        cluster.addresses.drivers.first().map(String::as_str),
        Some("docker"),
        "the Docker daemon answers, so dev enables the docker driver"
    );
    let address = cluster.http_address();
    let api = Api::new(&cluster.address(), "default").unwrap();
    let job = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/redis.nomad.hcl");

    let began = Instant::now();
    let (code, out, err) = cli(&address, &["job", "run", job.to_str().unwrap()]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(!out.contains("warning"), "{out}");
    let alloc = eventually_some("the alloc to run", WAIT, || async {
        let allocs = api.job_allocations("example").await.ok()?;
        allocs
            .into_iter()
            .find(|a| a.client_status() == AllocClientStatus::Running)
    })
    .await;
    let port = alloc
        .allocated_resources
        .as_ref()
        .and_then(|r| r.shared.as_ref())
        .and_then(|s| s.ports.iter().find(|p| p.label == "db"))
        .map(|p| p.value)
        .expect("the alloc names its db port");
    let addr = format!("127.0.0.1:{port}");
    let pong = eventually_some("redis to answer", WAIT, || async {
        ping(&addr).await.filter(|a| a.starts_with("+PONG"))
    })
    .await;
    eprintln!(
        "job run to redis answering PING on {addr}: {:?}",
        began.elapsed()
    );
    assert_eq!(pong.trim(), "+PONG");

    // The task's shutdown_delay (10 s) runs before the kill signal.
    let stopping = Instant::now();
    let (code, out, err) = cli(&address, &["job", "stop", "-purge", "example"]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    eventually_some("the container to go", WAIT, || async {
        ping(&addr).await.is_none().then_some(())
    })
    .await;
    let took = stopping.elapsed();
    assert!(took >= Duration::from_secs(10), "{took:?}");
    cluster.stop().await.expect("dev cluster stops cleanly");
}

//! A throwaway etcd of our own: the `etcd` binary on `PATH` in a temp dir,
//! on free loopback ports, with Caravan's raised txn, request and quota
//! limits (as `start_etcd` in `scripts/lib.sh` starts it), stopped and
//! removed when dropped. For the benchmark without an etcd given and for
//! tests that must take etcd away.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::Signal;
use tempfile::TempDir;

use crate::http::HttpApi;
use crate::process::{self, ServiceProcess};
use crate::wait::{Progress, wait_for};

/// How long etcd may take to answer its health check.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long etcd may take to stop on SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// How one etcd member is started: its name, data dir, addresses and the
/// cluster it belongs to.
#[derive(Clone, Debug)]
pub(crate) struct Member {
    /// The member's name, unique in its cluster.
    pub name: String,
    /// Its data dir (kept across restarts).
    pub data_dir: PathBuf,
    /// The address clients talk to.
    pub client: SocketAddr,
    /// The address the other members talk to.
    pub peer: SocketAddr,
    /// `--initial-cluster`: every member as `name=http://peer`.
    pub initial_cluster: String,
    /// Whether the member rejoins a cluster that exists already.
    pub existing: bool,
}

impl Member {
    /// Spawns etcd for this member, with Caravan's raised txn, request and
    /// quota limits, its output appended to `log`.
    pub fn spawn(&self, log: PathBuf) -> anyhow::Result<ServiceProcess> {
        let endpoint = format!("http://{}", self.client);
        let peer_url = format!("http://{}", self.peer);
        let args: Vec<String> = [
            "--name",
            &self.name,
            "--data-dir",
            &self.data_dir.display().to_string(),
            "--listen-client-urls",
            &endpoint,
            "--advertise-client-urls",
            &endpoint,
            "--listen-peer-urls",
            &peer_url,
            "--initial-advertise-peer-urls",
            &peer_url,
            "--initial-cluster",
            &self.initial_cluster,
            "--initial-cluster-state",
            if self.existing { "existing" } else { "new" },
            "--max-txn-ops",
            "10000",
            "--max-request-bytes",
            "33554432",
            "--quota-backend-bytes",
            "8589934592",
            "--logger",
            "zap",
            "--log-level",
            "error",
        ]
        .map(String::from)
        .to_vec();
        ServiceProcess::spawn(
            &self.name,
            Path::new("etcd"),
            &args,
            self.client,
            log,
            STOP_GRACE,
        )
    }
}

/// Waits until the etcd `process` listening on `client` reports itself
/// healthy (a member of a cluster: once the cluster has a leader).
pub(crate) async fn wait_healthy(
    process: &mut ServiceProcess,
    client: SocketAddr,
) -> anyhow::Result<()> {
    let api = HttpApi::new(client);
    wait_for("etcd to be healthy", START_TIMEOUT, async || {
        if let Some(status) = process.exited() {
            anyhow::bail!("etcd exited ({status})");
        }
        let reply = api.get("/health").await?;
        Ok(if reply.text().contains(r#""health":"true""#) {
            Progress::Done(())
        } else {
            Progress::Waiting(format!("HTTP {}: {}", reply.status, reply.text()))
        })
    })
    .await
}

/// etcd's status through the maintenance API, from whichever of
/// `endpoints` answers within `timeout`.
pub async fn status(
    endpoints: &[String],
    timeout: Duration,
) -> anyhow::Result<etcd_client::StatusResponse> {
    let ask = async {
        let mut client = etcd_client::Client::connect(endpoints, None).await?;
        anyhow::Ok(client.status().await?)
    };
    tokio::time::timeout(timeout, ask)
        .await
        .map_err(|_| anyhow::anyhow!("no answer within {timeout:?}"))?
}

/// A running etcd member alone in its cluster, with its data dir.
#[derive(Debug)]
pub struct EtcdProcess {
    endpoint: String,
    process: ServiceProcess,
    // Dropped after the process has stopped (see `Drop`).
    dir: TempDir,
}

impl EtcdProcess {
    /// Starts etcd and waits until it reports itself healthy; retries with
    /// other ports when another process took one first.
    pub async fn start() -> anyhow::Result<EtcdProcess> {
        let dir = tempfile::Builder::new().prefix("caravan-etcd-").tempdir()?;
        for _ in 0..3 {
            let (client, peer) = (process::free_addr()?, process::free_addr()?);
            let endpoint = format!("http://{client}");
            let member = Member {
                name: "caravan-test".into(),
                data_dir: dir.path().join("data"),
                client,
                peer,
                initial_cluster: format!("caravan-test=http://{peer}"),
                existing: false,
            };
            let mut process = member.spawn(dir.path().join("etcd.log"))?;
            match wait_healthy(&mut process, client).await {
                Ok(()) => {
                    return Ok(EtcdProcess {
                        endpoint,
                        process,
                        dir,
                    });
                }
                Err(_) if process.exited().is_some() && process::lost_port_race(&process.log) => {
                    // The data dir may hold a half-made member: start afresh.
                    let _ = std::fs::remove_dir_all(&member.data_dir);
                    continue;
                }
                Err(err) => {
                    let tail = process.tail(40);
                    return Err(err.context(format!("starting etcd; its log:\n{tail}")));
                }
            }
        }
        anyhow::bail!("etcd lost the race for free ports three times")
    }

    /// The client URL, e.g. `http://127.0.0.1:41234`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// The data and log directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Leaves the data and log directory on disk when dropped.
    pub fn keep_files(&mut self) {
        self.dir.disable_cleanup(true);
    }

    /// SIGKILL, as a crash or a lost machine: nothing answers from now on.
    pub fn kill(&mut self) {
        self.process.kill_hard();
    }

    /// SIGSTOP: etcd keeps its connections but answers nothing, as behind
    /// a network partition; requests wait for their timeouts.
    pub fn pause(&self) {
        self.process.signal(Signal::SIGSTOP);
    }

    /// SIGCONT after [`EtcdProcess::pause`].
    pub fn resume(&self) {
        self.process.signal(Signal::SIGCONT);
    }

    /// SIGTERM, then SIGKILL if it does not stop in time.
    pub fn stop(&mut self) {
        // A paused etcd would sit out the grace before the SIGKILL.
        self.resume();
        self.process.stop();
    }
}

impl Drop for EtcdProcess {
    fn drop(&mut self) {
        // Stop first: the temp dir is removed when the fields drop.
        self.stop();
    }
}

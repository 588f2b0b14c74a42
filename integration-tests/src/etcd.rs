//! A throwaway etcd of our own: the `etcd` binary on `PATH` in a temp dir,
//! on free loopback ports, with Caravan's raised txn, request and quota
//! limits (as `start_etcd` in `scripts/lib.sh` starts it), stopped and
//! removed when dropped. For the benchmark without an etcd given and for
//! tests that must take etcd away.

use std::path::Path;
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
            let peer_url = format!("http://{peer}");
            let args: Vec<String> = [
                "--name",
                "caravan-test",
                "--data-dir",
                &dir.path().join("data").display().to_string(),
                "--listen-client-urls",
                &endpoint,
                "--advertise-client-urls",
                &endpoint,
                "--listen-peer-urls",
                &peer_url,
                "--initial-advertise-peer-urls",
                &peer_url,
                "--initial-cluster",
                &format!("caravan-test={peer_url}"),
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
            let log = dir.path().join("etcd.log");
            let mut process =
                ServiceProcess::spawn("etcd", Path::new("etcd"), &args, client, log, STOP_GRACE)?;
            let api = HttpApi::new(client);
            let healthy = wait_for("etcd to be healthy", START_TIMEOUT, async || {
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
            .await;
            match healthy {
                Ok(()) => {
                    return Ok(EtcdProcess {
                        endpoint,
                        process,
                        dir,
                    });
                }
                Err(_) if process.exited().is_some() && process::lost_port_race(&process.log) => {
                    // The data dir may hold a half-made member: start afresh.
                    let _ = std::fs::remove_dir_all(dir.path().join("data"));
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

//! A throwaway etcd of our own: the `etcd` binary on `PATH` in a temp dir,
//! on free loopback ports, with Caravan's raised txn, request and quota
//! limits (as `start_etcd` in `scripts/lib.sh` starts it), stopped and
//! removed when dropped. For the benchmark without an etcd given, for
//! tests that must take etcd away, and for tests of etcd over TLS
//! ([`EtcdProcess::start_tls`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use caravan_runtime::tls::Role;
use caravan_runtime::tls::certs::{self, CertRequest};
use caravan_store::{EtcdClientCert, EtcdConfig, EtcdTls};
use nix::sys::signal::Signal;
use tempfile::TempDir;

use crate::http::HttpApi;
use crate::process::{self, ServiceProcess};
use crate::wait::{Progress, wait_for};

/// How long etcd may take to answer its health check.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long etcd may take to stop on SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// The backend quota Caravan's etcd runs with (8 GiB, etcd's largest
/// advised), unless a test asks for a small one to fill it.
pub const DEFAULT_QUOTA_BACKEND_BYTES: u64 = 8 * 1024 * 1024 * 1024;

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
    /// The peer address the member advertises when it is not `peer`: a
    /// cuttable link in front of it (see [`crate::FaultProxy`]).
    pub advertise_peer: Option<SocketAddr>,
    /// `--initial-cluster`: every member as `name=http://peer`.
    pub initial_cluster: String,
    /// Whether the member rejoins a cluster that exists already.
    pub existing: bool,
    /// TLS on the client URL, with client certificates required.
    pub tls: Option<MemberTls>,
    /// `--quota-backend-bytes`: past it etcd raises its NOSPACE alarm.
    pub quota_backend_bytes: u64,
}

/// A member's TLS on its client URL: `https://`, its certificate, and the
/// CA every client certificate must be signed by (`--client-cert-auth`).
#[derive(Clone, Debug)]
pub(crate) struct MemberTls {
    /// `--trusted-ca-file`.
    pub ca_file: PathBuf,
    /// `--cert-file`: valid for 127.0.0.1 and `localhost`.
    pub cert_file: PathBuf,
    /// `--key-file`.
    pub key_file: PathBuf,
    /// A plaintext listener for `/health` (`--listen-metrics-urls`): the
    /// client URL answers only holders of a client certificate.
    pub health: SocketAddr,
}

impl Member {
    /// Spawns etcd for this member with the settings Caravan's deployments
    /// give it (docs/services.md, "etcd settings"), its output appended to
    /// `log`.
    pub fn spawn(&self, log: PathBuf) -> anyhow::Result<ServiceProcess> {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let endpoint = format!("{scheme}://{}", self.client);
        let peer_url = format!("http://{}", self.peer);
        let advertised_peer_url = format!("http://{}", self.advertise_peer.unwrap_or(self.peer));
        let mut args: Vec<String> = [
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
            &advertised_peer_url,
            "--initial-cluster",
            &self.initial_cluster,
            "--initial-cluster-state",
            if self.existing { "existing" } else { "new" },
            "--max-txn-ops",
            "10000",
            "--max-request-bytes",
            "33554432",
            // etcd 3.5's default; 3.4 keeps 100,000 raft entries in memory.
            "--snapshot-count",
            "10000",
            "--quota-backend-bytes",
            &self.quota_backend_bytes.to_string(),
            "--logger",
            "zap",
        ]
        .map(String::from)
        .to_vec();
        // `CARAVAN_ETCD_LOG_LEVEL=info` keeps etcd's elections in its log.
        args.extend([
            "--log-level".to_string(),
            std::env::var("CARAVAN_ETCD_LOG_LEVEL").unwrap_or_else(|_| "error".into()),
        ]);
        if let Some(tls) = &self.tls {
            args.extend([
                "--cert-file".to_string(),
                tls.cert_file.display().to_string(),
                "--key-file".to_string(),
                tls.key_file.display().to_string(),
                "--trusted-ca-file".to_string(),
                tls.ca_file.display().to_string(),
                "--client-cert-auth".to_string(),
                "--listen-metrics-urls".to_string(),
                format!("http://{}", tls.health),
            ]);
        }
        ServiceProcess::spawn(
            &self.name,
            Path::new("etcd"),
            &args,
            self.client,
            log,
            STOP_GRACE,
        )
    }

    /// Where the member answers `/health` in plaintext.
    pub fn health_addr(&self) -> SocketAddr {
        self.tls.as_ref().map_or(self.client, |tls| tls.health)
    }
}

/// Waits until the etcd `process` answering `/health` on `client` reports
/// itself healthy (a member of a cluster: once the cluster has a leader).
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

/// The alarms etcd's members have raised and not disarmed, by kind
/// (`NOSPACE`), from whichever of `endpoints` answers.
pub async fn alarms(endpoints: &[String]) -> anyhow::Result<Vec<String>> {
    let mut client = etcd_client::Client::connect(endpoints, None).await?;
    let reply = client
        .alarm(
            etcd_client::AlarmAction::Get,
            etcd_client::AlarmType::None,
            None,
        )
        .await?;
    Ok(reply
        .alarms()
        .iter()
        .map(|a| a.alarm().as_str_name().to_string())
        .collect())
}

/// What [`free_space`] did: the backend's size before and after.
#[derive(Clone, Copy, Debug)]
pub struct FreedSpace {
    /// The revision history was compacted to.
    pub compacted_to: i64,
    /// The largest member's backend before defragmenting, in bytes.
    pub db_size_before: i64,
    /// The largest member's backend after defragmenting, in bytes.
    pub db_size_after: i64,
}

/// What an operator does about a full etcd: compacts the history up to the
/// current revision, defragments every member (giving the freed pages back
/// so the backend shrinks under its quota) and disarms every alarm.
pub async fn free_space(endpoints: &[String]) -> anyhow::Result<FreedSpace> {
    let mut client = etcd_client::Client::connect(endpoints, None).await?;
    let status = client.status().await?;
    let revision = status.header().map_or(0, |h| h.revision());
    let mut db_size_before = 0;
    let mut db_size_after = 0;
    client
        .compact(
            revision,
            Some(etcd_client::CompactionOptions::new().with_physical()),
        )
        .await?;
    for endpoint in endpoints {
        let mut member = etcd_client::Client::connect([endpoint.as_str()], None).await?;
        db_size_before = db_size_before.max(member.status().await?.db_size());
        member.defragment().await?;
        db_size_after = db_size_after.max(member.status().await?.db_size());
    }
    // `etcdctl alarm disarm`: each alarm is disarmed for the member that
    // raised it.
    let raised = client
        .alarm(
            etcd_client::AlarmAction::Get,
            etcd_client::AlarmType::None,
            None,
        )
        .await?;
    for alarm in raised.alarms() {
        let mut options = etcd_client::AlarmOptions::new();
        options.with_member(alarm.member_id());
        client
            .alarm(
                etcd_client::AlarmAction::Deactivate,
                alarm.alarm(),
                Some(options),
            )
            .await?;
    }
    Ok(FreedSpace {
        compacted_to: revision,
        db_size_before,
        db_size_after,
    })
}

/// The files of an etcd that requires TLS with client certificates, made
/// with `caravan tls` (its CA and certificates): etcd's certificate is a
/// server one (valid for 127.0.0.1 and `localhost`), the client's a
/// client one (whose `clientAuth` usage etcd checks).
#[derive(Clone, Debug)]
pub struct EtcdTlsFiles {
    /// The CA that signs etcd's certificate and the client's.
    pub ca_file: PathBuf,
    /// A client certificate etcd accepts.
    pub cert_file: PathBuf,
    /// Its key.
    pub key_file: PathBuf,
    /// etcd's own certificate.
    server_cert: PathBuf,
    /// Its key.
    server_key: PathBuf,
}

impl EtcdTlsFiles {
    /// Makes a CA and a server and a client certificate in `dir`.
    pub fn create(dir: &Path) -> anyhow::Result<EtcdTlsFiles> {
        std::fs::create_dir_all(dir)?;
        let ca = certs::create_ca(dir, certs::CA_DAYS)?;
        let request = |role| CertRequest {
            role,
            region: "global".to_string(),
            days: 1,
            dns_names: Vec::new(),
            ip_addresses: Vec::new(),
            ca_cert: ca.cert.clone(),
            ca_key: ca.key.clone(),
        };
        let server = certs::create_cert(dir, &request(Role::Server))?;
        let client = certs::create_cert(dir, &request(Role::Client))?;
        Ok(EtcdTlsFiles {
            ca_file: ca.cert,
            cert_file: client.cert,
            key_file: client.key,
            server_cert: server.cert,
            server_key: server.key,
        })
    }

    /// The `[store]` settings of a service using these files.
    pub fn store_settings(&self) -> Vec<(String, String)> {
        let path = |p: &PathBuf| p.display().to_string();
        vec![
            ("store.ca_file".into(), path(&self.ca_file)),
            ("store.cert_file".into(), path(&self.cert_file)),
            ("store.key_file".into(), path(&self.key_file)),
        ]
    }

    /// The store's TLS with these files.
    pub fn etcd_tls(&self) -> EtcdTls {
        EtcdTls {
            ca_file: self.ca_file.clone(),
            client_cert: Some(EtcdClientCert {
                cert_file: self.cert_file.clone(),
                key_file: self.key_file.clone(),
            }),
            server_name: None,
        }
    }
}

/// A running etcd member alone in its cluster, with its data dir.
#[derive(Debug)]
pub struct EtcdProcess {
    endpoint: String,
    tls: Option<EtcdTlsFiles>,
    process: ServiceProcess,
    // Dropped after the process has stopped (see `Drop`).
    dir: TempDir,
}

impl EtcdProcess {
    /// Starts etcd and waits until it reports itself healthy; retries with
    /// other ports when another process took one first.
    pub async fn start() -> anyhow::Result<EtcdProcess> {
        EtcdProcess::start_with(false, DEFAULT_QUOTA_BACKEND_BYTES).await
    }

    /// Starts etcd serving clients over TLS only, to holders of a client
    /// certificate signed by its CA (see [`EtcdTlsFiles`]).
    pub async fn start_tls() -> anyhow::Result<EtcdProcess> {
        EtcdProcess::start_with(true, DEFAULT_QUOTA_BACKEND_BYTES).await
    }

    /// Starts etcd with a backend quota of `bytes`: a store a test can fill
    /// until etcd raises its NOSPACE alarm (see [`free_space`]).
    pub async fn start_with_quota(bytes: u64) -> anyhow::Result<EtcdProcess> {
        EtcdProcess::start_with(false, bytes).await
    }

    async fn start_with(tls: bool, quota_backend_bytes: u64) -> anyhow::Result<EtcdProcess> {
        let dir = tempfile::Builder::new().prefix("caravan-etcd-").tempdir()?;
        let files = if tls {
            Some(EtcdTlsFiles::create(&dir.path().join("tls"))?)
        } else {
            None
        };
        for _ in 0..3 {
            let (client, peer) = (process::free_addr()?, process::free_addr()?);
            let member_tls = match &files {
                Some(files) => Some(MemberTls {
                    ca_file: files.ca_file.clone(),
                    cert_file: files.server_cert.clone(),
                    key_file: files.server_key.clone(),
                    health: process::free_addr()?,
                }),
                None => None,
            };
            let scheme = if tls { "https" } else { "http" };
            let endpoint = format!("{scheme}://{client}");
            let member = Member {
                name: "caravan-test".into(),
                data_dir: dir.path().join("data"),
                client,
                peer,
                advertise_peer: None,
                initial_cluster: format!("caravan-test=http://{peer}"),
                existing: false,
                tls: member_tls,
                quota_backend_bytes,
            };
            let mut process = member.spawn(dir.path().join("etcd.log"))?;
            match wait_healthy(&mut process, member.health_addr()).await {
                Ok(()) => {
                    return Ok(EtcdProcess {
                        endpoint,
                        tls: files,
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

    /// The client URL, e.g. `http://127.0.0.1:41234` (`https://` with TLS).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The CA and client certificate, when etcd requires TLS.
    pub fn tls(&self) -> Option<&EtcdTlsFiles> {
        self.tls.as_ref()
    }

    /// How a store reaches this etcd, TLS included.
    pub fn etcd_config(&self) -> EtcdConfig {
        let mut config = EtcdConfig::new(&[self.endpoint.as_str()]);
        config.tls = self.tls.as_ref().map(EtcdTlsFiles::etcd_tls);
        config
    }

    /// The `[store]` settings of a service using this etcd, but its prefix.
    pub fn store_settings(&self) -> Vec<(String, String)> {
        let mut settings = vec![("store.endpoints".to_string(), self.endpoint.clone())];
        if let Some(tls) = &self.tls {
            settings.extend(tls.store_settings());
        }
        settings
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

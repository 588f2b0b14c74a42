//! A Caravan cluster of real service processes around a real etcd, under a
//! key prefix of its own: started piece by piece, inspected through etcd and
//! the gateway, and torn down (every child killed) when dropped.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use caravan_proto::NodeStatus;
use caravan_runtime::names;
use caravan_runtime::tls::Role;
use caravan_state::Keyspace;
use caravan_store::{EtcdConfig, EtcdStore, Store};
use tempfile::TempDir;
use tonic::transport::Channel;

use crate::binaries;
use crate::etcd::{EtcdProcess, EtcdTlsFiles};
use crate::http::HttpApi;
use crate::process::{self, ServiceProcess};
use crate::state::ClusterState;
use crate::tls::TlsFiles;
use crate::wait::{Progress, wait_for};

/// How long a service binary may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a wait for simulated nodes looks at etcd.
const NODES_POLL: Duration = Duration::from_millis(250);
/// Lines of each log printed when a test fails.
const LOG_TAIL_LINES: usize = 40;

/// The variables key of test clusters that serve Nomad Variables: base64 of
/// 32 zero bytes (never a real key).
pub const TEST_VARIABLES_KEY: &str = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";

/// The services of the pipeline, by binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    /// `caravan-api-gateway`.
    Gateway,
    /// `caravan-eval-broker`.
    EvalBroker,
    /// `caravan-plan-applier`.
    PlanApplier,
    /// `caravan-scheduler-worker`.
    SchedulerWorker,
    /// `caravan-client-node`.
    ClientNode,
    /// `caravan-deployment-watcher`.
    DeploymentWatcher,
}

impl Service {
    /// The service's name, as in its leader key and logs.
    pub fn name(self) -> &'static str {
        match self {
            Service::Gateway => names::API_GATEWAY,
            Service::EvalBroker => names::EVAL_BROKER,
            Service::PlanApplier => names::PLAN_APPLIER,
            Service::SchedulerWorker => names::SCHEDULER_WORKER,
            Service::ClientNode => names::CLIENT_NODE,
            Service::DeploymentWatcher => names::DEPLOYMENT_WATCHER,
        }
    }

    /// The service named `name` (as [`Service::name`] gives it).
    pub fn from_name(name: &str) -> Option<Service> {
        [
            Service::Gateway,
            Service::EvalBroker,
            Service::PlanApplier,
            Service::SchedulerWorker,
            Service::ClientNode,
            Service::DeploymentWatcher,
        ]
        .into_iter()
        .find(|s| s.name() == name)
    }

    fn binary(self) -> String {
        names::binary(self.name())
    }

    /// The role its certificate names with TLS: client nodes serve and dial
    /// with the client certificate, everything else with the server one.
    pub fn role(self) -> Role {
        match self {
            Service::ClientNode => Role::Client,
            _ => Role::Server,
        }
    }

    /// Short timings for tests: quick failover, quick redelivery, quick
    /// heartbeat expiry. Later `--set`s of the same key win.
    fn test_settings(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Service::Gateway => &[
                ("min_heartbeat_ttl_ms", "2000"),
                ("heartbeat_grace_ms", "2000"),
            ],
            Service::EvalBroker => &[
                ("leader_ttl_ms", "2000"),
                ("nack_timeout_ms", "10000"),
                ("initial_nack_delay_ms", "200"),
                ("subsequent_nack_delay_ms", "1000"),
                ("failed_follow_up_base_ms", "1000"),
                ("failed_follow_up_jitter_ms", "1000"),
                ("failed_unblock_interval_ms", "1000"),
            ],
            Service::PlanApplier => &[("leader_ttl_ms", "2000"), ("broker_timeout_ms", "3000")],
            Service::SchedulerWorker => &[
                ("workers", "2"),
                ("dequeue_timeout_ms", "1000"),
                ("heartbeat_interval_ms", "2000"),
                ("rpc_timeout_ms", "10000"),
                ("leader_wait_ms", "30000"),
                ("shutdown_grace_ms", "1000"),
            ],
            Service::ClientNode => &[
                ("update_interval_ms", "100"),
                ("max_kill_timeout_ms", "2000"),
                ("stop_tasks_on_shutdown", "true"),
            ],
            Service::DeploymentWatcher => {
                &[("leader_ttl_ms", "2000"), ("eval_batch_window_ms", "100")]
            }
        }
    }
}

/// The addresses of an api-gateway.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GatewayAddrs {
    /// Public and node-facing gRPC.
    pub grpc: SocketAddr,
    /// The Nomad HTTP API.
    pub http: SocketAddr,
    /// The heartbeat listener (`heartbeat_addr`).
    pub heartbeat: SocketAddr,
}

/// Key/value `--set` overrides.
pub type Settings<'a> = &'a [(&'a str, &'a str)];

/// Processes of one cluster, all under one etcd prefix. Dropping it stops
/// every child; after a panic it prints the tail of every log first and
/// keeps the directory of logs and data.
pub struct Cluster {
    name: String,
    etcd: Vec<String>,
    bins: PathBuf,
    dir: TempDir,
    /// The cluster's keys in etcd.
    pub state: ClusterState,
    processes: Vec<ServiceProcess>,
    gateways: Vec<GatewayAddrs>,
    /// Real client nodes by node name: the index of their process.
    clients: BTreeMap<String, usize>,
    /// `caravan server` processes by name: the services each runs, with
    /// the gRPC address each listens on.
    servers: BTreeMap<String, Vec<(Service, SocketAddr)>>,
    /// Whether `Service::test_settings` apply.
    test_timings: bool,
    /// The CA and certificates when processes run with `[tls]`.
    tls: Option<TlsFiles>,
    /// The `store.*` TLS settings of every service, when etcd needs TLS.
    store_tls: Vec<(String, String)>,
    /// Whether client nodes send heartbeats to the gateways' `grpc_addr`
    /// rather than to their heartbeat listeners.
    heartbeats_on_grpc_addr: bool,
    /// Environment variables for the next process started, taken by it.
    next_env: Vec<(String, String)>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("name", &self.name)
            .field("prefix", &self.prefix())
            .field("processes", &self.processes.len())
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// A cluster on the test etcd (`CARAVAN_TEST_ETCD`, which must be set),
    /// under a fresh prefix, with test timings. Fails when the service
    /// binaries are not built. With `CARAVAN_TEST_TLS=1` every service runs
    /// with mutual TLS (see [`Cluster::enable_tls`]).
    pub async fn new(name: &str) -> anyhow::Result<Cluster> {
        Cluster::on_etcd(name, caravan_testkit::etcd_endpoints(), true).await
    }

    /// A cluster on the given etcd; `test_timings` shortens TTLs and
    /// timeouts for tests (the benchmark keeps the defaults). TLS is on
    /// from the start when `CARAVAN_TEST_TLS` asks for it.
    pub async fn on_etcd(
        name: &str,
        etcd: Vec<String>,
        test_timings: bool,
    ) -> anyhow::Result<Cluster> {
        let config = EtcdConfig::new(&etcd);
        Cluster::on_store(name, config, Vec::new(), test_timings, None).await
    }

    /// A cluster with the timings and the key prefix a user gets (`/caravan`),
    /// on an etcd nothing else uses: a benchmark's own, whose bytes per key
    /// are then what a user's cluster stores.
    pub async fn on_own_etcd(name: &str, etcd: Vec<String>) -> anyhow::Result<Cluster> {
        let config = EtcdConfig::new(&etcd);
        let prefix = Keyspace::default().prefix().to_string();
        Cluster::on_store(name, config, Vec::new(), false, Some(prefix)).await
    }

    /// A cluster on the etcd `etcd` started, with test timings: every
    /// service gets its `[store]` settings, TLS included.
    pub async fn on_etcd_process(name: &str, etcd: &EtcdProcess) -> anyhow::Result<Cluster> {
        let store_tls = etcd.tls().map(EtcdTlsFiles::store_settings);
        Cluster::on_store(
            name,
            etcd.etcd_config(),
            store_tls.unwrap_or_default(),
            true,
            None,
        )
        .await
    }

    /// A cluster on the etcd `config` reaches, under `prefix` (a fresh one
    /// of its own when `None`); `store_tls` are the `store.*` TLS settings
    /// every service gets.
    async fn on_store(
        name: &str,
        config: EtcdConfig,
        store_tls: Vec<(String, String)>,
        test_timings: bool,
        prefix: Option<String>,
    ) -> anyhow::Result<Cluster> {
        let tls = crate::tls::requested()?;
        let bins = binaries::bin_dir()?;
        binaries::check_all(&bins)?;
        let prefix = prefix.unwrap_or_else(|| caravan_testkit::unique_prefix(name));
        let etcd = config.endpoints.clone();
        let store: Arc<dyn Store> = Arc::new(EtcdStore::connect_with(config).await?);
        let dir = tempfile::Builder::new()
            .prefix(&format!("caravan-e2e-{name}-"))
            .tempdir()?;
        let mut cluster = Cluster {
            name: name.to_string(),
            etcd,
            bins,
            dir,
            state: ClusterState::new(store, Keyspace::new(&prefix)),
            processes: Vec::new(),
            gateways: Vec::new(),
            clients: BTreeMap::new(),
            servers: BTreeMap::new(),
            test_timings,
            tls: None,
            store_tls,
            heartbeats_on_grpc_addr: false,
            next_env: Vec::new(),
        };
        if tls {
            cluster.enable_tls().await?;
        }
        Ok(cluster)
    }

    /// Client nodes started from now on send heartbeats to the gateways'
    /// `grpc_addr`, beside their alloc streams and status updates, instead
    /// of to the heartbeat listeners (for comparing the two).
    pub fn heartbeats_on_grpc_addr(&mut self) {
        self.heartbeats_on_grpc_addr = true;
    }

    /// The next process started (by any `start_*` call) runs with `env`
    /// added to its environment, through its restarts too; the processes
    /// after it do not. How one process is run under a stepped clock
    /// ([`crate::clock::SteppedClock`]).
    pub fn env_for_next_start(&mut self, env: Vec<(String, String)>) {
        self.next_env = env;
    }

    /// The cluster's key prefix.
    pub fn prefix(&self) -> &str {
        self.state.keys().prefix()
    }

    /// The directory of logs and data dirs.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Leaves the directory of logs and data dirs on disk when dropped.
    pub fn keep_files(&mut self) {
        self.dir.disable_cleanup(true);
    }

    /// The HTTP API of the first gateway.
    pub fn http(&self) -> anyhow::Result<HttpApi> {
        let gw = self
            .gateways
            .first()
            .ok_or_else(|| anyhow::anyhow!("no api-gateway started"))?;
        Ok(HttpApi::new(gw.http))
    }

    /// The gRPC address of the first gateway.
    pub fn gateway_grpc(&self) -> anyhow::Result<SocketAddr> {
        self.gateways
            .first()
            .map(|g| g.grpc)
            .ok_or_else(|| anyhow::anyhow!("no api-gateway started"))
    }

    /// Every api-gateway started, in start order.
    pub fn gateways(&self) -> &[GatewayAddrs] {
        &self.gateways
    }

    /// Every service process still running, in start order, by name with
    /// its pid (for reading its cost from `/proc`).
    pub fn processes(&self) -> Vec<(String, u32)> {
        self.processes
            .iter()
            .filter_map(|p| p.pid().map(|pid| (p.name.clone(), pid)))
            .collect()
    }

    /// Every service process with a `/metrics` address the harness knows,
    /// in start order, by name.
    pub fn metrics_addrs(&self) -> Vec<(String, SocketAddr)> {
        self.processes
            .iter()
            .filter_map(|p| p.metrics.map(|m| (p.name.clone(), m)))
            .collect()
    }

    /// Every service process still running, in start order, by name with
    /// its gRPC address.
    pub fn grpc_addrs(&mut self) -> Vec<(String, SocketAddr)> {
        self.processes
            .iter_mut()
            .filter_map(|p| p.is_running().then(|| (p.name.clone(), p.grpc)))
            .collect()
    }

    /// SIGTERMs the process named `name` and waits up to `limit` for it to
    /// exit: how long it took and its status, or `None` when it had to be
    /// SIGKILLed.
    pub fn terminate(
        &mut self,
        name: &str,
        limit: Duration,
    ) -> anyhow::Result<Option<(Duration, ExitStatus)>> {
        Ok(self.process_mut(name)?.terminate(limit))
    }

    /// Starts an api-gateway and waits until its HTTP API answers.
    pub async fn start_gateway(&mut self, extra: Settings<'_>) -> anyhow::Result<GatewayAddrs> {
        let store = self.store_settings();
        let (index, addrs) = self
            .launch(Service::Gateway, 3, extra, |a| {
                let mut s = store.clone();
                s.push(("grpc_addr".into(), a[0].to_string()));
                s.push(("http_addr".into(), a[1].to_string()));
                s.push(("heartbeat_addr".into(), a[2].to_string()));
                s
            })
            .await?;
        let gw = GatewayAddrs {
            grpc: addrs[0],
            http: addrs[1],
            heartbeat: addrs[2],
        };
        let api = HttpApi::new(gw.http);
        let name = self.processes[index].name.clone();
        wait_for(
            &format!("{name} to answer HTTP"),
            START_TIMEOUT,
            async || {
                let reply = api.get("/v1/agent/self").await?;
                // With ACLs on, an anonymous request is answered 403: it answers.
                Ok(if reply.status == 200 || reply.status == 403 {
                    Progress::Done(())
                } else {
                    Progress::Waiting(format!("HTTP {}: {}", reply.status, reply.text()))
                })
            },
        )
        .await?;
        self.gateways.push(gw);
        Ok(gw)
    }

    /// Starts an eval-broker replica; returns the address it campaigns with.
    pub async fn start_broker(&mut self, extra: Settings<'_>) -> anyhow::Result<SocketAddr> {
        self.start_grpc_service(Service::EvalBroker, extra).await
    }

    /// Starts a plan-applier replica; returns the address it campaigns with.
    pub async fn start_applier(&mut self, extra: Settings<'_>) -> anyhow::Result<SocketAddr> {
        self.start_grpc_service(Service::PlanApplier, extra).await
    }

    /// Starts a deployment-watcher replica; returns the address it
    /// campaigns with.
    pub async fn start_deployment_watcher(
        &mut self,
        extra: Settings<'_>,
    ) -> anyhow::Result<SocketAddr> {
        self.start_grpc_service(Service::DeploymentWatcher, extra)
            .await
    }

    /// Starts a scheduler-worker replica.
    pub async fn start_worker(&mut self, extra: Settings<'_>) -> anyhow::Result<SocketAddr> {
        self.start_grpc_service(Service::SchedulerWorker, extra)
            .await
    }

    async fn start_grpc_service(
        &mut self,
        service: Service,
        extra: Settings<'_>,
    ) -> anyhow::Result<SocketAddr> {
        let store = self.store_settings();
        let (_, addrs) = self
            .launch(service, 1, extra, |a| {
                let mut s = store.clone();
                s.push(("grpc_addr".into(), a[0].to_string()));
                s
            })
            .await?;
        Ok(addrs[0])
    }

    /// Starts a gateway, an eval-broker, a plan-applier, a scheduler
    /// worker and a deployment-watcher, and waits for the three leaders.
    pub async fn start_control_plane(&mut self) -> anyhow::Result<()> {
        self.start_control_plane_with(&[]).await
    }

    /// [`Cluster::start_control_plane`] with `broker` settings for the
    /// eval-broker (garbage collection thresholds, for one).
    pub async fn start_control_plane_with(&mut self, broker: Settings<'_>) -> anyhow::Result<()> {
        self.start_control_plane_from(&[], broker).await
    }

    /// [`Cluster::start_control_plane`] whose gateway has a variables key
    /// (a fixed one: tests only), so the cluster serves Nomad Variables.
    pub async fn start_control_plane_with_variables(&mut self) -> anyhow::Result<()> {
        self.start_control_plane_from(&[("variables_key", TEST_VARIABLES_KEY)], &[])
            .await
    }

    async fn start_control_plane_from(
        &mut self,
        gateway: Settings<'_>,
        broker: Settings<'_>,
    ) -> anyhow::Result<()> {
        self.start_gateway(gateway).await?;
        self.start_broker(broker).await?;
        self.start_applier(&[]).await?;
        self.start_worker(&[]).await?;
        self.start_deployment_watcher(&[]).await?;
        self.wait_leader(Service::EvalBroker).await?;
        self.wait_leader(Service::PlanApplier).await?;
        self.wait_leader(Service::DeploymentWatcher).await?;
        Ok(())
    }

    /// Starts one real client node named `name` (its own data dir, talking
    /// to every gateway) and waits until it is registered and ready;
    /// returns its node id.
    pub async fn start_client(
        &mut self,
        name: &str,
        extra: Settings<'_>,
    ) -> anyhow::Result<String> {
        let data_dir = self.dir().join(format!("data-{name}"));
        let settings = self.client_settings(&data_dir, Some(name));
        let (index, _) = self
            .launch(Service::ClientNode, 1, extra, |a| {
                let mut s = settings.clone();
                s.push(("grpc_addr".into(), a[0].to_string()));
                s
            })
            .await?;
        self.clients.insert(name.to_string(), index);
        let state = self.state.clone();
        wait_for(
            &format!("client node {name} to register"),
            START_TIMEOUT,
            async || {
                let nodes = state.nodes().await?;
                Ok(
                    match nodes
                        .iter()
                        .find(|n| n.name == name && n.status() == NodeStatus::Ready)
                    {
                        Some(n) => Progress::Done(n.id.clone()),
                        None => Progress::Waiting(format!(
                            "{} nodes, none ready named {name}",
                            nodes.len()
                        )),
                    },
                )
            },
        )
        .await
    }

    /// Starts one client-node process simulating `count` nodes (mock driver)
    /// and waits until all of them are ready.
    pub async fn start_simulated_clients(
        &mut self,
        count: u32,
        extra: Settings<'_>,
    ) -> anyhow::Result<()> {
        let before = self.ready_nodes().await?;
        let index = self.processes.len();
        let data_dir = self.dir().join(format!("data-sim-{index}"));
        let mut settings = self.client_settings(&data_dir, None);
        settings.push(("simulate".into(), count.to_string()));
        self.launch(Service::ClientNode, 1, extra, |a| {
            let mut s = settings.clone();
            s.push(("grpc_addr".into(), a[0].to_string()));
            s
        })
        .await?;
        let want = before + count as usize;
        // Bounded by progress, not by a total: 2,000 nodes on a loaded
        // two-core machine (a TLS handshake each, the test niced beside a
        // CPU hog) take minutes, but a hung start gains no node for a minute.
        let mut most = 0;
        let mut gained = Instant::now();
        loop {
            let seen = match ready_count(&self.state).await {
                Ok(ready) if ready >= want => return Ok(()),
                Ok(ready) => {
                    if ready > most {
                        most = ready;
                        gained = Instant::now();
                    }
                    format!("{ready} of {want} nodes ready")
                }
                Err(err) => format!("error: {err:#}"),
            };
            if gained.elapsed() >= START_TIMEOUT {
                anyhow::bail!(
                    "{count} simulated nodes did not register: none became ready for \
                     {START_TIMEOUT:?}; last seen: {seen}"
                );
            }
            tokio::time::sleep(NODES_POLL).await;
        }
    }

    /// The number of ready nodes in etcd.
    pub async fn ready_nodes(&self) -> anyhow::Result<usize> {
        ready_count(&self.state).await
    }

    /// Waits until `service` has a leader; returns its advertised address.
    pub async fn wait_leader(&self, service: Service) -> anyhow::Result<String> {
        self.wait_leader_other_than(service, None).await
    }

    /// Waits until `service` has a leader other than `old`.
    pub async fn wait_leader_other_than(
        &self,
        service: Service,
        old: Option<&str>,
    ) -> anyhow::Result<String> {
        let state = self.state.clone();
        wait_for(
            &format!("a {} leader", service.name()),
            START_TIMEOUT,
            async || {
                Ok(match state.leader(service.name()).await? {
                    Some(addr) if Some(addr.as_str()) != old => Progress::Done(addr),
                    other => Progress::Waiting(format!("leader {other:?}")),
                })
            },
        )
        .await
    }

    /// SIGKILLs the replica of `service` listening on `addr` (the address
    /// it campaigns with); returns its process name.
    pub fn crash(&mut self, service: Service, addr: &str) -> anyhow::Result<String> {
        let p = self
            .processes
            .iter_mut()
            .find(|p| p.name.starts_with(service.name()) && p.grpc.to_string() == addr)
            .ok_or_else(|| anyhow::anyhow!("no {} process at {addr}", service.name()))?;
        p.kill_hard();
        Ok(p.name.clone())
    }

    /// The name of the process of `service` listening on `addr` (the
    /// address it campaigns with), e.g. to find a leader's process.
    pub fn process_at(&self, service: Service, addr: &str) -> Option<&str> {
        let alone = self
            .processes
            .iter()
            .find(|p| p.name.starts_with(service.name()) && p.grpc.to_string() == addr)
            .map(|p| p.name.as_str());
        alone.or_else(|| {
            self.servers
                .iter()
                .find(|(_, runs)| {
                    runs.iter()
                        .any(|(s, a)| *s == service && a.to_string() == addr)
                })
                .map(|(name, _)| name.as_str())
        })
    }

    /// Whether the process named `name` runs `service`: a replica of it
    /// alone, or a `caravan server` with it among its services.
    pub fn runs(&self, name: &str, service: Service) -> bool {
        name.starts_with(service.name())
            || self
                .servers
                .get(name)
                .is_some_and(|runs| runs.iter().any(|(s, _)| *s == service))
    }

    /// Whether the process named `name` is a `caravan server`.
    pub fn is_server(&self, name: &str) -> bool {
        self.servers.contains_key(name)
    }

    /// Every process's name, running or not, in start order.
    pub fn process_names(&self) -> Vec<String> {
        self.processes.iter().map(|p| p.name.clone()).collect()
    }

    /// SIGKILLs the process named `name`, as a crash.
    pub fn crash_named(&mut self, name: &str) -> anyhow::Result<()> {
        self.process_mut(name)?.kill_hard();
        Ok(())
    }

    /// Sends `signal` to the process named `name` (SIGSTOP to freeze it,
    /// SIGCONT to thaw it); whether it was sent.
    pub fn signal(&mut self, name: &str, signal: nix::sys::signal::Signal) -> anyhow::Result<bool> {
        Ok(self.process_mut(name)?.signal(signal))
    }

    /// Starts the process named `name` again, with its settings, addresses
    /// and data dir, SIGKILLing it first if it still runs; waits until it
    /// listens again.
    pub async fn restart(&mut self, name: &str) -> anyhow::Result<()> {
        let gateways = self.gateways.clone();
        let p = self.process_mut(name)?;
        p.respawn()?;
        let mut addrs = vec![p.grpc];
        addrs.extend(gateways.iter().filter(|g| g.grpc == p.grpc).map(|g| g.http));
        wait_listening(p, &addrs).await.map_err(|err| {
            err.context(format!(
                "restarting {name}; its log:\n{}",
                p.tail(LOG_TAIL_LINES)
            ))
        })
    }

    fn process_mut(&mut self, name: &str) -> anyhow::Result<&mut ServiceProcess> {
        self.processes
            .iter_mut()
            .find(|p| p.name == name)
            .ok_or_else(|| anyhow::anyhow!("no process named {name}"))
    }

    /// SIGKILLs the real client node named `name` (its tasks keep running,
    /// as when a machine's agent dies).
    pub fn crash_client(&mut self, name: &str) -> anyhow::Result<()> {
        let index = *self
            .clients
            .get(name)
            .ok_or_else(|| anyhow::anyhow!("no client node named {name}"))?;
        self.processes[index].kill_hard();
        Ok(())
    }

    /// Sends `signal` to the real client node named `name` (SIGSTOP freezes
    /// it as a node cut off from every gateway; SIGCONT brings it back);
    /// whether it was sent.
    pub fn signal_client(
        &mut self,
        name: &str,
        signal: nix::sys::signal::Signal,
    ) -> anyhow::Result<bool> {
        let index = *self
            .clients
            .get(name)
            .ok_or_else(|| anyhow::anyhow!("no client node named {name}"))?;
        Ok(self.processes[index].signal(signal))
    }

    /// Starts the real client node named `name` again after a crash, with
    /// its settings and data dir, and waits until it listens.
    pub async fn restart_client(&mut self, name: &str) -> anyhow::Result<()> {
        let index = *self
            .clients
            .get(name)
            .ok_or_else(|| anyhow::anyhow!("no client node named {name}"))?;
        let process = self.processes[index].name.clone();
        self.restart(&process).await
    }

    /// The data dir of the real client node named `name`.
    pub fn client_data_dir(&self, name: &str) -> PathBuf {
        self.dir().join(format!("data-{name}"))
    }

    /// Makes a CA and a server, a client and a CLI certificate (with
    /// `caravan tls`) in the cluster's directory; processes started from
    /// now on run with `[tls]` (servers with the server certificate, client
    /// nodes with the client one), and [`Cluster::cli`] presents the CLI's.
    /// Returns the directory of the files; once on (`CARAVAN_TEST_TLS`, or
    /// an earlier call), the same directory again.
    pub async fn enable_tls(&mut self) -> anyhow::Result<PathBuf> {
        if let Some(tls) = &self.tls {
            return Ok(tls.dir().to_path_buf());
        }
        let bin = binaries::binary(&self.bins, "caravan")?;
        let tls = TlsFiles::create(&bin, &self.dir().join("tls")).await?;
        let dir = tls.dir().to_path_buf();
        self.tls = Some(tls);
        Ok(dir)
    }

    /// The CA and certificates when the cluster runs with TLS.
    pub fn tls(&self) -> Option<&TlsFiles> {
        self.tls.as_ref()
    }

    /// A channel to the gRPC server of `service` at `addr`, as an operator's
    /// tool (`grpcurl`) would dial it: plaintext, or with TLS the CLI's
    /// certificate, accepting the certificate `service` serves with.
    pub fn grpc_channel(&self, service: Service, addr: &str) -> anyhow::Result<Channel> {
        match &self.tls {
            Some(tls) => tls.channel(addr, Role::Cli, service.role()),
            None => Ok(caravan_runtime::grpc::channel(addr)?),
        }
    }

    /// The `[tls]` settings of `service` when TLS is on.
    fn tls_settings(&self, service: Service) -> Vec<(String, String)> {
        self.tls
            .as_ref()
            .map(|tls| tls.settings(service.role()))
            .unwrap_or_default()
    }

    /// Runs the `caravan` CLI against the first gateway.
    pub async fn cli(&self, args: &[&str]) -> anyhow::Result<Output> {
        self.cli_with_env(args, &[]).await
    }

    /// Runs the `caravan` CLI against the first gateway with `env` added to
    /// its environment (`NOMAD_VAR_count=3`).
    pub async fn cli_with_env(
        &self,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Output> {
        let bin = binaries::binary(&self.bins, "caravan")?;
        let address = format!("http://{}", self.gateway_grpc()?);
        let mut command = tokio::process::Command::new(bin);
        if let Some(tls) = &self.tls {
            command
                .env("CARAVAN_CACERT", tls.ca())
                .env("CARAVAN_CLIENT_CERT", tls.cert(Role::Cli))
                .env("CARAVAN_CLIENT_KEY", tls.key(Role::Cli));
        }
        let output = command
            .arg("-grpc-address")
            .arg(&address)
            .args(args)
            .envs(env.iter().copied())
            .env("NO_COLOR", "1")
            .kill_on_drop(true)
            .output();
        tokio::time::timeout(Duration::from_secs(60), output)
            .await
            .map_err(|_| anyhow::anyhow!("caravan {args:?} did not finish in 60 s"))?
            .map_err(anyhow::Error::from)
    }

    /// Runs the `caravan` CLI as a Nomad user would: no address flag, the
    /// environment cleared of Caravan's and Nomad's variables and given only
    /// `env` (`NOMAD_ADDR`, `NOMAD_TOKEN`, ...).
    pub async fn cli_nomad_env(
        &self,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Output> {
        let bin = binaries::binary(&self.bins, "caravan")?;
        let mut command = tokio::process::Command::new(bin);
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy().into_owned();
            if name.starts_with("CARAVAN_") || name.starts_with("NOMAD_") {
                command.env_remove(name);
            }
        }
        let output = command
            .args(args)
            .envs(env.iter().copied())
            .env("NO_COLOR", "1")
            .kill_on_drop(true)
            .output();
        tokio::time::timeout(Duration::from_secs(60), output)
            .await
            .map_err(|_| anyhow::anyhow!("caravan {args:?} did not finish in 60 s"))?
            .map_err(anyhow::Error::from)
    }

    /// As [`Cluster::cli_nomad_env`], with `stdin` as the CLI's standard
    /// input (`alloc exec`).
    pub async fn cli_nomad_env_stdin(
        &self,
        args: &[&str],
        env: &[(&str, &str)],
        stdin: &[u8],
    ) -> anyhow::Result<Output> {
        use tokio::io::AsyncWriteExt;
        let bin = binaries::binary(&self.bins, "caravan")?;
        let mut command = tokio::process::Command::new(bin);
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy().into_owned();
            if name.starts_with("CARAVAN_") || name.starts_with("NOMAD_") {
                command.env_remove(name);
            }
        }
        let mut child = command
            .args(args)
            .envs(env.iter().copied())
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        if let Some(mut input) = child.stdin.take() {
            input.write_all(stdin).await?;
            // Dropped: the CLI reads the end of its input.
        }
        tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .map_err(|_| anyhow::anyhow!("caravan {args:?} did not finish in 60 s"))?
            .map_err(anyhow::Error::from)
    }

    /// The first gateway's HTTP API as `NOMAD_ADDR` names it.
    pub fn nomad_addr(&self) -> anyhow::Result<String> {
        let gw = self
            .gateways
            .first()
            .ok_or_else(|| anyhow::anyhow!("no gateway started"))?;
        Ok(format!("http://{}", gw.http))
    }

    /// Processes that exited on their own (not through [`Cluster::crash`]),
    /// with their status: a service that dies by itself is a bug to name.
    pub fn exited(&mut self) -> Vec<String> {
        self.processes
            .iter_mut()
            .filter_map(|p| p.exited().map(|s| format!("{} exited: {s}", p.name)))
            .collect()
    }

    /// The tail of every service's log.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for p in &self.processes {
            out.push_str(&format!(
                "----- {} ({}) last {LOG_TAIL_LINES} lines of {} -----\n{}\n",
                p.name,
                p.grpc,
                p.log.display(),
                p.tail(LOG_TAIL_LINES)
            ));
        }
        out
    }

    /// Stops every process gracefully, clients first (so their tasks stop).
    pub fn shutdown(&mut self) {
        for p in self
            .processes
            .iter_mut()
            .filter(|p| p.name.starts_with(Service::ClientNode.name()))
        {
            p.stop();
        }
        for p in self.processes.iter_mut().rev() {
            p.stop();
        }
    }

    fn store_settings(&self) -> Vec<(String, String)> {
        let mut settings = vec![
            ("store.endpoints".into(), self.etcd.join(",")),
            ("store.prefix".into(), self.prefix().to_string()),
        ];
        settings.extend(self.store_tls.iter().cloned());
        settings
    }

    fn client_settings(&self, data_dir: &Path, name: Option<&str>) -> Vec<(String, String)> {
        let servers: Vec<String> = self.gateways.iter().map(|g| g.grpc.to_string()).collect();
        let heartbeats: Vec<String> = if self.heartbeats_on_grpc_addr {
            Vec::new()
        } else {
            self.gateways
                .iter()
                .map(|g| g.heartbeat.to_string())
                .collect()
        };
        let mut s = vec![
            ("servers".to_string(), servers.join(",")),
            ("heartbeat_servers".to_string(), heartbeats.join(",")),
            ("data_dir".to_string(), data_dir.display().to_string()),
            // raw_exec is off unless enabled; the tests run real tasks.
            ("drivers".to_string(), "raw_exec,mock".to_string()),
        ];
        if let Some(name) = name {
            s.push(("name".into(), name.to_string()));
        }
        s
    }

    /// Spawns `service` with `ports` fresh loopback addresses handed to
    /// `settings`, then `extra`; retries with new ports when another process
    /// took one first. Returns the process index and its addresses once
    /// every address accepts connections.
    async fn launch(
        &mut self,
        service: Service,
        ports: usize,
        extra: Settings<'_>,
        settings: impl Fn(&[SocketAddr]) -> Vec<(String, String)>,
    ) -> anyhow::Result<(usize, Vec<SocketAddr>)> {
        let binary = binaries::binary(&self.bins, &service.binary())?;
        let name = self.next_name(service.name());
        // Every process but a gateway (which serves `/metrics` on its HTTP
        // address) gets a metrics listener the harness knows, unless the
        // caller sets one.
        let own_metrics =
            service != Service::Gateway && !extra.iter().any(|(k, _)| *k == "metrics_addr");
        let tls = self.tls_settings(service);
        let defaults = self.defaults_with(service, extra);
        self.spawn_listening(&name, &binary, ports, own_metrics, |addrs, own| {
            let metrics = if service == Service::Gateway {
                Some(addrs[1])
            } else {
                own
            };
            let metrics_setting = own.map(|a| ("metrics_addr".to_string(), a.to_string()));
            let layers = settings(addrs)
                .into_iter()
                .chain(metrics_setting)
                .chain(tls.iter().cloned())
                .chain(defaults.iter().cloned());
            (set_args(layers, ""), metrics)
        })
        .await
    }

    /// Starts `caravan server` running `services` in one process (each
    /// with its test settings and its `extra`; `process` holds the
    /// process's own `telemetry.*` and `shutdown.*`), sharing one store
    /// connection and one watch cache; returns each one's gRPC address, in
    /// the order given. The first one serves the process's `/metrics`.
    pub async fn start_server(
        &mut self,
        services: &[Service],
        process: Settings<'_>,
        extra: &[(Service, Settings<'_>)],
    ) -> anyhow::Result<Vec<SocketAddr>> {
        anyhow::ensure!(
            !services.is_empty(),
            "caravan server runs at least one service"
        );
        let binary = binaries::binary(&self.bins, "caravan")?;
        let name = self.next_name("server");
        let tls = self.tls_settings(Service::EvalBroker);
        let mut shared = self.store_settings();
        shared.extend(tls);
        shared.extend(process.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let none: Settings<'_> = &[];
        let defaults: Vec<Vec<(String, String)>> = services
            .iter()
            .map(|service| {
                let extra = extra
                    .iter()
                    .find(|(s, _)| s == service)
                    .map_or(none, |e| e.1);
                self.defaults_with(*service, extra)
            })
            .collect();
        let (_, addrs) = self
            .spawn_listening(&name, &binary, services.len(), true, |addrs, own| {
                let mut args = vec!["server".to_string(), "--services".to_string()];
                args.push(
                    services
                        .iter()
                        .map(|s| s.name())
                        .collect::<Vec<_>>()
                        .join(","),
                );
                args.extend(set_args(shared.iter().cloned(), ""));
                for (i, service) in services.iter().enumerate() {
                    let metrics = if i == 0 {
                        own.map(|a| a.to_string())
                    } else {
                        None
                    };
                    let own = [
                        ("grpc_addr".to_string(), addrs[i].to_string()),
                        ("metrics_addr".to_string(), metrics.unwrap_or_default()),
                    ];
                    let layers = own.into_iter().chain(defaults[i].iter().cloned());
                    args.extend(set_args(layers, &format!("{}.", service.name())));
                }
                (args, own)
            })
            .await?;
        let runs = services
            .iter()
            .copied()
            .zip(addrs.iter().copied())
            .collect();
        self.servers.insert(name, runs);
        Ok(addrs)
    }

    /// `caravan server -health` asked about server process `name`'s
    /// services, with the process's TLS settings: its output, and whether
    /// it exited 0 (every service answered SERVING).
    pub async fn server_health(&self, name: &str) -> anyhow::Result<(bool, String)> {
        let runs = self
            .servers
            .get(name)
            .with_context(|| format!("no server process {name}"))?;
        let binary = binaries::binary(&self.bins, "caravan")?;
        let names: Vec<&str> = runs.iter().map(|(s, _)| s.name()).collect();
        let mut args = vec!["server".to_string(), "--health".to_string()];
        args.extend(["--services".to_string(), names.join(",")]);
        args.extend(set_args(self.tls_settings(Service::EvalBroker), ""));
        for (service, addr) in runs {
            let grpc = [("grpc_addr".to_string(), addr.to_string())];
            args.extend(set_args(grpc, &format!("{}.", service.name())));
        }
        let out = tokio::process::Command::new(binary)
            .args(&args)
            .output()
            .await?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok((out.status.success(), text))
    }

    /// The name of the next process of `kind`: `<kind>-<ordinal>`.
    fn next_name(&self, kind: &str) -> String {
        let ordinal = 1 + self
            .processes
            .iter()
            .filter(|p| p.name.starts_with(kind))
            .count();
        format!("{kind}-{ordinal}")
    }

    /// `service`'s test settings (when the cluster has test timings), then
    /// `extra`.
    fn defaults_with(&self, service: Service, extra: Settings<'_>) -> Vec<(String, String)> {
        let defaults = if self.test_timings {
            service.test_settings()
        } else {
            &[]
        };
        defaults
            .iter()
            .chain(extra.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Spawns `binary` as process `name` with the arguments `args_for`
    /// makes of `ports` free addresses (and a free `/metrics` address when
    /// `own_metrics`), which also names the `/metrics` address the harness
    /// reads; waits until it listens on every one, trying again (three
    /// times in all) when it lost a port to another process.
    async fn spawn_listening(
        &mut self,
        name: &str,
        binary: &Path,
        ports: usize,
        own_metrics: bool,
        args_for: impl Fn(&[SocketAddr], Option<SocketAddr>) -> (Vec<String>, Option<SocketAddr>),
    ) -> anyhow::Result<(usize, Vec<SocketAddr>)> {
        let env = std::mem::take(&mut self.next_env);
        for attempt in 1..=3 {
            let addrs = (0..ports)
                .map(|_| process::free_addr())
                .collect::<anyhow::Result<Vec<_>>>()?;
            let own = if own_metrics {
                Some(process::free_addr()?)
            } else {
                None
            };
            let (args, metrics) = args_for(&addrs, own);
            let log = self.dir().join(format!("{name}.log"));
            let mut process = ServiceProcess::spawn_with_env(
                name,
                binary,
                &args,
                &env,
                addrs[0],
                log.clone(),
                Duration::from_secs(5),
            )?;
            process.metrics = metrics;
            let listening = wait_listening(&mut process, &addrs).await;
            match listening {
                Ok(()) => {
                    self.processes.push(process);
                    return Ok((self.processes.len() - 1, addrs));
                }
                Err(_)
                    if attempt < 3
                        && process.exited().is_some()
                        && process::lost_port_race(&log) =>
                {
                    continue;
                }
                Err(err) => {
                    let tail = process.tail(LOG_TAIL_LINES);
                    return Err(err.context(format!("starting {name}; its log:\n{tail}")));
                }
            }
        }
        anyhow::bail!("{name}: lost the race for free ports three times")
    }
}

/// `--set` arguments of `layers`, each key under `prefix`; a later
/// setting of the same key wins.
fn set_args(layers: impl IntoIterator<Item = (String, String)>, prefix: &str) -> Vec<String> {
    let merged: BTreeMap<String, String> = layers.into_iter().collect();
    merged
        .into_iter()
        .flat_map(|(k, v)| ["--set".to_string(), format!("{prefix}{k}={v}")])
        .collect()
}

/// Waits until `process` accepts connections on every one of `addrs`;
/// fails at once when it exits.
async fn wait_listening(process: &mut ServiceProcess, addrs: &[SocketAddr]) -> anyhow::Result<()> {
    let name = process.name.clone();
    wait_for(&format!("{name} to listen"), START_TIMEOUT, async || {
        if let Some(status) = process.exited() {
            anyhow::bail!("{name} exited ({status})");
        }
        Ok(if addrs.iter().all(|a| process::accepts(*a)) {
            Progress::Done(())
        } else {
            Progress::Waiting(format!("not listening on {addrs:?}"))
        })
    })
    .await
}

async fn ready_count(state: &ClusterState) -> anyhow::Result<usize> {
    Ok(state
        .nodes()
        .await?
        .iter()
        .filter(|n| n.status() == NodeStatus::Ready)
        .count())
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let failed = std::thread::panicking();
        if failed {
            eprintln!(
                "cluster {} (prefix {}) failed; service logs follow",
                self.name,
                self.prefix()
            );
            eprintln!("{}", self.logs());
        }
        self.shutdown();
        if failed {
            self.keep_files();
            eprintln!("logs and data kept in {}", self.dir().display());
        }
    }
}

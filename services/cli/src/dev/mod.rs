//! `caravan dev`: every service and one client node (raw_exec and mock
//! drivers, and docker when the Docker daemon answers) in this process, on
//! one embedded `MemStore` (or an etcd), each service on its own loopback
//! port and still talking gRPC to the others.

mod banner;
pub(crate) mod tier;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use caravan_api_gateway::{ApiGatewayService, GatewayConfig};
use caravan_client_node::{ClientConfig, ClientNodeService};
use caravan_deployment_watcher::{DeploymentWatcherConfig, DeploymentWatcherService};
use caravan_eval_broker::{EvalBrokerConfig, EvalBrokerService};
use caravan_plan_applier::{PlanApplierConfig, PlanApplierService};
use caravan_proto::NodeStatus;
use caravan_runtime::service::NoStore;
use caravan_runtime::store::StoreConfig;
use caravan_runtime::telemetry::TelemetryConfig;
use caravan_scheduler_worker::{SchedulerWorkerConfig, SchedulerWorkerService};
use caravan_store::{MemStore, Store};

pub use banner::banner;

use crate::api::Api;
use crate::args::DevArgs;
use crate::error::CliError;
use crate::ui::Ui;
use tier::Tiers;

/// How long `start` waits for the node to register and the leaders to be
/// elected before handing the cluster over.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Every service of a dev cluster shares one process and so one metrics
/// registry, which the gateway serves at `/metrics` on its HTTP port: the
/// others open no listener of their own (an empty `metrics_addr`).
const NO_METRICS_LISTENER: &str = "";

/// What `caravan dev` starts.
#[derive(Debug, Clone)]
pub struct DevOptions {
    /// etcd endpoints; empty keeps the state in memory.
    pub etcd: Vec<String>,
    /// With `https://` endpoints: the CA that signs etcd's certificate.
    pub etcd_ca_file: PathBuf,
    /// The client certificate etcd asks for; empty for none.
    pub etcd_cert_file: PathBuf,
    /// Its key.
    pub etcd_key_file: PathBuf,
    /// The key prefix of the state.
    pub prefix: String,
    /// The client node's data directory; a fresh temporary one when unset
    /// (removed on stop).
    pub data_dir: Option<PathBuf>,
    /// The address every service listens on.
    pub bind: String,
    /// The api-gateway's gRPC port (0: any free one).
    pub grpc_port: u16,
    /// The api-gateway's HTTP port (0: any free one).
    pub http_port: u16,
    /// The binary that supervises raw_exec tasks (`caravan`, which runs as one
    /// given `task-supervisor`); empty means this process's own binary.
    pub task_supervisor: PathBuf,
    /// The client node's name (Nomad's `-node`); the host name when empty.
    pub node_name: String,
    /// Enforce ACLs on the gateway's HTTP and public gRPC APIs.
    pub acl_enabled: bool,
}

impl DevOptions {
    /// The `[store]` section of every service: the etcd given, TLS
    /// included, or the default endpoints when the state is in memory.
    pub fn store_config(&self) -> StoreConfig {
        let mut config = StoreConfig {
            prefix: self.prefix.clone(),
            ..StoreConfig::default()
        };
        if !self.etcd.is_empty() {
            config.endpoints = self.etcd.clone();
            config.ca_file = self.etcd_ca_file.clone();
            config.cert_file = self.etcd_cert_file.clone();
            config.key_file = self.etcd_key_file.clone();
        }
        config
    }
}

impl Default for DevOptions {
    fn default() -> Self {
        DevOptions {
            etcd: Vec::new(),
            etcd_ca_file: PathBuf::new(),
            etcd_cert_file: PathBuf::new(),
            etcd_key_file: PathBuf::new(),
            prefix: StoreConfig::default().prefix,
            data_dir: None,
            bind: "127.0.0.1".into(),
            grpc_port: 4647,
            http_port: 4646,
            task_supervisor: PathBuf::new(),
            node_name: String::new(),
            acl_enabled: false,
        }
    }
}

/// Where each service of a running dev cluster listens.
#[derive(Debug, Clone)]
pub struct DevAddresses {
    /// The api-gateway's gRPC API (the CLI's `-grpc-address`).
    pub gateway_grpc: SocketAddr,
    /// The api-gateway's HTTP API (the CLI's `-address`).
    pub gateway_http: SocketAddr,
    /// The eval broker.
    pub eval_broker: SocketAddr,
    /// The plan applier.
    pub plan_applier: SocketAddr,
    /// The scheduler worker.
    pub scheduler_worker: SocketAddr,
    /// The deployment watcher.
    pub deployment_watcher: SocketAddr,
    /// Worker loops of the scheduler worker.
    pub workers: usize,
    /// The client node's own API (logs).
    pub client_node: SocketAddr,
    /// The client node's id.
    pub node_id: String,
    /// The client node's drivers (docker only when the daemon answered).
    pub drivers: Vec<String>,
    /// The client node's data directory.
    pub data_dir: PathBuf,
}

/// A running dev cluster; [`DevCluster::stop`] stops it.
#[derive(Debug)]
pub struct DevCluster {
    /// Where everything listens.
    pub addresses: DevAddresses,
    tiers: Tiers,
    owned_data_dir: bool,
    acl_enabled: bool,
}

fn host_port(bind: &str, port: u16) -> String {
    if bind.contains(':') && !bind.starts_with('[') {
        format!("[{bind}]:{port}")
    } else {
        format!("{bind}:{port}")
    }
}

/// A bound address made dialable: loopback in place of "every interface".
fn dialable(addr: SocketAddr) -> SocketAddr {
    if addr.ip().is_unspecified() {
        let lo = if addr.is_ipv4() {
            std::net::Ipv4Addr::LOCALHOST.into()
        } else {
            std::net::Ipv6Addr::LOCALHOST.into()
        };
        SocketAddr::new(lo, addr.port())
    } else {
        addr
    }
}

impl DevCluster {
    /// Starts every service and the client node, and waits until the node is
    /// ready and the eval broker and plan applier have leaders.
    pub async fn start(options: DevOptions) -> anyhow::Result<DevCluster> {
        let store: Arc<dyn Store> = if options.etcd.is_empty() {
            Arc::new(MemStore::new())
        } else {
            options
                .store_config()
                .connect()
                .await
                .with_context(|| format!("cannot reach etcd at {}", options.etcd.join(",")))?
        };
        let (data_dir, owned_data_dir) = match &options.data_dir {
            Some(d) => (d.clone(), false),
            None => {
                let d = std::env::temp_dir().join(format!("caravan-dev-{}", std::process::id()));
                // A directory left by an earlier process with the same pid holds nothing of ours.
                let _ = std::fs::remove_dir_all(&d);
                (d, true)
            }
        };
        std::fs::create_dir_all(&data_dir)
            .with_context(|| format!("cannot create the data dir {}", data_dir.display()))?;
        // Every service runs in this process: leaders are called directly.
        caravan_runtime::local::enable();
        let mut tiers = Tiers::default();
        let addresses = match start_services(&mut tiers, &options, store, data_dir).await {
            Ok(addresses) => addresses,
            Err(err) => {
                // What started is stopped; the failure to start is what counts.
                let _ = tiers.stop().await;
                return Err(err);
            }
        };
        let cluster = DevCluster {
            addresses,
            tiers,
            owned_data_dir,
            acl_enabled: options.acl_enabled,
        };
        cluster.wait_ready().await;
        Ok(cluster)
    }

    /// The gateway's gRPC address (the CLI's `-grpc-address`, the SDK's address).
    pub fn address(&self) -> String {
        format!("http://{}", self.addresses.gateway_grpc)
    }

    /// The gateway's HTTP API (the CLI's `-address`, Nomad's `NOMAD_ADDR`).
    pub fn http_address(&self) -> String {
        format!("http://{}", self.addresses.gateway_http)
    }

    /// Waits (bounded) until the node is ready and the eval broker, plan
    /// applier and deployment watcher have leaders, so a job run right after
    /// start is placed at once. With ACLs on, reading the node needs a token
    /// nobody holds before the bootstrap, so only the leaders are awaited.
    async fn wait_ready(&self) {
        let Ok(api) = Api::new(&self.address(), "default") else {
            return;
        };
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        while tokio::time::Instant::now() < deadline {
            let node_ready = self.acl_enabled
                || api
                    .node(&self.addresses.node_id)
                    .await
                    .is_ok_and(|n| n.status() == NodeStatus::Ready);
            let leaders = api.leaders().await.unwrap_or_default();
            let led = self
                .tiers
                .back
                .leaders()
                .iter()
                .all(|s| leaders.contains_key(*s));
            if node_ready && led {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tracing::warn!("the dev cluster is not fully up after {READY_TIMEOUT:?}; going on");
    }

    /// Waits until a service stops on its own (which is a failure: they
    /// stop only when told), returning its name and error.
    pub async fn failed(&mut self) -> (String, anyhow::Error) {
        match self.tiers.next_stopped().await {
            (name, Ok(())) => (name.to_string(), anyhow::anyhow!("stopped")),
            (name, Err(e)) => (name.to_string(), e),
        }
    }

    /// Stops the client node first (its tasks are killed), then the gateway
    /// and the scheduler worker, then the eval broker, the plan applier and
    /// the deployment watcher (which serve them and resign their
    /// leadership); removes a temporary data directory.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        let result = self.tiers.stop().await;
        if self.owned_data_dir {
            let _ = std::fs::remove_dir_all(&self.addresses.data_dir);
        }
        result
    }
}

/// The file of the dev cluster's variables key in `data_dir`, made (readable
/// by its owner only) on the first start and kept, so variables written on
/// a persistent store stay readable across restarts with the same data dir.
fn dev_variables_key(data_dir: &std::path::Path) -> anyhow::Result<PathBuf> {
    let file = data_dir.join("variables.key");
    if file.exists() {
        return Ok(file);
    }
    let key = format!("{}\n", caravan_api_gateway::VariableKey::generate());
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut out = options
        .open(&file)
        .with_context(|| format!("cannot create the variables key {}", file.display()))?;
    std::io::Write::write_all(&mut out, key.as_bytes())
        .with_context(|| format!("cannot write the variables key {}", file.display()))?;
    Ok(file)
}

/// Starts each service in turn into its tier, every one on its own port of
/// `options.bind` and on `store`; where they listen.
async fn start_services(
    tiers: &mut Tiers,
    options: &DevOptions,
    store: Arc<dyn Store>,
    data_dir: PathBuf,
) -> anyhow::Result<DevAddresses> {
    let any_port = host_port(&options.bind, 0);
    let store_config = options.store_config();
    let back = &mut tiers.back;
    let (_, eval_broker) = back
        .start(
            EvalBrokerService,
            EvalBrokerConfig {
                grpc_addr: any_port.clone(),
                store: store_config.clone(),
                metrics_addr: NO_METRICS_LISTENER.into(),
                ..Default::default()
            },
            store.clone(),
        )
        .await?;
    let (_, plan_applier) = back
        .start(
            PlanApplierService::default(),
            PlanApplierConfig {
                grpc_addr: any_port.clone(),
                store: store_config.clone(),
                metrics_addr: NO_METRICS_LISTENER.into(),
                ..Default::default()
            },
            store.clone(),
        )
        .await?;
    // Deployments progress only while the watcher leads: it counts health
    // and creates the evals that place each next batch.
    let (_, deployment_watcher) = back
        .start(
            DeploymentWatcherService,
            DeploymentWatcherConfig {
                grpc_addr: any_port.clone(),
                store: store_config.clone(),
                metrics_addr: NO_METRICS_LISTENER.into(),
                ..Default::default()
            },
            store.clone(),
        )
        .await?;
    let front = &mut tiers.front;
    let (pool, scheduler_worker) = front
        .start(
            SchedulerWorkerService,
            SchedulerWorkerConfig {
                grpc_addr: any_port.clone(),
                store: store_config.clone(),
                metrics_addr: NO_METRICS_LISTENER.into(),
                ..Default::default()
            },
            store.clone(),
        )
        .await?;
    let variables_key_file = dev_variables_key(&data_dir)?;
    let (gateway, _) = front
        .start(
            ApiGatewayService,
            GatewayConfig {
                grpc_addr: host_port(&options.bind, options.grpc_port),
                http_addr: host_port(&options.bind, options.http_port),
                variables_key_file: variables_key_file.display().to_string(),
                acl: caravan_api_gateway::AclConfig {
                    enabled: options.acl_enabled,
                },
                store: store_config,
                ..Default::default()
            },
            // Heartbeats on the shared runtime and connection: `caravan dev`
            // runs every service in this one process.
            caravan_api_gateway::GatewayStore::from(store),
        )
        .await?;
    let gateway_grpc = dialable(gateway.grpc);
    let docker = caravan_client_node::driver::docker::daemon_answers(&Default::default()).await;
    let mut drivers = vec!["raw_exec".to_string(), "mock".to_string()];
    if docker {
        drivers.insert(0, "docker".to_string());
    }
    let (nodes, client_node) = tiers
        .edge
        .start(
            ClientNodeService,
            ClientConfig {
                servers: vec![gateway_grpc.to_string()],
                grpc_addr: any_port,
                data_dir: data_dir.clone(),
                drivers: drivers.clone(),
                stop_tasks_on_shutdown: true,
                task_supervisor: options.task_supervisor.clone(),
                name: options.node_name.clone(),
                metrics_addr: NO_METRICS_LISTENER.into(),
                ..Default::default()
            },
            NoStore,
        )
        .await?;
    Ok(DevAddresses {
        gateway_grpc,
        gateway_http: dialable(gateway.http),
        eval_broker: dialable(eval_broker),
        plan_applier: dialable(plan_applier),
        scheduler_worker: dialable(scheduler_worker),
        deployment_watcher: dialable(deployment_watcher),
        workers: pool.workers(),
        client_node: dialable(client_node),
        node_id: nodes.node_ids.first().cloned().unwrap_or_default(),
        drivers,
        data_dir,
    })
}

/// `caravan dev`: starts the cluster, prints the banner, and runs until
/// Ctrl-C (or until a service fails).
pub async fn run(args: DevArgs, ui: &mut Ui) -> Result<u8, CliError> {
    let telemetry = TelemetryConfig {
        log_filter: args.log_level.clone(),
        ..Default::default()
    };
    let _guard = caravan_runtime::telemetry::init("caravan-dev", &telemetry)
        .map_err(|e| CliError::Usage(format!("-log-level: {e}")))?;
    let shutdown = caravan_runtime::shutdown::on_signals()
        .map_err(|e| CliError::Other(format!("Cannot install signal handlers: {e}")))?;
    let options = DevOptions {
        etcd: args.etcd.clone().into_iter().collect(),
        etcd_ca_file: args.etcd_ca_file.clone().unwrap_or_default(),
        etcd_cert_file: args.etcd_cert_file.clone().unwrap_or_default(),
        etcd_key_file: args.etcd_key_file.clone().unwrap_or_default(),
        data_dir: args.data_dir.clone(),
        bind: args.bind.clone(),
        grpc_port: args.grpc_port,
        http_port: args.http_port,
        node_name: args.node.clone().unwrap_or_default(),
        acl_enabled: args.acl_enabled,
        ..Default::default()
    };
    if let Err(err) = options.store_config().validate() {
        return Err(CliError::Usage(as_flags(&err.to_string())));
    }
    let store = match &args.etcd {
        Some(e) => format!("in etcd at {e}"),
        None => "in memory".to_string(),
    };
    let mut cluster = tokio::select! {
        started = DevCluster::start(options) => started
            .map_err(|e| CliError::Other(format!("Error starting the dev cluster: {e:#}")))?,
        () = shutdown.cancelled() => return Ok(0),
    };
    ui.output(banner(&cluster.addresses, &store));
    if args.acl_enabled {
        ui.output(
            "==> ACLs are enabled: `caravan acl bootstrap` prints the management token; \
             pass a token with -token, CARAVAN_TOKEN or NOMAD_TOKEN",
        );
    }
    let failure = tokio::select! {
        () = shutdown.cancelled() => None,
        (name, err) = cluster.failed() => Some(format!("{name}: {err:#}")),
    };
    ui.output("==> Stopping the dev cluster");
    let stopped = cluster.stop().await;
    if let Some(f) = failure {
        return Err(CliError::Other(format!("Error: a service failed: {f}")));
    }
    stopped.map_err(|e| CliError::Other(format!("Error stopping the dev cluster: {e:#}")))?;
    Ok(0)
}

/// The `[store]` keys as `caravan dev`'s flags, for its messages.
const STORE_FLAGS: [(&str, &str); 4] = [
    ("store.endpoints", "-etcd"),
    ("store.ca_file", "-etcd-ca-file"),
    ("store.cert_file", "-etcd-cert-file"),
    ("store.key_file", "-etcd-key-file"),
];

/// A `[store]` message with the keys it names as the flags that set them.
fn as_flags(message: &str) -> String {
    STORE_FLAGS
        .iter()
        .fold(message.to_string(), |m, (key, flag)| m.replace(key, flag))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etcd_tls_flags_reach_the_store_section_and_are_checked() {
        let options = DevOptions {
            etcd: vec!["https://10.0.0.1:2379".into()],
            etcd_ca_file: "/tls/ca.pem".into(),
            etcd_cert_file: "/tls/client.pem".into(),
            etcd_key_file: "/tls/client-key.pem".into(),
            ..DevOptions::default()
        };
        let tls = options.store_config().tls().unwrap().unwrap();
        assert_eq!(tls.ca_file, PathBuf::from("/tls/ca.pem"));
        assert!(tls.client_cert.is_some());
        let missing_ca = DevOptions {
            etcd_ca_file: PathBuf::new(),
            ..options
        };
        let err = missing_ca.store_config().validate().unwrap_err();
        assert!(
            as_flags(&err.to_string()).starts_with("-etcd-ca-file:"),
            "{err}"
        );
        // In memory: the default (plaintext) endpoints, no TLS.
        assert_eq!(DevOptions::default().store_config().tls().unwrap(), None);
    }

    #[test]
    fn addresses_bracket_ipv6_and_dial_loopback() {
        assert_eq!(host_port("127.0.0.1", 0), "127.0.0.1:0");
        assert_eq!(host_port("::1", 4647), "[::1]:4647");
        let any: SocketAddr = "0.0.0.0:4647".parse().unwrap();
        assert_eq!(dialable(any).to_string(), "127.0.0.1:4647");
    }

    #[test]
    fn every_service_runs_under_its_name_and_the_elected_ones_campaign() {
        use caravan_runtime::names;
        use caravan_runtime::service::Service;

        let services = [
            (ApiGatewayService::NAME, ApiGatewayService::LEADER_ELECTED),
            (EvalBrokerService::NAME, EvalBrokerService::LEADER_ELECTED),
            (PlanApplierService::NAME, PlanApplierService::LEADER_ELECTED),
            (
                SchedulerWorkerService::NAME,
                SchedulerWorkerService::LEADER_ELECTED,
            ),
            (
                DeploymentWatcherService::NAME,
                DeploymentWatcherService::LEADER_ELECTED,
            ),
            (ClientNodeService::NAME, ClientNodeService::LEADER_ELECTED),
        ];
        let all: Vec<&str> = services.iter().map(|(name, _)| *name).collect();
        assert_eq!(all, names::ALL);
        let elected: Vec<&str> = services
            .iter()
            .filter(|(_, elected)| *elected)
            .map(|(name, _)| *name)
            .collect();
        assert_eq!(elected, names::LEADER_ELECTED);
    }
}

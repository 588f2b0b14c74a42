//! Caravan's client-node service: fingerprints the machine, registers with
//! the api-gateway and heartbeats, runs the node's allocations with task
//! drivers, reports their status in batches, and serves task logs.
//!
//! It talks only gRPC (the gateway's `NodeClientService`), so unlike the
//! other services its `run` takes no store.

pub mod alloc_dir;
pub mod alloc_runner;
pub mod config;
pub mod driver;
pub mod error;
pub mod fingerprint;
pub mod gateway;
pub mod health;
pub mod lifecycle;
pub mod logs;
pub mod node_agent;
pub mod node_allocs;
pub mod restart;
pub mod service;
pub mod shared_jobs;
pub mod simulate;
pub mod state_dir;
pub mod status_reporter;
pub mod task_env;
pub mod task_runner;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use caravan_proto::client_node_service_server::ClientNodeServiceServer;
use caravan_runtime::config::ConfigLoader;
use caravan_runtime::service::ServiceArgs;
use caravan_runtime::shutdown::ShutdownConfig;
use clap::Parser;
use tokio_util::sync::CancellationToken;

use crate::alloc_runner::NodeContext;
pub use crate::config::ClientConfig;
use crate::driver::Drivers;
pub use crate::error::ClientError;
use crate::fingerprint::{HostFacts, build_node};
use crate::gateway::Gateway;
use crate::node_agent::NodeAgent;
use crate::service::ClientNodeApi;
use crate::state_dir::StateDir;
use crate::status_reporter::StatusSink;

/// The service's name (config env prefix `CARAVAN_CLIENT_NODE__`).
pub const SERVICE: &str = "client-node";

/// Time beyond the longest kill timeout for the rest of a shutdown that
/// stops tasks (their final status updates, the server's drain).
const TASK_STOP_MARGIN: std::time::Duration = std::time::Duration::from_secs(5);

/// A started client: its bound address and nodes; await [`Client::wait`].
#[derive(Debug)]
pub struct Client {
    /// Where the node API listens.
    pub addr: SocketAddr,
    /// What the nodes advertise as `http_addr`.
    pub advertised: String,
    /// The ids of the nodes this process runs (one, or N simulated).
    pub node_ids: Vec<String>,
    join: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Client {
    /// Waits until the client has stopped (after the shutdown token fired).
    pub async fn wait(self) -> anyhow::Result<()> {
        self.join.await.context("client task panicked")?
    }
}

/// Runs the client until `shutdown` fires.
pub async fn run(config: ClientConfig, shutdown: CancellationToken) -> anyhow::Result<()> {
    start(config, shutdown).await?.wait().await
}

/// Fingerprints, binds the node API and starts the node(s); returns once
/// everything runs.
pub async fn start(config: ClientConfig, shutdown: CancellationToken) -> anyhow::Result<Client> {
    config.validate()?;
    std::fs::create_dir_all(&config.data_dir)
        .map_err(|e| ClientError::io("create", &config.data_dir, e))?;
    let state = StateDir::open(&config.data_dir)?;
    let (listener, addr) = caravan_runtime::grpc::bind(&config.grpc_addr)
        .await
        .with_context(|| format!("grpc_addr: cannot listen on {}", config.grpc_addr))?;
    let servers = config.server_addrs();
    let facts = {
        let data_dir = config.data_dir.clone();
        let probe = servers.first().cloned();
        tokio::task::spawn_blocking(move || HostFacts::probe(&data_dir, probe.as_deref()))
            .await
            .context("fingerprinting")?
    };
    let advertised = if !config.advertise_addr.is_empty() {
        config.advertise_addr.clone()
    } else if addr.ip().is_unspecified() {
        SocketAddr::new(facts.ip, addr.port()).to_string()
    } else {
        addr.to_string()
    };
    let agents: Vec<NodeAgent> = if config.simulate > 0 {
        simulate::simulated_agents(&config, &state, facts.ip, &advertised, &shutdown)?
    } else {
        vec![real_agent(&config, &state, &facts, &advertised, &shutdown)?]
    };
    let node_ids: Vec<String> = agents.iter().map(|a| a.ctx.node.id.clone()).collect();
    tracing::info!(
        addr = %addr,
        advertised = %advertised,
        nodes = node_ids.len(),
        servers = ?servers,
        "client node starting"
    );
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<ClientNodeServiceServer<ClientNodeApi>>()
        .await;
    let api = ClientNodeApi::new(
        (config.simulate == 0).then(|| config.data_dir.clone()),
        shutdown.clone(),
    );
    let router = caravan_runtime::grpc::server()
        .add_service(health_service)
        .add_service(ClientNodeServiceServer::new(api));
    let server_stop = shutdown.clone();
    let join = tokio::spawn(async move {
        let server = tokio::spawn(caravan_runtime::grpc::serve(router, listener, server_stop));
        let mut set = tokio::task::JoinSet::new();
        for agent in agents {
            set.spawn(agent.run());
        }
        while set.join_next().await.is_some() {}
        server.await.context("server task")??;
        Ok(())
    });
    Ok(Client {
        addr,
        advertised,
        node_ids,
        join,
    })
}

fn real_agent(
    config: &ClientConfig,
    state: &StateDir,
    facts: &HostFacts,
    advertised: &str,
    shutdown: &CancellationToken,
) -> Result<NodeAgent, ClientError> {
    let drivers = Drivers::from_names(&config.driver_names());
    let node = build_node(
        config,
        facts,
        &state.node_id()?,
        advertised,
        drivers.infos(),
    );
    let recovered = state.load_all()?;
    if !recovered.is_empty() {
        tracing::info!(
            allocs = recovered.len(),
            "found allocs from before a restart"
        );
    }
    let ctx = Arc::new(NodeContext {
        node: Arc::new(node),
        drivers,
        data_dir: Some(config.data_dir.clone()),
        state: Some(state.clone()),
        sink: StatusSink::new(config.update_max_batch),
        shutdown: shutdown.clone(),
        stop_on_shutdown: config.stop_tasks_on_shutdown,
        max_kill_timeout: std::time::Duration::from_millis(config.max_kill_timeout_ms),
        jobs: Default::default(),
    });
    Ok(NodeAgent {
        ctx,
        gateway: Gateway::new(&config.server_addrs())?,
        update_interval: config.update_interval(),
        initial_delay: std::time::Duration::ZERO,
        recovered,
    })
}

/// Flags of the `caravan-client-node` binary.
#[derive(Debug, Clone, Parser)]
#[command(name = "caravan-client-node", about = "Caravan's client node")]
pub struct Args {
    #[command(flatten)]
    service: ServiceArgs,
    /// Run N simulated nodes (mock driver) instead of one real node.
    #[arg(long, value_name = "N")]
    simulate: Option<u32>,
}

/// The whole `main` of the binary: flags, config layers, tracing, signals, `run`.
pub fn main() -> ExitCode {
    let args = Args::parse();
    let mut loader = ConfigLoader::new(SERVICE)
        .file(args.service.config.as_deref())
        .list_keys(ClientConfig::LIST_KEYS);
    if let Some(n) = args.simulate {
        loader = loader.set("simulate", n.to_string());
    }
    let loader = match loader.set_all(args.service.set.iter().map(String::as_str)) {
        Ok(l) => l,
        Err(err) => {
            eprintln!("{SERVICE}: {err}");
            return ExitCode::from(2);
        }
    };
    let (config, shutdown_config) =
        match ShutdownConfig::load_beside(&loader, &ClientConfig::default()) {
            Ok(both) => both,
            Err(err) => {
                eprintln!("{SERVICE}: {err}");
                return ExitCode::from(2);
            }
        };
    if let Err(err) = config.validate() {
        eprintln!("{SERVICE}: {err}");
        return ExitCode::from(2);
    }
    // Stopping tasks on shutdown may take up to their kill timeout: the
    // deadline must not cut that short and leave them running.
    let shutdown_config = if config.stop_tasks_on_shutdown {
        shutdown_config.at_least(
            std::time::Duration::from_millis(config.max_kill_timeout_ms) + TASK_STOP_MARGIN,
        )
    } else {
        shutdown_config
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(err) => {
            eprintln!("{SERVICE}: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let _telemetry = match caravan_runtime::telemetry::init(SERVICE, &config.telemetry) {
            Ok(g) => g,
            Err(err) => {
                eprintln!("{SERVICE}: {err}");
                return ExitCode::from(2);
            }
        };
        let shutdown = match caravan_runtime::shutdown::on_signals_with(&shutdown_config) {
            Ok(t) => t,
            Err(err) => {
                tracing::error!(error = %err, "cannot install signal handlers");
                return ExitCode::FAILURE;
            }
        };
        match run(config, shutdown).await {
            Ok(()) => {
                tracing::info!(service = SERVICE, "stopped");
                ExitCode::SUCCESS
            }
            Err(err) => {
                tracing::error!(service = SERVICE, error = format!("{err:#}"), "failed");
                ExitCode::FAILURE
            }
        }
    })
}

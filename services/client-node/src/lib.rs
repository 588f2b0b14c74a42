//! Caravan's client-node service: fingerprints the machine, registers with
//! the api-gateway and heartbeats, runs the node's allocations with task
//! drivers, reports their status in batches, and serves task logs, the
//! alloc file system, resource usage and alloc signals, restarts and GC.
//!
//! It talks only gRPC (the gateway's `NodeClientService`), so unlike the
//! other services it needs no store. [`ClientNodeService`] is how a process
//! or `caravan dev` runs it.

mod alloc_dir;
mod alloc_runner;
pub mod artifact;
pub mod checks;
mod config;
pub mod driver;
mod driver_health;
mod encoded;
mod error;
mod exec_session;
mod fingerprint;
mod fs;
mod gateway;
mod health;
mod heartbeat_thread;
mod host_network;
mod identity_hook;
mod lifecycle;
mod live_allocs;
mod log_rotate;
mod logs;
pub mod metrics;
pub mod network;
mod node_agent;
mod node_allocs;
pub mod node_api;
mod orphans;
pub mod prestart;
mod restart;
mod server_contact;
mod service;
mod shared_jobs;
mod simulate;
mod state_dir;
mod stats;
mod status_reporter;
mod task_env;
mod task_runner;
mod template;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use caravan_proto::client_node_service_server::{self, ClientNodeServiceServer};
use caravan_runtime::names::CLIENT_NODE;
use caravan_runtime::service::{NoStore, Service, ServiceArgs, Serving};
use clap::Parser;
use tokio_util::sync::CancellationToken;

use crate::alloc_runner::NodeContext;
pub use crate::config::ClientConfig;
use crate::driver::{DriverContext, Drivers};
pub use crate::driver::{ProcStat, proc_stat};

/// Runs this process as a task supervisor, or as the credential switch
/// before a task, when its first argument asks for it (`task-supervisor`,
/// `task-exec`), or as the isolate step of an `exec` task (`task-isolate`);
/// returns the exit code it should end with.
pub fn task_supervisor_main() -> Option<i32> {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let (first, rest) = argv.split_first()?;
    if first == driver::SUPERVISOR_ARG {
        Some(driver::supervisor::main(rest))
    } else if first == driver::task_user::TASK_EXEC_ARG {
        Some(driver::task_user::exec_main(rest))
    } else if first == driver::exec_driver::isolate::ISOLATE_ARG {
        Some(driver::exec_driver::isolate::main(rest))
    } else {
        None
    }
}
pub use crate::error::ClientError;
use crate::fingerprint::{HostFacts, build_node};
use crate::gateway::Gateway;
use crate::node_agent::NodeAgent;
use crate::service::ClientNodeApi;
use crate::state_dir::StateDir;
use crate::status_reporter::StatusSink;

/// The client node as a service: fingerprints, starts the node(s) and
/// serves the node API (logs) until shutdown.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientNodeService;

/// What a started client node reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartedNodes {
    /// What the nodes advertise as `http_addr`.
    pub advertised: String,
    /// The ids of the nodes this process runs (one, or N simulated).
    pub node_ids: Vec<String>,
}

impl Service for ClientNodeService {
    const NAME: &'static str = CLIENT_NODE;
    const LEADER_ELECTED: bool = false;
    const GRPC_SERVICES: &'static [&'static str] = &[client_node_service_server::SERVICE_NAME];
    type Config = ClientConfig;
    type Store = NoStore;
    type Ready = StartedNodes;

    async fn serve(
        self,
        config: ClientConfig,
        _store: NoStore,
        serving: Serving<StartedNodes>,
    ) -> anyhow::Result<()> {
        metrics::register();
        config.validate()?;
        std::fs::create_dir_all(&config.data_dir)
            .map_err(|e| ClientError::io("create", &config.data_dir, e))?;
        let state = StateDir::open(&config.data_dir)?;
        let servers = config.server_addrs();
        let facts = {
            let data_dir = config.data_dir.clone();
            let probe = servers.first().cloned();
            tokio::task::spawn_blocking(move || HostFacts::probe(&data_dir, probe.as_deref()))
                .await
                .context("fingerprinting")?
        };
        let local = serving.local_addr;
        // Nodes are reached from other machines: "every interface" stands
        // for the machine's own address rather than loopback.
        let advertised = if config.advertise_addr.is_empty() && local.ip().is_unspecified() {
            SocketAddr::new(facts.ip, local.port()).to_string()
        } else {
            serving.advertise_addr
        };
        let shutdown = serving.shutdown;
        let agents: Vec<NodeAgent> = if config.simulate > 0 {
            simulate::simulated_agents(&config, &state, facts.ip, &advertised, &shutdown).await?
        } else {
            vec![real_agent(&config, &state, &facts, &advertised, &shutdown).await?]
        };
        let node_ids: Vec<String> = agents.iter().map(|a| a.ctx.node.id.clone()).collect();
        tracing::info!(
            addr = %local,
            advertised = %advertised,
            nodes = node_ids.len(),
            servers = ?servers,
            "client node starting"
        );
        // The allocs of the node (or of every simulated node: they share one
        // registry; their tasks have no processes or files to show).
        let live = agents
            .first()
            .map(|a| a.ctx.live.clone())
            .unwrap_or_default();
        let cpu_mhz = match agents.as_slice() {
            [one] if config.simulate == 0 => {
                one.ctx.node.resources.as_ref().map_or(0, |r| r.cpu_mhz)
            }
            _ => 0,
        };
        let api = ClientNodeApi::new(
            (config.simulate == 0).then(|| config.data_dir.clone()),
            shutdown.clone(),
            config.max_log_follows,
        )
        .with_allocs(live, cpu_mhz);
        let router = serving
            .router
            .add_service(ClientNodeServiceServer::new(api));
        serving.ready.report(StartedNodes {
            advertised,
            node_ids,
        });
        let server = tokio::spawn(caravan_runtime::grpc::serve(
            router,
            serving.listener,
            shutdown,
        ));
        let mut set = tokio::task::JoinSet::new();
        for agent in agents {
            set.spawn(agent.run());
        }
        while set.join_next().await.is_some() {}
        server.await.context("server task")??;
        Ok(())
    }
}

async fn real_agent(
    config: &ClientConfig,
    state: &StateDir,
    facts: &HostFacts,
    advertised: &str,
    shutdown: &CancellationToken,
) -> Result<NodeAgent, ClientError> {
    let supervisor = if config.task_supervisor.as_os_str().is_empty() {
        std::env::current_exe().map_err(|e| ClientError::io("locate", "/proc/self/exe", e))?
    } else {
        config.task_supervisor.clone()
    };
    let node_id = state.node_id()?;
    let drivers = Drivers::from_names(
        &config.driver_names(),
        &DriverContext {
            supervisor,
            node_id: node_id.clone(),
            node_name: if config.name.is_empty() {
                facts.hostname.clone()
            } else {
                config.name.clone()
            },
            plugins: config.plugin.clone(),
        },
    );
    let fingerprints = drivers.fingerprints().await;
    for (name, fp) in &fingerprints {
        tracing::info!(driver = %name, health = ?fp.health, description = %fp.description, "driver fingerprinted");
    }
    let node = Arc::new(build_node(
        config,
        facts,
        &node_id,
        advertised,
        &fingerprints,
    ));
    let node_updates = driver_health::watch(drivers.clone(), node.clone(), shutdown.clone());
    let recovered = state.load_all()?;
    if !recovered.is_empty() {
        tracing::info!(
            allocs = recovered.len(),
            "found allocs from before a restart"
        );
    }
    let gateway = Gateway::pooled(&config.server_addrs(), &config.heartbeat_addrs(), 1)?;
    let secret_id = state.node_secret()?;
    let api = Arc::new(crate::node_api::NodeApi {
        gateway: gateway.clone(),
        node_id: node.id.clone(),
        secret_id: secret_id.clone(),
    });
    let ctx = Arc::new(NodeContext {
        node,
        drivers,
        data_dir: Some(config.data_dir.clone()),
        state: Some(state.clone()),
        sink: StatusSink::new(config.update_max_batch),
        shutdown: shutdown.clone(),
        stop_on_shutdown: config.stop_tasks_on_shutdown,
        max_kill_timeout: Duration::from_millis(config.max_kill_timeout_ms),
        jobs: Default::default(),
        live: Default::default(),
        simulated: false,
        contact: Default::default(),
        api: Some(api),
        hook_config: Arc::new(config.hook_config()),
    });
    Ok(NodeAgent {
        ctx,
        gateway,
        secret_id,
        update_interval: config.update_interval(),
        initial_delay: Duration::ZERO,
        recovered,
        node_updates,
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

impl Args {
    /// The flags every service takes, with `--simulate N` as the
    /// `simulate` key (a `--set simulate=…` still wins).
    pub fn into_service_args(self) -> ServiceArgs {
        let mut args = self.service;
        if let Some(n) = self.simulate {
            args.set.insert(0, format!("simulate={n}"));
        }
        args
    }
}

//! `caravan dev`: every service and one client node (raw_exec and mock
//! drivers) in this process, on one embedded `MemStore` (or an etcd), each
//! service on its own loopback port and still talking gRPC to the others.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use caravan_api_gateway::GatewayConfig;
use caravan_client_node::ClientConfig;
use caravan_deployment_watcher::DeploymentWatcherConfig;
use caravan_eval_broker::EvalBrokerConfig;
use caravan_plan_applier::PlanApplierConfig;
use caravan_proto::NodeStatus;
use caravan_runtime::store::StoreConfig;
use caravan_runtime::telemetry::TelemetryConfig;
use caravan_scheduler_worker::SchedulerWorkerConfig;
use caravan_store::{MemStore, Store};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::api::Api;
use crate::args::DevArgs;
use crate::error::CliError;
use crate::format::{short_id, table};
use crate::ui::Ui;

/// How long `start` waits for the node to register and the leaders to be
/// elected before handing the cluster over.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// What `caravan dev` starts.
#[derive(Debug, Clone)]
pub struct DevOptions {
    /// etcd endpoints; empty keeps the state in memory.
    pub etcd: Vec<String>,
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
}

impl Default for DevOptions {
    fn default() -> Self {
        DevOptions {
            etcd: Vec::new(),
            prefix: StoreConfig::default().prefix,
            data_dir: None,
            bind: "127.0.0.1".into(),
            grpc_port: 4647,
            http_port: 4646,
        }
    }
}

/// Where each service of a running dev cluster listens.
#[derive(Debug, Clone)]
pub struct DevAddresses {
    /// The api-gateway's gRPC API (the CLI's `-address`).
    pub gateway_grpc: SocketAddr,
    /// The api-gateway's HTTP API.
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
    /// The client node's data directory.
    pub data_dir: PathBuf,
}

/// A running dev cluster; [`DevCluster::stop`] stops it.
#[derive(Debug)]
pub struct DevCluster {
    /// Where everything listens.
    pub addresses: DevAddresses,
    /// The gateway and the scheduler worker: stopped before the services
    /// they call, so no eval is left mid-flight waiting for a leader.
    front: JoinSet<Served>,
    front_stop: CancellationToken,
    /// The leader-elected services: the eval broker, the plan applier and
    /// the deployment watcher.
    back: JoinSet<Served>,
    back_stop: CancellationToken,
    client: Option<caravan_client_node::Client>,
    client_stop: CancellationToken,
    owned_data_dir: bool,
}

/// A service task's name and outcome.
type Served = (&'static str, anyhow::Result<()>);

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

async fn bind(bind: &str, what: &str) -> anyhow::Result<(tokio::net::TcpListener, SocketAddr)> {
    let addr = host_port(bind, 0);
    caravan_runtime::grpc::bind(&addr)
        .await
        .with_context(|| format!("{what}: cannot listen on {addr}"))
}

impl DevCluster {
    /// Starts every service and the client node, and waits until the node is
    /// ready and the eval broker and plan applier have leaders.
    pub async fn start(options: DevOptions) -> anyhow::Result<DevCluster> {
        let store: Arc<dyn Store> = if options.etcd.is_empty() {
            Arc::new(MemStore::new())
        } else {
            let config = StoreConfig {
                endpoints: options.etcd.clone(),
                prefix: options.prefix.clone(),
                ..Default::default()
            };
            config
                .connect()
                .await
                .with_context(|| format!("cannot reach etcd at {}", options.etcd.join(",")))?
        };
        let store_config = StoreConfig {
            endpoints: if options.etcd.is_empty() {
                StoreConfig::default().endpoints
            } else {
                options.etcd.clone()
            },
            prefix: options.prefix.clone(),
            ..Default::default()
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

        let back_stop = CancellationToken::new();
        let mut back = JoinSet::new();
        let front_stop = CancellationToken::new();
        let mut front = JoinSet::new();

        let (listener, eval_broker) = bind(&options.bind, "eval-broker").await?;
        let config = EvalBrokerConfig {
            store: store_config.clone(),
            ..Default::default()
        };
        back.spawn({
            let (store, stop) = (store.clone(), back_stop.clone());
            async move {
                let r = caravan_eval_broker::serve(config, store, listener, stop).await;
                ("eval-broker", r)
            }
        });

        let (listener, plan_applier) = bind(&options.bind, "plan-applier").await?;
        let config = PlanApplierConfig {
            store: store_config.clone(),
            ..Default::default()
        };
        back.spawn({
            let (store, stop) = (store.clone(), back_stop.clone());
            async move {
                let r = caravan_plan_applier::serve(config, store, listener, stop).await;
                ("plan-applier", r)
            }
        });

        // Deployments progress only while the watcher leads: it counts health
        // and creates the evals that place each next batch.
        let (listener, deployment_watcher) = bind(&options.bind, "deployment-watcher").await?;
        let config = DeploymentWatcherConfig {
            store: store_config.clone(),
            ..Default::default()
        };
        back.spawn({
            let (store, stop) = (store.clone(), back_stop.clone());
            async move {
                let r = caravan_deployment_watcher::serve(config, store, listener, stop).await;
                ("deployment-watcher", r)
            }
        });

        let (listener, scheduler_worker) = bind(&options.bind, "scheduler-worker").await?;
        let config = SchedulerWorkerConfig {
            store: store_config.clone(),
            ..Default::default()
        };
        let workers = config.worker_count();
        front.spawn({
            let (store, stop) = (store.clone(), front_stop.clone());
            async move {
                let r =
                    caravan_scheduler_worker::serve(config, store, listener, stop, |_| {}).await;
                ("scheduler-worker", r)
            }
        });

        let config = GatewayConfig {
            grpc_addr: host_port(&options.bind, options.grpc_port),
            http_addr: host_port(&options.bind, options.http_port),
            store: store_config.clone(),
            ..Default::default()
        };
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        front.spawn({
            let (store, stop) = (store.clone(), front_stop.clone());
            async move {
                let r = caravan_api_gateway::run_with(config, store, stop, Some(ready_tx)).await;
                ("api-gateway", r)
            }
        });
        let bound = match ready_rx.await {
            Ok(b) => b,
            Err(_) => {
                // The gateway ended before it was ready: its own error says why.
                front_stop.cancel();
                back_stop.cancel();
                let mut why = anyhow::anyhow!("the api-gateway stopped before it was ready");
                while let Some(done) = front.join_next().await {
                    if let Ok(("api-gateway", Err(e))) = done {
                        why = e.context("api-gateway");
                    }
                }
                while back.join_next().await.is_some() {}
                return Err(why);
            }
        };
        let gateway_grpc = dialable(bound.grpc);

        let client_stop = CancellationToken::new();
        let client_config = ClientConfig {
            servers: vec![gateway_grpc.to_string()],
            grpc_addr: host_port(&options.bind, 0),
            data_dir: data_dir.clone(),
            drivers: vec!["raw_exec".into(), "mock".into()],
            stop_tasks_on_shutdown: true,
            ..Default::default()
        };
        let client = match caravan_client_node::start(client_config, client_stop.clone()).await {
            Ok(c) => c,
            Err(e) => {
                front_stop.cancel();
                back_stop.cancel();
                while front.join_next().await.is_some() {}
                while back.join_next().await.is_some() {}
                return Err(e.context("client-node"));
            }
        };
        let addresses = DevAddresses {
            gateway_grpc,
            gateway_http: dialable(bound.http),
            eval_broker: dialable(eval_broker),
            plan_applier: dialable(plan_applier),
            scheduler_worker: dialable(scheduler_worker),
            deployment_watcher: dialable(deployment_watcher),
            workers,
            client_node: dialable(client.addr),
            node_id: client.node_ids.first().cloned().unwrap_or_default(),
            data_dir,
        };
        let cluster = DevCluster {
            addresses,
            front,
            front_stop,
            back,
            back_stop,
            client: Some(client),
            client_stop,
            owned_data_dir,
        };
        cluster.wait_ready().await;
        Ok(cluster)
    }

    /// The gateway address for the CLI's `-address`.
    pub fn address(&self) -> String {
        format!("http://{}", self.addresses.gateway_grpc)
    }

    /// Waits (bounded) until the node is ready and the eval broker, plan
    /// applier and deployment watcher have leaders, so a job run right after
    /// start is placed at once.
    async fn wait_ready(&self) {
        let Ok(api) = Api::new(&self.address(), "default") else {
            return;
        };
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        while tokio::time::Instant::now() < deadline {
            let node_ready = api
                .node(&self.addresses.node_id)
                .await
                .is_ok_and(|n| n.status() == NodeStatus::Ready);
            let leaders = api.leaders().await.unwrap_or_default();
            let led = ["eval-broker", "plan-applier", "deployment-watcher"]
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
        let done = tokio::select! {
            Some(done) = self.front.join_next() => done,
            Some(done) = self.back.join_next() => done,
            else => std::future::pending().await,
        };
        match done {
            Ok((name, Ok(()))) => (name.to_string(), anyhow::anyhow!("stopped")),
            Ok((name, Err(e))) => (name.to_string(), e),
            Err(e) => ("a service".to_string(), anyhow::anyhow!("task failed: {e}")),
        }
    }

    /// Stops the client node first (its tasks are killed), then the gateway
    /// and the scheduler worker, then the eval broker, the plan applier and
    /// the deployment watcher (which serve them and resign their
    /// leadership); removes a temporary data directory.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.client_stop.cancel();
        let mut result = Ok(());
        if let Some(client) = self.client.take()
            && let Err(e) = client.wait().await
        {
            result = Err(e.context("client-node"));
        }
        for (stop, set) in [
            (&self.front_stop, &mut self.front),
            (&self.back_stop, &mut self.back),
        ] {
            stop.cancel();
            while let Some(done) = set.join_next().await {
                match done {
                    Ok((name, Err(e))) if result.is_ok() => result = Err(e.context(name)),
                    Err(e) if result.is_ok() => {
                        result = Err(anyhow::anyhow!("a service task failed: {e}"))
                    }
                    _ => {}
                }
            }
        }
        if self.owned_data_dir {
            let _ = std::fs::remove_dir_all(&self.addresses.data_dir);
        }
        result
    }
}

/// The banner: where each service listens and what to try.
pub fn banner(addresses: &DevAddresses, store: &str) -> String {
    let a = addresses;
    let rows = vec![
        vec![
            "api-gateway".to_string(),
            format!("gRPC {}", a.gateway_grpc),
            format!("HTTP {}", a.gateway_http),
        ],
        vec![
            "eval-broker".to_string(),
            format!("gRPC {}", a.eval_broker),
            String::new(),
        ],
        vec![
            "plan-applier".to_string(),
            format!("gRPC {}", a.plan_applier),
            String::new(),
        ],
        vec![
            "scheduler-worker".to_string(),
            format!("gRPC {}", a.scheduler_worker),
            format!("{} workers", a.workers),
        ],
        vec![
            "deployment-watcher".to_string(),
            format!("gRPC {}", a.deployment_watcher),
            String::new(),
        ],
        vec![
            "client-node".to_string(),
            format!("gRPC {}", a.client_node),
            format!("node {} (raw_exec, mock)", short_id(&a.node_id)),
        ],
    ];
    let services: String = table(rows)
        .replace("<none>", "")
        .lines()
        .map(|l| format!("    {}\n", l.trim_end()))
        .collect();
    let address = if a.gateway_grpc.port() == 4647 && a.gateway_grpc.ip().is_loopback() {
        String::new()
    } else {
        format!(" -address http://{}", a.gateway_grpc)
    };
    format!(
        "==> Caravan dev cluster running (state {store}); Ctrl-C stops everything\n\
         {services}    data dir {}\n\
         ==> Try: caravan{address} job run examples/hello.hcl",
        a.data_dir.display()
    )
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
        data_dir: args.data_dir.clone(),
        bind: args.bind.clone(),
        grpc_port: args.grpc_port,
        http_port: args.http_port,
        ..Default::default()
    };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_bracket_ipv6_and_dial_loopback() {
        assert_eq!(host_port("127.0.0.1", 0), "127.0.0.1:0");
        assert_eq!(host_port("::1", 4647), "[::1]:4647");
        let any: SocketAddr = "0.0.0.0:4647".parse().unwrap();
        assert_eq!(dialable(any).to_string(), "127.0.0.1:4647");
    }

    #[test]
    fn the_banner_lists_every_service_and_the_hint() {
        let a = DevAddresses {
            gateway_grpc: "127.0.0.1:4647".parse().unwrap(),
            gateway_http: "127.0.0.1:4646".parse().unwrap(),
            eval_broker: "127.0.0.1:4650".parse().unwrap(),
            plan_applier: "127.0.0.1:4651".parse().unwrap(),
            scheduler_worker: "127.0.0.1:4652".parse().unwrap(),
            deployment_watcher: "127.0.0.1:4653".parse().unwrap(),
            workers: 2,
            client_node: "127.0.0.1:4660".parse().unwrap(),
            node_id: "f7476465-0000".into(),
            data_dir: PathBuf::from("/tmp/d"),
        };
        let text = banner(&a, "in memory");
        assert!(text.starts_with("==> Caravan dev cluster running (state in memory)"));
        assert!(
            text.contains("    api-gateway         gRPC 127.0.0.1:4647  HTTP 127.0.0.1:4646\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "    client-node         gRPC 127.0.0.1:4660  node f7476465 (raw_exec, mock)\n"
            ),
            "{text}"
        );
        assert!(
            text.ends_with("==> Try: caravan job run examples/hello.hcl"),
            "{text}"
        );
        let mut other = a;
        other.gateway_grpc = "127.0.0.1:5000".parse().unwrap();
        assert!(
            banner(&other, "x")
                .ends_with("caravan -address http://127.0.0.1:5000 job run examples/hello.hcl")
        );
    }
}

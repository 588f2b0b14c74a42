//! `caravan server`: the eval-broker, the plan-applier, the
//! deployment-watcher and the scheduler-worker in one process. Each is the
//! same service its own binary runs (its own gRPC port, lease, election and
//! fencing), configured by its own keys, but the services share one
//! connection per store and so one watch cache of it: one watch of the
//! store, and one decode of each change, instead of one per service.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use caravan_deployment_watcher::DeploymentWatcherService;
use caravan_eval_broker::EvalBrokerService;
use caravan_plan_applier::PlanApplierService;
use caravan_runtime::config::ConfigLoader;
use caravan_runtime::names;
use caravan_runtime::service::{Service, ServiceConfig, StoreSection};
use caravan_runtime::shutdown::ShutdownConfig;
use caravan_runtime::store::{STORE_LIST_KEYS, StoreConfig};
use caravan_runtime::telemetry::{self, TelemetryConfig};
use caravan_runtime::tls::TlsConfig;
use caravan_scheduler_worker::SchedulerWorkerService;
use caravan_store::Store;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::args::ServerArgs;
use crate::dev::tier::{Tier, Tiers};
use crate::error::CliError;
use crate::ui::Ui;

/// The services `caravan server` runs, in start order.
pub const SERVICES: [&str; 4] = [
    names::EVAL_BROKER,
    names::PLAN_APPLIER,
    names::DEPLOYMENT_WATCHER,
    names::SCHEDULER_WORKER,
];

/// Top-level sections of the server's file that are the process's, not a
/// service's: `store` is every service's default; `telemetry`, `tls` and
/// `shutdown` are the process's own (one log, one identity, one deadline).
const SHARED: [&str; 4] = ["store", "telemetry", "tls", "shutdown"];

/// The process's own sections.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
struct ProcessSections {
    telemetry: TelemetryConfig,
    tls: TlsConfig,
    shutdown: ShutdownConfig,
}

/// The server's layers before they are split per service: the file's
/// tables and the `--set`s, by the section or service they name.
#[derive(Debug, Default)]
pub(crate) struct Layers {
    /// The file's top-level `store` table (every service's default store).
    store: Option<Value>,
    /// The file's `telemetry`, `tls` and `shutdown` tables.
    process: Map<String, Value>,
    /// Each service's table of the file.
    tables: BTreeMap<String, Value>,
    /// `store.*` overrides, for every service.
    store_sets: Vec<String>,
    /// `telemetry.*`, `tls.*` and `shutdown.*` overrides.
    process_sets: Vec<String>,
    /// Each service's own overrides, without its name.
    sets: BTreeMap<String, Vec<String>>,
    /// The services to run.
    services: Vec<&'static str>,
}

impl Layers {
    /// Splits the file at `file` (TOML) and the `--set` overrides by what
    /// they configure; an error names a section, service or override that
    /// is none of them.
    pub(crate) fn read(
        file: Option<&Path>,
        sets: &[String],
        only: &[String],
    ) -> anyhow::Result<Layers> {
        let mut layers = Layers::default();
        for name in only {
            let known = SERVICES
                .iter()
                .find(|s| **s == name.trim())
                .with_context(|| {
                    format!(
                        "-services: {name:?} is not a service caravan server runs ({})",
                        SERVICES.join(", ")
                    )
                })?;
            if !layers.services.contains(known) {
                layers.services.push(known);
            }
        }
        if layers.services.is_empty() {
            layers.services = SERVICES.to_vec();
        }
        if let Some(path) = file {
            layers.split_file(path)?;
        }
        for set in sets {
            let (key, value) = set
                .split_once('=')
                .with_context(|| format!("-set {set:?} is not of the form key=value"))?;
            let (head, rest) = key.trim().split_once('.').unwrap_or((key.trim(), ""));
            match head {
                "store" => layers.store_sets.push(set.clone()),
                "telemetry" | "tls" | "shutdown" => layers.process_sets.push(set.clone()),
                service if SERVICES.contains(&service) && !rest.is_empty() => {
                    layers
                        .sets
                        .entry(service.to_string())
                        .or_default()
                        .push(format!("{rest}={value}"));
                }
                _ => bail!(
                    "-set {set:?}: the key must start with a service's name ({}) or one of {}",
                    SERVICES.join(", "),
                    SHARED.join(", ")
                ),
            }
        }
        for named in layers.tables.keys().chain(layers.sets.keys()) {
            if !layers.services.iter().any(|s| s == named) {
                bail!("{named} is configured but not among the services to run (-services)");
            }
        }
        Ok(layers)
    }

    fn split_file(&mut self, path: &Path) -> anyhow::Result<()> {
        // The file alone (a missing one is the loader's error): each service reads its own environment later.
        let whole: Map<String, Value> = ConfigLoader::new("server")
            .file(Some(path))
            .with_env(Vec::new())
            .load(&Map::new())?;
        for (section, table) in whole {
            match section.as_str() {
                "store" => self.store = Some(table),
                "telemetry" | "tls" | "shutdown" => {
                    self.process.insert(section, table);
                }
                s if SERVICES.contains(&s) => {
                    self.tables.insert(section, table);
                }
                other => bail!(
                    "{}: [{other}] is neither a service caravan server runs ({}) nor one of {}",
                    path.display(),
                    SERVICES.join(", "),
                    SHARED.join(", ")
                ),
            }
        }
        Ok(())
    }

    /// The process's telemetry, TLS and shutdown sections (env
    /// `CARAVAN_SERVER__<SECTION>__<KEY>`).
    fn process(&self) -> anyhow::Result<ProcessSections> {
        let loader = ConfigLoader::new("server")
            .table(Value::Object(self.process.clone()))
            .set_all(self.process_sets.iter().map(String::as_str))?;
        let unknown = loader.unknown_keys(&ProcessSections::default(), &[])?;
        if !unknown.is_empty() {
            bail!(
                "configuration keys caravan server does not read: {}",
                unknown.join(", ")
            );
        }
        Ok(loader.load(&ProcessSections::default())?)
    }

    /// The loader of `name`'s configuration: its defaults, the shared
    /// `[store]`, its own table, its environment (`CARAVAN_<SERVICE>__…`
    /// as its binary reads), the shared `store.*` overrides, its own.
    fn loader(&self, name: &str, list_keys: &[&str]) -> anyhow::Result<ConfigLoader> {
        let mut loader = ConfigLoader::new(name).list_keys(list_keys);
        if let Some(store) = &self.store {
            loader = loader.table(serde_json::json!({ "store": store }));
        }
        if let Some(table) = self.tables.get(name) {
            loader = loader.table(table.clone());
        }
        let own = self.sets.get(name).into_iter().flatten();
        Ok(loader.set_all(self.store_sets.iter().chain(own).map(String::as_str))?)
    }
}

/// One service's configuration, read and checked as its own binary reads
/// it, and stricter: a key it does not read, or a `telemetry` or `tls` of
/// its own (the process has one of each), is refused, naming it.
fn service_config<S>(layers: &Layers) -> anyhow::Result<S::Config>
where
    S: Service,
    S::Config: StoreSection,
{
    let name = S::NAME;
    let list_keys: Vec<&str> = S::Config::LIST_KEYS
        .iter()
        .chain(STORE_LIST_KEYS)
        .copied()
        .collect();
    let loader = layers.loader(name, &list_keys)?;
    let defaults = S::Config::default();
    let unknown = loader.unknown_keys(&defaults, &[])?;
    if !unknown.is_empty() {
        let named: Vec<String> = unknown.iter().map(|k| format!("{name}.{k}")).collect();
        bail!(
            "configuration keys {name} does not read: {}",
            named.join(", ")
        );
    }
    let config: S::Config = loader.load(&defaults)?;
    for (section, own) in [
        ("telemetry", config.telemetry() != defaults.telemetry()),
        ("tls", config.tls() != defaults.tls()),
    ] {
        if own {
            bail!(
                "{name}.{section}: caravan server is one process with one {section} setup; \
                 set [{section}] at the top level of the file (or -set {section}.KEY=VALUE)"
            );
        }
    }
    config.validate().with_context(|| name)?;
    config.store().validate().with_context(|| name)?;
    Ok(config)
}

/// The checked configurations of the services to run, before anything
/// starts.
#[derive(Debug)]
struct Configs {
    broker: Option<<EvalBrokerService as Service>::Config>,
    applier: Option<<PlanApplierService as Service>::Config>,
    watcher: Option<<DeploymentWatcherService as Service>::Config>,
    worker: Option<<SchedulerWorkerService as Service>::Config>,
}

impl Configs {
    fn read(layers: &Layers) -> anyhow::Result<Configs> {
        let runs = |name: &str| layers.services.contains(&name);
        Ok(Configs {
            broker: runs(EvalBrokerService::NAME)
                .then(|| service_config::<EvalBrokerService>(layers))
                .transpose()?,
            applier: runs(PlanApplierService::NAME)
                .then(|| service_config::<PlanApplierService>(layers))
                .transpose()?,
            watcher: runs(DeploymentWatcherService::NAME)
                .then(|| service_config::<DeploymentWatcherService>(layers))
                .transpose()?,
            worker: runs(SchedulerWorkerService::NAME)
                .then(|| service_config::<SchedulerWorkerService>(layers))
                .transpose()?,
        })
    }

    /// The name and `grpc_addr` of each service to run.
    fn grpc_addrs(&self) -> Vec<(&'static str, &str)> {
        [
            (
                EvalBrokerService::NAME,
                self.broker.as_ref().map(|c| c.grpc_addr()),
            ),
            (
                PlanApplierService::NAME,
                self.applier.as_ref().map(|c| c.grpc_addr()),
            ),
            (
                DeploymentWatcherService::NAME,
                self.watcher.as_ref().map(|c| c.grpc_addr()),
            ),
            (
                SchedulerWorkerService::NAME,
                self.worker.as_ref().map(|c| c.grpc_addr()),
            ),
        ]
        .into_iter()
        .filter_map(|(name, addr)| Some((name, addr?)))
        .collect()
    }

    /// The longest shutdown any of them needs.
    fn min_shutdown_deadline(&self) -> Duration {
        [
            self.broker.as_ref().map(|c| c.min_shutdown_deadline()),
            self.applier.as_ref().map(|c| c.min_shutdown_deadline()),
            self.watcher.as_ref().map(|c| c.min_shutdown_deadline()),
            self.worker.as_ref().map(|c| c.min_shutdown_deadline()),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or_default()
    }
}

/// Store connections by their settings: services with the same `[store]`
/// share one, and with it one watch cache.
#[derive(Default)]
struct Stores(HashMap<String, Arc<dyn Store>>);

impl Stores {
    /// The connection for `config`, made on first use; `None` when
    /// `shutdown` fired first.
    async fn get(
        &mut self,
        config: &StoreConfig,
        shutdown: &CancellationToken,
    ) -> anyhow::Result<Option<Arc<dyn Store>>> {
        let key = serde_json::to_string(config)?;
        if let Some(store) = self.0.get(&key) {
            return Ok(Some(Arc::clone(store)));
        }
        let Some(store) = config.connect_until(shutdown).await else {
            return Ok(None);
        };
        self.0.insert(key, Arc::clone(&store));
        Ok(Some(store))
    }
}

/// Starts `service` with `config` into `tier` on its store connection;
/// false when shutdown came first.
async fn start<S>(
    tier: &mut Tier,
    stores: &mut Stores,
    service: S,
    config: S::Config,
    shutdown: &CancellationToken,
) -> anyhow::Result<bool>
where
    S: Service<Store = Arc<dyn Store>>,
    S::Config: StoreSection,
    S::Ready: Clone,
{
    let Some(store) = stores.get(config.store(), shutdown).await? else {
        return Ok(false);
    };
    let (_, addr) = tier.start(service, config, store).await?;
    tracing::info!(service = S::NAME, %addr, "started");
    Ok(true)
}

/// Starts every service of `configs` (the leaders first, then the worker,
/// as `caravan dev` does); false when shutdown came first.
async fn start_all(
    tiers: &mut Tiers,
    configs: Configs,
    shutdown: &CancellationToken,
) -> anyhow::Result<bool> {
    let mut stores = Stores::default();
    let back = &mut tiers.back;
    if let Some(c) = configs.broker
        && !start(back, &mut stores, EvalBrokerService, c, shutdown).await?
    {
        return Ok(false);
    }
    if let Some(c) = configs.applier
        && !start(
            back,
            &mut stores,
            PlanApplierService::default(),
            c,
            shutdown,
        )
        .await?
    {
        return Ok(false);
    }
    if let Some(c) = configs.watcher
        && !start(back, &mut stores, DeploymentWatcherService, c, shutdown).await?
    {
        return Ok(false);
    }
    if let Some(c) = configs.worker
        && !start(
            &mut tiers.front,
            &mut stores,
            SchedulerWorkerService,
            c,
            shutdown,
        )
        .await?
    {
        return Ok(false);
    }
    Ok(true)
}

/// How long `-health` waits for each service.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(3);

/// `caravan server -health`: asks every service to run whether it serves,
/// all at once; 0 only when each answers SERVING.
async fn health(configs: &Configs, ui: &mut Ui) -> u8 {
    let services = configs.grpc_addrs();
    let asked = services.iter().map(|(_, grpc_addr)| async move {
        let addr = caravan_runtime::service::reachable_addr(grpc_addr)?;
        caravan_runtime::service::serving(&addr, "", HEALTH_TIMEOUT)
            .await
            .map(|()| addr)
    });
    let answers = futures::future::join_all(asked).await;
    let mut failed = false;
    for ((name, _), answer) in services.iter().zip(answers) {
        match answer {
            Ok(addr) => ui.output(format!("{name} at {addr} is SERVING")),
            Err(err) => {
                failed = true;
                ui.error(format!("{name}: {err:#}"));
            }
        }
    }
    u8::from(failed)
}

/// `caravan server`: reads and checks every configuration, then runs the
/// services until a signal (exit 0) or until one of them fails (exit 1);
/// a bad configuration exits 2 before anything starts.
pub async fn run(args: ServerArgs, ui: &mut Ui) -> Result<u8, CliError> {
    if let Some(verb) = &args.verb {
        return Err(CliError::Usage(format!(
            "Error: caravan server {verb}: Caravan's servers are services that share etcd, \
             with no gossip pool to list, join or leave (Nomad's `server members`, `join`, \
             `force-leave`); their leaders are in etcd under leader/ (docs/services.md). \
             `caravan server` without a verb runs the control plane in this process."
        )));
    }
    let read = Layers::read(args.config.as_deref(), &args.set, &args.services).and_then(|l| {
        let process = l.process()?;
        let configs = Configs::read(&l)?;
        Ok((process, configs))
    });
    let (process, configs) = match read {
        Ok(read) => read,
        Err(err) => {
            ui.error(format!("caravan server: {err:#}"));
            return Ok(2);
        }
    };
    if args.check_config {
        ui.output("configuration is valid");
        return Ok(0);
    }
    if let Err(err) = caravan_runtime::tls::install(&process.tls) {
        ui.error(format!("caravan server: tls: {err:#}"));
        return Ok(2);
    }
    if args.health {
        return Ok(health(&configs, ui).await);
    }
    // As every service binary does (see `caravan_runtime::huge_pages`).
    caravan_runtime::huge_pages::disable();
    let _telemetry = match telemetry::init("caravan-server", &process.telemetry) {
        Ok(guard) => guard,
        Err(err) => {
            ui.error(format!("caravan server: {err}"));
            return Ok(2);
        }
    };
    let deadline = process.shutdown.at_least(configs.min_shutdown_deadline());
    let shutdown = caravan_runtime::shutdown::on_signals_with(&deadline)
        .map_err(|e| CliError::Usage(format!("caravan server: signal handlers: {e}")))?;
    // A service calls a leader of this process directly, not through its
    // port (`caravan_runtime::local`).
    caravan_runtime::local::enable();
    let mut tiers = Tiers::default();
    let outcome = tokio::select! {
        started = start_all(&mut tiers, configs, &shutdown) => match started {
            Ok(true) => tokio::select! {
                (name, served) = tiers.next_stopped() => {
                    Err(served.err().unwrap_or_else(|| anyhow::anyhow!("stopped on its own")).context(name))
                }
                () = shutdown.cancelled() => Ok(()),
            },
            Ok(false) => Ok(()),
            Err(err) => Err(err),
        },
        () = shutdown.cancelled() => Ok(()),
    };
    let stopped = tiers.stop().await;
    match outcome.and(stopped) {
        Ok(()) => Ok(0),
        Err(err) => {
            tracing::error!(error = format!("{err:#}"), "caravan server failed");
            ui.error(format!("caravan server: {err:#}"));
            Ok(1)
        }
    }
}

#[cfg(test)]
mod tests;

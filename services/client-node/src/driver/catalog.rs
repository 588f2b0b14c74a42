//! The catalog of task drivers: every driver Caravan has, by the name jobs
//! give it, with how it is built and its client configuration. Adding a
//! driver is its module plus one entry here (and, if it is configured, one
//! field of [`PluginConfigs`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::docker::{DockerConfig, DockerDriver};
use super::exec_driver::ExecConfig;
use super::{Driver, ExecDriver, Fingerprint, HandleState, MockDriver, RawExecDriver};

/// What a driver is built with.
#[derive(Debug, Clone, Default)]
pub struct DriverContext {
    /// The binary run as the supervisor of `raw_exec` tasks.
    pub supervisor: PathBuf,
    /// The node's id (drivers label what they create with it).
    pub node_id: String,
    /// The node's name.
    pub node_name: String,
    /// The drivers' own configuration.
    pub plugins: PluginConfigs,
}

/// The client configuration of the drivers that have one (Nomad's
/// `plugin "<name>" { config { … } }`), under `[plugin.<name>]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PluginConfigs {
    /// The `docker` driver.
    pub docker: DockerConfig,
    /// The `exec` driver.
    pub exec: ExecConfig,
}

impl PluginConfigs {
    /// Checks each driver's configuration, naming the first bad key.
    pub fn validate(&self) -> Result<(), (String, String)> {
        self.docker
            .validate()
            .map_err(|(k, why)| (format!("plugin.docker.{k}"), why))?;
        self.exec
            .validate()
            .map_err(|(k, why)| (format!("plugin.exec.{k}"), why))
    }
}

/// One driver of the catalog.
struct Entry {
    name: &'static str,
    build: fn(&DriverContext) -> Arc<dyn Driver>,
}

/// Every driver, by name.
const CATALOG: &[Entry] = &[
    Entry {
        name: "raw_exec",
        build: |ctx| Arc::new(RawExecDriver::new(ctx.supervisor.clone())),
    },
    Entry {
        name: "mock",
        build: |_| Arc::new(MockDriver::new()),
    },
    Entry {
        name: "docker",
        build: |ctx| Arc::new(DockerDriver::new(ctx)),
    },
    Entry {
        name: "exec",
        build: |ctx| Arc::new(ExecDriver::new(ctx.supervisor.clone(), &ctx.plugins.exec)),
    },
];

/// The names of every driver, as a client's `drivers` list may give them.
pub fn known() -> impl Iterator<Item = &'static str> {
    CATALOG.iter().map(|e| e.name)
}

/// The drivers of a node.
#[derive(Debug, Clone, Default)]
pub struct Drivers {
    by_name: BTreeMap<String, Arc<dyn Driver>>,
    /// Runs every task with this driver whatever its job says (simulated nodes).
    everything_as: Option<Arc<dyn Driver>>,
}

impl Drivers {
    /// The drivers named (names not in the catalog are left out: the
    /// configuration refuses them).
    pub fn from_names(names: &[String], ctx: &DriverContext) -> Drivers {
        let mut d = Drivers::default();
        for n in names {
            if let Some(e) = CATALOG.iter().find(|e| e.name == n) {
                d.add((e.build)(ctx));
            }
        }
        d
    }

    /// The drivers of a simulated node: every task runs as a mock that runs
    /// until stopped unless its config sets `run_for`.
    pub fn simulated() -> Drivers {
        let mock: Arc<dyn Driver> = Arc::new(MockDriver::simulated());
        let mut by_name = BTreeMap::new();
        by_name.insert("mock".to_string(), mock.clone());
        by_name.insert("raw_exec".to_string(), mock.clone());
        Drivers {
            by_name,
            everything_as: Some(mock),
        }
    }

    /// Adds (or replaces) a driver.
    pub fn add(&mut self, driver: Arc<dyn Driver>) {
        self.by_name.insert(driver.name().to_string(), driver);
    }

    /// The driver that runs tasks asking for `name`.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Driver>> {
        self.everything_as
            .clone()
            .or_else(|| self.by_name.get(name).cloned())
    }

    /// The driver that recovers `state`.
    pub fn for_state(&self, state: &HandleState) -> Option<Arc<dyn Driver>> {
        self.by_name.get(state.driver()).cloned()
    }

    /// Every driver by name.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Arc<dyn Driver>)> {
        self.by_name.iter()
    }

    /// The fingerprint of every driver, taken together.
    pub async fn fingerprints(&self) -> BTreeMap<String, Fingerprint> {
        let taken = futures::future::join_all(
            self.by_name
                .iter()
                .map(|(n, d)| async move { (n.clone(), d.fingerprint().await) }),
        )
        .await;
        taken.into_iter().collect()
    }

    /// How often some driver's fingerprint must be taken again; `None` when
    /// none ever changes.
    pub fn fingerprint_period(&self) -> Option<Duration> {
        self.by_name
            .values()
            .filter_map(|d| d.fingerprint_period())
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn simulated_drivers_run_everything_as_mock() {
        let d = Drivers::simulated();
        assert_eq!(d.get("docker").unwrap().name(), "mock");
        assert_eq!(d.get("raw_exec").unwrap().name(), "mock");
        assert_eq!(d.fingerprint_period(), None);
        let ctx = DriverContext {
            supervisor: "/bin/true".into(),
            ..Default::default()
        };
        let real = Drivers::from_names(&["raw_exec".into(), "nope".into()], &ctx);
        assert!(real.get("mock").is_none());
        assert_eq!(real.get("raw_exec").unwrap().name(), "raw_exec");
        let fps = real.fingerprints().await;
        assert_eq!(fps.len(), 1);
        assert!(fps["raw_exec"].info().healthy);
        let state = HandleState::new("raw_exec", 1, Vec::new());
        assert_eq!(real.for_state(&state).unwrap().name(), "raw_exec");
        assert!(
            real.for_state(&HandleState::new("mock", 1, Vec::new()))
                .is_none()
        );
    }

    #[test]
    fn the_catalog_names_each_driver_once() {
        let names: Vec<&str> = known().collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(names.len(), unique.len());
        assert!(names.contains(&"docker"));
    }
}

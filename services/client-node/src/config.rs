//! The client node's configuration (`[client]` keys at the top level of its TOML file).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use caravan_runtime::telemetry::TelemetryConfig;
use serde::{Deserialize, Serialize};

use crate::error::ClientError;

/// Default gRPC port of a client node.
pub const DEFAULT_PORT: u16 = 4660;

/// Time beyond the longest kill timeout for the rest of a shutdown that
/// stops tasks (their final status updates, the server's drain).
const TASK_STOP_MARGIN: Duration = Duration::from_secs(5);

/// Configuration of a client node (or of N simulated ones).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClientConfig {
    /// api-gateway gRPC addresses (`host:port`); the client fails over between them.
    pub servers: Vec<String>,
    /// The api-gateways' heartbeat listeners (their `heartbeat_addr`), in
    /// the order of `servers`: heartbeats go there, on connections the
    /// gateway serves from a thread of their own. Empty sends heartbeats to
    /// `servers`.
    pub heartbeat_servers: Vec<String>,
    /// Address the node's own gRPC API (logs) listens on; port 0 picks one.
    pub grpc_addr: String,
    /// Address advertised to the servers as `Node.http_addr`; empty means the
    /// bound address (with an unspecified IP replaced by the node's IP).
    pub advertise_addr: String,
    /// Listen address of `/metrics` (Prometheus text); port 0 picks a free
    /// port (logged at start), empty serves none. See docs/metrics.md.
    pub metrics_addr: String,
    /// Where the node id, alloc state and alloc directories live.
    pub data_dir: PathBuf,
    /// Node name; the host name when empty.
    pub name: String,
    /// Datacenter the node is in.
    pub datacenter: String,
    /// Node class, used by constraints (`${node.class}`).
    pub node_class: String,
    /// Node pool; `default` when empty.
    pub node_pool: String,
    /// Node metadata (`${meta.<key>}`).
    pub meta: BTreeMap<String, String>,
    /// Resources kept back from the scheduler.
    pub reserved: ReservedConfig,
    /// Total CPU in MHz; 0 fingerprints cores × MHz.
    pub cpu_total_mhz: u64,
    /// MHz per core when `/proc/cpuinfo` doesn't say.
    pub cpu_mhz_fallback: u64,
    /// Memory in MB; 0 fingerprints `/proc/meminfo`.
    pub memory_mb: u64,
    /// Disk in MB; 0 fingerprints the free space of the data dir's file system.
    pub disk_mb: u64,
    /// Network speed advertised for the node's interface.
    pub network_speed_mbits: u32,
    /// Enabled task drivers (`raw_exec`, `docker`, `mock`). `raw_exec` runs
    /// a job's commands as the client's own user with no isolation, so it is
    /// off unless listed here, as Nomad's is unless its plugin block enables
    /// it; the default enables only `mock`.
    pub drivers: Vec<String>,
    /// The drivers' own settings (`[plugin.docker]`, …), as Nomad's
    /// `plugin "<name>" { config { … } }` blocks.
    pub plugin: crate::driver::PluginConfigs,
    /// Run this many simulated nodes (mock driver only) instead of one real node.
    pub simulate: u32,
    /// Resources of each simulated node.
    pub simulate_resources: SimulatedResources,
    /// Simulated nodes sharing one connection to a gateway for their alloc
    /// streams and status updates (registrations and heartbeats of every
    /// node share the heartbeat thread's connections).
    pub simulate_nodes_per_channel: u32,
    /// Longest a status update waits to be batched, in milliseconds.
    pub update_interval_ms: u64,
    /// Updates that trigger a send before the interval is up.
    pub update_max_batch: usize,
    /// Longest kill timeout a task may ask for, in milliseconds.
    pub max_kill_timeout_ms: u64,
    /// How long a task's templates may take to first render (what they
    /// read must exist) before the task fails, in milliseconds.
    pub template_render_timeout_ms: u64,
    /// Kill every task when the client stops (development); otherwise tasks keep
    /// running and the next client start re-attaches to them.
    pub stop_tasks_on_shutdown: bool,
    /// Log streams the node follows at once (`alloc logs -f`); more are refused.
    pub max_log_follows: usize,
    /// The binary run as the supervisor of each `raw_exec` task (with the
    /// `task-supervisor` argument); empty means this process's own binary.
    pub task_supervisor: PathBuf,
    /// Logging and tracing.
    pub telemetry: TelemetryConfig,
    /// Mutual TLS on every gRPC hop (`[tls]`).
    pub tls: caravan_runtime::tls::TlsConfig,
    /// Directories offered to jobs as host volumes, by name
    /// (`[host_volume.<name>]`, Nomad's `host_volume "<name>" { … }`).
    pub host_volume: BTreeMap<String, HostVolumeConfig>,
    /// Limits on tasks' artifact downloads and unpacking (`[artifact]`).
    pub artifact: crate::artifact::ArtifactConfig,
    /// Named networks of the node that ports may ask for by name
    /// (`[host_network.<name>]`, Nomad's `host_network "<name>" { … }`).
    pub host_network: BTreeMap<String, HostNetworkConfig>,
}

/// A named network of the node: the node's address in `cidr` and/or on
/// `interface` (both, when both are set).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HostNetworkConfig {
    /// CIDR blocks, comma-separated (`10.0.0.0/8,fd00::/8`); empty matches any address.
    pub cidr: String,
    /// Interface name; empty matches any interface.
    pub interface: String,
    /// Ports reserved on this network's address only (`22,80,8000-8100`).
    pub reserved_ports: String,
}

/// A directory of the node that jobs may mount by name (`volume { type = "host" }`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HostVolumeConfig {
    /// The directory; absolute, and it must exist when the client starts.
    pub path: PathBuf,
    /// Tasks may only mount it read-only.
    pub read_only: bool,
}

/// Resources a node keeps for itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReservedConfig {
    /// CPU in MHz.
    pub cpu_mhz: u64,
    /// Memory in MB.
    pub memory_mb: u64,
    /// Disk in MB.
    pub disk_mb: u64,
    /// Host ports, e.g. `22,80,8000-8100`.
    pub reserved_host_ports: String,
    /// Core ids.
    pub cores: Vec<u32>,
}

/// The resources each simulated node offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SimulatedResources {
    /// CPU in MHz.
    pub cpu_mhz: u64,
    /// Cores.
    pub cores: u32,
    /// Memory in MB.
    pub memory_mb: u64,
    /// Disk in MB.
    pub disk_mb: u64,
}

impl Default for SimulatedResources {
    fn default() -> Self {
        SimulatedResources {
            cpu_mhz: 16_000,
            cores: 8,
            memory_mb: 32_768,
            disk_mb: 200_000,
        }
    }
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            servers: vec!["127.0.0.1:4647".into()],
            heartbeat_servers: Vec::new(),
            grpc_addr: format!("127.0.0.1:{DEFAULT_PORT}"),
            advertise_addr: String::new(),
            metrics_addr: "127.0.0.1:0".into(),
            data_dir: PathBuf::from("/var/lib/caravan/client"),
            name: String::new(),
            datacenter: "dc1".into(),
            node_class: String::new(),
            node_pool: "default".into(),
            meta: BTreeMap::new(),
            reserved: ReservedConfig::default(),
            cpu_total_mhz: 0,
            cpu_mhz_fallback: 2000,
            memory_mb: 0,
            disk_mb: 0,
            network_speed_mbits: 1000,
            drivers: vec!["mock".into()],
            plugin: Default::default(),
            simulate: 0,
            simulate_resources: SimulatedResources::default(),
            simulate_nodes_per_channel: 100,
            update_interval_ms: 200,
            update_max_batch: 100,
            max_kill_timeout_ms: 30_000,
            template_render_timeout_ms: 300_000,
            stop_tasks_on_shutdown: false,
            max_log_follows: 64,
            task_supervisor: PathBuf::new(),
            telemetry: TelemetryConfig::default(),
            tls: caravan_runtime::tls::TlsConfig::default(),
            host_volume: BTreeMap::new(),
            artifact: crate::artifact::ArtifactConfig::default(),
            host_network: BTreeMap::new(),
        }
    }
}

impl ClientConfig {
    /// The settings of tasks' prestart hooks.
    pub fn hook_config(&self) -> crate::prestart::HookConfig {
        crate::prestart::HookConfig {
            template_render_timeout: Duration::from_millis(self.template_render_timeout_ms),
            // `validate` has checked the limits.
            artifacts: std::sync::Arc::new(crate::artifact::ArtifactFetcher::new(
                self.artifact.limits().unwrap_or_default(),
            )),
        }
    }

    /// Keys whose environment values are comma-separated lists.
    pub const LIST_KEYS: &'static [&'static str] =
        &["servers", "heartbeat_servers", "drivers", "reserved.cores"];

    /// Checks what `run` relies on, naming the first bad key.
    pub fn validate(&self) -> Result<(), ClientError> {
        if self.server_addrs().is_empty() {
            return Err(ClientError::invalid(
                "servers",
                "at least one api-gateway address is needed",
            ));
        }
        heartbeat_targets(&self.server_addrs(), &self.heartbeat_addrs())?;
        if self.data_dir.as_os_str().is_empty() {
            return Err(ClientError::invalid("data_dir", "must not be empty"));
        }
        for d in &self.driver_names() {
            if !crate::driver::catalog::known().any(|k| k == d) {
                let known: Vec<&str> = crate::driver::catalog::known().collect();
                return Err(ClientError::invalid(
                    "drivers",
                    format!("unknown driver {d:?} (known: {})", known.join(", ")),
                ));
            }
        }
        self.plugin
            .validate()
            .map_err(|(field, why)| ClientError::invalid(field, why))?;
        if self.update_interval_ms == 0 {
            return Err(ClientError::invalid(
                "update_interval_ms",
                "must be positive",
            ));
        }
        if self.max_log_follows == 0 {
            return Err(ClientError::invalid("max_log_follows", "must be positive"));
        }
        if self.update_max_batch == 0 {
            return Err(ClientError::invalid("update_max_batch", "must be positive"));
        }
        if self.simulate > 0 && self.simulate_nodes_per_channel == 0 {
            return Err(ClientError::invalid(
                "simulate_nodes_per_channel",
                "must be positive",
            ));
        }
        for (name, v) in &self.host_volume {
            let key = format!("host_volume.{name}.path");
            if name.is_empty() {
                return Err(ClientError::invalid(
                    "host_volume",
                    "a host volume needs a name",
                ));
            }
            if !v.path.is_absolute() {
                return Err(ClientError::invalid(
                    key,
                    format!("must be an absolute path (got {:?})", v.path),
                ));
            }
            if !v.path.is_dir() {
                return Err(ClientError::invalid(
                    key,
                    format!("{} is not a directory on this node", v.path.display()),
                ));
            }
        }
        self.artifact
            .limits()
            .map_err(|(field, why)| ClientError::invalid(field, why))?;
        for (name, n) in &self.host_network {
            crate::host_network::validate(name, n)?;
        }
        if caravan_scheduler::ports::PortSet::parse(&self.reserved.reserved_host_ports).is_err() {
            return Err(ClientError::invalid(
                "reserved.reserved_host_ports",
                "expected ports and ranges like 22,80,8000-8100",
            ));
        }
        Ok(())
    }

    /// The status batching interval.
    pub fn update_interval(&self) -> Duration {
        Duration::from_millis(self.update_interval_ms)
    }

    /// The gateway addresses, trimmed, without empty entries; an entry may
    /// itself be a comma-separated list (as `--set servers=a,b` gives it).
    pub fn server_addrs(&self) -> Vec<String> {
        split_list(&self.servers)
    }

    /// Where each server takes heartbeats, split like
    /// [`ClientConfig::server_addrs`]: `heartbeat_servers`, or the servers
    /// themselves when it is empty.
    pub fn heartbeat_addrs(&self) -> Vec<String> {
        split_list(&self.heartbeat_servers)
    }

    /// The enabled driver names, split like [`ClientConfig::server_addrs`].
    pub fn driver_names(&self) -> Vec<String> {
        split_list(&self.drivers)
    }
}

caravan_runtime::service_config!(ClientConfig;
    const LIST_KEYS: &'static [&'static str] = ClientConfig::LIST_KEYS;

    fn validate(&self) -> anyhow::Result<()> {
        Ok(ClientConfig::validate(self)?)
    }

    /// Stopping tasks on shutdown may take up to their kill timeout: the
    /// deadline must not cut that short and leave them running.
    fn min_shutdown_deadline(&self) -> Duration {
        if self.stop_tasks_on_shutdown {
            Duration::from_millis(self.max_kill_timeout_ms) + TASK_STOP_MARGIN
        } else {
            Duration::ZERO
        }
    }

    /// A real node's tasks are its runtime's child processes and would
    /// inherit a lowered priority: it keeps its own unless told otherwise.
    /// Simulated nodes run only the mock driver, and thousands of them
    /// heartbeat from one process.
    fn default_runtime_nice(&self) -> i32 {
        if self.simulate > 0 {
            caravan_runtime::service::DEFAULT_NICE
        } else {
            0
        }
    }
);

/// Where heartbeats go, with the key that names them: `heartbeats` (each
/// server's heartbeat listener, in the order of `servers`), or the servers
/// themselves when it is empty; any other count is refused.
pub(crate) fn heartbeat_targets<'a>(
    servers: &'a [String],
    heartbeats: &'a [String],
) -> Result<(&'a [String], &'static str), ClientError> {
    match heartbeats {
        [] => Ok((servers, "servers")),
        given if given.len() == servers.len() => Ok((given, "heartbeat_servers")),
        given => Err(ClientError::invalid(
            "heartbeat_servers",
            format!(
                "{} addresses for {} servers: name each server's heartbeat listener, \
                 in the order of servers, or none",
                given.len(),
                servers.len()
            ),
        )),
    }
}

fn split_list(items: &[String]) -> Vec<String> {
    items
        .iter()
        .flat_map(|s| s.split(','))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use caravan_runtime::config::ConfigLoader;

    use super::*;

    #[test]
    fn a_real_node_keeps_its_priority_for_its_tasks_and_a_simulation_lowers_it() {
        use caravan_runtime::service::ServiceConfig;
        assert_eq!(ClientConfig::default().default_runtime_nice(), 0);
        let simulating = ClientConfig {
            simulate: 2,
            ..Default::default()
        };
        assert_eq!(
            simulating.default_runtime_nice(),
            caravan_runtime::service::DEFAULT_NICE
        );
    }

    #[test]
    fn defaults_are_valid() {
        ClientConfig::default().validate().unwrap();
    }

    #[test]
    fn raw_exec_is_off_unless_listed() {
        assert!(
            !ClientConfig::default()
                .drivers
                .iter()
                .any(|d| d == "raw_exec")
        );
        let conf: ClientConfig = ConfigLoader::new(caravan_runtime::names::CLIENT_NODE)
            .list_keys(ClientConfig::LIST_KEYS)
            .set("drivers", "raw_exec,mock")
            .load(&ClientConfig::default())
            .unwrap();
        assert_eq!(conf.drivers, ["raw_exec", "mock"]);
    }

    #[test]
    fn env_lists_and_overrides_load() {
        let conf: ClientConfig = ConfigLoader::new(caravan_runtime::names::CLIENT_NODE)
            .list_keys(ClientConfig::LIST_KEYS)
            .with_env(vec![(
                "CARAVAN_CLIENT_NODE__SERVERS".into(),
                "10.0.0.1:4647,10.0.0.2:4647".into(),
            )])
            .set("simulate", "200")
            .set("meta.rack", "r1")
            .load(&ClientConfig::default())
            .unwrap();
        assert_eq!(conf.servers, vec!["10.0.0.1:4647", "10.0.0.2:4647"]);
        let flags: ClientConfig = ConfigLoader::new(caravan_runtime::names::CLIENT_NODE)
            .list_keys(ClientConfig::LIST_KEYS)
            .with_env(vec![])
            .set("servers", "a:1, b:2")
            .set("drivers", "mock")
            .load(&ClientConfig::default())
            .unwrap();
        assert_eq!(flags.server_addrs(), vec!["a:1", "b:2"]);
        assert_eq!(flags.driver_names(), vec!["mock"]);
        assert_eq!(conf.simulate, 200);
        assert_eq!(conf.meta.get("rack").map(String::as_str), Some("r1"));
    }

    #[test]
    fn bad_values_name_the_key() {
        let c = ClientConfig {
            drivers: vec!["podman".into()],
            ..Default::default()
        };
        assert!(c.validate().unwrap_err().to_string().starts_with("drivers"));
        let c = ClientConfig {
            servers: vec![" ".into()],
            ..Default::default()
        };
        assert!(c.validate().unwrap_err().to_string().starts_with("servers"));
        let c = ClientConfig {
            servers: vec!["a:1,b:1".into()],
            heartbeat_servers: vec!["a:2".into()],
            ..Default::default()
        };
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .starts_with("heartbeat_servers")
        );
        let c = ClientConfig {
            heartbeat_servers: vec!["a:2".into()],
            ..Default::default()
        };
        c.validate().unwrap();
        let mut c = ClientConfig::default();
        c.artifact.http_max_size = "huge".into();
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .starts_with("artifact.http_max_size")
        );
        let mut c = ClientConfig::default();
        c.reserved.reserved_host_ports = "22-x".into();
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .starts_with("reserved.reserved_host_ports")
        );
    }
}

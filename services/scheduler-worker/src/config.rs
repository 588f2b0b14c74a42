//! The scheduler worker's configuration.

use std::time::Duration;

use caravan_runtime::store::StoreConfig;
use caravan_runtime::telemetry::TelemetryConfig;
use serde::{Deserialize, Serialize};

/// Configuration of one scheduler-worker replica. The eval broker and the
/// plan applier are found through their leader keys in the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SchedulerWorkerConfig {
    /// gRPC listen address (control API and health; loopback unless
    /// configured); port 0 picks a free port.
    pub grpc_addr: String,
    /// Address this replica is reachable on, for logs; empty means the
    /// bound address (loopback when bound to all interfaces). Also read as
    /// `advertised_addr`; left out of the defaults layer when empty, so that
    /// spelling is not read twice.
    #[serde(alias = "advertised_addr", skip_serializing_if = "String::is_empty")]
    pub advertise_addr: String,
    /// Listen address of `/metrics` (Prometheus text); port 0 picks a free
    /// port (logged at start), empty serves none. See docs/metrics.md.
    pub metrics_addr: String,
    /// Worker loops, each processing one evaluation at a time; 0 means
    /// [`LOOPS_PER_CORE`] per core.
    pub workers: usize,
    /// Large evaluations (those asking for 256 allocations or
    /// more) scheduled at once; smaller ones count in proportion. 0 means
    /// [`LARGE_EVALS_PER_CORE`] per core. See `budget.rs`.
    pub large_evals: usize,
    /// Scheduler types to dequeue.
    pub schedulers: Vec<String>,
    /// Long-poll timeout of one dequeue, in milliseconds.
    pub dequeue_timeout_ms: u64,
    /// How long the cache may take to reach an eval's wait revision (or a
    /// plan's refresh revision) before the eval is nacked, in milliseconds.
    pub wait_revision_timeout_ms: u64,
    /// How often a running eval's delivery token is reset at the broker, in
    /// milliseconds (the broker's nack timeout is 60 s).
    pub heartbeat_interval_ms: u64,
    /// Deadline of one call to the broker or the applier, in milliseconds.
    pub rpc_timeout_ms: u64,
    /// How long to wait for a broker or applier leader before giving up on a
    /// call, in milliseconds.
    pub leader_wait_ms: u64,
    /// How long in-flight evals may run on after shutdown is asked, in
    /// milliseconds; then their calls fail and they are nacked. Keep it
    /// well under `shutdown.deadline_ms` (8 s), when the process exits
    /// whatever still runs.
    pub shutdown_grace_ms: u64,
    /// Start paused (no dequeuing until `SetPaused(false)`).
    pub paused: bool,
    /// The state store.
    pub store: StoreConfig,
    /// Logs and traces.
    pub telemetry: TelemetryConfig,
    /// Mutual TLS on every gRPC hop (`[tls]`).
    pub tls: caravan_runtime::tls::TlsConfig,
}

impl Default for SchedulerWorkerConfig {
    fn default() -> Self {
        SchedulerWorkerConfig {
            grpc_addr: "127.0.0.1:4652".into(),
            advertise_addr: String::new(),
            metrics_addr: "127.0.0.1:0".into(),
            workers: 0,
            large_evals: 0,
            schedulers: ["service", "batch", "system", "sysbatch"]
                .map(String::from)
                .to_vec(),
            dequeue_timeout_ms: 5_000,
            wait_revision_timeout_ms: 5_000,
            heartbeat_interval_ms: 15_000,
            rpc_timeout_ms: 60_000,
            leader_wait_ms: 30_000,
            shutdown_grace_ms: 4_000,
            paused: false,
            store: StoreConfig::default(),
            telemetry: TelemetryConfig::default(),
            tls: caravan_runtime::tls::TlsConfig::default(),
        }
    }
}

caravan_runtime::service_config!(SchedulerWorkerConfig, store;
    const LIST_KEYS: &'static [&'static str] = &["schedulers"];
);

/// Worker loops per core when `workers` is 0. A loop spends most of an
/// evaluation waiting: for the broker's dequeue, for its cache to reach the
/// eval's revision, and for the plan-applier's commit (a disk sync in etcd).
/// With one loop per core the cores idle through those waits, and the more
/// plans arrive together the more share one commit (docs/benchmarks.md, (d)).
pub const LOOPS_PER_CORE: usize = 16;

/// Large evaluations scheduled at once per core when `large_evals` is 0:
/// more, against snapshots of the same moment, would compete for the same
/// nodes (docs/benchmarks.md, C1M).
pub const LARGE_EVALS_PER_CORE: usize = 4;

/// `set`, or `per_core` for each core when `set` is 0.
fn per_core_unless_set(set: usize, per_core: usize) -> usize {
    if set > 0 {
        set
    } else {
        per_core * std::thread::available_parallelism().map_or(1, usize::from)
    }
}

/// The configuration as durations and counts, resolved once.
#[derive(Clone, Debug)]
pub(crate) struct Timing {
    pub(crate) dequeue_timeout: Duration,
    pub(crate) wait_revision: Duration,
    pub(crate) heartbeat: Duration,
    pub(crate) rpc: Duration,
    pub(crate) leader_wait: Duration,
}

impl SchedulerWorkerConfig {
    /// The number of worker loops, resolving 0 to [`LOOPS_PER_CORE`] per
    /// core.
    pub fn worker_count(&self) -> usize {
        per_core_unless_set(self.workers, LOOPS_PER_CORE)
    }

    /// The large evaluations scheduled at once, resolving 0 to
    /// [`LARGE_EVALS_PER_CORE`] per core.
    pub fn large_eval_count(&self) -> usize {
        per_core_unless_set(self.large_evals, LARGE_EVALS_PER_CORE)
    }

    pub(crate) fn timing(&self) -> Timing {
        let ms = Duration::from_millis;
        Timing {
            dequeue_timeout: ms(self.dequeue_timeout_ms.max(1)),
            wait_revision: ms(self.wait_revision_timeout_ms),
            heartbeat: ms(self.heartbeat_interval_ms.max(100)),
            rpc: ms(self.rpc_timeout_ms.max(100)),
            leader_wait: ms(self.leader_wait_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use caravan_runtime::config::ConfigLoader;
    use caravan_runtime::names::SCHEDULER_WORKER;
    use caravan_runtime::service::ServiceConfig;

    use super::*;

    #[test]
    fn advertise_addr_is_also_read_under_its_older_spelling() {
        let load = |env: &str| -> SchedulerWorkerConfig {
            ConfigLoader::new(SCHEDULER_WORKER)
                .list_keys(SchedulerWorkerConfig::LIST_KEYS)
                .with_env(vec![(env.to_string(), "worker-1:4652".to_string())])
                .load(&SchedulerWorkerConfig::default())
                .unwrap()
        };
        let current = load("CARAVAN_SCHEDULER_WORKER__ADVERTISE_ADDR");
        assert_eq!(current.advertise_addr, "worker-1:4652");
        let older = load("CARAVAN_SCHEDULER_WORKER__ADVERTISED_ADDR");
        assert_eq!(older.advertise_addr, "worker-1:4652");
        assert_eq!(load("CARAVAN_OTHER__X").advertise_addr, "");
    }
}

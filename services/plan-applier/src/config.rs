//! The plan-applier's configuration: where it listens, how it leads, and the
//! budgets of its commits.

use caravan_runtime::store::StoreConfig;
use caravan_runtime::telemetry::TelemetryConfig;
use serde::{Deserialize, Serialize};

/// Configuration of one plan-applier replica.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PlanApplierConfig {
    /// gRPC listen address (loopback unless configured; other processes
    /// reach it only when it binds a routable address); port 0 picks a free
    /// port.
    pub grpc_addr: String,
    /// Address other services reach this replica on, written into the
    /// leader key; empty means the bound address (loopback when bound to
    /// all interfaces). Also read as `advertised_addr`; left out of the
    /// defaults layer when empty, so that spelling is not read twice.
    #[serde(alias = "advertised_addr", skip_serializing_if = "String::is_empty")]
    pub advertise_addr: String,
    /// Listen address of `/metrics` (Prometheus text); port 0 picks a free
    /// port (logged at start), empty serves none. See docs/metrics.md.
    pub metrics_addr: String,
    /// TTL of the leader lease in milliseconds.
    pub leader_ttl_ms: u64,
    /// Most compares plus writes in one commit transaction; a plan over it is
    /// split by node (etcd runs with `--max-txn-ops 10000`).
    pub txn_max_ops: usize,
    /// Most bytes of keys and values in one commit transaction (etcd runs
    /// with `--max-request-bytes` 32 MiB).
    pub txn_max_bytes: usize,
    /// Threads verifying the nodes of one plan; 0 means one per core.
    pub verify_threads: usize,
    /// Re-reads and retries of a commit whose allocations a client status
    /// write changed concurrently.
    pub conflict_retries: u32,
    /// How long a plan waits for the applier's cache to reach the revision
    /// the scheduler planned against, in milliseconds.
    pub cache_wait_ms: u64,
    /// Deadline of the token check with the eval broker, in milliseconds.
    pub broker_timeout_ms: u64,
    /// Most plan commits under way at once; plans touching disjoint objects
    /// commit concurrently, so etcd batches their writes. 1 commits one plan
    /// at a time.
    pub max_in_flight_commits: usize,
    /// The state store.
    pub store: StoreConfig,
    /// Logs and traces.
    pub telemetry: TelemetryConfig,
    /// Mutual TLS on every gRPC hop (`[tls]`).
    pub tls: caravan_runtime::tls::TlsConfig,
}

impl Default for PlanApplierConfig {
    fn default() -> Self {
        PlanApplierConfig {
            grpc_addr: "127.0.0.1:4651".into(),
            advertise_addr: String::new(),
            metrics_addr: "127.0.0.1:0".into(),
            leader_ttl_ms: 3_000,
            txn_max_ops: 4_000,
            txn_max_bytes: 8 * 1024 * 1024,
            verify_threads: 0,
            conflict_retries: 5,
            cache_wait_ms: 2_000,
            broker_timeout_ms: 5_000,
            max_in_flight_commits: 16,
            store: StoreConfig::default(),
            telemetry: TelemetryConfig::default(),
            tls: caravan_runtime::tls::TlsConfig::default(),
        }
    }
}

caravan_runtime::service_config!(PlanApplierConfig, store);

impl PlanApplierConfig {
    /// The number of verification threads, resolving 0 to the core count.
    pub fn verify_threads(&self) -> usize {
        if self.verify_threads > 0 {
            self.verify_threads
        } else {
            std::thread::available_parallelism().map_or(1, usize::from)
        }
    }
}

#[cfg(test)]
mod tests {
    use caravan_runtime::config::ConfigLoader;
    use caravan_runtime::names::PLAN_APPLIER;

    use super::*;

    #[test]
    fn advertise_addr_is_also_read_under_its_older_spelling() {
        let load = |key: &str| -> PlanApplierConfig {
            ConfigLoader::new(PLAN_APPLIER)
                .with_env(vec![])
                .set(key, "applier-1:4651")
                .load(&PlanApplierConfig::default())
                .unwrap()
        };
        assert_eq!(load("advertise_addr").advertise_addr, "applier-1:4651");
        assert_eq!(load("advertised_addr").advertise_addr, "applier-1:4651");
        let defaults: PlanApplierConfig = ConfigLoader::new(PLAN_APPLIER)
            .with_env(vec![])
            .load(&PlanApplierConfig::default())
            .unwrap();
        assert_eq!(defaults, PlanApplierConfig::default());
    }
}

//! The gateway's configuration: listen addresses, heartbeat timing, request
//! limits, blocking-query waits, and the shared `[store]` and `[telemetry]`
//! sections.

use std::time::Duration;

use caravan_runtime::store::StoreConfig;
use caravan_runtime::telemetry::TelemetryConfig;
use serde::{Deserialize, Serialize};

/// Configuration of one api-gateway replica.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GatewayConfig {
    /// Where the gRPC API (public and node-facing) listens.
    pub grpc_addr: String,
    /// Where the Nomad-compatible HTTP API listens.
    pub http_addr: String,
    /// The gRPC address other processes should use; the bound address when empty.
    pub advertise_addr: String,
    /// The region this cluster answers for (Nomad's `region`); Caravan runs
    /// one region per cluster.
    pub region: String,
    /// Time a node has past its heartbeat TTL before its lease expires, in ms.
    pub heartbeat_grace_ms: u64,
    /// Shortest heartbeat TTL handed to a node, in ms.
    pub min_heartbeat_ttl_ms: u64,
    /// Heartbeats per second the cluster aims at; more nodes mean longer TTLs.
    pub max_heartbeats_per_second: f64,
    /// Largest request body (HTTP) or message (gRPC) accepted, in bytes.
    pub max_body_bytes: usize,
    /// Longest (and default) wait of a blocking query, in ms.
    pub max_query_wait_ms: u64,
    /// Attempts of a compare-and-swap write before giving up with ABORTED.
    pub write_attempts: u32,
    /// Most allocations a job may ask for in all (the sum of its groups'
    /// counts); more is refused as invalid (HTTP 400, INVALID_ARGUMENT).
    pub max_job_allocs: u64,
    /// Most operations of a node change's transaction (etcd's default
    /// `--max-txn-ops`): the evaluations that do not fit are owed by a
    /// fan-out on the node, which the eval broker finishes.
    pub max_txn_ops: usize,
    /// Most allocations in one transaction of client status updates; the
    /// updates of all nodes that arrive while one commits share the next
    /// (a compare, a put and a read-back each: within etcd's `--max-txn-ops`).
    pub status_batch_max_allocs: usize,
    /// The state store.
    pub store: StoreConfig,
    /// Logs and traces.
    pub telemetry: TelemetryConfig,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            grpc_addr: "127.0.0.1:4647".into(),
            http_addr: "127.0.0.1:4646".into(),
            advertise_addr: String::new(),
            region: "global".into(),
            heartbeat_grace_ms: 10_000,
            min_heartbeat_ttl_ms: 10_000,
            max_heartbeats_per_second: 50.0,
            max_body_bytes: caravan_jobspec::DEFAULT_MAX_JOB_BYTES,
            max_query_wait_ms: 300_000,
            write_attempts: 16,
            max_txn_ops: 128,
            max_job_allocs: 100_000,
            status_batch_max_allocs: 1000,
            store: StoreConfig::default(),
            telemetry: TelemetryConfig::default(),
        }
    }
}

impl GatewayConfig {
    /// The heartbeat grace period.
    pub fn heartbeat_grace(&self) -> Duration {
        Duration::from_millis(self.heartbeat_grace_ms)
    }

    /// The shortest heartbeat TTL.
    pub fn min_heartbeat_ttl(&self) -> Duration {
        Duration::from_millis(self.min_heartbeat_ttl_ms)
    }

    /// The longest wait of a blocking query.
    pub fn max_query_wait(&self) -> Duration {
        Duration::from_millis(self.max_query_wait_ms.max(1))
    }
}

caravan_runtime::service_config!(GatewayConfig, store);

#[cfg(test)]
mod tests {
    use caravan_runtime::config::ConfigLoader;

    use super::*;

    #[test]
    fn overrides_reach_every_section() {
        let config: GatewayConfig = ConfigLoader::new(caravan_runtime::names::API_GATEWAY)
            .with_env(vec![(
                "CARAVAN_API_GATEWAY__HEARTBEAT_GRACE_MS".into(),
                "2500".into(),
            )])
            .set("grpc_addr", "127.0.0.1:0")
            .set("store.prefix", "/t")
            .load(&GatewayConfig::default())
            .unwrap();
        assert_eq!(config.grpc_addr, "127.0.0.1:0");
        assert_eq!(config.store.prefix, "/t");
        assert_eq!(config.heartbeat_grace(), Duration::from_millis(2500));
        assert_eq!(config.http_addr, "127.0.0.1:4646");
    }
}

//! The gateway's configuration: listen addresses, heartbeat timing, request
//! limits, blocking-query waits, the `acl` section, and the shared `[store]`
//! and `[telemetry]` sections. Plain values only: the domain modules build
//! their objects from them (`vars::VariableKey::configured`).

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
    /// Address of a gRPC listener that takes node heartbeats only, served
    /// by the heartbeat thread: a heartbeat sent there waits neither behind
    /// alloc streams and status batches on a shared connection nor for the
    /// gateway's main runtime. Clients name it in `heartbeat_servers`.
    /// Empty serves none (nodes then heartbeat on `grpc_addr`); port 0
    /// picks one.
    pub heartbeat_addr: String,
    /// A listen address of its own for `/metrics` besides `http_addr`, which
    /// always serves it; empty (the default) opens none. See docs/metrics.md.
    pub metrics_addr: String,
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
    /// How long a batch of client status updates waits for more after its
    /// first, in ms, unless it fills first (Nomad's servers wait 50 ms):
    /// at a steady trickle, tens of nodes' reports share one transaction
    /// instead of each paying its own write, watch events and disk sync.
    /// 0 writes at once whatever has arrived.
    pub status_batch_linger_ms: u64,
    /// Most client status updates waiting for the writer. A report that
    /// would go beyond waits for room (see `status_backlog_wait_ms`), then
    /// is refused (UNAVAILABLE) rather than queued: its node keeps the
    /// newest state of each allocation and sends it again after a backoff,
    /// so a backlog costs the nodes one state per allocation instead of
    /// costing the gateway every report in flight and every copy a
    /// timed-out caller sent again.
    pub status_backlog_max_allocs: usize,
    /// How long a client status report waits for room in a full backlog
    /// before it is refused; 0 refuses it at once. A node sends one report
    /// at a time, so a report that waits holds the node's newer states at
    /// the node, merged one per allocation, where a refused one is sent,
    /// decoded and refused again after each backoff. Keep it well under
    /// the deadline nodes give a status report (30 s), which also covers
    /// the backlog ahead of it and the write.
    pub status_backlog_wait_ms: u64,
    /// Most node registrations the gateway works on at once; 0: no limit.
    /// A registration beyond waits for its turn up to `registration_wait_ms`
    /// and is then refused (UNAVAILABLE), which nodes retry after a
    /// jittered backoff. When thousands of nodes register at once (a
    /// cluster's restart, a burst of new nodes), each registration admitted
    /// finishes within the nodes' call timeout (10 s) instead of all of them
    /// queueing past it, being sent again and granting a lease per try.
    pub max_registrations_in_flight: usize,
    /// How long a registration waits for its turn, in ms (see
    /// `max_registrations_in_flight`); keep it well under the nodes' call
    /// timeout (10 s), which also covers the registration's writes.
    pub registration_wait_ms: u64,
    /// The key Nomad Variables are encrypted with: base64 of 32 random bytes
    /// (`caravan dev` makes one per data dir). Every replica needs the same
    /// key; without one (here or in `variables_key_file`) the variables API
    /// answers that it is unavailable. Printed (`--check-config`) as
    /// `<redacted>`.
    #[serde(serialize_with = "redacted")]
    pub variables_key: String,
    /// A file holding the variables key (base64), read at start; the
    /// alternative to `variables_key` that keeps the key out of the
    /// configuration.
    pub variables_key_file: String,
    /// The issuer of workload identity tokens (Nomad's `oidc_issuer`), a
    /// URL third parties reach this API at: set, tokens carry it as `iss`
    /// and `/.well-known/openid-configuration` describes it; empty (the
    /// default), that endpoint answers 404 and tokens carry no issuer.
    pub oidc_issuer: String,
    /// ACLs (`acl { enabled = true }`), off by default.
    pub acl: AclConfig,
    /// The state store.
    pub store: StoreConfig,
    /// Logs and traces.
    pub telemetry: TelemetryConfig,
    /// Mutual TLS on every gRPC hop (`[tls]`).
    pub tls: caravan_runtime::tls::TlsConfig,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            grpc_addr: "127.0.0.1:4647".into(),
            http_addr: "127.0.0.1:4646".into(),
            advertise_addr: String::new(),
            heartbeat_addr: String::new(),
            metrics_addr: String::new(),
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
            status_batch_linger_ms: 50,
            status_backlog_max_allocs: 8000,
            status_backlog_wait_ms: 3000,
            max_registrations_in_flight: 32,
            registration_wait_ms: 2000,
            variables_key: String::new(),
            variables_key_file: String::new(),
            oidc_issuer: String::new(),
            acl: AclConfig::default(),
            store: StoreConfig::default(),
            telemetry: TelemetryConfig::default(),
            tls: caravan_runtime::tls::TlsConfig::default(),
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

/// The `acl` section of the gateway's configuration (Nomad's agent
/// `acl { enabled = true }`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AclConfig {
    /// Enforce ACLs: every request needs a token allowed to make it (or the
    /// `anonymous` policy's leave). Off, nothing is checked and the ACL
    /// endpoints answer that ACLs are disabled.
    pub enabled: bool,
}

/// Serializes a secret as `<redacted>` (empty stays empty, so an unset
/// secret still reads as unset).
fn redacted<S: serde::Serializer>(secret: &str, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(if secret.is_empty() { "" } else { "<redacted>" })
}

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

    #[test]
    fn the_variables_key_prints_redacted() {
        let mut config = GatewayConfig::default();
        let printed = serde_json::to_string(&config).unwrap();
        assert!(printed.contains(r#""variables_key":"""#), "{printed}");
        config.variables_key = "c2VjcmV0LWtleQ==".into();
        let printed = serde_json::to_string(&config).unwrap();
        assert!(
            !printed.contains(&config.variables_key) && printed.contains("<redacted>"),
            "{printed}"
        );
    }

    #[test]
    fn acl_is_a_section_of_its_own() {
        let config: GatewayConfig = ConfigLoader::new(caravan_runtime::names::API_GATEWAY)
            .set("acl.enabled", "true")
            .load(&GatewayConfig::default())
            .unwrap();
        assert!(config.acl.enabled);
        assert!(!GatewayConfig::default().acl.enabled);
    }
}

//! The deployment-watcher's configuration: where it listens, how it leads,
//! and how it batches the evaluations it creates.

use std::time::Duration;

use caravan_runtime::store::StoreConfig;
use caravan_runtime::telemetry::TelemetryConfig;
use serde::{Deserialize, Serialize};

/// Configuration of the `caravan-deployment-watcher` service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DeploymentWatcherConfig {
    /// gRPC listen address (loopback unless configured; other processes
    /// reach it only when it binds a routable address); port 0 picks a free
    /// port.
    pub grpc_addr: String,
    /// Address other services reach this replica at, campaigned with so
    /// followers can name the leader; empty means the bound address (with
    /// 127.0.0.1 for an unspecified host).
    pub advertise_addr: String,
    /// Listen address of `/metrics` (Prometheus text); port 0 picks a free
    /// port (logged at start), empty serves none. See docs/metrics.md.
    pub metrics_addr: String,
    /// TTL of the leadership lease, in milliseconds (whole seconds are used).
    pub leader_ttl_ms: u64,
    /// How long the first reason for a deployment's next evaluation waits
    /// for others to join it, in milliseconds.
    pub eval_batch_window_ms: u64,
    /// Attempts at a steering write when the deployment keeps changing
    /// under it.
    pub write_attempts: u32,
    /// Least time between two assessments of a deployment prompted by
    /// changes of its allocations, in milliseconds: each assessment reads
    /// every allocation of the deployment. The first change after a quiet
    /// interval is assessed at once; a change of the deployment itself
    /// (an operator's pause, promotion or failure) is never held back.
    pub assess_interval_ms: u64,
    /// The state store.
    pub store: StoreConfig,
    /// Logging and tracing.
    pub telemetry: TelemetryConfig,
    /// Mutual TLS on every gRPC hop (`[tls]`).
    pub tls: caravan_runtime::tls::TlsConfig,
}

impl Default for DeploymentWatcherConfig {
    fn default() -> Self {
        DeploymentWatcherConfig {
            grpc_addr: "127.0.0.1:4653".into(),
            advertise_addr: String::new(),
            metrics_addr: "127.0.0.1:0".into(),
            leader_ttl_ms: 3_000,
            eval_batch_window_ms: 1_000,
            write_attempts: 5,
            assess_interval_ms: 250,
            store: StoreConfig::default(),
            telemetry: TelemetryConfig::default(),
            tls: caravan_runtime::tls::TlsConfig::default(),
        }
    }
}

caravan_runtime::service_config!(DeploymentWatcherConfig, store);

impl DeploymentWatcherConfig {
    /// The leadership lease TTL.
    pub fn leader_ttl(&self) -> Duration {
        Duration::from_millis(self.leader_ttl_ms.max(1_000))
    }

    /// The evaluation batching window.
    pub fn eval_batch_window(&self) -> Duration {
        Duration::from_millis(self.eval_batch_window_ms)
    }

    /// The least time between two assessments a deployment's allocations
    /// prompt.
    pub fn assess_interval(&self) -> Duration {
        Duration::from_millis(self.assess_interval_ms)
    }

    /// Attempts at a contended write, at least one.
    pub fn attempts(&self) -> u32 {
        self.write_attempts.max(1)
    }
}

#[cfg(test)]
mod tests {
    use caravan_runtime::config::ConfigLoader;

    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let d = DeploymentWatcherConfig::default();
        assert_eq!(d.grpc_addr, "127.0.0.1:4653");
        assert_eq!(d.eval_batch_window(), Duration::from_secs(1));
        let conf: DeploymentWatcherConfig =
            ConfigLoader::new(caravan_runtime::names::DEPLOYMENT_WATCHER)
                .with_env(vec![(
                    "CARAVAN_DEPLOYMENT_WATCHER__EVAL_BATCH_WINDOW_MS".into(),
                    "50".into(),
                )])
                .set_all(["grpc_addr=127.0.0.1:0", "leader_ttl_ms=2000"])
                .unwrap()
                .load(&DeploymentWatcherConfig::default())
                .unwrap();
        assert_eq!(conf.eval_batch_window(), Duration::from_millis(50));
        assert_eq!(conf.grpc_addr, "127.0.0.1:0");
        assert_eq!(conf.leader_ttl(), Duration::from_secs(2));
        assert_eq!(conf.store, StoreConfig::default());
    }
}

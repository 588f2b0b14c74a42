//! The eval-broker's configuration: where it listens, how it leads, and the
//! delivery settings of its queues.

use std::time::Duration;

use caravan_runtime::store::StoreConfig;
use caravan_runtime::telemetry::TelemetryConfig;
use serde::{Deserialize, Serialize};

use crate::queues::QueueConfig;

/// Configuration of the `caravan-eval-broker` service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct EvalBrokerConfig {
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
    /// A delivery neither acked, nacked nor reset for this long counts as
    /// nacked, in milliseconds.
    pub nack_timeout_ms: u64,
    /// Deliveries after which a nack fails the eval.
    pub delivery_limit: u32,
    /// Backoff after the first nack, in milliseconds.
    pub initial_nack_delay_ms: u64,
    /// Backoff per earlier delivery after later nacks, in milliseconds.
    pub subsequent_nack_delay_ms: u64,
    /// Least wait of the follow-up of a failed eval, in milliseconds.
    pub failed_follow_up_base_ms: u64,
    /// Random extra wait of the follow-up of a failed eval, up to this many
    /// milliseconds.
    pub failed_follow_up_jitter_ms: u64,
    /// How often blocked evals from plan failures are retried, in
    /// milliseconds.
    pub failed_unblock_interval_ms: u64,
    /// Longest long poll a `Dequeue` may ask for, in milliseconds.
    pub max_dequeue_timeout_ms: u64,
    /// Most operations the broker puts in one transaction.
    pub max_txn_ops: usize,
    /// Heartbeats lost together by at least this many nodes…
    pub mass_heartbeat_loss_nodes: usize,
    /// …and this percentage of the up nodes, within 10 s, point at the servers
    /// (starved, partitioned) rather than the nodes: those nodes get
    /// `mass_heartbeat_loss_grace_ms` to heartbeat again before they are
    /// marked down. 0 nodes turns the grace off.
    pub mass_heartbeat_loss_percent: u32,
    /// The grace of a mass heartbeat loss, in milliseconds.
    pub mass_heartbeat_loss_grace_ms: u64,
    /// How often the leader compacts the store's history, in milliseconds,
    /// each time up to the revision its cache had reached one interval
    /// before (etcd keeps every revision until compacted); 0 never does.
    pub compaction_interval_ms: u64,
    /// Garbage collection.
    pub gc: GcConfig,
    /// The state store.
    pub store: StoreConfig,
    /// Logging and tracing.
    pub telemetry: TelemetryConfig,
    /// Mutual TLS on every gRPC hop (`[tls]`).
    pub tls: caravan_runtime::tls::TlsConfig,
}

impl Default for EvalBrokerConfig {
    fn default() -> Self {
        EvalBrokerConfig {
            grpc_addr: "127.0.0.1:4650".into(),
            advertise_addr: String::new(),
            metrics_addr: "127.0.0.1:0".into(),
            leader_ttl_ms: 3_000,
            nack_timeout_ms: 60_000,
            delivery_limit: 3,
            initial_nack_delay_ms: 1_000,
            subsequent_nack_delay_ms: 20_000,
            failed_follow_up_base_ms: 60_000,
            failed_follow_up_jitter_ms: 300_000,
            failed_unblock_interval_ms: 60_000,
            max_dequeue_timeout_ms: 300_000,
            max_txn_ops: 128,
            compaction_interval_ms: 300_000,
            mass_heartbeat_loss_nodes: 10,
            mass_heartbeat_loss_percent: 30,
            mass_heartbeat_loss_grace_ms: 30_000,
            gc: GcConfig::default(),
            store: StoreConfig::default(),
            telemetry: TelemetryConfig::default(),
            tls: caravan_runtime::tls::TlsConfig::default(),
        }
    }
}

/// When the leader collects garbage, and how old terminal objects must be
/// (by their last change) before they go. Nomad's defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GcConfig {
    /// Time between two sweeps, in milliseconds.
    pub interval_ms: u64,
    /// Time between two sweeps of service registrations alone (those of
    /// allocations gone, stopped or lost, or on a node that is down), in
    /// milliseconds: callers are sent to a ghost instance until it goes.
    pub registrations_interval_ms: u64,
    /// Age of a terminal eval (not batch) before it goes, in milliseconds.
    pub eval_threshold_ms: u64,
    /// Age of a terminal batch eval before it goes, in milliseconds.
    pub batch_eval_threshold_ms: u64,
    /// Age of a dead job before it goes, in milliseconds.
    pub job_threshold_ms: u64,
    /// Age of a down node before it goes, in milliseconds.
    pub node_threshold_ms: u64,
    /// Age of a terminal deployment before it goes, in milliseconds.
    pub deployment_threshold_ms: u64,
}

impl Default for GcConfig {
    fn default() -> Self {
        const HOUR: u64 = 3_600_000;
        GcConfig {
            interval_ms: 300_000,
            registrations_interval_ms: 10_000,
            eval_threshold_ms: HOUR,
            batch_eval_threshold_ms: 24 * HOUR,
            job_threshold_ms: 4 * HOUR,
            node_threshold_ms: 24 * HOUR,
            deployment_threshold_ms: HOUR,
        }
    }
}

impl GcConfig {
    /// Time between two sweeps.
    pub fn interval(&self) -> Duration {
        Duration::from_millis(self.interval_ms.max(100))
    }

    /// Time between two sweeps of service registrations.
    pub fn registrations_interval(&self) -> Duration {
        Duration::from_millis(self.registrations_interval_ms.max(100))
    }
}

caravan_runtime::service_config!(EvalBrokerConfig, store);

impl EvalBrokerConfig {
    /// The delivery settings of the queues.
    pub fn queue_config(&self) -> QueueConfig {
        QueueConfig {
            nack_timeout: Duration::from_millis(self.nack_timeout_ms),
            delivery_limit: self.delivery_limit.max(1),
            initial_nack_delay: Duration::from_millis(self.initial_nack_delay_ms),
            subsequent_nack_delay: Duration::from_millis(self.subsequent_nack_delay_ms),
        }
    }

    /// The leadership lease TTL.
    pub fn leader_ttl(&self) -> Duration {
        Duration::from_millis(self.leader_ttl_ms.max(1_000))
    }

    /// How long the follow-up of an eval failed at the delivery limit waits:
    /// the base plus a random share of the jitter.
    pub fn failed_follow_up_wait(&self) -> Duration {
        let jitter = if self.failed_follow_up_jitter_ms == 0 {
            0
        } else {
            rand::random_range(0..=self.failed_follow_up_jitter_ms)
        };
        Duration::from_millis(self.failed_follow_up_base_ms.saturating_add(jitter))
    }

    /// The grace of a mass heartbeat loss.
    pub fn mass_heartbeat_loss_grace(&self) -> Duration {
        Duration::from_millis(self.mass_heartbeat_loss_grace_ms)
    }

    /// How often the store's history is compacted; `None` never.
    pub fn compaction_interval(&self) -> Option<Duration> {
        (self.compaction_interval_ms > 0)
            .then(|| Duration::from_millis(self.compaction_interval_ms.max(100)))
    }

    /// How often plan-failure blocked evals are retried.
    pub fn failed_unblock_interval(&self) -> Duration {
        Duration::from_millis(self.failed_unblock_interval_ms.max(100))
    }

    /// The longest long poll.
    pub fn max_dequeue_timeout(&self) -> Duration {
        Duration::from_millis(self.max_dequeue_timeout_ms)
    }
}

#[cfg(test)]
mod tests {
    use caravan_runtime::config::ConfigLoader;

    use super::*;

    #[test]
    fn defaults_match_nomad() {
        let c = EvalBrokerConfig::default().queue_config();
        assert_eq!(c, QueueConfig::default());
        assert_eq!(c.nack_timeout, Duration::from_secs(60));
        assert_eq!(c.delivery_limit, 3);
        let gc = EvalBrokerConfig::default().gc;
        assert_eq!(gc.interval(), Duration::from_secs(300));
        assert_eq!(gc.eval_threshold_ms, 3_600_000);
        assert_eq!(gc.batch_eval_threshold_ms, 24 * 3_600_000);
        assert_eq!(gc.job_threshold_ms, 4 * 3_600_000);
        assert_eq!(gc.node_threshold_ms, 24 * 3_600_000);
        assert_eq!(gc.deployment_threshold_ms, 3_600_000);
        let wait = EvalBrokerConfig::default().failed_follow_up_wait();
        assert!(wait >= Duration::from_secs(60) && wait <= Duration::from_secs(360));
    }

    #[test]
    fn overrides_reach_the_queue_settings() {
        let conf: EvalBrokerConfig = ConfigLoader::new("eval-broker")
            .with_env(vec![(
                "CARAVAN_EVAL_BROKER__NACK_TIMEOUT_MS".into(),
                "250".into(),
            )])
            .set_all([
                "delivery_limit=5",
                "grpc_addr=127.0.0.1:0",
                "gc.job_threshold_ms=1000",
            ])
            .unwrap()
            .load(&EvalBrokerConfig::default())
            .unwrap();
        assert_eq!(conf.queue_config().nack_timeout, Duration::from_millis(250));
        assert_eq!(conf.delivery_limit, 5);
        assert_eq!(conf.grpc_addr, "127.0.0.1:0");
        assert_eq!(conf.store, StoreConfig::default());
        assert_eq!(conf.gc.job_threshold_ms, 1000);
        assert_eq!(
            conf.gc.eval_threshold_ms, 3_600_000,
            "the rest keep defaults"
        );
    }
}

//! What the gateway records (evals it wrote, heartbeats received) and the
//! cluster as its watch cache sees it (nodes, allocs, evals, jobs and
//! deployments by status), counted at each scrape of `/metrics`.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use caravan_metrics::{IntCounter, IntCounterVec, MetricFamily, Registry};
use caravan_model::NomadName;
use caravan_state::Snapshot;

struct GatewayMetrics {
    evals_created: IntCounterVec,
    heartbeats: IntCounter,
}

static METRICS: LazyLock<GatewayMetrics> = LazyLock::new(|| GatewayMetrics {
    evals_created: caravan_metrics::counter_vec(
        "caravan_gateway_evals_created_total",
        "Evals the gateway wrote with a job registration, deregistration or alloc stop, by trigger.",
        &["triggered_by"],
    ),
    heartbeats: caravan_metrics::counter(
        "caravan_heartbeats_received_total",
        "Client node heartbeats the gateway renewed.",
    ),
});

/// Registers the gateway's metrics in the process registry.
pub fn register() {
    LazyLock::force(&METRICS);
}

/// An eval triggered by `trigger` was written.
pub fn eval_created(trigger: &str) {
    METRICS.evals_created.with_label_values(&[trigger]).inc();
}

/// A node's heartbeat was renewed.
pub fn heartbeat_received() {
    METRICS.heartbeats.inc();
}

/// Counts of objects by status in `snapshot`, as gauges of a registry made
/// for one scrape: the gateway's cache is the cluster's state, and two
/// gateways in one process (tests, `caravan dev` never) each count their own.
pub fn cluster(snapshot: &Snapshot, waiting: i64) -> Vec<MetricFamily> {
    let scrape = Registry::new();
    caravan_metrics::gauge_in(
        &scrape,
        "caravan_gateway_blocking_queries",
        "Blocking queries (reads with an index) waiting for a change or the end of their wait.",
    )
    .set(waiting);
    let by = |name: &str, help: &str, label: &str, counts: BTreeMap<&str, i64>| {
        let gauge = caravan_metrics::gauge_vec_in(&scrape, name, help, &[label]);
        for (value, n) in counts {
            gauge.with_label_values(&[value]).set(n);
        }
    };
    let count = |values: &mut dyn Iterator<Item = &'static str>| {
        let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
        for v in values {
            *counts.entry(v).or_default() += 1;
        }
        counts
    };
    by(
        "caravan_nodes",
        "Client nodes by status, as the gateway's cache holds them.",
        "status",
        count(&mut snapshot.nodes().map(|n| n.status().api_name())),
    );
    caravan_metrics::gauge_in(
        &scrape,
        "caravan_nodes_heartbeating",
        "Client nodes whose heartbeat lease is live.",
    )
    .set(i64::try_from(snapshot.live_heartbeats().count()).unwrap_or(i64::MAX));
    by(
        "caravan_allocs",
        "Allocations by client status, as the gateway's cache holds them.",
        "client_status",
        count(&mut snapshot.allocs().map(|a| a.client_status().api_name())),
    );
    by(
        "caravan_evals",
        "Evaluations by status, as the gateway's cache holds them.",
        "status",
        count(&mut snapshot.evals().map(|e| e.status().api_name())),
    );
    by(
        "caravan_jobs",
        "Jobs by status, as the gateway's cache holds them.",
        "status",
        count(&mut snapshot.jobs().map(|j| j.status().api_name())),
    );
    by(
        "caravan_deployments",
        "Deployments by status, as the gateway's cache holds them.",
        "status",
        count(&mut snapshot.deployments().map(|d| d.status().api_name())),
    );
    scrape.gather()
}

/// Every family this gateway exports: the process registry and the cluster
/// as `snapshot` holds it, by name.
pub fn all(snapshot: &Snapshot, waiting: i64) -> Vec<MetricFamily> {
    let mut families = caravan_metrics::gather();
    families.extend(cluster(snapshot, waiting));
    families.sort_by(|a, b| a.name().cmp(b.name()));
    families
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn every_gateway_metric_is_documented() {
        register();
        caravan_runtime::metrics::register();
        cluster(&Snapshot::new(caravan_state::Tables::new()), 0);
        let wrong = caravan_metrics::undocumented(include_str!("../../../../docs/metrics.md"));
        assert!(wrong.is_empty(), "docs/metrics.md: {wrong:#?}");
    }
}

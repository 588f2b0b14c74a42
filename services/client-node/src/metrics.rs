//! What a client node process records: heartbeats it sent and allocation
//! status updates it reported, over every node it runs (`--simulate N`
//! runs many).

use std::sync::LazyLock;

use caravan_metrics::IntCounterVec;

struct ClientMetrics {
    heartbeats: IntCounterVec,
    alloc_updates: IntCounterVec,
}

static METRICS: LazyLock<ClientMetrics> = LazyLock::new(|| ClientMetrics {
    heartbeats: caravan_metrics::counter_vec(
        "caravan_client_heartbeats_total",
        "Heartbeats this process's nodes sent, by result: ok, or failed (retried before the TTL runs out).",
        &["result"],
    ),
    alloc_updates: caravan_metrics::counter_vec(
        "caravan_client_alloc_updates_total",
        "Allocation status updates this process's nodes sent to the servers, by result: ok or failed.",
        &["result"],
    ),
});

/// Registers the client node's metrics in the process registry.
pub fn register() {
    let metrics = &*METRICS;
    for result in ["ok", "failed"] {
        metrics.heartbeats.with_label_values(&[result]);
        metrics.alloc_updates.with_label_values(&[result]);
    }
}

/// A heartbeat was answered (`ok`) or failed.
pub(crate) fn heartbeat(ok: bool) {
    METRICS.heartbeats.with_label_values(&[result(ok)]).inc();
}

/// `n` allocation updates were sent (`ok`) or failed.
pub(crate) fn alloc_updates(ok: bool, n: usize) {
    METRICS
        .alloc_updates
        .with_label_values(&[result(ok)])
        .inc_by(n as u64);
}

fn result(ok: bool) -> &'static str {
    if ok { "ok" } else { "failed" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_client_metric_is_documented() {
        register();
        caravan_runtime::metrics::register();
        let wrong = caravan_metrics::undocumented(include_str!("../../../docs/metrics.md"));
        assert!(wrong.is_empty(), "docs/metrics.md: {wrong:#?}");
    }

    #[test]
    fn registered_counters_show_before_their_first_event() {
        register();
        let text = caravan_metrics::exposition();
        assert!(
            text.contains("caravan_client_heartbeats_total{result=\"failed\"}"),
            "{text}"
        );
    }
}

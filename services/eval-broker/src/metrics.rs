//! What the broker records: its queues by scheduler type (ready, unacked,
//! delayed, blocked) while it leads, how long evals wait for a worker and
//! how long a worker holds them, nacks, and heartbeats missed.

use std::collections::BTreeMap;
use std::sync::LazyLock;
use std::time::Duration;

use caravan_metrics::{HistogramVec, IntCounter, IntCounterVec, IntGaugeVec};
use caravan_model::now_unix_ns;
use caravan_proto::Evaluation;
use tokio::time::Instant;

use crate::error::BrokerError;
use crate::term::LeaderTerm;

/// How often the queue gauges are refreshed while leading.
const PUBLISH_EVERY: Duration = Duration::from_secs(1);

/// The scheduler types always exported, at 0 when empty, so a dashboard
/// shows a flat line rather than no data.
const SCHEDULERS: &[&str] = &["service", "batch", "system", "sysbatch", "_core"];

struct BrokerMetrics {
    ready: IntGaugeVec,
    unacked: IntGaugeVec,
    delayed: IntGaugeVec,
    blocked: IntGaugeVec,
    wait: HistogramVec,
    schedule: HistogramVec,
    nacks: IntCounterVec,
    heartbeats_missed: IntCounter,
}

static METRICS: LazyLock<BrokerMetrics> = LazyLock::new(|| {
    let by_scheduler =
        |name: &str, help: &str| caravan_metrics::gauge_vec(name, help, &["scheduler"]);
    BrokerMetrics {
        ready: by_scheduler(
            "caravan_broker_ready",
            "Evals ready for a worker in the leading broker, by scheduler type.",
        ),
        unacked: by_scheduler(
            "caravan_broker_unacked",
            "Evals handed to a worker and not yet acked or nacked, by scheduler type.",
        ),
        delayed: by_scheduler(
            "caravan_broker_delayed",
            "Evals waiting for their wait_until or a nack backoff, by scheduler type.",
        ),
        blocked: by_scheduler(
            "caravan_broker_blocked",
            "Blocked evals held until capacity changes, by scheduler type.",
        ),
        wait: caravan_metrics::histogram_vec(
            "caravan_eval_wait_seconds",
            "Time from an eval's creation to its delivery to a worker, by scheduler type.",
            &["scheduler"],
            caravan_metrics::WAIT_BUCKETS,
        ),
        schedule: caravan_metrics::histogram_vec(
            "caravan_eval_schedule_seconds",
            "Time from an eval's delivery to a worker to its ack, by scheduler type.",
            &["scheduler"],
            caravan_metrics::WAIT_BUCKETS,
        ),
        nacks: caravan_metrics::counter_vec(
            "caravan_broker_nacks_total",
            "Deliveries given back by a worker or timed out, by scheduler type.",
            &["scheduler"],
        ),
        heartbeats_missed: caravan_metrics::counter(
            "caravan_heartbeats_missed_total",
            "Nodes whose heartbeat lease expired, as the leading broker saw it.",
        ),
    }
});

/// Registers the broker's metrics in the process registry.
pub fn register() {
    LazyLock::force(&METRICS);
}

/// `eval` was delivered to a worker now.
pub(crate) fn delivered(eval: &Evaluation) {
    let waited = now_unix_ns()
        .saturating_sub(eval.create_time_unix_ns)
        .max(0);
    METRICS
        .wait
        .with_label_values(&[eval.r#type.as_str()])
        .observe(waited as f64 / 1e9);
}

/// An eval of `scheduler` delivered at `since` was acked now.
pub(crate) fn acked(scheduler: &str, since: Instant) {
    METRICS
        .schedule
        .with_label_values(&[scheduler])
        .observe(since.elapsed().as_secs_f64());
}

/// A delivery of an eval of `scheduler` was nacked or timed out.
pub(crate) fn nacked(scheduler: &str) {
    METRICS.nacks.with_label_values(&[scheduler]).inc();
}

/// A node's heartbeat lease expired.
pub(crate) fn heartbeat_missed() {
    METRICS.heartbeats_missed.inc();
}

/// Refreshes the queue gauges from `term` until it stops, then zeroes them:
/// a broker that does not lead holds no queues.
pub(crate) async fn run(term: &LeaderTerm) -> Result<(), BrokerError> {
    let mut tick = tokio::time::interval(PUBLISH_EVERY);
    loop {
        tokio::select! {
            _ = tick.tick() => publish(term),
            _ = term.stop.cancelled() => break,
        }
    }
    let none = BTreeMap::new();
    set_all(&none, &none, &none, &none);
    Ok(())
}

/// Sets the queue gauges from `term`'s queues.
pub(crate) fn publish(term: &LeaderTerm) {
    let (stats, blocked) = {
        let state = term.state.lock();
        (state.queues.stats(), state.blocked.count_by_scheduler())
    };
    set_all(
        &stats.ready_by_scheduler,
        &stats.unacked_by_scheduler,
        &stats.delayed_by_scheduler,
        &blocked,
    );
}

fn set_all(
    ready: &BTreeMap<String, u64>,
    unacked: &BTreeMap<String, u64>,
    delayed: &BTreeMap<String, u64>,
    blocked: &BTreeMap<String, u64>,
) {
    let metrics = &*METRICS;
    for (gauge, counts) in [
        (&metrics.ready, ready),
        (&metrics.unacked, unacked),
        (&metrics.delayed, delayed),
        (&metrics.blocked, blocked),
    ] {
        for scheduler in SCHEDULERS {
            if !counts.contains_key(*scheduler) {
                gauge.with_label_values(&[*scheduler]).set(0);
            }
        }
        for (scheduler, n) in counts {
            gauge
                .with_label_values(&[scheduler.as_str()])
                .set(i64::try_from(*n).unwrap_or(i64::MAX));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn every_broker_metric_is_documented() {
        register();
        caravan_runtime::metrics::register();
        let wrong = caravan_metrics::undocumented(include_str!("../../../docs/metrics.md"));
        assert!(wrong.is_empty(), "docs/metrics.md: {wrong:#?}");
    }

    #[test]
    fn gauges_name_every_scheduler_and_the_counts_given() {
        let ready = BTreeMap::from([("batch".to_string(), 3)]);
        let none = BTreeMap::new();
        set_all(&ready, &none, &none, &none);
        assert_eq!(METRICS.ready.with_label_values(&["batch"]).get(), 3);
        assert_eq!(METRICS.ready.with_label_values(&["service"]).get(), 0);
    }
}

//! The process's metrics: one Prometheus registry that the store, the watch
//! cache, the runtime and every service register into, the catalog of what
//! was registered (name, type, labels, help), and the text exposition that
//! `/metrics` serves.
//!
//! Each crate keeps its metrics in one `LazyLock` static, so a metric is
//! registered once per process however many services run in it (`caravan
//! dev`, tests): a second registration of a name is a bug, reported by
//! [`conflicts`] instead of a panic.

mod catalog;

use std::sync::LazyLock;

pub use catalog::{Entry, Kind, catalog, conflicts, documented_names, undocumented};
pub use prometheus::proto;
pub use prometheus::proto::MetricFamily;
use prometheus::{Encoder, HistogramOpts, Opts, TextEncoder};
pub use prometheus::{
    Histogram, HistogramTimer, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
    Registry,
};

/// The Content-Type of the text exposition format.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Buckets (seconds) for request and step latencies: 0.5 ms to 30 s.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Buckets (seconds) for waits that may last minutes (an eval in a queue, a
/// blocking dequeue): 1 ms to 10 min.
pub const WAIT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];

/// The one registry of this process.
static REGISTRY: LazyLock<Registry> = LazyLock::new(Registry::new);

/// The process's registry.
pub fn registry() -> &'static Registry {
    &REGISTRY
}

/// A counter in the process registry.
pub fn counter(name: &str, help: &str) -> IntCounter {
    let metric =
        IntCounter::with_opts(Opts::new(name, help)).unwrap_or_else(|err| invalid(name, err));
    catalog::register(&REGISTRY, Kind::Counter, name, help, &[], metric)
}

/// A counter with `labels` in the process registry.
pub fn counter_vec(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let metric =
        IntCounterVec::new(Opts::new(name, help), labels).unwrap_or_else(|err| invalid(name, err));
    catalog::register(&REGISTRY, Kind::Counter, name, help, labels, metric)
}

/// A gauge in `registry` (the process's, or one built for a single scrape).
pub fn gauge_in(registry: &Registry, name: &str, help: &str) -> IntGauge {
    let metric =
        IntGauge::with_opts(Opts::new(name, help)).unwrap_or_else(|err| invalid(name, err));
    catalog::register(registry, Kind::Gauge, name, help, &[], metric)
}

/// A gauge in the process registry.
pub fn gauge(name: &str, help: &str) -> IntGauge {
    gauge_in(&REGISTRY, name, help)
}

/// A gauge with `labels` in `registry` (the process's, or one built for a
/// single scrape).
pub fn gauge_vec_in(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let metric =
        IntGaugeVec::new(Opts::new(name, help), labels).unwrap_or_else(|err| invalid(name, err));
    catalog::register(registry, Kind::Gauge, name, help, labels, metric)
}

/// A gauge with `labels` in the process registry.
pub fn gauge_vec(name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    gauge_vec_in(&REGISTRY, name, help, labels)
}

/// A histogram in the process registry.
pub fn histogram(name: &str, help: &str, buckets: &[f64]) -> Histogram {
    let opts = HistogramOpts::new(name, help).buckets(buckets.to_vec());
    let metric = Histogram::with_opts(opts).unwrap_or_else(|err| invalid(name, err));
    catalog::register(&REGISTRY, Kind::Histogram, name, help, &[], metric)
}

/// A histogram with `labels` in the process registry.
pub fn histogram_vec(name: &str, help: &str, labels: &[&str], buckets: &[f64]) -> HistogramVec {
    let opts = HistogramOpts::new(name, help).buckets(buckets.to_vec());
    let metric = HistogramVec::new(opts, labels).unwrap_or_else(|err| invalid(name, err));
    catalog::register(&REGISTRY, Kind::Histogram, name, help, labels, metric)
}

/// A metric definition the library refuses (a bad name or label) is a
/// mistake in the code that defines it, caught by its crate's tests.
fn invalid(name: &str, err: prometheus::Error) -> ! {
    panic!("metric {name} is malformed: {err}")
}

/// Every family of the process registry that has a sample.
pub fn gather() -> Vec<MetricFamily> {
    REGISTRY.gather()
}

/// `families` in the text exposition format.
pub fn encode_text(families: &[MetricFamily]) -> String {
    let mut buf = Vec::new();
    // Encoding into a Vec fails only on a family without samples, which
    // `gather` never returns.
    if let Err(err) = TextEncoder::new().encode(families, &mut buf) {
        return format!("# encoding failed: {err}\n");
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// The process registry in the text exposition format.
pub fn exposition() -> String {
    encode_text(&gather())
}

#[cfg(test)]
mod tests;

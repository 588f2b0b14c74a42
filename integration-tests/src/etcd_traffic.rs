//! What the run cost etcd in requests and bytes, from its own `/metrics`
//! read before the first registration and after the last allocation runs:
//! revisions, puts, txns, ranges, deletes, bytes put, WAL bytes, watch
//! events sent, gRPC bytes in and out, and requests by method, each per
//! placement. Counts do not drift with the machine's load as CPU time does:
//! they are the budget the data flow is held to (docs/benchmarks.md).

use std::collections::BTreeMap;

use crate::HttpApi;
use crate::prom::{label, samples};
use serde::Serialize;

/// The counters read, each summed over its labels, with the name shown.
const COUNTERS: &[(&str, &str)] = &[
    ("etcd_debugging_mvcc_current_revision", "revisions"),
    ("etcd_mvcc_txn_total", "txns"),
    ("etcd_mvcc_put_total", "puts"),
    ("etcd_mvcc_delete_total", "deletes"),
    ("etcd_mvcc_range_total", "ranges"),
    ("etcd_debugging_mvcc_total_put_size_in_bytes", "bytes put"),
    ("etcd_disk_wal_write_bytes_total", "WAL bytes"),
    ("etcd_debugging_mvcc_events_total", "watch events sent"),
    (
        "etcd_network_client_grpc_sent_bytes_total",
        "gRPC bytes sent",
    ),
    (
        "etcd_network_client_grpc_received_bytes_total",
        "gRPC bytes received",
    ),
    ("etcd_server_proposals_committed_total", "raft proposals"),
];

/// One reading of etcd's counters: the [`COUNTERS`] and the unary gRPC
/// requests handled, by method.
#[derive(Clone, Debug, Default)]
pub struct EtcdReading {
    counters: BTreeMap<String, f64>,
    methods: BTreeMap<String, f64>,
}

/// The difference of two readings, per placement.
#[derive(Clone, Debug, Serialize)]
pub struct EtcdTraffic {
    /// The placements divided by.
    pub placements: usize,
    /// Each counter: (name, total over the run, per placement).
    pub counters: Vec<(String, f64, f64)>,
    /// gRPC requests handled by method: (method, total, per placement).
    pub methods: Vec<(String, f64, f64)>,
}

/// Reads etcd's `/metrics` at `endpoint` (`http://host:port`).
pub async fn read(endpoint: &str) -> anyhow::Result<EtcdReading> {
    let addr: std::net::SocketAddr = endpoint
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .map_err(|e| {
            anyhow::anyhow!("etcd endpoint {endpoint:?}: {e} (only plain http is read)")
        })?;
    let text = HttpApi::new(addr).get("/metrics").await?.text();
    Ok(parse(&text))
}

/// The readings of a Prometheus text exposition.
fn parse(text: &str) -> EtcdReading {
    let mut r = EtcdReading::default();
    for (name, labels, value) in samples(text) {
        if let Some((_, shown)) = COUNTERS.iter().find(|(n, _)| *n == name) {
            *r.counters.entry(shown.to_string()).or_default() += value;
        } else if name == "grpc_server_handled_total"
            && let Some(method) = label(labels, "grpc_method")
        {
            *r.methods.entry(method.to_string()).or_default() += value;
        }
    }
    r
}

impl EtcdReading {
    /// What happened between `before` and this reading, per placement.
    pub fn since(&self, before: &EtcdReading, placements: usize) -> EtcdTraffic {
        let per = |d: f64| d / placements.max(1) as f64;
        let diff = |now: &BTreeMap<String, f64>, then: &BTreeMap<String, f64>, k: &str| {
            now.get(k).copied().unwrap_or(0.0) - then.get(k).copied().unwrap_or(0.0)
        };
        EtcdTraffic {
            placements,
            counters: COUNTERS
                .iter()
                .map(|(_, shown)| {
                    let d = diff(&self.counters, &before.counters, shown);
                    (shown.to_string(), d, per(d))
                })
                .collect(),
            methods: self
                .methods
                .keys()
                .map(|m| {
                    let d = diff(&self.methods, &before.methods, m);
                    (m.clone(), d, per(d))
                })
                .filter(|(_, d, _)| *d > 0.0)
                .collect(),
        }
    }
}

impl EtcdTraffic {
    /// Prints the table.
    pub fn print(&self) {
        println!();
        println!("{:<24}{:>14}{:>16}", "etcd", "total", "per placement");
        for (name, total, per) in self.counters.iter().chain(&self.methods) {
            println!("{name:<24}{total:>14.0}{per:>16.2}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_sum_their_labels_and_methods_come_apart() {
        let text = "# HELP x\n\
                    etcd_mvcc_put_total 10\n\
                    etcd_disk_wal_write_bytes_total 4096\n\
                    etcd_debugging_mvcc_events_total 7\n\
                    grpc_server_handled_total{grpc_code=\"OK\",grpc_method=\"Txn\",grpc_service=\"etcdserverpb.KV\",grpc_type=\"unary\"} 5\n\
                    grpc_server_handled_total{grpc_code=\"Unavailable\",grpc_method=\"Txn\",grpc_service=\"etcdserverpb.KV\",grpc_type=\"unary\"} 1\n\
                    grpc_server_handled_total{grpc_code=\"OK\",grpc_method=\"Range\",grpc_service=\"etcdserverpb.KV\",grpc_type=\"unary\"} 2\n";
        let before = parse("etcd_mvcc_put_total 4\n");
        let t = parse(text).since(&before, 2);
        let put = t.counters.iter().find(|c| c.0 == "puts").unwrap();
        assert_eq!((put.1, put.2), (6.0, 3.0));
        let wal = t.counters.iter().find(|c| c.0 == "WAL bytes").unwrap();
        assert_eq!(wal.2, 2048.0);
        assert_eq!(
            t.methods,
            vec![("Range".into(), 2.0, 1.0), ("Txn".into(), 6.0, 3.0)]
        );
    }
}

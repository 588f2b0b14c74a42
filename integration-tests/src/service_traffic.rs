//! What each service process received from its watch and carried over gRPC
//! during a run, from its own `/metrics` read before the first registration
//! and after the last allocation runs: watch events and their bytes by kind
//! of key, and the gRPC calls it served with their request and response
//! bytes by method. Per placement, these are the per-process and per-hop
//! columns of the data-flow budget in docs/benchmarks.md.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::Serialize;

use crate::HttpApi;
use crate::prom::{label, samples};

/// One process's counters at one moment.
#[derive(Clone, Debug, Default)]
pub struct Reading {
    /// Watch events and bytes, by kind of key.
    watch: BTreeMap<String, (f64, f64)>,
    /// gRPC calls served, bytes received and sent, by method; calls made
    /// to a service of the same process under `<method> (in process)`.
    grpc: BTreeMap<String, (f64, f64, f64)>,
}

impl Reading {
    /// The watch events received of `kind` of key (`allocs`, `evals`, …).
    pub fn watch_events(&self, kind: &str) -> f64 {
        self.watch.get(kind).map_or(0.0, |(events, _)| *events)
    }

    /// The gRPC calls of `method` (a path) this process served over the
    /// network, and those it made to a service of its own directly.
    pub fn grpc_calls(&self, method: &str) -> (f64, f64) {
        let calls = |m: &str| self.grpc.get(m).map_or(0.0, |(calls, ..)| *calls);
        (calls(method), calls(&format!("{method} (in process)")))
    }
}

/// Reads the `/metrics` of the process serving them at `addr`.
pub async fn read(addr: SocketAddr) -> anyhow::Result<Reading> {
    let text = HttpApi::new(addr).get("/metrics").await?.text();
    Ok(parse(&text))
}

/// Reads every process of `addrs` (by name); a process that does not
/// answer is left out, with a warning.
pub async fn read_all(addrs: &[(String, SocketAddr)]) -> Vec<(String, Reading)> {
    let mut readings = Vec::with_capacity(addrs.len());
    for (name, addr) in addrs {
        match read(*addr).await {
            Ok(r) => readings.push((name.clone(), r)),
            Err(err) => eprintln!("{name}'s metrics at {addr}: {err:#}"),
        }
    }
    readings
}

fn parse(text: &str) -> Reading {
    let mut r = Reading::default();
    for (name, labels, value) in samples(text) {
        match name {
            "caravan_watch_received_total" | "caravan_watch_received_bytes_total" => {
                let kind = label(labels, "kind").unwrap_or("?").to_string();
                let slot = r.watch.entry(kind).or_default();
                if name == "caravan_watch_received_total" {
                    slot.0 += value;
                } else {
                    slot.1 += value;
                }
            }
            "caravan_grpc_server_calls_total"
            | "caravan_grpc_server_received_bytes_total"
            | "caravan_grpc_server_sent_bytes_total" => {
                let method = label(labels, "method").unwrap_or("?").to_string();
                let slot = r.grpc.entry(method).or_default();
                match name {
                    "caravan_grpc_server_calls_total" => slot.0 += value,
                    "caravan_grpc_server_received_bytes_total" => slot.1 += value,
                    _ => slot.2 += value,
                }
            }
            // Calls to a leader of the same process (`caravan server`):
            // no bytes cross a wire, so only the calls are counted.
            "caravan_grpc_local_calls_total" => {
                let method = label(labels, "method").unwrap_or("?");
                r.grpc
                    .entry(format!("{method} (in process)"))
                    .or_default()
                    .0 += value;
            }
            _ => {}
        }
    }
    r
}

/// One process's traffic over a run, per placement.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ProcessTraffic {
    /// The process, e.g. `api-gateway-1`.
    pub name: String,
    /// Watch events received.
    pub watch_events: f64,
    /// Their key and value bytes.
    pub watch_bytes: f64,
    /// Of those, events of allocations.
    pub watch_alloc_events: f64,
    /// gRPC calls served.
    pub grpc_calls: f64,
    /// Request bytes received.
    pub grpc_received: f64,
    /// Response bytes sent.
    pub grpc_sent: f64,
}

/// One gRPC method's traffic over a run, summed over the processes serving
/// it, per placement.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MethodTraffic {
    /// The method's path.
    pub method: String,
    /// Calls.
    pub calls: f64,
    /// Request bytes.
    pub received: f64,
    /// Response bytes.
    pub sent: f64,
}

/// Every process's and every method's traffic over a run, per placement.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ServiceTraffic {
    /// The placements divided by.
    pub placements: usize,
    /// By process, in start order.
    pub processes: Vec<ProcessTraffic>,
    /// By method, busiest (in bytes) first.
    pub methods: Vec<MethodTraffic>,
    /// What one watch receives by kind of key: (kind, events, bytes), from
    /// the first process with a watch (every service watches the whole
    /// keyspace, so each receives the same).
    pub watch_kinds: Vec<(String, f64, f64)>,
}

impl ServiceTraffic {
    /// The difference of `after` and `before` (by process name), per
    /// placement.
    pub fn between(
        before: &[(String, Reading)],
        after: &[(String, Reading)],
        placements: usize,
    ) -> ServiceTraffic {
        let per = |d: f64| d / placements.max(1) as f64;
        let empty = Reading::default();
        let mut methods: BTreeMap<String, MethodTraffic> = BTreeMap::new();
        let mut processes = Vec::new();
        let mut watch_kinds = Vec::new();
        for (name, now) in after {
            let then = before
                .iter()
                .find(|(n, _)| n == name)
                .map_or(&empty, |(_, r)| r);
            let mut p = ProcessTraffic {
                name: name.clone(),
                ..ProcessTraffic::default()
            };
            let first_watch = watch_kinds.is_empty();
            for (kind, (events, bytes)) in &now.watch {
                let (e0, b0) = then.watch.get(kind).copied().unwrap_or_default();
                p.watch_events += per(events - e0);
                p.watch_bytes += per(bytes - b0);
                if kind == "allocs" {
                    p.watch_alloc_events += per(events - e0);
                }
                if first_watch && events > &e0 {
                    watch_kinds.push((kind.clone(), per(events - e0), per(bytes - b0)));
                }
            }
            for (method, (calls, received, sent)) in &now.grpc {
                let (c0, r0, s0) = then.grpc.get(method).copied().unwrap_or_default();
                let (calls, received, sent) = (per(calls - c0), per(received - r0), per(sent - s0));
                p.grpc_calls += calls;
                p.grpc_received += received;
                p.grpc_sent += sent;
                let m = methods
                    .entry(method.clone())
                    .or_insert_with(|| MethodTraffic {
                        method: method.clone(),
                        ..MethodTraffic::default()
                    });
                m.calls += calls;
                m.received += received;
                m.sent += sent;
            }
            processes.push(p);
        }
        let mut methods: Vec<MethodTraffic> = methods
            .into_values()
            .filter(|m| m.calls > 0.0 || m.received > 0.0 || m.sent > 0.0)
            .collect();
        methods.sort_by(|a, b| (b.received + b.sent).total_cmp(&(a.received + a.sent)));
        ServiceTraffic {
            placements,
            processes,
            methods,
            watch_kinds,
        }
    }

    /// Prints the two tables.
    pub fn print(&self) {
        println!();
        println!(
            "{:<26}{:>12}{:>12}{:>12}{:>12}{:>12}{:>12}",
            "per placement",
            "watch ev",
            "of allocs",
            "watch B",
            "grpc calls",
            "grpc in B",
            "grpc out B"
        );
        for p in &self.processes {
            println!(
                "{:<26}{:>12.2}{:>12.2}{:>12.0}{:>12.3}{:>12.0}{:>12.0}",
                p.name,
                p.watch_events,
                p.watch_alloc_events,
                p.watch_bytes,
                p.grpc_calls,
                p.grpc_received,
                p.grpc_sent
            );
        }
        println!();
        println!(
            "{:<26}{:>12}{:>12}",
            "one watch, per placement", "events", "bytes"
        );
        for (kind, events, bytes) in &self.watch_kinds {
            println!("{kind:<26}{events:>12.3}{bytes:>12.0}");
        }
        println!();
        println!(
            "{:<64}{:>10}{:>10}{:>10}",
            "gRPC method, per placement", "calls", "in B", "out B"
        );
        for m in &self.methods {
            println!(
                "{:<64}{:>10.3}{:>10.0}{:>10.0}",
                m.method, m.calls, m.received, m.sent
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_per_placement_by_process_and_method() {
        let before = parse(
            "caravan_watch_received_total{kind=\"allocs\",prefix=\"/p\"} 10\n\
             caravan_grpc_server_calls_total{method=\"/a/B\"} 1\n",
        );
        let after = parse(
            "caravan_watch_received_total{kind=\"allocs\",prefix=\"/p\"} 30\n\
             caravan_watch_received_total{kind=\"evals\",prefix=\"/p\"} 10\n\
             caravan_watch_received_bytes_total{kind=\"allocs\",prefix=\"/p\"} 2000\n\
             caravan_grpc_server_calls_total{method=\"/a/B\"} 5\n\
             caravan_grpc_server_sent_bytes_total{method=\"/a/B\"} 400\n",
        );
        let other = parse("caravan_grpc_server_calls_total{method=\"/a/B\"} 6\n");
        let t = ServiceTraffic::between(
            &[("gw".into(), before)],
            &[("gw".into(), after), ("new".into(), other)],
            2,
        );
        let gw = &t.processes[0];
        assert_eq!(
            (gw.watch_events, gw.watch_alloc_events, gw.watch_bytes),
            (15.0, 10.0, 1000.0)
        );
        assert_eq!((gw.grpc_calls, gw.grpc_sent), (2.0, 200.0));
        // A process with no earlier reading counts from zero.
        assert_eq!(t.processes[1].grpc_calls, 3.0);
        assert_eq!(t.methods.len(), 1);
        assert_eq!(t.methods[0].calls, 5.0);
        assert_eq!(
            t.watch_kinds,
            vec![("allocs".into(), 10.0, 1000.0), ("evals".into(), 5.0, 0.0)]
        );
    }

    #[test]
    fn calls_within_a_process_are_a_method_of_their_own() {
        let r = parse(
            "caravan_grpc_server_calls_total{method=\"/a/B\"} 2\n\
             caravan_grpc_local_calls_total{method=\"/a/B\"} 7\n",
        );
        assert_eq!(r.grpc.get("/a/B"), Some(&(2.0, 0.0, 0.0)));
        assert_eq!(r.grpc.get("/a/B (in process)"), Some(&(7.0, 0.0, 0.0)));
        assert_eq!(r.grpc_calls("/a/B"), (2.0, 7.0));
    }
}

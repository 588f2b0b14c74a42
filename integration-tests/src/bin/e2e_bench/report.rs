//! Every figure of a run in one serializable report: printed as text, and
//! written as JSON with `--json` so runs can be tabulated.

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::checks::Checks;
use crate::meter::CostReport;

/// The shape of the run, from the flags.
#[derive(Clone, Debug, Serialize)]
pub struct Shape {
    /// Jobs registered.
    pub jobs: usize,
    /// Allocations per job.
    pub count: usize,
    /// Simulated nodes.
    pub nodes: u32,
    /// Task cpu, MHz.
    pub cpu_mhz: i64,
    /// Task memory, MB.
    pub memory_mb: i64,
    /// api-gateway processes.
    pub gateways: usize,
    /// scheduler-worker processes.
    pub worker_replicas: usize,
    /// Workers per scheduler-worker (0: sixteen per core).
    pub workers: usize,
    /// Async threads of each service process (0: one per core).
    pub worker_threads: usize,
    /// Burst: registrations in flight.
    pub concurrency: usize,
    /// Open loop: jobs offered per second (absent for a burst).
    pub rate: Option<f64>,
}

/// Latency percentiles, in milliseconds.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Latency {
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Slowest.
    pub max_ms: f64,
}

impl Latency {
    /// The percentiles of `samples` (sorted here).
    pub fn of(samples: &mut [Duration]) -> Latency {
        samples.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        Latency {
            p50_ms: ms(percentile(samples, 50.0)),
            p99_ms: ms(percentile(samples, 99.0)),
            max_ms: ms(percentile(samples, 100.0)),
        }
    }
}

/// The `p`th percentile (0–100) of sorted durations.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// How the registrations went.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Registration {
    /// Registrations answered.
    pub answered: usize,
    /// Seconds from the first request sent to the last one sent.
    pub sent_s: f64,
    /// Seconds from the first request sent to the last answer.
    pub answered_s: f64,
    /// Jobs sent per second (the achieved offered rate).
    pub sent_per_s: f64,
    /// Jobs answered per second.
    pub answered_per_s: f64,
    /// HTTP round trip of a registration.
    pub http: Latency,
    /// Open loop: ticks that had to wait for an in-flight slot.
    pub waited_for_slot: usize,
}

/// Seconds from the first registration to each stage, when reached.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Stages {
    /// Every registration answered.
    pub registered_s: Option<f64>,
    /// Every register eval complete (seen by the watch).
    pub evals_complete_s: Option<f64>,
    /// Every allocation placed.
    pub placed_s: Option<f64>,
    /// Every allocation running on its node.
    pub running_s: Option<f64>,
}

/// Everything a run measured; what was not reached is absent.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The run's flags.
    pub shape: Shape,
    /// Stopped by a signal before the end.
    pub interrupted: bool,
    /// Seconds the simulated nodes took to be ready.
    pub nodes_ready_s: Option<f64>,
    /// Stage wall times.
    pub stages: Stages,
    /// Registration figures.
    pub registration: Option<Registration>,
    /// Register evals seen complete so far.
    pub evals_complete: usize,
    /// Allocations seen placed so far.
    pub allocs_placed: usize,
    /// Allocations seen running so far.
    pub allocs_running: usize,
    /// Placements per second, first register → all placed.
    pub placed_per_s: Option<f64>,
    /// Placements per second, first register → all running.
    pub running_per_s: Option<f64>,
    /// Eval create time → seen complete by the watch.
    pub eval_latency: Option<Latency>,
    /// Eval create time → the complete eval's modify time (writer's clock).
    pub eval_latency_written: Option<Latency>,
    /// CPU and memory per process.
    pub cost: Option<CostReport>,
    /// etcd's requests and bytes, per placement (the bench's own watch of
    /// every key is one of the watchers counted).
    pub etcd: Option<caravan_integration_tests::etcd_traffic::EtcdTraffic>,
    /// Writes of allocations the bench's watch saw, by what they carried
    /// (`placed`, then the client status), per placement.
    pub alloc_writes: Vec<(String, f64)>,
    /// Each service process's watch events and gRPC traffic, per placement.
    pub traffic: Option<caravan_integration_tests::service_traffic::ServiceTraffic>,
    /// The state in etcd after the run.
    pub checks: Option<Checks>,
}

impl Report {
    /// Writes the report as JSON to `path`.
    pub fn write_json(&self, path: &Path) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(path, text + "\n")
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))
    }

    /// Prints the report as text on stdout.
    pub fn print(&self) {
        let s = &self.shape;
        let want = s.jobs * s.count;
        println!(
            "jobs × count            {} × {} = {want} allocs on {} simulated nodes \
             (task {} MHz, {} MB; {} gateway(s), {} worker replica(s), {})",
            s.jobs,
            s.count,
            s.nodes,
            s.cpu_mhz,
            s.memory_mb,
            s.gateways,
            s.worker_replicas,
            match s.worker_threads {
                0 => "async threads one per core".to_string(),
                n => format!("{n} async thread(s) per process"),
            }
        );
        if self.interrupted {
            println!(
                "INTERRUPTED             {} evals complete, {} placed, {} running so far",
                self.evals_complete, self.allocs_placed, self.allocs_running
            );
        }
        if let Some(r) = &self.registration {
            let mode = match s.rate {
                Some(rate) => format!(
                    "open loop at {rate:.0}/s: sent at {:.1}/s, {} waited for a slot; ",
                    r.sent_per_s, r.waited_for_slot
                ),
                None => String::new(),
            };
            println!(
                "registered              {:.2} s ({mode}{:.0} jobs/s answered; HTTP p50 {:.1} ms, p99 {:.1} ms)",
                r.answered_s, r.answered_per_s, r.http.p50_ms, r.http.p99_ms
            );
        }
        let stage = |name: &str, at: Option<f64>, extra: String| {
            if let Some(at) = at {
                println!("{name:<24}{at:.2} s{extra}");
            }
        };
        stage(
            "all evals complete",
            self.stages.evals_complete_s,
            String::new(),
        );
        let rate = |r: Option<f64>, what: &str| {
            r.map(|r| format!(" ({r:.0} placements/s{what})"))
                .unwrap_or_default()
        };
        stage(
            "all allocs placed",
            self.stages.placed_s,
            rate(self.placed_per_s, ""),
        );
        stage(
            "all allocs running",
            self.stages.running_s,
            rate(self.running_per_s, ", first register → last running"),
        );
        for (name, l) in [
            ("eval latency (watch)", self.eval_latency),
            ("eval latency (written)", self.eval_latency_written),
        ] {
            if let Some(l) = l {
                println!(
                    "{name:<24}p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
                    l.p50_ms, l.p99_ms, l.max_ms
                );
            }
        }
        if let Some(cost) = &self.cost {
            print_cost(cost);
        }
        if !self.alloc_writes.is_empty() {
            println!();
            println!("{:<26}{:>12}", "alloc writes", "per placement");
            for (what, per) in &self.alloc_writes {
                println!("{what:<26}{per:>12.3}");
            }
        }
        if let Some(traffic) = &self.traffic {
            traffic.print();
        }
        if let Some(etcd) = &self.etcd {
            etcd.print();
        }
        if let Some(c) = &self.checks {
            print_checks(c);
        }
    }
}

fn print_cost(cost: &CostReport) {
    println!();
    println!(
        "{:<24}{:>9}{:>9}{:>13}",
        "process", "CPU-s", "share", "peak RSS"
    );
    for p in &cost.processes {
        println!(
            "{:<24}{:>9.2}{:>8.1}%{:>9.1} MiB",
            p.name, p.cpu_s, p.cpu_percent, p.peak_rss_mib
        );
    }
    println!(
        "{:<24}{:>9.2}   → {:.0} µs CPU per placement ({} placements)",
        "total", cost.total_cpu_s, cost.cpu_us_per_placement, cost.placements
    );
    println!(
        "{:<24}{:>9.2}   → {:.0} µs CPU per placement",
        "total without e2e-bench", cost.cluster_cpu_s, cost.cluster_cpu_us_per_placement
    );
    println!();
}

fn print_checks(c: &Checks) {
    let mib = |b: Option<i64>| {
        b.map(|b| format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0)))
            .unwrap_or_else(|| "?".into())
    };
    println!(
        "check                   {} allocs in etcd of {} wanted, {} replacements, \
         {} nodes down, {} over-committed nodes, {} duplicated names",
        c.allocs_in_etcd,
        c.allocs_wanted,
        c.replacements,
        c.nodes_down.len(),
        c.overcommitted.len(),
        c.duplicated.len()
    );
    println!(
        "etcd                    db size {} ({} in use), {} keys in the cluster's prefix",
        mib(c.etcd_db_size_bytes),
        mib(c.etcd_db_in_use_bytes),
        c.keys
    );
    for failure in c.failures() {
        println!("FAILED                  {failure}");
    }
}

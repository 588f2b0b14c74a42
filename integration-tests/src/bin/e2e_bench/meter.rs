//! The cost of a run per process: CPU time between a baseline taken just
//! before the first registration and the last reading, and peak memory.
//! Processes are read every second in the background, so one that exits
//! mid-run still counts with its last reading.

use std::sync::Arc;
use std::time::Duration;

use caravan_integration_tests::ProcessCost;
use parking_lot::Mutex;
use serde::Serialize;

/// The name the benchmark itself is listed under.
pub const BENCH: &str = "e2e-bench";

/// One process's readings.
#[derive(Clone, Debug)]
struct Metered {
    name: String,
    pid: u32,
    baseline: Option<ProcessCost>,
    last: Option<ProcessCost>,
}

/// Reads the cost of a fixed set of processes.
#[derive(Debug)]
pub struct CostMeter {
    processes: Mutex<Vec<Metered>>,
}

/// One row of the cost table.
#[derive(Clone, Debug, Serialize)]
pub struct ProcessRow {
    /// Process name, e.g. `api-gateway-1`.
    pub name: String,
    /// Its pid.
    pub pid: u32,
    /// CPU seconds between the baseline and the last reading.
    pub cpu_s: f64,
    /// Its share of the total CPU, in percent.
    pub cpu_percent: f64,
    /// Peak resident memory, in MiB.
    pub peak_rss_mib: f64,
}

/// The cost table and its totals.
#[derive(Clone, Debug, Serialize)]
pub struct CostReport {
    /// Every metered process, in start order, the benchmark last.
    pub processes: Vec<ProcessRow>,
    /// CPU seconds of every process.
    pub total_cpu_s: f64,
    /// `total_cpu_s` per placement, in microseconds.
    pub cpu_us_per_placement: f64,
    /// CPU seconds of every process but the benchmark (its watch decodes
    /// every event and is not part of the cluster's cost).
    pub cluster_cpu_s: f64,
    /// `cluster_cpu_s` per placement, in microseconds.
    pub cluster_cpu_us_per_placement: f64,
    /// The placements the figures are divided by.
    pub placements: usize,
}

impl CostMeter {
    /// Meters `processes` (name, pid).
    pub fn new(processes: Vec<(String, u32)>) -> Arc<CostMeter> {
        Arc::new(CostMeter {
            processes: Mutex::new(
                processes
                    .into_iter()
                    .map(|(name, pid)| Metered {
                        name,
                        pid,
                        baseline: None,
                        last: None,
                    })
                    .collect(),
            ),
        })
    }

    /// Reads every process still running; one that has exited keeps its
    /// last reading.
    pub fn read_all(&self) {
        let mut processes = self.processes.lock();
        for p in processes.iter_mut() {
            if let Ok(cost) = ProcessCost::read(p.pid) {
                p.last = Some(cost);
            }
        }
    }

    /// Reads every process and makes that the zero of its CPU time.
    pub fn mark_baseline(&self) {
        self.read_all();
        for p in self.processes.lock().iter_mut() {
            p.baseline = p.last;
        }
    }

    /// Reads every process every `every` until dropped (the task holds a
    /// weak reference only).
    pub fn sample_every(self: &Arc<Self>, every: Duration) -> tokio::task::JoinHandle<()> {
        let meter = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(every);
            loop {
                ticker.tick().await;
                let Some(meter) = meter.upgrade() else { return };
                meter.read_all();
            }
        })
    }

    /// The table as of the last reading, dividing by `placements`; `None`
    /// before the baseline.
    pub fn report(&self, placements: usize) -> Option<CostReport> {
        let processes = self.processes.lock();
        let used: Vec<(&Metered, ProcessCost)> = processes
            .iter()
            .filter_map(|p| Some((p, p.last?.since(&p.baseline?))))
            .collect();
        if used.is_empty() {
            return None;
        }
        let total: f64 = used.iter().map(|(_, c)| c.cpu.as_secs_f64()).sum();
        let bench: f64 = used
            .iter()
            .filter(|(p, _)| p.name == BENCH)
            .map(|(_, c)| c.cpu.as_secs_f64())
            .sum();
        let per_placement = |cpu_s: f64| cpu_s * 1e6 / placements.max(1) as f64;
        Some(CostReport {
            processes: used
                .iter()
                .map(|(p, c)| ProcessRow {
                    name: p.name.clone(),
                    pid: p.pid,
                    cpu_s: c.cpu.as_secs_f64(),
                    cpu_percent: if total > 0.0 {
                        100.0 * c.cpu.as_secs_f64() / total
                    } else {
                        0.0
                    },
                    peak_rss_mib: c.peak_rss_bytes as f64 / (1024.0 * 1024.0),
                })
                .collect(),
            total_cpu_s: total,
            cpu_us_per_placement: per_placement(total),
            cluster_cpu_s: total - bench,
            cluster_cpu_us_per_placement: per_placement(total - bench),
            placements,
        })
    }
}

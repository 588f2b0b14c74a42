//! The summary of a run: its shape and seed, the submissions, every fault
//! with its failover time, failover percentiles by kind of fault, the
//! checks, and the failures; printed as a table and written as JSON.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::checks::Checks;
use crate::faults::{Fault, FaultKind};
use crate::run::Settled;
use crate::workload::Submitted;

/// Failover times of one kind of fault, in seconds.
#[derive(Clone, Debug, Serialize)]
pub struct Failovers {
    /// Faults of this kind on a leader.
    pub count: usize,
    /// Median.
    pub p50_s: f64,
    /// 99th percentile.
    pub p99_s: f64,
    /// Slowest.
    pub max_s: f64,
}

impl Failovers {
    fn of(mut times: Vec<f64>) -> Option<Failovers> {
        if times.is_empty() {
            return None;
        }
        times.sort_by(f64::total_cmp);
        let at = |q: f64| {
            let rank = (q * times.len() as f64).ceil() as usize;
            times[rank.clamp(1, times.len()) - 1]
        };
        Some(Failovers {
            count: times.len(),
            p50_s: at(0.50),
            p99_s: at(0.99),
            max_s: times[times.len() - 1],
        })
    }
}

/// Everything a run reports.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// The seed of every random choice.
    pub seed: u64,
    /// Seconds of faults.
    pub duration_s: u64,
    /// Jobs asked for.
    pub jobs: usize,
    /// Batch jobs among them.
    pub batch_jobs: usize,
    /// How the submissions went.
    pub submitted: Submitted,
    /// Seconds from the end of the faults until the checks passed or the
    /// state stopped changing.
    pub settled_s: f64,
    /// How that wait ended.
    pub settled: Settled,
    /// Every fault.
    pub faults: Vec<Fault>,
    /// Failover times by kind of fault.
    pub failovers: BTreeMap<String, Failovers>,
    /// The checks.
    pub checks: Checks,
    /// What went wrong while faulting: services that exited on their own,
    /// restarts that failed, failovers that never came.
    pub problems: Vec<String>,
    /// Every failure; empty for a clean run.
    pub failures: Vec<String>,
}

impl Summary {
    /// The summary of a run; fills in the percentiles and the failures.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        seed: u64,
        duration_s: u64,
        jobs: usize,
        batch_jobs: usize,
        submitted: Submitted,
        settled_s: f64,
        settled: Settled,
        faults: Vec<Fault>,
        checks: Checks,
        problems: Vec<String>,
    ) -> Summary {
        let mut by_kind: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for f in &faults {
            if let Some(t) = f.failover_s {
                by_kind.entry(kind_name(f.kind)).or_default().push(t);
            }
        }
        let all: Vec<f64> = faults
            .iter()
            .filter(|f| matches!(f.kind, FaultKind::KillLeader | FaultKind::FreezeLeader))
            .filter_map(|f| f.failover_s)
            .collect();
        let mut failovers: BTreeMap<String, Failovers> = by_kind
            .into_iter()
            .filter_map(|(k, v)| Failovers::of(v).map(|f| (k, f)))
            .collect();
        if let Some(f) = Failovers::of(all) {
            failovers.insert("kill-or-freeze-leader".into(), f);
        }
        let mut failures = checks.failures();
        failures.extend(problems.iter().cloned());
        failures.extend(
            submitted
                .failed
                .iter()
                .map(|f| format!("submission failed: {f}")),
        );
        Summary {
            seed,
            duration_s,
            jobs,
            batch_jobs,
            submitted,
            settled_s,
            settled,
            faults,
            failovers,
            checks,
            problems,
            failures,
        }
    }

    /// Prints the summary as a table.
    pub fn print(&self) {
        println!(
            "chaos run: seed {}, {} s of faults",
            self.seed, self.duration_s
        );
        let s = &self.submitted;
        println!(
            "jobs: {} ({} batch); registered {}, updated {}, stopped {}, retries {}, failed {} in {:.1} s",
            self.jobs,
            self.batch_jobs,
            s.registered,
            s.updated,
            s.stopped,
            s.retries,
            s.failed.len(),
            s.took_s
        );
        println!("faults:");
        for f in &self.faults {
            let failover = f
                .failover_s
                .map(|t| format!("failover {t:.2} s"))
                .unwrap_or_default();
            println!(
                "  {:>6.1} s  {:<14} {:<32} {failover}",
                f.at_s,
                kind_name(f.kind),
                f.target
            );
        }
        println!("failover (s):    count    p50    p99    max");
        for (kind, f) in &self.failovers {
            println!(
                "  {kind:<22} {:>4} {:>6.2} {:>6.2} {:>6.2}",
                f.count, f.p50_s, f.p99_s, f.max_s
            );
        }
        let c = &self.checks;
        println!(
            "settling: {:?} after {:.1} s{}",
            self.settled,
            self.settled_s,
            if self.settled == Settled::StillDraining {
                " (the failures below include work still queued)"
            } else {
                ""
            }
        );
        println!(
            "checks: {} evals, {} allocs; lost evals {}, blocked jobs {}, jobs not at desired state {}, \
             over-committed nodes {}, duplicate alloc names {}, batch ran once {}, never {}, more than once {}; \
             service registrations {}, without a live alloc {}",
            c.evals,
            c.allocs,
            c.lost_evals.len(),
            c.blocked_jobs.len(),
            c.jobs_not_at_desired_state.len(),
            c.overcommitted.len(),
            c.duplicated.len(),
            c.batch_ran_once,
            c.batch_never_ran.len(),
            c.batch_ran_more_than_once.len(),
            c.registrations,
            c.ghost_registrations.len()
        );
        if self.failures.is_empty() {
            println!("PASS");
        } else {
            println!("FAIL: {} failures", self.failures.len());
            for f in &self.failures {
                println!("  {f}");
            }
        }
    }

    /// Writes the summary as JSON to `path`.
    pub fn write_json(&self, path: &Path) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(path, text + "\n")
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))
    }
}

fn kind_name(kind: FaultKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_else(|| format!("{kind:?}"))
}

//! The chaos run: a three-member etcd cluster, two or more replicas of every
//! service, real `raw_exec` client nodes and simulated ones; service and
//! batch jobs submitted (some updated, some stopped again) while processes
//! are SIGKILLed and restarted, leaders frozen with SIGSTOP and etcd members
//! taken away. Then, once the cluster is quiet, the invariants are checked
//! straight from etcd (no lost eval, every job at its desired state, no node
//! over-committed, no duplicate alloc names, every batch task ran exactly
//! once by its side effect) and every failover is reported. Exits non-zero
//! when any check fails.

mod checks;
mod faults;
mod leaders;
mod report;
mod run;
mod workload;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

/// The run's processes are many small ones; mimalloc, as in the services.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Flags of `chaos-bench`.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "chaos-bench",
    about = "Caravan under faults: jobs submitted while processes and etcd members die"
)]
pub struct Args {
    /// Seconds of faults and submissions.
    #[arg(long, default_value_t = 300)]
    duration: u64,
    /// Jobs to register over the run (service and batch).
    #[arg(long, default_value_t = 10_000)]
    jobs: usize,
    /// Seed of every random choice (jobs and faults); a fresh one when not
    /// given. Printed either way, to replay a run.
    #[arg(long)]
    seed: Option<u64>,
    /// Replicas of every service (gateways, brokers, appliers,
    /// deployment-watchers, scheduler-workers).
    #[arg(long, default_value_t = 2)]
    replicas: usize,
    /// Run each replica of the eval-broker, plan-applier,
    /// deployment-watcher and scheduler-worker together as one `caravan
    /// server` process (a kill or freeze then takes all four at once).
    #[arg(long)]
    server: bool,
    /// Real client nodes, running the batch jobs' `raw_exec` tasks.
    #[arg(long, default_value_t = 3)]
    real_clients: usize,
    /// Simulated client nodes (mock driver), running the service jobs.
    #[arg(long, default_value_t = 40)]
    simulated_nodes: u32,
    /// Client-node processes the simulated nodes are spread over.
    #[arg(long, default_value_t = 2)]
    simulated_processes: u32,
    /// Registrations in flight at once.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Seconds between two SIGKILLs of a process.
    #[arg(long, default_value_t = 10)]
    kill_every: u64,
    /// Seconds between two SIGSTOPs of a leader.
    #[arg(long, default_value_t = 30)]
    freeze_every: u64,
    /// Seconds a leader stays SIGSTOPped.
    #[arg(long, default_value_t = 15)]
    freeze_for: u64,
    /// Seconds between two etcd member faults.
    #[arg(long, default_value_t = 30)]
    etcd_every: u64,
    /// Seconds an etcd member stays down.
    #[arg(long, default_value_t = 10)]
    etcd_down_for: u64,
    /// Seconds to wait for the cluster to settle after the faults.
    #[arg(long, default_value_t = 300)]
    settle_timeout: u64,
    /// Log filter of every service.
    #[arg(long, default_value = "info")]
    log_filter: String,
    /// Keep the logs and etcd's data on disk afterwards.
    #[arg(long)]
    keep: bool,
    /// Also write the summary as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

impl Args {
    fn duration(&self) -> Duration {
        Duration::from_secs(self.duration)
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(err) => {
            eprintln!("chaos-bench: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run::run(args.clone())) {
        Ok(summary) => {
            summary.print();
            if let Some(path) = &args.json
                && let Err(err) = summary.write_json(path)
            {
                eprintln!("chaos-bench: {err:#}");
                return ExitCode::FAILURE;
            }
            if summary.failures.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(err) => {
            eprintln!("chaos-bench: {err:#}");
            ExitCode::FAILURE
        }
    }
}

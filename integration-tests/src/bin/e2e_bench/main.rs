//! The end-to-end benchmark: real service binaries on etcd (api-gateways, an
//! eval-broker, a plan-applier, scheduler-workers, a deployment-watcher, and
//! a client-node simulating the nodes), each with the defaults a user gets
//! unless a flag says otherwise, job registrations over the HTTP API (a burst, or
//! an open loop at a fixed rate), and what a watch of the cluster's keys
//! sees: stage times from the first register to every allocation running on
//! its node, eval latency (an eval's create time to the moment the watch sees
//! it complete), what every process cost in CPU and memory, and what etcd
//! holds afterwards. Exits non-zero when a node went down or an allocation
//! was replaced, over-committed or duplicated, or when interrupted.

mod checks;
mod log_digest;
mod meter;
mod register;
mod report;
mod run;
mod watch;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use caravan_integration_tests::ClusterState;
use clap::Parser;
use parking_lot::Mutex;
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::checks::Checks;
use crate::meter::CostMeter;
use crate::register::Registered;
use crate::report::{Latency, Registration, Report, Shape, Stages};
use crate::watch::Seen;

/// The bench decodes every change of the cluster; mimalloc, as in the
/// services.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Flags of `e2e-bench`.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "e2e-bench",
    about = "Caravan end to end: jobs registered → allocs running, and what it cost"
)]
pub struct Args {
    /// etcd endpoint(s), comma-separated; defaults to CARAVAN_TEST_ETCD.
    /// Without either, the bench starts a throwaway etcd of its own.
    #[arg(long, env = "CARAVAN_TEST_ETCD")]
    etcd: Option<String>,
    /// The pid of the etcd given with --etcd, to count its cost too.
    #[arg(long)]
    etcd_pid: Option<u32>,
    /// Jobs to register.
    #[arg(long, default_value_t = 1000)]
    jobs: usize,
    /// Allocations per job.
    #[arg(long, default_value_t = 10)]
    count: usize,
    /// Simulated client nodes.
    #[arg(long, default_value_t = 500)]
    nodes: u32,
    /// The task's cpu, in MHz. At the default, a simulated node (16 GHz)
    /// holds 320 allocations, so the C1M shape (1,000,000 on 5,000 nodes)
    /// fits with room to spare.
    #[arg(long, default_value_t = 50)]
    cpu: i64,
    /// The task's memory, in MB (a simulated node has 32 GiB).
    #[arg(long, default_value_t = 32)]
    memory: i64,
    /// api-gateway processes; registrations are spread over them
    /// round-robin and the client-node talks to all of them.
    #[arg(long, default_value_t = 1)]
    gateways: usize,
    /// scheduler-worker processes.
    #[arg(long, default_value_t = 1)]
    worker_replicas: usize,
    /// Scheduler workers in each scheduler-worker process (0: its default,
    /// sixteen per core, at most four large evaluations per core at once).
    #[arg(long, default_value_t = 0)]
    workers: usize,
    /// Async threads of every service process (`runtime.worker_threads`;
    /// 0, the default: each service's own default, one per core, as a user
    /// gets it). Earlier runs of this bench used one each; on 2026-11-27 one
    /// each was not the cheaper setting (docs/benchmarks.md).
    #[arg(long, default_value_t = 0)]
    worker_threads: usize,
    /// Run the eval-broker, plan-applier, deployment-watcher and one
    /// scheduler-worker in one `caravan server` process (one store
    /// connection, one watch cache) instead of a process each; further
    /// worker replicas still run alone.
    #[arg(long)]
    server: bool,
    /// Give every group a `service` block (provider nomad, no check), which
    /// each running alloc registers: the cost of service discovery.
    #[arg(long)]
    service: bool,
    /// Burst: registrations in flight at once.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Open loop: register the jobs at this many per second instead of in a
    /// burst, whatever the cluster's pace.
    #[arg(long)]
    rate: Option<f64>,
    /// Open loop: registrations unanswered at once before the schedule
    /// waits (and counts the wait).
    #[arg(long, default_value_t = 256)]
    max_in_flight: usize,
    /// Log filter of every service.
    #[arg(long, default_value = "info")]
    log_filter: String,
    /// An eval-broker setting, `KEY=VALUE` (repeatable), e.g.
    /// `compaction_interval_ms=10000` for a soak against a small etcd quota.
    #[arg(long = "broker-set", value_parser = parse_setting)]
    broker_settings: Vec<(String, String)>,
    /// An api-gateway setting, `KEY=VALUE` (repeatable), e.g.
    /// `min_heartbeat_ttl_ms=30000`.
    #[arg(long = "gateway-set", value_parser = parse_setting)]
    gateway_settings: Vec<(String, String)>,
    /// The simulated nodes send heartbeats to the gateways' gRPC address,
    /// beside their alloc streams and status updates, instead of to the
    /// gateways' heartbeat listeners.
    #[arg(long)]
    heartbeats_on_grpc_addr: bool,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 900)]
    timeout_secs: u64,
    /// Keep the cluster's keys in etcd and its logs on disk afterwards.
    #[arg(long)]
    keep: bool,
    /// Also write every figure as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// A `KEY=VALUE` setting.
fn parse_setting(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("{s:?} is not KEY=VALUE")),
    }
}

impl Args {
    /// The etcd endpoints given, if any.
    fn etcd_endpoints(&self) -> Option<Vec<String>> {
        let list: Vec<String> = self
            .etcd
            .as_deref()?
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(String::from)
            .collect();
        (!list.is_empty()).then_some(list)
    }

    fn want_allocs(&self) -> usize {
        self.jobs * self.count
    }

    /// The settings every service process gets: its log filter and, unless
    /// 0, its async threads.
    fn common_settings(&self) -> Vec<(&'static str, String)> {
        let mut settings = vec![("telemetry.log_filter", self.log_filter.clone())];
        if self.worker_threads > 0 {
            settings.push(("runtime.worker_threads", self.worker_threads.to_string()));
        }
        settings
    }
}

/// What the run has measured so far, shared with the signal path so an
/// interrupted run still reports it.
#[derive(Default)]
pub struct Progress {
    /// How long the simulated nodes took to be ready.
    pub nodes_ready: Option<std::time::Duration>,
    /// The first registration.
    pub t0: Option<Instant>,
    /// How the registrations went, once all are answered.
    pub registered: Option<Registered>,
    /// The processes' cost.
    pub meter: Option<Arc<CostMeter>>,
    /// What the run cost etcd in requests and bytes.
    pub etcd: Option<caravan_integration_tests::etcd_traffic::EtcdTraffic>,
    /// What each service process received and carried.
    pub traffic: Option<caravan_integration_tests::service_traffic::ServiceTraffic>,
    /// The state after the run.
    pub checks: Option<Checks>,
    /// The cluster's keys, when they live in an etcd that outlives the run.
    pub purge: Option<ClusterState>,
}

/// [`Progress`] and the watch's [`Seen`], for the run and the signal path.
#[derive(Default)]
pub struct Shared {
    /// Set by the run as it goes.
    pub progress: Mutex<Progress>,
    /// Set by the watch.
    pub seen: Arc<Mutex<Seen>>,
}

/// SIGINT and SIGTERM.
struct Signals {
    term: Signal,
    int: Signal,
}

impl Signals {
    fn install() -> std::io::Result<Signals> {
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}

async fn bench(args: Args) -> ExitCode {
    let mut signals = match Signals::install() {
        Ok(s) => s,
        Err(err) => {
            eprintln!("e2e-bench: cannot install signal handlers: {err}");
            return ExitCode::FAILURE;
        }
    };
    let shared = Arc::new(Shared::default());
    let mut running = Box::pin(run::run(args.clone(), shared.clone()));
    let finished = tokio::select! {
        finished = &mut running => Some(finished),
        name = signals.next() => {
            eprintln!("e2e-bench: {name}: stopping the cluster (again to exit at once)");
            None
        }
    };
    let interrupted = finished.is_none();
    if interrupted {
        let meter = shared.progress.lock().meter.clone();
        if let Some(meter) = meter {
            // The last reading, while the services still run.
            meter.read_all();
        }
        tokio::spawn(async move {
            let name = signals.next().await;
            eprintln!("e2e-bench: {name} again: exiting now");
            // The children get SIGTERM from their parent-death signal.
            std::process::exit(130);
        });
        // Stops the cluster gracefully, then the bench's own etcd.
        drop(running);
        let purge = shared.progress.lock().purge.take();
        if let Some(state) = purge.filter(|_| !args.keep)
            && let Err(err) = state.purge().await
        {
            eprintln!("e2e-bench: purging the cluster's keys: {err:#}");
        }
    }
    let report = compose(&args, &shared, interrupted);
    report.print();
    if let Some(path) = &args.json
        && let Err(err) = report.write_json(path)
    {
        eprintln!("e2e-bench: {err:#}");
        return ExitCode::FAILURE;
    }
    match finished {
        Some(Ok(())) => {
            let failures = report.checks.as_ref().map(Checks::failures);
            if failures.is_some_and(|f| f.is_empty()) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Some(Err(err)) => {
            eprintln!("e2e-bench: {err:#}");
            ExitCode::FAILURE
        }
        None => ExitCode::from(130),
    }
}

/// Every figure measured so far.
fn compose(args: &Args, shared: &Shared, interrupted: bool) -> Report {
    let p = shared.progress.lock();
    let s = shared.seen.lock();
    let since_t0 = |at: Option<Instant>| Some(at?.checked_duration_since(p.t0?)?.as_secs_f64());
    let want = args.want_allocs();
    let stages = Stages {
        registered_s: p.registered.as_ref().map(|r| r.answered_in.as_secs_f64()),
        evals_complete_s: since_t0(s.all_evals_at),
        placed_s: since_t0(s.all_placed_at),
        running_s: since_t0(s.all_running_at),
    };
    let per_s = |n: usize, secs: f64| n as f64 / secs.max(f64::MIN_POSITIVE);
    let registration = p.registered.as_ref().map(|r| {
        let mut took = r.took.clone();
        Registration {
            answered: took.len(),
            sent_s: r.sent_in.as_secs_f64(),
            answered_s: r.answered_in.as_secs_f64(),
            sent_per_s: per_s(took.len(), r.sent_in.as_secs_f64()),
            answered_per_s: per_s(took.len(), r.answered_in.as_secs_f64()),
            http: Latency::of(&mut took),
            waited_for_slot: r.waited_for_slot,
        }
    });
    let mut observed: Vec<_> = s.evals_done.values().map(|v| v.0).collect();
    let mut written: Vec<_> = s.evals_done.values().map(|v| v.1).collect();
    let latency = |v: &mut Vec<_>| (!v.is_empty()).then(|| Latency::of(v));
    // An unfinished run is charged for what it placed so far.
    let placements = if s.all_placed_at.is_some() {
        want
    } else {
        s.placed.len()
    };
    Report {
        shape: Shape {
            jobs: args.jobs,
            count: args.count,
            nodes: args.nodes,
            cpu_mhz: args.cpu,
            memory_mb: args.memory,
            gateways: args.gateways,
            worker_replicas: args.worker_replicas,
            worker_threads: args.worker_threads,
            workers: args.workers,
            concurrency: args.concurrency,
            rate: args.rate,
        },
        interrupted,
        nodes_ready_s: p.nodes_ready.map(|d| d.as_secs_f64()),
        stages,
        registration,
        evals_complete: s.evals_done.len(),
        allocs_placed: s.placed.len(),
        allocs_running: s.running.len(),
        placed_per_s: stages.placed_s.map(|t| per_s(want, t)),
        running_per_s: stages.running_s.map(|t| per_s(want, t)),
        eval_latency: latency(&mut observed),
        eval_latency_written: latency(&mut written),
        cost: p.meter.as_ref().and_then(|m| m.report(placements)),
        etcd: p.etcd.clone(),
        traffic: p.traffic.clone(),
        alloc_writes: s
            .alloc_writes
            .iter()
            .map(|((status, health), n)| {
                (
                    format!("{status}{health}"),
                    *n as f64 / placements.max(1) as f64,
                )
            })
            .collect(),
        checks: p.checks.clone(),
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
            eprintln!("e2e-bench: {err}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(bench(args))
}

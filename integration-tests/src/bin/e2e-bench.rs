//! The end-to-end benchmark: real service binaries on etcd (one gateway,
//! eval-broker, plan-applier and scheduler-worker each, and a client-node
//! simulating the nodes), a burst of job registrations over the HTTP API, and
//! what a watch of the cluster's keys sees: placements per second from the
//! first register to every allocation running on its node, and eval latency
//! (an eval's create time to the moment the watch sees it complete).

use std::collections::{HashMap, HashSet};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use caravan_integration_tests::state::is_live;
use caravan_integration_tests::{Cluster, HttpApi, jobs};
use caravan_proto::{AllocClientStatus, Allocation, EvalStatus, Evaluation};
use caravan_state::{Keyspace, StateKey, decode};
use caravan_store::{EventKind, Store};
use clap::Parser;
use futures::StreamExt;
use parking_lot::Mutex;
use tokio::sync::Notify;

/// Flags of `e2e-bench`.
#[derive(Debug, Parser)]
#[command(
    name = "e2e-bench",
    about = "Caravan end to end: jobs registered → allocs running"
)]
struct Args {
    /// etcd endpoint(s), comma-separated; defaults to CARAVAN_TEST_ETCD.
    #[arg(long, env = "CARAVAN_TEST_ETCD")]
    etcd: String,
    /// Jobs to register.
    #[arg(long, default_value_t = 1000)]
    jobs: usize,
    /// Allocations per job.
    #[arg(long, default_value_t = 10)]
    count: usize,
    /// Simulated client nodes.
    #[arg(long, default_value_t = 500)]
    nodes: u32,
    /// Registrations in flight at once.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Scheduler workers in the one scheduler-worker replica (0: its
    /// default, one per core).
    #[arg(long, default_value_t = 0)]
    workers: usize,
    /// Log filter of every service.
    #[arg(long, default_value = "info")]
    log_filter: String,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 900)]
    timeout_secs: u64,
    /// Keep the cluster's keys in etcd and its logs on disk afterwards.
    #[arg(long)]
    keep: bool,
}

/// What the watch has seen so far.
#[derive(Default)]
struct Seen {
    /// Register eval id → (observed, writer-side) latency.
    evals_done: HashMap<String, (Duration, Duration)>,
    placed: HashSet<String>,
    running: HashSet<String>,
    all_evals_at: Option<Instant>,
    all_placed_at: Option<Instant>,
    all_running_at: Option<Instant>,
}

fn now_unix_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn since_ns(from: i64, to: i64) -> Duration {
    Duration::from_nanos(u64::try_from(to.saturating_sub(from)).unwrap_or(0))
}

/// Follows evals and allocs through one etcd watch from `start` on.
async fn watch(
    store: Arc<dyn Store>,
    keys: Keyspace,
    start: i64,
    want_evals: usize,
    want_allocs: usize,
    seen: Arc<Mutex<Seen>>,
    done: Arc<Notify>,
) -> anyhow::Result<()> {
    let mut w = store.watch(keys.root(), start).await?;
    while let Some(batch) = w.stream.next().await {
        let batch = batch.context("watch")?;
        let at = Instant::now();
        let at_ns = now_unix_ns();
        let mut seen = seen.lock();
        for ev in batch.events.iter().filter(|e| e.kind == EventKind::Put) {
            match keys.parse(&ev.kv.key) {
                Ok(StateKey::Eval(_)) => {
                    let e: Evaluation = decode(&ev.kv)?;
                    if e.triggered_by == "job-register" && e.status() == EvalStatus::Complete {
                        let observed = since_ns(e.create_time_unix_ns, at_ns);
                        let written = since_ns(e.create_time_unix_ns, e.modify_time_unix_ns);
                        seen.evals_done.entry(e.id).or_insert((observed, written));
                    }
                }
                Ok(StateKey::Alloc(_)) => {
                    let a: Allocation = decode(&ev.kv)?;
                    if is_live(&a) {
                        seen.placed.insert(a.id.clone());
                    }
                    if is_live(&a) && a.client_status() == AllocClientStatus::Running {
                        seen.running.insert(a.id);
                    }
                }
                _ => {}
            }
        }
        if seen.all_evals_at.is_none() && seen.evals_done.len() >= want_evals {
            seen.all_evals_at = Some(at);
        }
        if seen.all_placed_at.is_none() && seen.placed.len() >= want_allocs {
            seen.all_placed_at = Some(at);
        }
        if seen.all_running_at.is_none() && seen.running.len() >= want_allocs {
            seen.all_running_at = Some(at);
        }
        if seen.all_evals_at.is_some() && seen.all_running_at.is_some() {
            done.notify_one();
            return Ok(());
        }
    }
    anyhow::bail!("the watch ended")
}

/// The `p`th percentile (0–100) of sorted durations.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// Registers `args.jobs` jobs with `args.concurrency` in flight; returns the
/// HTTP round trip of each.
async fn register_all(http: &HttpApi, args: &Args) -> anyhow::Result<Vec<Duration>> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..args.concurrency.max(1) {
        let (http, next) = (http.clone(), next.clone());
        let (total, count) = (args.jobs, args.count as i64);
        tasks.push(tokio::spawn(async move {
            let mut took = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    return anyhow::Ok(took);
                }
                let job =
                    jobs::service_job(&format!("bench-{i:05}"), count, jobs::mock_task(100, 64));
                let start = Instant::now();
                http.put_json("/v1/jobs", &job).await?.ok_json()?;
                took.push(start.elapsed());
            }
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await??);
    }
    Ok(all)
}

async fn run(args: Args) -> anyhow::Result<()> {
    let endpoints: Vec<String> = args
        .etcd
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(String::from)
        .collect();
    let mut c = Cluster::on_etcd("e2e-bench", endpoints, false).await?;
    let log = [("telemetry.log_filter", args.log_filter.as_str())];
    c.start_gateway(&log).await?;
    c.start_broker(&log).await?;
    c.start_applier(&log).await?;
    let workers = args.workers.to_string();
    let mut worker_settings = log.to_vec();
    if args.workers > 0 {
        worker_settings.push(("workers", workers.as_str()));
    }
    c.start_worker(&worker_settings).await?;
    c.wait_leader(caravan_integration_tests::Service::EvalBroker)
        .await?;
    c.wait_leader(caravan_integration_tests::Service::PlanApplier)
        .await?;
    let started = Instant::now();
    c.start_simulated_clients(args.nodes, &log).await?;
    eprintln!(
        "{} simulated nodes ready in {:.1} s; prefix {}, logs in {}",
        args.nodes,
        started.elapsed().as_secs_f64(),
        c.prefix(),
        c.dir().display()
    );

    let want_allocs = args.jobs * args.count;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let done = Arc::new(Notify::new());
    let store = c.state.store().clone();
    let start_rev = store.current_revision().await? + 1;
    let watcher = tokio::spawn(watch(
        store.clone(),
        c.state.keys().clone(),
        start_rev,
        args.jobs,
        want_allocs,
        seen.clone(),
        done.clone(),
    ));

    let http = c.http()?;
    let t0 = Instant::now();
    let register_times = register_all(&http, &args).await?;
    let registered = t0.elapsed();
    eprintln!(
        "{} jobs registered in {:.2} s",
        args.jobs,
        registered.as_secs_f64()
    );

    let deadline = Duration::from_secs(args.timeout_secs);
    let mut last_report = Instant::now();
    loop {
        tokio::select! {
            () = done.notified() => break,
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        if watcher.is_finished() {
            break;
        }
        let exited = c.exited();
        if !exited.is_empty() {
            anyhow::bail!("services exited: {exited:?}\n{}", c.logs());
        }
        let s = seen.lock();
        if t0.elapsed() > deadline {
            anyhow::bail!(
                "gave up after {deadline:?}: {} evals complete, {} allocs placed, {} running\n{}",
                s.evals_done.len(),
                s.placed.len(),
                s.running.len(),
                c.logs()
            );
        }
        if last_report.elapsed() >= Duration::from_secs(5) {
            eprintln!(
                "{:>6.1} s: {} evals complete, {} placed, {} running",
                t0.elapsed().as_secs_f64(),
                s.evals_done.len(),
                s.placed.len(),
                s.running.len()
            );
            last_report = Instant::now();
        }
    }
    if watcher.is_finished() {
        watcher.await??;
    }

    let (all_evals, all_placed, all_running, mut observed, mut written) = {
        let s = seen.lock();
        let (Some(e), Some(p), Some(r)) = (s.all_evals_at, s.all_placed_at, s.all_running_at)
        else {
            anyhow::bail!("the watch stopped before the run finished");
        };
        let observed: Vec<Duration> = s.evals_done.values().map(|v| v.0).collect();
        let written: Vec<Duration> = s.evals_done.values().map(|v| v.1).collect();
        (e, p, r, observed, written)
    };
    observed.sort();
    written.sort();
    let mut reg = register_times;
    reg.sort();
    let run_s = (all_running - t0).as_secs_f64();
    let placed_s = (all_placed - t0).as_secs_f64();
    println!(
        "jobs × count            {} × {} = {want_allocs} allocs on {} simulated nodes",
        args.jobs, args.count, args.nodes
    );
    println!(
        "registered              {:.2} s ({:.0} jobs/s; HTTP p50 {}, p99 {})",
        registered.as_secs_f64(),
        args.jobs as f64 / registered.as_secs_f64(),
        ms(percentile(&reg, 50.0)),
        ms(percentile(&reg, 99.0))
    );
    println!(
        "all evals complete      {:.2} s",
        (all_evals - t0).as_secs_f64()
    );
    println!(
        "all allocs placed       {placed_s:.2} s ({:.0} placements/s)",
        want_allocs as f64 / placed_s
    );
    println!(
        "all allocs running      {run_s:.2} s ({:.0} placements/s, first register → last running)",
        want_allocs as f64 / run_s
    );
    println!(
        "eval latency (watch)    p50 {}, p99 {}, max {}",
        ms(percentile(&observed, 50.0)),
        ms(percentile(&observed, 99.0)),
        ms(percentile(&observed, 100.0))
    );
    println!(
        "eval latency (written)  p50 {}, p99 {}, max {}",
        ms(percentile(&written, 50.0)),
        ms(percentile(&written, 99.0)),
        ms(percentile(&written, 100.0))
    );

    let allocs = c.state.allocs().await?;
    let over =
        caravan_integration_tests::state::overcommitted_nodes(&c.state.nodes().await?, &allocs);
    let dups = caravan_integration_tests::state::duplicated_allocs(&allocs);
    println!(
        "check                   {} allocs, {} over-committed nodes, {} duplicated names",
        allocs.len(),
        over.len(),
        dups.len()
    );
    c.shutdown();
    if args.keep {
        eprintln!(
            "kept prefix {} and logs in {}",
            c.prefix(),
            c.dir().display()
        );
        c.keep_files();
    } else {
        c.state.purge().await?;
    }
    Ok(())
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
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("e2e-bench: {err:#}");
            ExitCode::FAILURE
        }
    }
}

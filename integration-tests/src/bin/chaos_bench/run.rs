//! One chaos run: the etcd cluster and the services, the submissions and
//! the faults side by side, the graceful resigns, the wait for the cluster
//! to settle, and the checks.

use std::sync::Arc;
use std::time::{Duration, Instant};

use caravan_integration_tests::{Cluster, EtcdCluster, HttpApi, Service};
use rand::SeedableRng;
use rand_pcg::Pcg64;

use crate::Args;
use crate::checks::Checks;
use crate::faults::Chaos;
use crate::leaders::{self, ELECTED};
use crate::report::Summary;
use crate::workload::{self, Kind, REAL_NODE_PREFIX, Workload};

/// How often the state is read while waiting for it to settle.
const SETTLE_POLL: Duration = Duration::from_secs(2);
/// How long the same checks may keep failing before the run stops waiting
/// and reports them.
const STUCK_FOR: Duration = Duration::from_secs(45);

/// The processes of a run. The cluster is a field before etcd so that,
/// dropped, the services stop while etcd is still there for them.
struct Harness {
    cluster: Cluster,
    etcd: EtcdCluster,
}

/// Runs the chaos run and sums it up.
pub async fn run(args: Args) -> anyhow::Result<Summary> {
    let seed = args.seed.unwrap_or_else(fresh_seed);
    eprintln!("chaos-bench: seed {seed} (--seed {seed} replays the run's choices)");
    let mut rng = Pcg64::seed_from_u64(seed);

    let etcd = EtcdCluster::start(3).await?;
    eprintln!(
        "etcd cluster at {} (pids {:?}, data in {})",
        etcd.endpoints_joined(),
        etcd.pids(),
        etcd.dir().display()
    );
    let cluster = Cluster::on_etcd("chaos", etcd.endpoints(), false).await?;
    let mut h = Harness { cluster, etcd };
    start_services(&mut h.cluster, &args).await?;
    eprintln!(
        "services up; prefix {}, logs in {}",
        h.cluster.prefix(),
        h.cluster.dir().display()
    );

    let work = Arc::new(Workload::new(
        args.jobs,
        &mut rng,
        &h.cluster.dir().join("batch-runs.log"),
    ));
    let gateways: Vec<HttpApi> = h
        .cluster
        .gateways()
        .iter()
        .map(|g| HttpApi::new(g.http))
        .collect();
    let (leaders, polling) = leaders::monitor(h.cluster.state.clone());
    for service in ELECTED {
        h.cluster.wait_leader(service).await?;
    }

    let submitting = tokio::spawn(workload::submit(
        work.clone(),
        gateways,
        args.duration(),
        args.concurrency,
    ));
    let mut chaos = Chaos::new(&args, rng, leaders);
    chaos
        .run(&mut h.cluster, &mut h.etcd, args.duration())
        .await;
    let submitted = submitting.await?;
    eprintln!(
        "faults over; {} registered, {} updated, {} stopped, {} retries, {} failed",
        submitted.registered,
        submitted.updated,
        submitted.stopped,
        submitted.retries,
        submitted.failed.len()
    );
    chaos.resign_each_leader(&mut h.cluster, &mut h.etcd).await;
    polling.abort();

    let settling = Instant::now();
    let (checks, settled) =
        settle(&h.cluster, &work, Duration::from_secs(args.settle_timeout)).await?;
    let settled_s = settling.elapsed().as_secs_f64();
    let mut problems = chaos.record.problems;
    problems.extend(
        h.cluster
            .exited()
            .into_iter()
            .map(|e| format!("{e} (after the run)")),
    );

    h.cluster.shutdown();
    if args.keep || !problems.is_empty() || !checks.failures().is_empty() {
        h.cluster.keep_files();
        h.etcd.keep_files();
        eprintln!(
            "kept logs in {} and etcd's data in {}",
            h.cluster.dir().display(),
            h.etcd.dir().display()
        );
    }
    let batch_jobs = work.jobs.iter().filter(|j| j.kind == Kind::Batch).count();
    Ok(Summary::new(
        seed,
        args.duration,
        args.jobs,
        batch_jobs,
        submitted,
        settled_s,
        settled,
        chaos.record.faults,
        checks,
        problems,
    ))
}

/// `replicas` of every service, the real client nodes (raw_exec only) and
/// the simulated ones (mock only), with default timings.
async fn start_services(c: &mut Cluster, args: &Args) -> anyhow::Result<()> {
    let log = [("telemetry.log_filter", args.log_filter.as_str())];
    let replicas = args.replicas.max(1);
    for _ in 0..replicas {
        c.start_gateway(&log).await?;
    }
    for _ in 0..replicas {
        if args.server {
            let together = [
                Service::EvalBroker,
                Service::PlanApplier,
                Service::DeploymentWatcher,
                Service::SchedulerWorker,
            ];
            c.start_server(&together, &log, &[]).await?;
            continue;
        }
        c.start_broker(&log).await?;
        c.start_applier(&log).await?;
        c.start_deployment_watcher(&log).await?;
        c.start_worker(&log).await?;
    }
    for service in [
        Service::EvalBroker,
        Service::PlanApplier,
        Service::DeploymentWatcher,
    ] {
        c.wait_leader(service).await?;
    }
    let real = [log[0], ("drivers", "raw_exec")];
    for i in 0..args.real_clients {
        c.start_client(&format!("{REAL_NODE_PREFIX}{i}"), &real)
            .await?;
    }
    let processes = args.simulated_processes.max(1);
    let mut left = args.simulated_nodes;
    for p in 0..processes {
        let n = left / (processes - p);
        left -= n;
        if n > 0 {
            c.start_simulated_clients(n, &log).await?;
        }
    }
    Ok(())
}

/// How the wait for the cluster to settle ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Settled {
    /// Every check passed.
    Passed,
    /// The same checks kept failing for [`STUCK_FOR`]: nothing more will
    /// happen by itself.
    Stuck,
    /// The time was up while the failures were still changing: a backlog
    /// still draining, so the failures include unfinished work.
    StillDraining,
}

/// Waits until the checks pass, or the same checks have failed for
/// [`STUCK_FOR`], or `limit` is over; returns the last checks.
async fn settle(
    cluster: &Cluster,
    work: &Workload,
    limit: Duration,
) -> anyhow::Result<(Checks, Settled)> {
    let start = Instant::now();
    let mut last: Option<(Vec<String>, Instant)> = None;
    loop {
        let checks = Checks::read(&cluster.state, work).await?;
        let failures = checks.failures();
        if failures.is_empty() {
            return Ok((checks, Settled::Passed));
        }
        let print = format!("{} failures, first: {}", failures.len(), failures[0]);
        let since = match last {
            Some((before, since)) if before == failures => since,
            _ => Instant::now(),
        };
        let outcome = if since.elapsed() >= STUCK_FOR {
            Some(Settled::Stuck)
        } else if start.elapsed() >= limit {
            Some(Settled::StillDraining)
        } else {
            None
        };
        if let Some(outcome) = outcome {
            eprintln!(
                "settling: gave up after {:.0} s ({outcome:?}, {:.0} s unchanged): {print}",
                start.elapsed().as_secs_f64(),
                since.elapsed().as_secs_f64()
            );
            return Ok((checks, outcome));
        }
        // The progress line stays short; the report names each alloc's history.
        let brief: String = print.chars().take(PROGRESS_CHARS).collect();
        let more = if brief.len() < print.len() { "…" } else { "" };
        eprintln!(
            "settling {:.0} s: {brief}{more}",
            start.elapsed().as_secs_f64()
        );
        last = Some((failures, since));
        tokio::time::sleep(SETTLE_POLL).await;
    }
}

/// How much of the first failure a settling progress line shows.
const PROGRESS_CHARS: usize = 240;

/// A seed from the clock, for a run not given one.
fn fresh_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
}

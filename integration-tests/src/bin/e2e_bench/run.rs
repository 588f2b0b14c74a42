//! One run: etcd (given, or our own), the cluster, the registrations, the
//! wait for every allocation to run, the final readings and checks, and the
//! teardown. Figures go to [`Shared`] as they are measured.

use std::sync::Arc;
use std::time::{Duration, Instant};

use caravan_integration_tests::cluster::Settings;
use caravan_integration_tests::{Cluster, EtcdProcess, HttpApi, Service, jobs};
use tokio::sync::Notify;
use tokio::task::JoinSet;

use crate::checks::Checks;
use crate::meter::{BENCH, CostMeter};
use crate::register::{self, Registered, Workload};
use crate::watch::{self, Want};
use crate::{Args, Shared};
use caravan_integration_tests::etcd_traffic;
use caravan_integration_tests::service_traffic::{self, ServiceTraffic};

/// How often every process's cost is read.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// How often progress is printed while waiting.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// The processes of a run. The cluster is a field before etcd so that,
/// dropped (at the end or when the run is interrupted), the services stop
/// while etcd is still there for them.
struct Harness {
    cluster: Cluster,
    etcd: Option<EtcdProcess>,
}

/// Runs the benchmark, recording what it measures in `shared`.
pub async fn run(args: Args, shared: Arc<Shared>) -> anyhow::Result<()> {
    let (endpoints, etcd) = match args.etcd_endpoints() {
        Some(endpoints) => (endpoints, None),
        None => {
            let etcd = EtcdProcess::start().await?;
            eprintln!(
                "started etcd at {} (pid {}, data in {})",
                etcd.endpoint(),
                etcd.pid().unwrap_or_default(),
                etcd.dir().display()
            );
            (vec![etcd.endpoint().to_string()], Some(etcd))
        }
    };
    let etcd_pid = etcd.as_ref().and_then(EtcdProcess::pid).or(args.etcd_pid);
    let own_etcd = etcd.is_some();
    // On its own etcd the bench stores under the prefix a user's cluster
    // has, so etcd's bytes per key are a user's; a shared etcd needs a
    // prefix of the run's own.
    let cluster = if own_etcd {
        Cluster::on_own_etcd("e2e-bench", endpoints.clone()).await?
    } else {
        Cluster::on_etcd("e2e-bench", endpoints.clone(), false).await?
    };
    let mut harness = Harness { cluster, etcd };
    let c = &mut harness.cluster;
    if !own_etcd {
        shared.progress.lock().purge = Some(c.state.clone());
    }
    let common = args.common_settings();
    let common: Vec<(&str, &str)> = common.iter().map(|(k, v)| (*k, v.as_str())).collect();
    start_cluster(c, &args, &common).await?;
    let started = Instant::now();
    c.start_simulated_clients(args.nodes, &common).await?;
    shared.progress.lock().nodes_ready = Some(started.elapsed());
    eprintln!(
        "{} simulated nodes ready in {:.1} s; prefix {}, logs in {}",
        args.nodes,
        started.elapsed().as_secs_f64(),
        c.prefix(),
        c.dir().display()
    );

    let done = Arc::new(Notify::new());
    let store = c.state.store().clone();
    let mut watcher = JoinSet::new();
    watcher.spawn(watch::watch(
        store.clone(),
        c.state.keys().clone(),
        store.current_revision().await? + 1,
        Want {
            evals: args.jobs,
            allocs: args.want_allocs(),
        },
        shared.seen.clone(),
        done.clone(),
    ));

    let mut metered = c.processes();
    metered.extend(etcd_pid.map(|pid| ("etcd".to_string(), pid)));
    metered.push((BENCH.to_string(), std::process::id()));
    let meter = CostMeter::new(metered);
    shared.progress.lock().meter = Some(meter.clone());
    let sampling = meter.sample_every(SAMPLE_EVERY);

    let https: Vec<HttpApi> = c.gateways().iter().map(|g| HttpApi::new(g.http)).collect();
    let work = Workload {
        jobs: args.jobs,
        count: args.count,
        task: jobs::mock_task(args.cpu, args.memory),
        service: args.service,
    };
    let mut registering = JoinSet::new();
    // etcd's own counters of one member: a cluster's members each count
    // their own share, which one reading would not add up.
    let etcd_metrics = (endpoints.len() == 1).then(|| endpoints[0].clone());
    let etcd_before = match &etcd_metrics {
        Some(e) => etcd_traffic::read(e)
            .await
            .map_err(|err| eprintln!("e2e-bench: etcd's metrics: {err:#}"))
            .ok(),
        None => None,
    };
    let metrics_addrs = c.metrics_addrs();
    let traffic_before = service_traffic::read_all(&metrics_addrs).await;
    meter.mark_baseline();
    let t0 = Instant::now();
    shared.progress.lock().t0 = Some(t0);
    let (rate, concurrency, max_in_flight) = (args.rate, args.concurrency, args.max_in_flight);
    registering.spawn(async move {
        match rate {
            Some(rate) => register::open_loop(&https, &work, rate, max_in_flight).await,
            None => register::burst(&https, &work, concurrency).await,
        }
    });

    wait_until_running(c, &args, &shared, &done, &mut registering, &mut watcher, t0).await?;
    // The last reading, before anything else runs.
    meter.read_all();
    sampling.abort();
    let traffic_after = service_traffic::read_all(&metrics_addrs).await;
    shared.progress.lock().traffic = Some(ServiceTraffic::between(
        &traffic_before,
        &traffic_after,
        args.want_allocs(),
    ));
    if let (Some(e), Some(before)) = (&etcd_metrics, &etcd_before) {
        match etcd_traffic::read(e).await {
            Ok(after) => {
                shared.progress.lock().etcd = Some(after.since(before, args.want_allocs()));
            }
            Err(err) => eprintln!("e2e-bench: etcd's metrics: {err:#}"),
        }
    }

    let checks = Checks::read(&c.state, &endpoints, args.want_allocs()).await?;
    let failed = !checks.failures().is_empty();
    shared.progress.lock().checks = Some(checks);
    c.shutdown();
    if failed {
        eprint!("{}", crate::log_digest::digest(c.dir()));
    }
    if args.keep {
        eprintln!(
            "kept prefix {} and logs in {}",
            c.prefix(),
            c.dir().display()
        );
        c.keep_files();
        if let Some(etcd) = &mut harness.etcd {
            eprintln!("kept etcd's data in {}", etcd.dir().display());
            etcd.keep_files();
        }
    } else if !own_etcd {
        c.state.purge().await?;
    }
    Ok(())
}

/// Starts the control plane: gateways, an eval-broker, a plan-applier, a
/// deployment-watcher and the scheduler-workers (with `--server`, all but
/// the gateways and extra workers in one `caravan server`), each with the
/// `common` settings, and waits for the three leaders.
async fn start_cluster(c: &mut Cluster, args: &Args, common: Settings<'_>) -> anyhow::Result<()> {
    if args.heartbeats_on_grpc_addr {
        c.heartbeats_on_grpc_addr();
    }
    let mut gateway_settings = common.to_vec();
    gateway_settings.extend(
        args.gateway_settings
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str())),
    );
    for _ in 0..args.gateways.max(1) {
        c.start_gateway(&gateway_settings).await?;
    }
    let mut broker_settings = common.to_vec();
    broker_settings.extend(
        args.broker_settings
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str())),
    );
    let workers = args.workers.to_string();
    let mut worker_settings = common.to_vec();
    if args.workers > 0 {
        worker_settings.push(("workers", workers.as_str()));
    }
    let mut replicas = args.worker_replicas.max(1);
    if args.server {
        // The process's own settings (its log filter) go to the process;
        // each service keeps the rest of its own.
        anyhow::ensure!(
            args.worker_threads == 0,
            "--server: caravan server runs on the CLI's runtime (one thread per core); \
             --worker-threads does not apply"
        );
        let process = [("telemetry.log_filter", args.log_filter.as_str())];
        let (broker, worker) = (
            without_telemetry(&broker_settings),
            without_telemetry(&worker_settings),
        );
        c.start_server(
            &[
                Service::EvalBroker,
                Service::PlanApplier,
                Service::DeploymentWatcher,
                Service::SchedulerWorker,
            ],
            &process,
            &[
                (Service::EvalBroker, &broker),
                (Service::SchedulerWorker, &worker),
            ],
        )
        .await?;
        replicas -= 1;
    } else {
        c.start_broker(&broker_settings).await?;
        c.start_applier(common).await?;
        // Service jobs get deployments: without the watcher nothing moves
        // their health, and its cost (it decodes every alloc change) goes
        // uncounted.
        c.start_deployment_watcher(common).await?;
    }
    for _ in 0..replicas {
        c.start_worker(&worker_settings).await?;
    }
    c.wait_leader(Service::EvalBroker).await?;
    c.wait_leader(Service::PlanApplier).await?;
    c.wait_leader(Service::DeploymentWatcher).await?;
    Ok(())
}

/// `settings` but the process's own (`telemetry.*`), which a service in
/// `caravan server` may not set for itself.
fn without_telemetry<'s>(settings: &[(&'s str, &'s str)]) -> Vec<(&'s str, &'s str)> {
    settings
        .iter()
        .filter(|(k, _)| !k.starts_with("telemetry."))
        .copied()
        .collect()
}

/// Waits until every registration is answered and the watch has seen every
/// eval complete and every allocation running; fails when a service exits,
/// a registration fails, or the run's timeout passes.
async fn wait_until_running(
    c: &mut Cluster,
    args: &Args,
    shared: &Shared,
    done: &Notify,
    registering: &mut JoinSet<anyhow::Result<Registered>>,
    watcher: &mut JoinSet<anyhow::Result<()>>,
    t0: Instant,
) -> anyhow::Result<()> {
    let deadline = Duration::from_secs(args.timeout_secs);
    let mut last_report = Instant::now();
    let mut watch_ended = false;
    loop {
        tokio::select! {
            () = done.notified() => {}
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        while let Some(registered) = registering.try_join_next() {
            let registered = registered??;
            // The latencies now too: a run stopped here (to measure
            // registration alone) still has them.
            let http = crate::report::Latency::of(&mut registered.took.clone());
            eprintln!(
                "{} jobs registered in {:.2} s (HTTP p50 {:.1} ms, p99 {:.1} ms)",
                registered.took.len(),
                registered.answered_in.as_secs_f64(),
                http.p50_ms,
                http.p99_ms
            );
            shared.progress.lock().registered = Some(registered);
        }
        while let Some(watched) = watcher.try_join_next() {
            watched??;
            watch_ended = true;
        }
        let registered = shared.progress.lock().registered.is_some();
        if watch_ended && registered {
            return Ok(());
        }
        let exited = c.exited();
        if !exited.is_empty() {
            anyhow::bail!("services exited: {exited:?}\n{}", c.logs());
        }
        let s = shared.seen.lock();
        if t0.elapsed() > deadline {
            anyhow::bail!(
                "gave up after {deadline:?}: {} evals complete, {} allocs placed, {} running\n{}",
                s.evals_done.len(),
                s.placed.len(),
                s.running.len(),
                c.logs()
            );
        }
        if last_report.elapsed() >= PROGRESS_EVERY {
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
}

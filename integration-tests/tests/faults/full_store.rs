//! A full store: etcd started with a small `--quota-backend-bytes`, filled
//! by a burst of job registrations until it raises its NOSPACE alarm. While
//! it is full every write is refused with a clear error (HTTP 507, gRPC
//! RESOURCE_EXHAUSTED, naming the full store and the operator's remedy),
//! nothing is half-written (every job has its evaluation), the alarm shows
//! on `/v1/agent/health`, in the `caravan_etcd_alarms` gauge and in one
//! warning, and no service dies or loses its leadership. After the operator
//! compacts, defragments and disarms, the same processes carry on: the
//! work queued during the alarm completes and a new job is placed.

use std::time::{Duration, Instant};

use caravan_integration_tests::batch_once;
use caravan_integration_tests::etcd::{self, EtcdProcess};
use caravan_integration_tests::jobs::{eval_id, mock_task, service_job};
use caravan_integration_tests::state::{
    alloc_histogram, duplicated_allocs, eval_histogram, evals_settled, jobs_without_eval,
    overcommitted_nodes,
};
use caravan_integration_tests::{Cluster, HttpApi, Progress, Service, wait_for};
use caravan_proto::RegisterJobRequest;
use caravan_proto::job_service_client::JobServiceClient;
use serde_json::{Value, json};
use tonic::Code;

/// etcd's backend quota: small enough that a burst of a few hundred
/// registrations fills it within seconds.
const QUOTA_BYTES: u64 = 8 * 1024 * 1024;
/// The size of the `Meta` value each registration of the burst carries.
const META_BYTES: usize = 32 * 1024;
/// Jobs of the burst, each re-registered with new `Meta` by its own writer:
/// most of what fills the store is their history, which compaction frees.
const BURST_WRITERS: usize = 4;
/// Registrations after which a store that never filled fails the test.
const BURST_LIMIT: usize = 2_000;
/// Simulated client nodes: room for every job many times over.
const NODES: u32 = 4;
/// How long the full store is held before the operator frees it, so the
/// services meet refused writes for a while.
const HOLD: Duration = Duration::from_secs(6);
/// How long the cluster may take to finish its queued work and place a new
/// job once the store is freed.
const RECOVERY_LIMIT: Duration = Duration::from_secs(45);

#[tokio::test]
async fn a_full_store_refuses_writes_clearly_and_carries_on_once_freed() {
    for round in 1..=crate::rounds() {
        let recovered = one_round().await;
        eprintln!("full store, round {round}: recovered in {recovered:?}");
    }
}

/// One fill, hold and recovery on a fresh etcd; returns the time from the
/// disarm to a new job placed with all queued work settled.
async fn one_round() -> Duration {
    let etcd = EtcdProcess::start_with_quota(QUOTA_BYTES)
        .await
        .expect("etcd with a small quota");
    let endpoints = vec![etcd.endpoint().to_string()];
    let mut cluster = Cluster::on_etcd_process("full-store", &etcd)
        .await
        .expect("cluster");
    cluster
        .start_control_plane_with_variables()
        .await
        .expect("control plane");
    // A standby beside each leader-elected service: one that deposed a
    // leader unable to mark its key (no write lands) would leave nobody
    // able to campaign until the store is freed.
    cluster
        .start_broker(&[])
        .await
        .expect("a standby eval-broker");
    cluster
        .start_applier(&[])
        .await
        .expect("a standby plan-applier");
    cluster
        .start_deployment_watcher(&[])
        .await
        .expect("a standby deployment-watcher");
    cluster
        .start_simulated_clients(NODES, &[])
        .await
        .expect("simulated nodes");
    let http = cluster.http().expect("gateway");
    let before = healthy(&http).await;
    assert_eq!(before["server"]["ok"], json!(true), "{before}");

    // The cluster works: a small job is placed.
    register(&http, "before")
        .await
        .expect("a job before the fill");
    wait_placed(&cluster, "before").await;
    // Batch work in flight as the store fills: it ends while writes are
    // refused, and must still run exactly once.
    let batch = batch_once::register(&http, "full", 3).await.unwrap();
    let broker = cluster.wait_leader(Service::EvalBroker).await.unwrap();
    let applier = cluster.wait_leader(Service::PlanApplier).await.unwrap();
    let watcher = cluster
        .wait_leader(Service::DeploymentWatcher)
        .await
        .unwrap();

    // The burst: writers re-register their job with fresh meta until the
    // store refuses. Every answer is a success or the full store's 507.
    let filling = Instant::now();
    let (accepted, refusals) = burst(&http).await;
    eprintln!(
        "filled: {accepted} registrations accepted in {:?} before the first refusal",
        filling.elapsed()
    );
    let refusal = refusals.first().expect("the burst met a full store");
    assert_store_full_message(&refusal.1);
    assert_eq!(
        etcd::alarms(&endpoints).await.unwrap(),
        vec!["NOSPACE".to_string()],
        "etcd raised its NOSPACE alarm"
    );

    // Every write path answers the same clear refusal.
    let reply = http
        .put_json("/v1/jobs", &service_job("during", 1, mock_task(10, 10)))
        .await
        .unwrap();
    assert_eq!(reply.status, 507, "a new job: {}", reply.text());
    assert_store_full_message(&reply.text());
    let reply = http
        .put_json("/v1/var/full/store", &json!({"Items": {"k": "v"}}))
        .await
        .unwrap();
    assert_eq!(reply.status, 507, "a variable: {}", reply.text());
    assert_store_full_message(&reply.text());
    let grpc = grpc_refusal(&cluster).await;
    assert_eq!(grpc.code(), Code::ResourceExhausted, "{grpc:?}");
    assert_store_full_message(grpc.message());

    // The alarm is surfaced: health, gauge, one warning.
    let health = wait_for(
        "/v1/agent/health to name the alarm",
        Duration::from_secs(10),
        async || {
            let reply = http.get("/v1/agent/health").await?;
            let body = reply.json()?;
            let message = body["server"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            Ok(if reply.status == 500 && message.contains("NOSPACE") {
                Progress::Done(body)
            } else {
                Progress::Waiting(format!("HTTP {}: {body}", reply.status))
            })
        },
    )
    .await
    .unwrap();
    assert_eq!(health["server"]["ok"], json!(false), "{health}");
    assert!(
        health["server"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("alarm disarm") && m.contains("defrag")),
        "{health}"
    );
    wait_for("the alarm gauge", Duration::from_secs(10), async || {
        let text = http.get("/metrics").await?.text();
        Ok(
            if text.contains("caravan_etcd_alarms{alarm=\"NOSPACE\"} 1") {
                Progress::Done(())
            } else {
                let line = text.lines().find(|l| l.starts_with("caravan_etcd_alarms"));
                Progress::Waiting(format!("{line:?}"))
            },
        )
    })
    .await
    .unwrap();

    // Held full: the services meet refused writes and keep running and
    // leading. Stating "nothing dies for a while" needs the while.
    tokio::time::sleep(HOLD).await;
    assert_eq!(cluster.exited(), Vec::<String>::new(), "no service died");
    assert_eq!(
        cluster
            .state
            .leader(Service::EvalBroker.name())
            .await
            .unwrap(),
        Some(broker.clone()),
        "the eval-broker kept its leadership"
    );
    assert_eq!(
        cluster
            .state
            .leader(Service::PlanApplier.name())
            .await
            .unwrap(),
        Some(applier.clone()),
        "the plan-applier kept its leadership"
    );
    assert_eq!(
        cluster
            .state
            .leader(Service::DeploymentWatcher.name())
            .await
            .unwrap(),
        Some(watcher.clone()),
        "the deployment-watcher kept its leadership"
    );
    let gateway_log = log_of(&cluster, "api-gateway-1");
    let warnings = gateway_log
        .lines()
        .filter(|l| l.contains("etcd alarm NOSPACE on member"))
        .count();
    assert_eq!(warnings, 1, "one warning for the alarm:\n{gateway_log}");
    let per_request = gateway_log
        .lines()
        .filter(|l| l.contains("HTTP request failed") && l.contains("store full"))
        .count();
    assert_eq!(per_request, 0, "no warning per refused request");
    for service in [
        "eval-broker-1",
        "eval-broker-2",
        "plan-applier-1",
        "plan-applier-2",
        "deployment-watcher-1",
        "deployment-watcher-2",
    ] {
        let log = log_of(&cluster, service);
        assert!(
            !log.contains("leadership lost"),
            "{service} lost its leadership:\n{log}"
        );
        // Retried writes wait for the operator quietly: the alarm is
        // reported once, by the gateway.
        let warnings: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(" WARN ") && l.contains("store full"))
            .collect();
        assert!(
            warnings.is_empty(),
            "{service} warns per refused write:\n{}",
            warnings.join("\n")
        );
    }
    check_whole(&cluster, "while full").await;

    // The operator frees the store; the same processes carry on.
    let freed = etcd::free_space(&endpoints)
        .await
        .expect("compact, defrag, disarm");
    let disarmed = Instant::now();
    eprintln!(
        "freed: compacted to revision {}, backend {} -> {} bytes",
        freed.compacted_to, freed.db_size_before, freed.db_size_after
    );
    assert!(
        freed.db_size_after < i64::try_from(QUOTA_BYTES).unwrap() / 2,
        "defragmenting freed the history: {freed:?}"
    );
    register(&http, "after")
        .await
        .expect("a job after the disarm");
    wait_placed(&cluster, "after").await;
    wait_for("the queued work to settle", RECOVERY_LIMIT, async || {
        let evals = cluster.state.evals().await?;
        Ok(if evals_settled(&evals) {
            Progress::Done(())
        } else {
            Progress::Waiting(format!("{:?}", eval_histogram(&evals)))
        })
    })
    .await
    .unwrap();
    // Each burst job runs its last registered version.
    for w in 0..BURST_WRITERS {
        wait_placed(&cluster, &format!("burst-{w}")).await;
    }
    let recovered = disarmed.elapsed();
    let health = healthy(&http).await;
    assert_eq!(health["server"]["ok"], json!(true), "{health}");
    wait_for(
        "the alarm gauge to clear",
        Duration::from_secs(10),
        async || {
            let text = http.get("/metrics").await?.text();
            Ok(
                if text.contains("caravan_etcd_alarms{alarm=\"NOSPACE\"} 0") {
                    Progress::Done(())
                } else {
                    Progress::Waiting("still raised".into())
                },
            )
        },
    )
    .await
    .unwrap();
    assert_eq!(cluster.exited(), Vec::<String>::new(), "no service died");
    check_whole(&cluster, "after recovery").await;
    batch_once::assert_ran_once(&cluster.state, &batch, RECOVERY_LIMIT).await;
    recovered
}

/// Registers `service_job(id)` with one small mock task.
async fn register(http: &HttpApi, id: &str) -> anyhow::Result<String> {
    let reply = http
        .put_json("/v1/jobs", &service_job(id, 1, mock_task(10, 10)))
        .await?;
    eval_id(&reply.ok_json()?)
}

/// Re-registers `burst-<w>` from each writer with a fresh `Meta` until the
/// store refuses; returns how many were accepted and every refusal (status,
/// body). Fails on any answer other than 200 or 507.
async fn burst(http: &HttpApi) -> (usize, Vec<(u16, String)>) {
    let filler = "x".repeat(META_BYTES);
    let writers = (0..BURST_WRITERS).map(|w| {
        let http = http.clone();
        let filler = filler.clone();
        async move {
            for i in 0..BURST_LIMIT / BURST_WRITERS {
                let mut job = service_job(&format!("burst-{w}"), 1, mock_task(10, 10));
                job["Job"]["Meta"] = json!({ "round": i.to_string(), "fill": filler });
                let reply = http.put_json("/v1/jobs", &job).await.unwrap();
                match reply.status {
                    200 => continue,
                    507 => return (i, Some((reply.status, reply.text()))),
                    other => panic!("burst-{w} #{i}: HTTP {other}: {}", reply.text()),
                }
            }
            (BURST_LIMIT / BURST_WRITERS, None)
        }
    });
    let answers = futures::future::join_all(writers).await;
    let accepted = answers.iter().map(|(n, _)| n).sum();
    (
        accepted,
        answers.into_iter().filter_map(|(_, r)| r).collect(),
    )
}

/// A new job over gRPC, while the store is full: the refusal.
async fn grpc_refusal(cluster: &Cluster) -> tonic::Status {
    let addr = cluster.gateway_grpc().unwrap().to_string();
    let channel = cluster.grpc_channel(Service::Gateway, &addr).unwrap();
    let mut job = cluster
        .state
        .jobs()
        .await
        .unwrap()
        .into_iter()
        .find(|j| j.id == "before")
        .expect("the job registered before the fill");
    job.id = "grpc-during".into();
    job.name = "grpc-during".into();
    job.create_revision = 0;
    job.modify_revision = 0;
    job.job_modify_revision = 0;
    job.version = 0;
    JobServiceClient::new(channel)
        .register_job(RegisterJobRequest {
            job: Some(job),
            ..Default::default()
        })
        .await
        .expect_err("a registration into a full store")
}

/// The refusal names the full store and the operator's remedy.
fn assert_store_full_message(message: &str) {
    for words in ["store full", "compact", "defrag", "alarm disarm"] {
        assert!(message.contains(words), "{words:?} missing from {message}");
    }
}

/// `/v1/agent/health`'s body (any status).
async fn healthy(http: &HttpApi) -> Value {
    http.get("/v1/agent/health").await.unwrap().json().unwrap()
}

/// Waits until job `id` has a running allocation of its current version.
async fn wait_placed(cluster: &Cluster, id: &str) {
    let state = cluster.state.clone();
    wait_for(&format!("job {id} placed"), RECOVERY_LIMIT, async || {
        let Some(job) = state.jobs().await?.into_iter().find(|j| j.id == id) else {
            return Ok(Progress::Waiting("no such job".into()));
        };
        let allocs = state.allocs().await?;
        let running = allocs.iter().any(|a| {
            a.job_id == id
                && a.job_version == job.version
                && a.client_status() == caravan_proto::AllocClientStatus::Running
        });
        Ok(if running {
            Progress::Done(())
        } else {
            let mine: Vec<_> = allocs.iter().filter(|a| a.job_id == id).cloned().collect();
            Progress::Waiting(format!("v{}: {:?}", job.version, alloc_histogram(&mine)))
        })
    })
    .await
    .unwrap();
}

/// The invariants: every job has its evaluation (nothing half-written), no
/// over-committed node, no two live allocations of one name.
async fn check_whole(cluster: &Cluster, when: &str) {
    let (jobs, evals, allocs, nodes) = (
        cluster.state.jobs().await.unwrap(),
        cluster.state.evals().await.unwrap(),
        cluster.state.allocs().await.unwrap(),
        cluster.state.nodes().await.unwrap(),
    );
    assert_eq!(
        jobs_without_eval(&jobs, &evals),
        Vec::<String>::new(),
        "{when}: every job has its eval"
    );
    assert_eq!(
        overcommitted_nodes(&nodes, &allocs),
        Vec::<String>::new(),
        "{when}: no over-commit"
    );
    assert_eq!(
        duplicated_allocs(&allocs),
        Vec::<String>::new(),
        "{when}: no duplicate names"
    );
}

/// The whole log of the process named `name`.
fn log_of(cluster: &Cluster, name: &str) -> String {
    std::fs::read_to_string(cluster.dir().join(format!("{name}.log"))).unwrap_or_default()
}

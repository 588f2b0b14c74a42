//! The periodic launcher: children launched on schedule with their version
//! and eval, `prohibit_overlap`, one catch-up launch per failover and no
//! double launch, and `ForcePeriodic`.

use std::sync::Arc;
use std::time::Duration;

use caravan_model::now_unix_ns;
use caravan_proto::{
    EvalStatus, Evaluation, ForcePeriodicRequest, Job, JobStatus, JobType, PeriodicConfig,
};
use caravan_state::{Keyspace, Kind};
use caravan_store::Store;
use tonic::Code;

use super::*;

const DAY_NS: i64 = 86_400 * 1_000_000_000;

fn keyspace() -> (String, Keyspace) {
    let prefix = caravan_testkit::unique_prefix("eval-broker-periodic");
    let ks = Keyspace::new(&prefix);
    (prefix, ks)
}

fn parent(id: &str, spec: &str, prohibit_overlap: bool, submitted_ns: i64) -> Job {
    Job {
        id: id.into(),
        name: id.into(),
        namespace: "default".into(),
        r#type: JobType::Batch as i32,
        priority: 40,
        submit_time_unix_ns: submitted_ns,
        periodic: Some(PeriodicConfig {
            enabled: true,
            specs: vec![spec.into()],
            spec_type: "cron".into(),
            prohibit_overlap,
            time_zone: "Europe/Paris".into(),
        }),
        ..Default::default()
    }
}

/// Registers a job as the gateway does: the job and its version.
async fn register(store: &Arc<dyn Store>, ks: &Keyspace, job: &Job) {
    put(
        store,
        ks.job_version(&job.namespace, &job.id, job.version),
        job,
    )
    .await;
    put(store, ks.job(&job.namespace, &job.id), job).await;
}

async fn all_jobs(store: &Arc<dyn Store>, ks: &Keyspace) -> Vec<Job> {
    let res = store.range(ks.range_of(Kind::Jobs)).await.expect("range");
    res.kvs
        .iter()
        .map(|kv| caravan_state::decode(kv).expect("decode"))
        .collect()
}

async fn children_of(store: &Arc<dyn Store>, ks: &Keyspace, parent: &str) -> Vec<Job> {
    let mut kids: Vec<Job> = all_jobs(store, ks)
        .await
        .into_iter()
        .filter(|j| j.parent_id == parent)
        .collect();
    kids.sort_by(|a, b| a.id.cmp(&b.id));
    kids
}

fn launch_eval<'a>(evals: &'a [Evaluation], child: &str) -> Vec<&'a Evaluation> {
    evals
        .iter()
        .filter(|e| e.job_id == child && e.triggered_by == "periodic-job")
        .collect()
}

pub async fn children_launch_on_schedule_with_version_and_eval(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let broker = start_leader(Arc::clone(&store), &prefix).await;
    // Every second (seconds first, year last).
    register(
        &store,
        &ks,
        &parent("tick", "* * * * * * *", false, now_unix_ns()),
    )
    .await;

    let kids = eventually_some("two periodic children", PATIENCE, || async {
        let kids = children_of(&store, &ks, "tick").await;
        (kids.len() >= 2).then_some(kids)
    })
    .await;
    let evals = all_evals(&store, &ks).await;
    for child in &kids {
        let launched = child
            .id
            .strip_prefix("tick/periodic-")
            .and_then(|t| t.parse::<i64>().ok())
            .expect("named <parent>/periodic-<unix seconds>");
        assert!((launched * 1_000_000_000 - now_unix_ns()).abs() < 60 * 1_000_000_000);
        assert!(child.periodic.is_none(), "a child is not periodic itself");
        assert_eq!(child.status(), JobStatus::Pending);
        assert_eq!(child.version, 0);
        assert_eq!(child.r#type(), JobType::Batch);
        let version = store
            .get(&ks.job_version("default", &child.id, 0))
            .await
            .expect("get");
        assert!(
            version.is_some(),
            "the child's version 0 is written with it"
        );
        let mine = launch_eval(&evals, &child.id);
        assert_eq!(mine.len(), 1, "one eval per launch: {mine:?}");
        assert_eq!(mine[0].r#type, "batch");
        assert_eq!(mine[0].priority, 40);
        assert_eq!(
            mine[0].job_modify_revision, child.job_modify_revision,
            "the eval names the revision the launch wrote"
        );
    }
    broker.stop().await;
}

pub async fn prohibit_overlap_waits_for_the_running_child(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let broker = start_leader(Arc::clone(&store), &prefix).await;
    register(
        &store,
        &ks,
        &parent("solo", "* * * * * * *", true, now_unix_ns()),
    )
    .await;

    let first = eventually_some("the first child", PATIENCE, || async {
        children_of(&store, &ks, "solo").await.into_iter().next()
    })
    .await;
    // Its eval is never scheduled here, so the child stays live. Only a
    // wait shows "no overlap": it covers two more launch times.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let kids = children_of(&store, &ks, "solo").await;
    assert_eq!(kids.len(), 1, "no overlap while the first runs: {kids:?}");

    // The child's work finishes: the next launch goes ahead.
    let evals = all_evals(&store, &ks).await;
    let mut done = launch_eval(&evals, &first.id)[0].clone();
    done.status = EvalStatus::Complete as i32;
    put_eval(&store, &ks, &done).await;
    eventually_some(
        "a second child once the first finished",
        PATIENCE,
        || async {
            let kids = children_of(&store, &ks, "solo").await;
            (kids.len() == 2).then_some(())
        },
    )
    .await;
    broker.stop().await;
}

pub async fn a_failover_catches_up_once_and_never_launches_twice(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let mut first = start(Arc::clone(&store), fast_config(&prefix)).await;
    first.wait_leading().await;
    let mut second = start(Arc::clone(&store), fast_config(&prefix)).await;
    // Yearly, registered 400 days ago: the launch due meanwhile is made once,
    // now, and the earlier missed ones are not replayed.
    let yearly = parent("yearly", "0 0 1 1 *", false, now_unix_ns() - 400 * DAY_NS);
    register(&store, &ks, &yearly).await;
    // A new parent seen during a term launches at its next time only, so
    // the catch-up comes with the next term; this window covers the
    // leader seeing the new parent (a wrong catch-up would follow at once).
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(children_of(&store, &ks, "yearly").await.is_empty());
    first.stop().await;
    second.wait_leading().await;
    let kids = eventually_some("the catch-up launch", PATIENCE, || async {
        let kids = children_of(&store, &ks, "yearly").await;
        (!kids.is_empty()).then_some(kids)
    })
    .await;
    assert_eq!(kids.len(), 1);

    // Another failover: the child records the launch, nothing is due.
    let mut third = start(Arc::clone(&store), fast_config(&prefix)).await;
    second.stop().await;
    third.wait_leading().await;
    // Only a wait shows "not again": a term catches up as it starts, so
    // this covers that catch-up (the second term's took well under it).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let again = children_of(&store, &ks, "yearly").await;
    assert_eq!(again.len(), 1, "launched twice: {again:?}");
    let evals = all_evals(&store, &ks).await;
    assert_eq!(launch_eval(&evals, &kids[0].id).len(), 1);
    third.stop().await;
}

pub async fn force_periodic_launches_now_and_checks_its_job(store: Arc<dyn Store>) {
    let (prefix, ks) = keyspace();
    let mut broker = start_leader(Arc::clone(&store), &prefix).await;
    register(
        &store,
        &ks,
        &parent("nightly", "0 3 * * *", true, now_unix_ns()),
    )
    .await;
    let plain = Job {
        id: "plain".into(),
        name: "plain".into(),
        namespace: "default".into(),
        r#type: JobType::Service as i32,
        ..Default::default()
    };
    register(&store, &ks, &plain).await;

    let forced = broker
        .client
        .force_periodic(ForcePeriodicRequest {
            namespace: String::new(),
            job_id: "nightly".into(),
        })
        .await
        .expect("forced")
        .into_inner();
    assert!(forced.dispatched_job_id.starts_with("nightly/periodic-"));
    let eval = read_eval(&store, &ks, &forced.eval_id)
        .await
        .expect("the launch eval");
    assert_eq!(eval.job_id, forced.dispatched_job_id);
    assert_eq!(eval.triggered_by, "periodic-job");
    assert_eq!(eval.create_revision, forced.eval_create_revision);

    let code = |job_id: &str| {
        let mut client = broker.client.clone();
        let job_id = job_id.to_string();
        async move {
            client
                .force_periodic(ForcePeriodicRequest {
                    namespace: "default".into(),
                    job_id,
                })
                .await
                .expect_err("refused")
                .code()
        }
    };
    assert_eq!(code("plain").await, Code::FailedPrecondition);
    assert_eq!(code("missing").await, Code::NotFound);
    assert_eq!(code("").await, Code::InvalidArgument);

    // Stopped parents are not launched, forced or not.
    let mut stopped = parent("nightly", "0 3 * * *", true, now_unix_ns());
    stopped.stop = true;
    register(&store, &ks, &stopped).await;
    assert_eq!(code("nightly").await, Code::FailedPrecondition);
    assert_eq!(children_of(&store, &ks, "nightly").await.len(), 1);
    broker.stop().await;
}

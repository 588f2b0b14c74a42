//! A rolling update: health counted into the deployment, an evaluation for
//! the next batch as allocations turn healthy, and success with the
//! version marked stable.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use caravan_proto::DeploymentStatus;
use caravan_state::Kind;
use caravan_store::{Store, Txn, TxnResult};
use caravan_testkit::faults::puts_under;
use caravan_testkit::layered::{Layered, StoreLayer};

use super::*;

pub async fn healthy_allocs_are_counted_and_roll_the_next_batch(store: Arc<dyn Store>) {
    let w = World::new(store.clone(), "dw-rollout");
    let update = rolling();
    let job = job(1, 4, update.clone());
    w.put_job(&job).await;
    let d = deployment(&job, 4, &update);
    w.put_deployment(&d).await;
    let (a1, a2) = (alloc(&d, 0), alloc(&d, 1));
    w.put_alloc(&a1).await;
    w.put_alloc(&a2).await;
    // The default window: wide enough that two reports written one after
    // the other land in one, even on a loaded machine.
    const WINDOW: Duration = Duration::from_secs(1);
    let mut config = fast_config(&w.prefix);
    config.eval_batch_window_ms = WINDOW.as_millis() as u64;
    let mut watcher = start(store.clone(), config).await;
    watcher.wait_leading().await;

    // The progress deadline starts with the first placement.
    let started = w
        .deployment_becomes(&d.id, "the progress deadline to start", |d| {
            d.task_groups["web"].require_progress_by_unix_ns != 0
        })
        .await;
    let first_deadline = started.task_groups["web"].require_progress_by_unix_ns;
    assert!(first_deadline >= a1.create_time_unix_ns + 600 * SEC);
    assert!(
        w.watcher_evals(&d.id).await.is_empty(),
        "nothing healthy yet"
    );

    let reported = tokio::time::Instant::now();
    w.report_health(&a1.id, true).await;
    w.report_health(&a2.id, true).await;
    let counted = w
        .deployment_becomes(&d.id, "two healthy allocs", |d| {
            d.task_groups["web"].healthy_allocs == 2
        })
        .await;
    // The watcher asks for an eval as it sees a report, before it counts
    // it: both asked between `reported` and now.
    let counted_at = tokio::time::Instant::now();
    assert_eq!(counted.status(), DeploymentStatus::Running);
    assert!(counted.task_groups["web"].require_progress_by_unix_ns >= first_deadline);
    let evals = w.wait_evals(&d.id, 1).await;
    // An eval either report asked for is due a window after it at the
    // latest; this wait covers that window (and the write).
    tokio::time::sleep_until(counted_at + WINDOW + Duration::from_millis(300)).await;
    let evals_later = w.watcher_evals(&d.id).await;
    let seen_within = counted_at - reported;
    if seen_within < WINDOW {
        assert_eq!(
            evals_later.len(),
            1,
            "both reports, seen within {seen_within:?}, fall in one {WINDOW:?} window: one eval"
        );
    } else {
        // The machine stalled a whole window between the two reports: two
        // batches are right then, and more would still be wrong.
        eprintln!("the reports took {seen_within:?} to be counted: not one window");
        assert!(evals_later.len() <= 2, "{}", evals_later.len());
    }
    let e = &evals[0];
    assert_eq!(e.job_id, "web");
    assert_eq!(e.r#type, "service");
    assert_eq!(e.priority, 60);
    assert_eq!(e.status(), caravan_proto::EvalStatus::Pending);
    assert_eq!(
        e.job_modify_revision,
        w.job("web").await.job_modify_revision
    );

    // The scheduler places the next batch; those turn healthy too.
    let (a3, a4) = (alloc(&d, 2), alloc(&d, 3));
    w.put_alloc(&a3).await;
    w.put_alloc(&a4).await;
    w.report_health(&a3.id, true).await;
    let before = w.watcher_evals(&d.id).await.len();
    w.wait_evals(&d.id, before + 1).await;
    w.report_health(&a4.id, false).await;
    let failed = w
        .deployment_becomes(&d.id, "the unhealthy alloc to fail it", |d| {
            d.status() == DeploymentStatus::Failed
        })
        .await;
    assert_eq!(failed.task_groups["web"].healthy_allocs, 3);
    assert_eq!(failed.task_groups["web"].unhealthy_allocs, 1);
    watcher.stop().await;
}

pub async fn a_healthy_deployment_succeeds_and_its_version_turns_stable(store: Arc<dyn Store>) {
    let w = World::new(store.clone(), "dw-success");
    let update = rolling();
    let job = job(0, 2, update.clone());
    w.put_job(&job).await;
    let d = deployment(&job, 2, &update);
    w.put_deployment(&d).await;
    let allocs = [alloc(&d, 0), alloc(&d, 1)];
    for a in &allocs {
        w.put_alloc(a).await;
    }
    let watcher = start_leader(store.clone(), &w.prefix).await;
    for a in &allocs {
        w.report_health(&a.id, true).await;
    }
    let done = w
        .deployment_becomes(&d.id, "success", |d| {
            d.status() == DeploymentStatus::Successful
        })
        .await;
    assert_eq!(done.status_description, "Deployment completed successfully");
    assert_eq!(done.task_groups["web"].healthy_allocs, 2);
    assert!(w.job("web").await.stable, "the job is stable");
    assert!(
        w.version("web", 0).await.unwrap().stable,
        "so is its version"
    );
    watcher.stop().await;
}

pub async fn a_success_written_by_the_scheduler_marks_the_version_stable(store: Arc<dyn Store>) {
    let w = World::new(store.clone(), "dw-sched-success");
    let update = rolling();
    let old = job(0, 1, update.clone());
    w.put_version(&old).await;
    let job = job(1, 1, update.clone());
    w.put_job(&job).await;
    let d = deployment(&job, 1, &update);
    w.put_deployment(&d).await;
    let watcher = start_leader(store.clone(), &w.prefix).await;
    // The scheduler's plan marks it successful (the plan-applier writes it).
    let mut done = w.deployment(&d.id).await;
    done.set_status(DeploymentStatus::Successful);
    done.status_description = "Deployment completed successfully".into();
    w.put_deployment(&done).await;
    eventually("version 1 to turn stable", PATIENCE, || async {
        w.version("web", 1).await.is_some_and(|v| v.stable)
    })
    .await;
    assert!(w.job("web").await.stable);
    assert!(
        !w.version("web", 0).await.unwrap().stable,
        "only that version"
    );
    watcher.stop().await;
}

pub async fn a_new_leader_writes_the_eval_a_healthy_batch_was_owed(store: Arc<dyn Store>) {
    let w = World::new(store.clone(), "dw-owed");
    let update = rolling();
    let job = job(1, 4, update.clone());
    w.put_job(&job).await;
    let d = deployment(&job, 4, &update);
    w.put_deployment(&d).await;
    let (a1, a2) = (alloc(&d, 0), alloc(&d, 1));
    w.put_alloc(&a1).await;
    w.put_alloc(&a2).await;
    // The batch turns healthy while no watcher runs at all.
    w.report_health(&a1.id, true).await;
    w.report_health(&a2.id, true).await;
    let watcher = start_leader(store.clone(), &w.prefix).await;
    let counted = w
        .deployment_becomes(&d.id, "the new leader to count", |d| {
            d.task_groups["web"].healthy_allocs == 2
        })
        .await;
    assert_eq!(counted.status(), DeploymentStatus::Running);
    let evals = w.wait_evals(&d.id, 1).await;
    assert_eq!(evals[0].job_id, "web");
    // Once written, a second leader owes nothing more.
    watcher.stop().await;
    let again = start_leader(store.clone(), &w.prefix).await;
    // Only a wait shows "not twice": a leader restores as it starts, so
    // this covers its restore and the 100 ms batch window after it.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        w.watcher_evals(&d.id).await.len(),
        1,
        "no eval written twice"
    );
    assert_eq!(w.job("web").await.version, 1);
    again.stop().await;
}

/// Deployment writes that take a while each, counting how many are in
/// flight at once.
struct SlowDeploymentWrites {
    deployments: Vec<u8>,
    in_flight: AtomicUsize,
    most: AtomicUsize,
}

#[async_trait]
impl StoreLayer for SlowDeploymentWrites {
    async fn txn(&self, inner: &Arc<dyn Store>, txn: Txn) -> caravan_store::Result<TxnResult> {
        if !puts_under(&txn, &self.deployments) {
            return inner.txn(txn).await;
        }
        let now = self.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
        self.most.fetch_max(now, Ordering::AcqRel);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let res = inner.txn(txn).await;
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
        res
    }
}

pub async fn a_backlog_of_deployments_is_written_several_at_a_time(store: Arc<dyn Store>) {
    let w = World::new(store.clone(), "dw-backlog");
    let slow = Layered::wrap(
        store.clone(),
        SlowDeploymentWrites {
            deployments: w.ks.prefix_of(Kind::Deployments),
            in_flight: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
        },
    );
    let update = rolling();
    let mut backlog = Vec::new();
    for i in 0..12 {
        let mut job = job(0, 1, update.clone());
        job.id = format!("web-{i}");
        job.name = job.id.clone();
        w.put_job(&job).await;
        let d = deployment(&job, 1, &update);
        w.put_deployment(&d).await;
        let a = alloc(&d, 0);
        w.put_alloc(&a).await;
        w.report_health(&a.id, true).await;
        backlog.push(d);
    }
    // Every deployment is owed its success when the term begins.
    let watcher = start_leader(slow.clone(), &w.prefix).await;
    for d in &backlog {
        w.deployment_becomes(&d.id, "success", |d| {
            d.status() == DeploymentStatus::Successful
        })
        .await;
    }
    let most = slow.most.load(Ordering::Acquire);
    assert!(
        most > 1,
        "the backlog was written one deployment at a time ({most} in flight at most)"
    );
    watcher.stop().await;
}

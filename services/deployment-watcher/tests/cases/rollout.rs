//! A rolling update: health counted into the deployment, an evaluation for
//! the next batch as allocations turn healthy, and success with the
//! version marked stable.

use std::sync::Arc;

use caravan_proto::DeploymentStatus;
use caravan_store::Store;

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
    let watcher = start_leader(store.clone(), &w.prefix).await;

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

    w.report_health(&a1.id, true).await;
    w.report_health(&a2.id, true).await;
    let counted = w
        .deployment_becomes(&d.id, "two healthy allocs", |d| {
            d.task_groups["web"].healthy_allocs == 2
        })
        .await;
    assert_eq!(counted.status(), DeploymentStatus::Running);
    assert!(counted.task_groups["web"].require_progress_by_unix_ns >= first_deadline);
    let evals = w.wait_evals(&d.id, 1).await;
    // Both turned healthy within one batch window.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let evals_later = w.watcher_evals(&d.id).await;
    assert!(evals_later.len() <= 2, "batched: {}", evals_later.len());
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
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        w.watcher_evals(&d.id).await.len(),
        1,
        "no eval written twice"
    );
    assert_eq!(w.job("web").await.version, 1);
    again.stop().await;
}

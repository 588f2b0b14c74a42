//! Failures: an unhealthy allocation (with and without auto-revert) and a
//! progress deadline passing without progress.

use std::sync::Arc;

use caravan_proto::DeploymentStatus;
use caravan_store::Store;

use super::*;

pub async fn an_unhealthy_alloc_fails_and_reverts_to_the_stable_version(store: Arc<dyn Store>) {
    let w = World::new(store.clone(), "dw-revert");
    let update = UpdateStrategy {
        auto_revert: true,
        ..rolling()
    };
    let mut v0 = job(0, 2, update.clone());
    v0.stable = true;
    w.put_version(&v0).await;
    let mut v1 = job(1, 3, update.clone());
    v1.stable = true;
    w.put_version(&v1).await;
    let v2 = job(2, 4, update.clone());
    w.put_job(&v2).await;
    let d = deployment(&v2, 4, &update);
    w.put_deployment(&d).await;
    let bad = alloc(&d, 0);
    w.put_alloc(&bad).await;
    let watcher = start_leader(store.clone(), &w.prefix).await;

    w.report_health(&bad.id, false).await;
    let failed = w
        .deployment_becomes(&d.id, "failure", |d| d.status() == DeploymentStatus::Failed)
        .await;
    assert_eq!(
        failed.status_description,
        "Failed due to unhealthy allocations - rolling back to job version 1"
    );
    assert_eq!(failed.task_groups["web"].unhealthy_allocs, 1);

    // Version 1's specification is registered again as version 3.
    let current = w.job("web").await;
    assert_eq!(current.version, 3);
    assert_eq!(current.task_groups[0].count, 3);
    assert_eq!(current.meta["version"], "1");
    assert!(!current.stable);
    let v3 = w.version("web", 3).await.expect("version 3 written");
    assert_eq!(v3.task_groups[0].count, 3);
    // One eval, in the same transaction, evaluates the new version.
    let evals = w.wait_evals(&d.id, 1).await;
    assert_eq!(evals.len(), 1);
    assert_eq!(evals[0].job_modify_revision, current.job_modify_revision);
    assert_eq!(evals[0].create_revision, current.modify_revision);
    watcher.stop().await;
}

pub async fn without_auto_revert_a_failure_only_evaluates(store: Arc<dyn Store>) {
    let w = World::new(store.clone(), "dw-fail");
    let update = rolling();
    let mut v0 = job(0, 2, update.clone());
    v0.stable = true;
    w.put_version(&v0).await;
    let v1 = job(1, 2, update.clone());
    w.put_job(&v1).await;
    let d = deployment(&v1, 2, &update);
    w.put_deployment(&d).await;
    let (good, bad) = (alloc(&d, 0), alloc(&d, 1));
    w.put_alloc(&good).await;
    w.put_alloc(&bad).await;
    let watcher = start_leader(store.clone(), &w.prefix).await;
    w.report_health(&good.id, true).await;
    w.report_health(&bad.id, false).await;
    let failed = w
        .deployment_becomes(&d.id, "failure", |d| d.status() == DeploymentStatus::Failed)
        .await;
    assert_eq!(
        failed.status_description,
        "Failed due to unhealthy allocations"
    );
    let evals = w.wait_evals(&d.id, 1).await;
    let current = w.job("web").await;
    assert!(
        evals
            .iter()
            .all(|e| e.job_modify_revision == current.job_modify_revision)
    );
    assert_eq!(w.job("web").await.version, 1, "no rollback");
    assert!(w.version("web", 2).await.is_none());
    watcher.stop().await;
}

pub async fn the_progress_deadline_fails_a_stalled_deployment(store: Arc<dyn Store>) {
    let w = World::new(store.clone(), "dw-deadline");
    let update = UpdateStrategy {
        progress_deadline_ns: SEC,
        auto_revert: true,
        ..rolling()
    };
    let v0 = job(0, 2, update.clone());
    w.put_job(&v0).await;
    let d = deployment(&v0, 2, &update);
    w.put_deployment(&d).await;
    let (a1, a2) = (alloc(&d, 0), alloc(&d, 1));
    w.put_alloc(&a1).await;
    w.put_alloc(&a2).await;
    let watcher = start_leader(store.clone(), &w.prefix).await;
    let failed = w
        .deployment_becomes(&d.id, "the deadline to pass", |d| {
            d.status() == DeploymentStatus::Failed
        })
        .await;
    assert_eq!(
        failed.status_description,
        "Failed due to progress deadline - no stable job version to auto revert to"
    );
    let by = failed.task_groups["web"].require_progress_by_unix_ns;
    assert!(by >= a1.create_time_unix_ns + SEC, "deadline {by}");
    assert!(
        failed.modify_time_unix_ns >= by,
        "failed only once it passed"
    );
    w.wait_evals(&d.id, 1).await;
    watcher.stop().await;
}

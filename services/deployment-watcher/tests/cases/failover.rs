//! Leadership changes: a standby names the leader and takes over when it
//! resigns or dies, continuing the deployments it followed from the store
//! alone, and a deposed leader's writes are refused by the fence.

use std::sync::Arc;

use caravan_deployment_watcher::{DeploymentWriter, WatcherError};
use caravan_proto::{DeploymentStatus, WatcherPauseRequest};
use caravan_runtime::names::DEPLOYMENT_WATCHER;
use caravan_runtime::status;
use caravan_store::{Leadership, Store, election_name};
use tonic::Code;

use super::*;

/// A rolling deployment of `web` version 1 (count 2) with two allocations
/// placed, health undecided.
async fn rolling_world(w: &World) -> (Deployment, Allocation, Allocation) {
    let update = rolling();
    let mut v0 = job(0, 2, update.clone());
    v0.stable = true;
    w.put_version(&v0).await;
    let v1 = job(1, 2, update.clone());
    w.put_job(&v1).await;
    let d = deployment(&v1, 2, &update);
    w.put_deployment(&d).await;
    let (a1, a2) = (alloc(&d, 0), alloc(&d, 1));
    w.put_alloc(&a1).await;
    w.put_alloc(&a2).await;
    (d, a1, a2)
}

pub async fn a_standby_names_the_leader_and_takes_over(store: Arc<dyn Store>) {
    let w = World::new(store.clone(), "dw-standby");
    let (d, a1, a2) = rolling_world(&w).await;
    let leader = start_leader(store.clone(), &w.prefix).await;
    let mut standby = start(store.clone(), fast_config(&w.prefix)).await;

    // The standby refuses leader-only requests and names the leader.
    let refused = standby
        .client
        .pause(WatcherPauseRequest {
            deployment_id: d.id.clone(),
            pause: true,
        })
        .await
        .expect_err("a standby does not steer");
    assert_eq!(refused.code(), Code::Unavailable);
    assert_eq!(
        status::leader_hint(&refused).as_deref(),
        Some(leader.addr.to_string().as_str())
    );

    w.report_health(&a1.id, true).await;
    w.deployment_becomes(&d.id, "the leader to count a1", |d| {
        d.task_groups["web"].healthy_allocs == 1
    })
    .await;
    w.wait_evals(&d.id, 1).await;

    // The leader resigns on shutdown; the standby takes over at once and
    // carries the deployment to its end.
    leader.stop().await;
    standby.wait_leading().await;
    w.report_health(&a2.id, true).await;
    let done = w
        .deployment_becomes(&d.id, "the new leader to finish it", |d| {
            d.status() == DeploymentStatus::Successful
        })
        .await;
    assert_eq!(done.task_groups["web"].healthy_allocs, 2);
    assert_eq!(done.task_groups["web"].unhealthy_allocs, 0);
    let job = w.job("web").await;
    assert_eq!(job.version, 1, "no new version");
    assert!(job.stable);
    assert!(w.version("web", 1).await.unwrap().stable);
    standby.stop().await;
}

pub async fn a_killed_leaders_work_is_picked_up(store: Arc<dyn Store>) {
    let w = World::new(store.clone(), "dw-killed");
    let update = UpdateStrategy {
        auto_revert: true,
        ..rolling()
    };
    let mut v0 = job(0, 2, update.clone());
    v0.stable = true;
    w.put_version(&v0).await;
    let v1 = job(1, 4, update.clone());
    w.put_job(&v1).await;
    let d = deployment(&v1, 4, &update);
    w.put_deployment(&d).await;
    let (a1, a2) = (alloc(&d, 0), alloc(&d, 1));
    w.put_alloc(&a1).await;
    w.put_alloc(&a2).await;
    let leader = start_leader(store.clone(), &w.prefix).await;
    let mut standby = start(store.clone(), fast_config(&w.prefix)).await;
    w.deployment_becomes(&d.id, "the leader's first look", |d| {
        d.task_groups["web"].require_progress_by_unix_ns != 0
    })
    .await;

    // The leader dies; the batch turns healthy before anyone leads again.
    leader.kill().await;
    w.report_health(&a1.id, true).await;
    w.report_health(&a2.id, true).await;
    standby.wait_leading().await;
    let counted = w
        .deployment_becomes(&d.id, "the new leader to count", |d| {
            d.task_groups["web"].healthy_allocs == 2
        })
        .await;
    assert_eq!(counted.status(), DeploymentStatus::Running);
    // The eval the dead leader owed for the healthy batch is written.
    let evals = w.wait_evals(&d.id, 1).await;
    assert!(evals.iter().all(|e| e.job_id == "web"));

    // The next batch fails: the new leader reverts to version 0.
    let a3 = alloc(&d, 2);
    w.put_alloc(&a3).await;
    w.report_health(&a3.id, false).await;
    let failed = w
        .deployment_becomes(&d.id, "failure", |d| d.status() == DeploymentStatus::Failed)
        .await;
    assert_eq!(
        failed.status_description,
        "Failed due to unhealthy allocations - rolling back to job version 0"
    );
    assert_eq!(failed.task_groups["web"].healthy_allocs, 2);
    assert_eq!(failed.task_groups["web"].unhealthy_allocs, 1);
    let job = w.job("web").await;
    assert_eq!((job.version, job.task_groups[0].count), (2, 2));
    standby.stop().await;
}

pub async fn a_deposed_leaders_write_is_refused(store: Arc<dyn Store>) {
    let w = World::new(store.clone(), "dw-deposed");
    let (d, a1, _a2) = rolling_world(&w).await;
    // An old leader's term: it campaigns and keeps a writer.
    let election = election_name(&w.prefix, DEPLOYMENT_WATCHER);
    let old = Leadership::campaign(
        store.clone(),
        &election,
        "127.0.0.1:1",
        Duration::from_secs(2),
    )
    .await
    .expect("campaign");
    let lease = old.leader_key().lease;
    let old = Arc::new(old);
    let writer = DeploymentWriter::new(Arc::clone(&old), store.clone(), w.ks.clone());
    let stale = w.deployment(&d.id).await;

    // Its lease ends (a partition outlasting the TTL) and a watcher takes
    // over and works on the deployment.
    store.lease_revoke(lease).await.expect("revoke");
    let mut watcher = start_leader(store.clone(), &w.prefix).await;
    w.report_health(&a1.id, true).await;
    let current = w
        .deployment_becomes(&d.id, "the new leader to count", |d| {
            d.task_groups["web"].healthy_allocs == 1
        })
        .await;

    // The old leader's write, even guarded by the revision the new leader
    // wrote, is refused: nothing it sends commits.
    let mut failed = current.clone();
    failed.set_status(DeploymentStatus::Failed);
    let refused = writer
        .put_deployment(&failed, current.modify_revision, None)
        .await
        .expect_err("deposed");
    assert!(matches!(refused, WatcherError::Deposed), "{refused:?}");
    let refused = writer
        .put_deployment(&stale, stale.modify_revision, None)
        .await
        .expect_err("deposed");
    assert!(refused.is_deposed());
    let after = w.deployment(&d.id).await;
    assert_eq!(after.status(), DeploymentStatus::Running);
    assert!(after.modify_revision >= current.modify_revision);
    assert_eq!(after.task_groups["web"].healthy_allocs, 1);
    watcher.wait_leading().await;
    watcher.stop().await;
}

//! Canaries: held until promoted by hand, or promoted automatically once
//! healthy with auto_promote; promotion evaluates so the rest roll.

use std::sync::Arc;

use caravan_proto::{DeploymentStatus, WatcherPromoteRequest};
use caravan_store::Store;
use tonic::Code;

use super::*;

async fn canary_world(
    store: &Arc<dyn Store>,
    name: &str,
    auto_promote: bool,
) -> (World, Deployment, Allocation) {
    let w = World::new(store.clone(), name);
    let update = UpdateStrategy {
        canary: 1,
        auto_promote,
        ..rolling()
    };
    let v1 = job(1, 3, update.clone());
    w.put_job(&v1).await;
    let mut d = deployment(&v1, 3, &update);
    let canary = Allocation {
        deployment_status: Some(AllocDeploymentStatus {
            canary: true,
            ..Default::default()
        }),
        ..alloc(&d, 0)
    };
    d.task_groups.get_mut("web").unwrap().placed_canaries = vec![canary.id.clone()];
    w.put_deployment(&d).await;
    w.put_alloc(&canary).await;
    (w, d, canary)
}

pub async fn canaries_wait_for_promotion(store: Arc<dyn Store>) {
    let (w, d, canary) = canary_world(&store, "dw-canary", false).await;
    let mut watcher = start_leader(store.clone(), &w.prefix).await;

    let early = watcher
        .client
        .promote(WatcherPromoteRequest {
            deployment_id: d.id.clone(),
            all: true,
            groups: vec![],
        })
        .await
        .expect_err("the canary is not healthy yet");
    assert_eq!(early.code(), Code::FailedPrecondition);
    assert!(early.message().contains("has 0/1 healthy"), "{early:?}");

    w.report_health(&canary.id, true).await;
    let waiting = w
        .deployment_becomes(&d.id, "the canary to count", |d| {
            d.task_groups["web"].healthy_allocs == 1
        })
        .await;
    assert_eq!(
        waiting.status_description,
        "Deployment is running but requires manual promotion"
    );
    assert!(!waiting.task_groups["web"].promoted);
    // Only a wait shows "held": the canary's health was counted, so this
    // covers the pass that would have wrongly moved on after it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        w.deployment(&d.id).await.status(),
        DeploymentStatus::Running,
        "held until promoted"
    );

    let promoted = watcher
        .client
        .promote(WatcherPromoteRequest {
            deployment_id: d.id.clone(),
            all: false,
            groups: vec!["web".into()],
        })
        .await
        .expect("promote")
        .into_inner();
    let after = w.deployment(&d.id).await;
    assert!(after.task_groups["web"].promoted);
    assert_eq!(after.status_description, "Deployment is running");
    assert_eq!(after.modify_revision, promoted.revision);
    let evals = w.wait_evals(&d.id, 1).await;
    assert!(evals.iter().any(|e| e.id == promoted.eval_id));
    watcher.stop().await;
}

pub async fn auto_promote_promotes_healthy_canaries(store: Arc<dyn Store>) {
    let (w, d, canary) = canary_world(&store, "dw-autopromote", true).await;
    let watcher = start_leader(store.clone(), &w.prefix).await;
    let pending = w
        .deployment_becomes(&d.id, "the auto-promotion description", |d| {
            d.status_description == "Deployment is running pending automatic promotion"
        })
        .await;
    assert!(!pending.task_groups["web"].promoted);
    w.report_health(&canary.id, true).await;
    let promoted = w
        .deployment_becomes(&d.id, "automatic promotion", |d| {
            d.task_groups["web"].promoted
        })
        .await;
    assert_eq!(promoted.status(), DeploymentStatus::Running);
    assert_eq!(promoted.status_description, "Deployment is running");
    w.wait_evals(&d.id, 1).await;
    watcher.stop().await;
}

pub async fn a_failed_canary_deployment_evaluates_to_stop_its_canaries(store: Arc<dyn Store>) {
    let (w, d, canary) = canary_world(&store, "dw-canary-fail", false).await;
    let watcher = start_leader(store.clone(), &w.prefix).await;
    w.report_health(&canary.id, false).await;
    let failed = w
        .deployment_becomes(&d.id, "the unhealthy canary to fail it", |d| {
            d.status() == DeploymentStatus::Failed
        })
        .await;
    assert_eq!(
        failed.status_description,
        "Failed due to unhealthy allocations"
    );
    let group = &failed.task_groups["web"];
    assert_eq!((group.unhealthy_allocs, group.promoted), (1, false));
    assert_eq!(group.placed_canaries, vec![canary.id.clone()]);
    // The scheduler stops the unpromoted canaries of a failed deployment
    // when it evaluates the job: the watcher writes that eval with the
    // failure.
    let evals = w.wait_evals(&d.id, 1).await;
    assert_eq!(evals.len(), 1);
    assert_eq!(evals[0].job_id, "web");
    assert_eq!(evals[0].status(), caravan_proto::EvalStatus::Pending);
    assert_eq!(evals[0].create_revision, failed.modify_revision);
    assert_eq!(w.job("web").await.version, 1, "no auto_revert: job kept");
    watcher.stop().await;
}

pub async fn healthy_canaries_outlive_the_progress_deadline(store: Arc<dyn Store>) {
    let w = World::new(store.clone(), "dw-canary-deadline");
    let update = UpdateStrategy {
        canary: 1,
        progress_deadline_ns: SEC,
        ..rolling()
    };
    let v1 = job(1, 2, update.clone());
    w.put_job(&v1).await;
    let mut d = deployment(&v1, 2, &update);
    let canary = Allocation {
        deployment_status: Some(AllocDeploymentStatus {
            canary: true,
            ..Default::default()
        }),
        ..alloc(&d, 0)
    };
    d.task_groups.get_mut("web").unwrap().placed_canaries = vec![canary.id.clone()];
    w.put_deployment(&d).await;
    w.put_alloc(&canary).await;
    let mut watcher = start_leader(store.clone(), &w.prefix).await;
    w.report_health(&canary.id, true).await;
    w.deployment_becomes(&d.id, "the canary to count", |d| {
        d.task_groups["web"].healthy_allocs == 1
    })
    .await;
    // Well past the deadline the healthy canary waits for the operator, as
    // in Nomad; the promotion restarts the deadline, which then fails the
    // deployment when the rest never turns healthy. The window: the 1 s
    // deadline, counted from the deployment's creation before this point,
    // plus 1 s for a watcher that would wrongly fail it to write that down
    // (it does so within milliseconds of the deadline when unloaded).
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let waiting = w.deployment(&d.id).await;
    assert_eq!(waiting.status(), DeploymentStatus::Running);
    watcher
        .client
        .promote(WatcherPromoteRequest {
            deployment_id: d.id.clone(),
            all: true,
            groups: vec![],
        })
        .await
        .expect("promote");
    let failed = w
        .deployment_becomes(&d.id, "the restarted deadline to pass", |d| {
            d.status() == DeploymentStatus::Failed
        })
        .await;
    assert_eq!(failed.status_description, "Failed due to progress deadline");
    assert!(failed.task_groups["web"].promoted);
    watcher.stop().await;
}

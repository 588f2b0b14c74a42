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

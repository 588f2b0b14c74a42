//! The operator's steering over gRPC: promotion by group and of all groups,
//! pause and resume, failing by hand (with auto-revert), allocation health
//! set by hand, and requests refused before anything is written.

use std::sync::Arc;

use caravan_proto::{
    DeploymentStatus, EvalStatus, WatcherAllocHealthRequest, WatcherPauseRequest,
    WatcherPromoteRequest,
};
use caravan_store::Store;
use tonic::Code;

use super::*;

/// A deployment of `web` version 1 with groups `web` and `api`, each with
/// one placed canary; returns it with the two canaries (web's, api's).
async fn two_group_canaries(w: &World) -> (Deployment, Allocation, Allocation) {
    let update = UpdateStrategy {
        canary: 1,
        ..rolling()
    };
    let mut v1 = job(1, 2, update.clone());
    v1.task_groups.push(TaskGroup {
        name: "api".into(),
        count: 2,
        update: Some(update.clone()),
        ..Default::default()
    });
    w.put_job(&v1).await;
    let mut d = deployment(&v1, 2, &update);
    let api_state = d.task_groups["web"].clone();
    d.task_groups.insert("api".into(), api_state);
    let canary = |group: &str, index| {
        let mut a = alloc(&d, index);
        a.task_group = group.into();
        a.name = format!("web.{group}[{index}]");
        a.deployment_status = Some(AllocDeploymentStatus {
            canary: true,
            ..Default::default()
        });
        a
    };
    let (web, api) = (canary("web", 0), canary("api", 0));
    d.task_groups.get_mut("web").unwrap().placed_canaries = vec![web.id.clone()];
    d.task_groups.get_mut("api").unwrap().placed_canaries = vec![api.id.clone()];
    w.put_deployment(&d).await;
    w.put_alloc(&web).await;
    w.put_alloc(&api).await;
    (d, web, api)
}

pub async fn promote_by_group_then_all(store: Arc<dyn Store>) {
    let w = World::new(store.clone(), "dw-promote-groups");
    let (d, web, api) = two_group_canaries(&w).await;
    let mut watcher = start_leader(store.clone(), &w.prefix).await;
    w.report_health(&web.id, true).await;
    w.report_health(&api.id, true).await;
    w.deployment_becomes(&d.id, "both canaries to count", |d| {
        d.task_groups["web"].healthy_allocs == 1 && d.task_groups["api"].healthy_allocs == 1
    })
    .await;

    let by_group = watcher
        .client
        .promote(WatcherPromoteRequest {
            deployment_id: d.id.clone(),
            all: false,
            groups: vec!["api".into()],
        })
        .await
        .expect("promote api")
        .into_inner();
    let after = w.deployment(&d.id).await;
    assert!(after.task_groups["api"].promoted);
    assert!(!after.task_groups["web"].promoted, "only the group named");
    assert_eq!(after.status(), DeploymentStatus::Running);
    assert_eq!(
        after.status_description,
        "Deployment is running but requires manual promotion"
    );
    assert!(after.task_groups["api"].require_progress_by_unix_ns > 0);
    let evals = w.watcher_evals(&d.id).await;
    let eval = evals
        .iter()
        .find(|e| e.id == by_group.eval_id)
        .expect("the promotion's eval");
    assert_eq!(eval.status(), EvalStatus::Pending);
    assert_eq!(eval.job_id, "web");

    let all = watcher
        .client
        .promote(WatcherPromoteRequest {
            deployment_id: d.id.clone(),
            all: true,
            groups: vec![],
        })
        .await
        .expect("promote all")
        .into_inner();
    let after = w.deployment(&d.id).await;
    assert!(after.task_groups["web"].promoted && after.task_groups["api"].promoted);
    assert_eq!(after.status_description, "Deployment is running");
    assert_eq!(after.modify_revision, all.revision);
    assert!(
        w.watcher_evals(&d.id)
            .await
            .iter()
            .any(|e| e.id == all.eval_id)
    );
    // The rest of both groups turn healthy: the deployment succeeds and
    // version 1 turns stable.
    for (group, index) in [("web", 1), ("api", 1)] {
        let mut a = alloc(&d, index);
        a.task_group = group.into();
        w.put_alloc(&a).await;
        w.report_health(&a.id, true).await;
    }
    w.deployment_becomes(&d.id, "success", |d| {
        d.status() == DeploymentStatus::Successful
    })
    .await;
    eventually("version 1 to turn stable", PATIENCE, || async {
        w.version("web", 1).await.is_some_and(|v| v.stable)
    })
    .await;
    watcher.wait_leading().await;
    watcher.stop().await;
}

pub async fn pause_holds_evals_and_resume_evaluates(store: Arc<dyn Store>) {
    let w = World::new(store.clone(), "dw-pause");
    let update = rolling();
    let v1 = job(1, 4, update.clone());
    w.put_job(&v1).await;
    let d = deployment(&v1, 4, &update);
    w.put_deployment(&d).await;
    let (a1, a2) = (alloc(&d, 0), alloc(&d, 1));
    w.put_alloc(&a1).await;
    w.put_alloc(&a2).await;
    let mut watcher = start_leader(store.clone(), &w.prefix).await;

    let paused = watcher
        .client
        .pause(WatcherPauseRequest {
            deployment_id: d.id.clone(),
            pause: true,
        })
        .await
        .expect("pause")
        .into_inner();
    assert!(paused.eval_id.is_empty(), "a pause evaluates nothing");
    let stored = w.deployment(&d.id).await;
    assert_eq!(stored.status(), DeploymentStatus::Paused);
    assert_eq!(stored.status_description, "Deployment is paused");

    // Health is still counted while paused, but no batch is rolled.
    w.report_health(&a1.id, true).await;
    w.report_health(&a2.id, true).await;
    let counted = w
        .deployment_becomes(&d.id, "health counted while paused", |d| {
            d.task_groups["web"].healthy_allocs == 2
        })
        .await;
    assert_eq!(counted.status(), DeploymentStatus::Paused);
    // Only a wait shows "no eval": the reports were seen (counted), so this
    // covers their 100 ms batch window and the write it would end in.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        w.watcher_evals(&d.id).await.is_empty(),
        "no eval while paused"
    );

    let resumed = watcher
        .client
        .pause(WatcherPauseRequest {
            deployment_id: d.id.clone(),
            pause: false,
        })
        .await
        .expect("resume")
        .into_inner();
    assert!(!resumed.eval_id.is_empty());
    let stored = w.deployment(&d.id).await;
    assert_eq!(stored.status(), DeploymentStatus::Running);
    assert_eq!(stored.status_description, "Deployment is running");
    let evals = w.wait_evals(&d.id, 1).await;
    assert_eq!(evals.len(), 1);
    assert_eq!(evals[0].id, resumed.eval_id);
    assert_eq!(evals[0].priority, 60);
    assert_eq!(w.job("web").await.version, 1);
    watcher.wait_leading().await;
    watcher.stop().await;
}

pub async fn manual_fail_and_alloc_health(store: Arc<dyn Store>) {
    let w = World::new(store.clone(), "dw-manual");
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
    // a1's client reported it running (in a status batch of its job, as a
    // gateway writes it), health not yet set: the watcher's write of the
    // status key is guarded by what it read, though no status key exists.
    let mut running = a1.clone();
    running.set_client_status(caravan_proto::AllocClientStatus::Running);
    store
        .put(
            &w.ks.job_status(&a1.namespace, &a1.job_id, "b1"),
            &caravan_state::status_batch::encode_batch([(
                a1.id.as_str(),
                &caravan_state::client_part(&running),
                0,
            )]),
            0,
        )
        .await
        .unwrap();
    let mut watcher = start_leader(store.clone(), &w.prefix).await;

    // Health set by hand counts as the client's would, with an eval: on the
    // client's status key, which is the allocation's once it exists.
    let marked = watcher
        .client
        .set_alloc_health(WatcherAllocHealthRequest {
            deployment_id: d.id.clone(),
            healthy_alloc_ids: vec![a1.id.clone()],
            unhealthy_alloc_ids: vec![],
        })
        .await
        .expect("set health")
        .into_inner();
    let a: Allocation = caravan_state::read_alloc(store.as_ref(), &w.ks, &a1.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(a.deployment_status.unwrap().healthy, Some(true));
    assert_eq!(a.client_status(), caravan_proto::AllocClientStatus::Running);
    assert!(
        w.watcher_evals(&d.id)
            .await
            .iter()
            .any(|e| e.id == marked.eval_id)
    );
    w.deployment_becomes(&d.id, "the healthy mark to count", |d| {
        d.task_groups["web"].healthy_allocs == 1
    })
    .await;

    // Failing by hand rolls back to the stable version 0 as version 2.
    let failed = watcher
        .client
        .fail(WatcherFailRequest {
            deployment_id: d.id.clone(),
        })
        .await
        .expect("fail")
        .into_inner();
    let stored = w.deployment(&d.id).await;
    assert_eq!(stored.status(), DeploymentStatus::Failed);
    assert_eq!(
        stored.status_description,
        "Deployment marked as failed - rolling back to job version 0"
    );
    assert_eq!(stored.modify_revision, failed.revision);
    let current = w.job("web").await;
    assert_eq!(current.version, 2);
    assert_eq!(current.task_groups[0].count, 2);
    assert_eq!(current.meta["version"], "0");
    assert!(w.version("web", 2).await.is_some());
    let eval = w
        .watcher_evals(&d.id)
        .await
        .into_iter()
        .find(|e| e.id == failed.eval_id)
        .expect("the failure's eval");
    assert_eq!(eval.job_modify_revision, current.job_modify_revision);

    // A terminal deployment can't be steered any more.
    let again = watcher
        .client
        .fail(WatcherFailRequest {
            deployment_id: d.id.clone(),
        })
        .await
        .expect_err("already failed");
    assert_eq!(again.code(), Code::FailedPrecondition);
    let health = watcher
        .client
        .set_alloc_health(WatcherAllocHealthRequest {
            deployment_id: d.id.clone(),
            healthy_alloc_ids: vec![],
            unhealthy_alloc_ids: vec![a2.id.clone()],
        })
        .await
        .expect_err("terminal deployment");
    assert_eq!(health.code(), Code::FailedPrecondition);
    assert_eq!(w.job("web").await.version, 2, "reverted once only");
    watcher.wait_leading().await;
    watcher.stop().await;
}

pub async fn bad_requests_name_the_field(store: Arc<dyn Store>) {
    let w = World::new(store.clone(), "dw-bad");
    let (d, web, _api) = two_group_canaries(&w).await;
    let mut watcher = start_leader(store.clone(), &w.prefix).await;
    // The watcher's first look writes the progress deadline; wait for it so
    // the deployment is quiet before checking nothing else writes it.
    w.deployment_becomes(&d.id, "the first assessment", |d| {
        d.task_groups["web"].require_progress_by_unix_ns != 0
    })
    .await;
    let before = w.deployment(&d.id).await;
    let c = &mut watcher.client;

    let invalid = |s: tonic::Status, field: &str| {
        assert_eq!(s.code(), Code::InvalidArgument, "{s:?}");
        assert!(s.message().starts_with(field), "{field}: {s:?}");
    };
    let promote = |id: &str, all: bool, groups: &[&str]| WatcherPromoteRequest {
        deployment_id: id.into(),
        all,
        groups: groups.iter().map(|g| g.to_string()).collect(),
    };
    invalid(
        c.promote(promote("", true, &[])).await.unwrap_err(),
        "deployment_id",
    );
    invalid(
        c.promote(promote(&d.id, false, &["db"])).await.unwrap_err(),
        "groups[0]",
    );
    invalid(
        c.promote(promote(&d.id, false, &["web", "db"]))
            .await
            .unwrap_err(),
        "groups[1]",
    );
    invalid(
        c.promote(promote(&d.id, false, &[])).await.unwrap_err(),
        "groups",
    );
    invalid(
        c.fail(WatcherFailRequest {
            deployment_id: String::new(),
        })
        .await
        .unwrap_err(),
        "deployment_id",
    );
    invalid(
        c.pause(WatcherPauseRequest {
            deployment_id: String::new(),
            pause: true,
        })
        .await
        .unwrap_err(),
        "deployment_id",
    );
    let health = |healthy: Vec<String>, unhealthy: Vec<String>| WatcherAllocHealthRequest {
        deployment_id: d.id.clone(),
        healthy_alloc_ids: healthy,
        unhealthy_alloc_ids: unhealthy,
    };
    invalid(
        c.set_alloc_health(health(vec![], vec![]))
            .await
            .unwrap_err(),
        "healthy_alloc_ids",
    );
    invalid(
        c.set_alloc_health(health(vec![web.id.clone()], vec![web.id.clone()]))
            .await
            .unwrap_err(),
        "unhealthy_alloc_ids[0]",
    );
    invalid(
        c.set_alloc_health(health(vec![String::new()], vec![]))
            .await
            .unwrap_err(),
        "healthy_alloc_ids[0]",
    );

    // Unknown deployments and allocations are not found.
    let unknown = uuid();
    for s in [
        c.promote(promote(&unknown, true, &[])).await.unwrap_err(),
        c.fail(WatcherFailRequest {
            deployment_id: unknown.clone(),
        })
        .await
        .unwrap_err(),
        c.pause(WatcherPauseRequest {
            deployment_id: unknown.clone(),
            pause: true,
        })
        .await
        .unwrap_err(),
        c.set_alloc_health(health(vec![uuid()], vec![]))
            .await
            .unwrap_err(),
    ] {
        assert_eq!(s.code(), Code::NotFound, "{s:?}");
    }
    // Promoting canaries that aren't healthy is refused with the reason.
    let early = c.promote(promote(&d.id, true, &[])).await.unwrap_err();
    assert_eq!(early.code(), Code::FailedPrecondition);
    assert!(early.message().contains("0/1 healthy"), "{early:?}");

    // None of it wrote anything.
    let after = w.deployment(&d.id).await;
    assert_eq!(after.modify_revision, before.modify_revision);
    assert!(w.watcher_evals(&d.id).await.is_empty());
    let a: Allocation = w.get(w.ks.alloc(&web.id)).await.unwrap();
    assert_eq!(a.deployment_status.unwrap().healthy, None);
    watcher.stop().await;
}

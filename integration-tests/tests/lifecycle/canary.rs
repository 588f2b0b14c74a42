//! Scenario 3: one canary promoted by hand, then one promoted automatically.

use caravan_integration_tests::{Progress, jobs, wait_for};
use caravan_model::AllocExt;
use caravan_proto::DeploymentStatus;
use serde_json::json;

use crate::{
    Reaper, SECOND_NS, STEP, job_deployments, pid_dir, raw_exec_cluster, register, running, set,
    sleeper_script, wait_allocs, wait_deployment, wait_running_version,
};

const JOB: &str = "canaried";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_waits_for_promotion_unless_auto_promoted() {
    let (c, _nodes) = raw_exec_cluster("canary", &["canary-a", "canary-b"]).await;
    let pids_dir = pid_dir(&c);
    let _reaper = Reaper(pids_dir.clone());
    let http = c.http().unwrap();
    let spec = |greeting: &str, auto_promote: bool| {
        let mut job = jobs::service_job(
            JOB,
            2,
            jobs::raw_exec_task(&sleeper_script(&pids_dir, greeting)),
        );
        set(
            &mut job,
            "/Job/TaskGroups/0/Update",
            json!({
                "MaxParallel": 1,
                "Canary": 1,
                "AutoPromote": auto_promote,
                "MinHealthyTime": SECOND_NS,
                "HealthyDeadline": 20 * SECOND_NS,
                "ProgressDeadline": 30 * SECOND_NS,
            }),
        );
        job
    };
    register(&http, &spec("v0", false)).await;
    wait_running_version(&c, JOB, 2, 0).await;
    wait_deployment(&c, JOB, 0, DeploymentStatus::Successful).await;

    // Version 1: one healthy canary next to both old allocs, and the
    // deployment waits for a promotion.
    register(&http, &spec("v1", false)).await;
    let allocs = wait_allocs(&c, "a healthy canary of v1", JOB, |allocs| {
        allocs.iter().any(|a| {
            a.job_version == 1
                && a.deployment_status
                    .as_ref()
                    .is_some_and(|d| d.canary && d.healthy == Some(true))
        })
    })
    .await;
    let live: Vec<_> = allocs.iter().filter(|a| a.is_live()).collect();
    assert_eq!(
        live.iter().filter(|a| a.job_version == 0).count(),
        2,
        "the old allocs keep running beside the canary: {}",
        crate::describe(&allocs)
    );
    assert_eq!(live.iter().filter(|a| a.job_version == 1).count(), 1);
    let deployment = job_deployments(&c.state, JOB)
        .await
        .unwrap()
        .into_iter()
        .find(|d| d.job_version == 1)
        .unwrap();
    let group = &deployment.task_groups["g"];
    assert_eq!(group.desired_canaries, 1, "{deployment:?}");
    assert_eq!(group.placed_canaries.len(), 1, "{deployment:?}");
    assert!(!group.promoted);
    let state = c.state.clone();
    wait_for("the deployment to wait for promotion", STEP, async || {
        let deps = job_deployments(&state, JOB).await?;
        let d = deps.iter().find(|d| d.job_version == 1);
        Ok(match d {
            Some(d) if d.task_groups["g"].healthy_allocs == 1 => Progress::Done(()),
            other => Progress::Waiting(format!("{other:?}")),
        })
    })
    .await
    .unwrap();
    // Nothing moves without the promotion.
    assert_eq!(
        running(&crate::job_allocs(&c.state, JOB).await.unwrap())
            .iter()
            .filter(|a| a.job_version == 0)
            .count(),
        2
    );

    let reply = http
        .put_json(
            &format!("/v1/deployment/promote/{}", deployment.id),
            &json!({"DeploymentID": deployment.id, "All": true}),
        )
        .await
        .unwrap();
    reply.ok_json().unwrap();
    let done = wait_deployment(&c, JOB, 1, DeploymentStatus::Successful).await;
    assert!(done.task_groups["g"].promoted, "{done:?}");
    wait_running_version(&c, JOB, 2, 1).await;

    // Version 2 with auto_promote: the canary turns healthy and the
    // deployment rolls on by itself.
    register(&http, &spec("v2", true)).await;
    let done = wait_deployment(&c, JOB, 2, DeploymentStatus::Successful).await;
    assert!(done.task_groups["g"].promoted, "{done:?}");
    assert_eq!(done.task_groups["g"].placed_canaries.len(), 1, "{done:?}");
    wait_running_version(&c, JOB, 2, 2).await;
}

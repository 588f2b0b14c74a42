//! A deployment of a docker service job rolls forward, and a failing update
//! is reverted to the last stable version, as a raw_exec one is.

use caravan_integration_tests::docker::ContainerSweeper;
use caravan_integration_tests::{ClusterState, Progress, wait_for};
use caravan_model::AllocExt;
use caravan_proto::{AllocClientStatus, Deployment, DeploymentStatus};
use serde_json::{Value, json};

use crate::{SECOND_NS, STEP, docker_cluster, docker_task, register};

const JOB: &str = "rolling";

fn spec(script: &str) -> Value {
    let mut job =
        caravan_integration_tests::jobs::service_job(JOB, 2, docker_task("busybox:1", script));
    let g = &mut job["Job"]["TaskGroups"][0];
    g["Update"] = json!({
        "MaxParallel": 1,
        "MinHealthyTime": SECOND_NS,
        "HealthyDeadline": 20 * SECOND_NS,
        "ProgressDeadline": 30 * SECOND_NS,
        "AutoRevert": true,
    });
    g["RestartPolicy"] =
        json!({"Attempts": 0, "Interval": 60 * SECOND_NS, "Delay": SECOND_NS, "Mode": "fail"});
    g["ReschedulePolicy"] = json!({"Attempts": 0, "Unlimited": false});
    job
}

async fn deployment(state: &ClusterState, version: u64, status: DeploymentStatus) -> Deployment {
    let state = state.clone();
    wait_for(
        &format!("deployment of version {version} {status:?}"),
        STEP * 2,
        async || {
            let all: Vec<Deployment> = state.list(caravan_state::Kind::Deployments).await?;
            let d = all
                .into_iter()
                .find(|d| d.job_id == JOB && d.job_version == version);
            Ok(match d {
                Some(d) if d.status() == status => Progress::Done(d),
                other => Progress::Waiting(format!("{:?}", other.map(|d| d.status()))),
            })
        },
    )
    .await
    .unwrap()
}

async fn running_version(state: &ClusterState, version: u64) {
    let state = state.clone();
    wait_for(
        &format!("2 allocs of version {version} running"),
        STEP * 2,
        async || {
            let allocs = state.allocs().await?;
            let n = allocs
                .iter()
                .filter(|a| {
                    a.job_id == JOB
                        && a.job_version == version
                        && a.is_live()
                        && a.client_status() == AllocClientStatus::Running
                })
                .count();
            Ok(if n == 2 {
                Progress::Done(())
            } else {
                Progress::Waiting(format!("{n} running"))
            })
        },
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_deployment_rolls_forward_and_reverts_a_failing_update() {
    let sweeper = ContainerSweeper::default();
    let (c, _) = docker_cluster("docker-deploy", "deploy-a", &[], &sweeper).await;
    let http = c.http().unwrap();
    register(&http, &spec("echo v0; exec sleep 300")).await;
    running_version(&c.state, 0).await;
    deployment(&c.state, 0, DeploymentStatus::Successful).await;
    register(&http, &spec("echo v1; exec sleep 300")).await;
    running_version(&c.state, 1).await;
    deployment(&c.state, 1, DeploymentStatus::Successful).await;

    register(&http, &spec("echo broken; exit 3")).await;
    let failed = deployment(&c.state, 2, DeploymentStatus::Failed).await;
    assert!(failed.task_groups["g"].unhealthy_allocs >= 1, "{failed:?}");
    // The revert registers version 3 with version 1's task, and it runs.
    running_version(&c.state, 3).await;
    let job = http.get_json(&format!("/v1/job/{JOB}")).await.unwrap();
    assert_eq!(job["Version"], 3);
    assert_eq!(
        job.pointer("/TaskGroups/0/Tasks/0/Config/args/1"),
        Some(&json!("echo v1; exec sleep 300"))
    );
}

//! Deployments through the client: a canary awaiting promotion paused,
//! resumed and promoted; the next version's deployment failed by hand.

#![allow(clippy::unwrap_used)]

use caravan_client::proto::{Deployment, DeploymentStatus};
use caravan_client::{Client, Error};

use crate::common::{WAIT, cluster, eventually_some, hcl};

const CANARY_HCL: &str = r#"
job "canary" {
  type = "service"
  group "canary" {
    count = 2
    update {
      canary            = 1
      max_parallel      = 1
      min_healthy_time  = "1s"
      healthy_deadline  = "30s"
      progress_deadline = "1m"
    }
    task "canary" {
      driver = "mock"
      config {
        run_for = "RUN_FOR"
      }
      resources {
        cpu    = 10
        memory = 10
      }
    }
  }
}
"#;

/// Job `canary`'s deployment of `version` once `ready` holds.
async fn deployment_of(
    client: &Client,
    version: u64,
    what: &str,
    ready: impl Fn(&Deployment) -> bool,
) -> Deployment {
    eventually_some(what, WAIT, || async {
        let deployments = client.deployments().list("").await.ok()?;
        deployments
            .into_iter()
            .find(|d| d.job_id == "canary" && d.job_version == version && ready(d))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn canaries_promoted_and_deployments_paused_and_failed() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path()).await;
    let client = Client::connect(cluster.address()).await.unwrap();
    let version = |run_for: &str| hcl(&CANARY_HCL.replace("RUN_FOR", run_for));
    let status_is = |s: DeploymentStatus| move |d: &Deployment| d.status() == s;

    client.jobs().register(version("10m")).await.unwrap();
    deployment_of(
        &client,
        0,
        "version 0 to deploy",
        status_is(DeploymentStatus::Successful),
    )
    .await;

    client.jobs().register(version("11m")).await.unwrap();
    let d = deployment_of(&client, 1, "a healthy canary", |d| {
        d.task_groups
            .get("canary")
            .is_some_and(|g| g.healthy_allocs >= 1)
    })
    .await;
    assert!(!d.task_groups["canary"].promoted);
    client.deployments().pause(&d.id, true).await.unwrap();
    // Pausing twice leaves it paused: the call is one the client retries.
    client.deployments().pause(&d.id, true).await.unwrap();
    assert_eq!(
        client.deployments().get(&d.id).await.unwrap().status(),
        DeploymentStatus::Paused
    );
    client.deployments().pause(&d.id, false).await.unwrap();
    client
        .deployments()
        .promote(&d.id, Vec::new())
        .await
        .unwrap();
    let done = deployment_of(
        &client,
        1,
        "the promoted deployment to end",
        status_is(DeploymentStatus::Successful),
    )
    .await;
    assert!(done.task_groups["canary"].promoted);
    let read = client
        .deployments()
        .get_after(&d.id, 0, std::time::Duration::ZERO)
        .await
        .unwrap();
    assert!(read.revision > 0);

    client.jobs().register(version("12m")).await.unwrap();
    let d = deployment_of(
        &client,
        2,
        "version 2's deployment",
        status_is(DeploymentStatus::Running),
    )
    .await;
    client.deployments().fail(&d.id).await.unwrap();
    assert_eq!(
        client.deployments().get(&d.id).await.unwrap().status(),
        DeploymentStatus::Failed
    );
    let err = client
        .deployments()
        .promote("no-such-deployment", Vec::new())
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    assert!(matches!(
        client.deployments().get("no-such-deployment").await,
        Err(Error::NotFound { .. })
    ));
    cluster.stop().await.unwrap();
}

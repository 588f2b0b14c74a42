//! The Docker daemon going away and coming back. Stopping this machine's
//! daemon would take every other test's containers with it, so the client
//! talks to the daemon through a socket of the test's
//! ([`SocketProxy`]), which the test takes down and brings back: the
//! node's docker driver turns unhealthy, the scheduler places no docker
//! task there meanwhile, and once the socket is back the driver is healthy
//! again, the waiting job is placed, and the container that ran throughout
//! is the same one, still running.

use std::time::Duration;

use caravan_integration_tests::docker::{ContainerSweeper, SocketProxy, inspect};
use caravan_integration_tests::{ClusterState, Progress, wait_for};

use crate::{
    STEP, docker_cluster, docker_job, docker_task, register, running, task, the_container,
};

async fn docker_healthy(state: &ClusterState, node: &str, want: bool) {
    let (state, node) = (state.clone(), node.to_string());
    wait_for(
        &format!("the node's docker driver healthy={want}"),
        STEP,
        async || {
            let nodes = state.nodes().await?;
            let info = nodes
                .iter()
                .find(|n| n.id == node)
                .and_then(|n| n.drivers.get("docker").cloned());
            Ok(match info {
                Some(i) if i.healthy == want && i.detected => Progress::Done(i),
                other => Progress::Waiting(format!("{other:?}")),
            })
        },
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_that_goes_away_is_unhealthy_until_it_comes_back() {
    let sweeper = ContainerSweeper::default();
    let dir = tempfile::tempdir().unwrap();
    let proxy = SocketProxy::start(&dir.path().join("docker.sock")).unwrap();
    let endpoint = proxy.endpoint();
    let (c, node) = docker_cluster(
        "docker-daemon",
        "daemon-a",
        &[
            ("plugin.docker.endpoint", &endpoint),
            ("plugin.docker.fingerprint_interval_ms", "200"),
        ],
        &sweeper,
    )
    .await;
    docker_healthy(&c.state, &node, true).await;
    let http = c.http().unwrap();
    register(
        &http,
        &docker_job("steady", docker_task("busybox:1", "exec sleep 300")),
    )
    .await;
    let steady = running(&c, "steady").await;
    let container = the_container(&steady.id).await;

    proxy.down();
    docker_healthy(&c.state, &node, false).await;
    let nodes = c.state.nodes().await.unwrap();
    let info = &nodes.iter().find(|n| n.id == node).unwrap().drivers["docker"];
    assert_eq!(
        info.health_description,
        "Failed to connect to docker daemon"
    );
    register(
        &http,
        &docker_job("later", docker_task("busybox:1", "exec sleep 300")),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let placed: Vec<_> = c
        .state
        .allocs()
        .await
        .unwrap()
        .into_iter()
        .filter(|a| a.job_id == "later")
        .collect();
    assert!(
        placed.is_empty(),
        "placed on an unhealthy driver: {placed:?}"
    );

    proxy.up().unwrap();
    docker_healthy(&c.state, &node, true).await;
    let later = running(&c, "later").await;
    assert_eq!(later.node_id, node);
    // Nothing lost: the task that ran throughout is the same container.
    let still = running(&c, "steady").await;
    assert_eq!(still.id, steady.id);
    assert_eq!(task(&still).restarts, 0, "{:?}", task(&still).events);
    assert_eq!(the_container(&steady.id).await, container);
    assert_eq!(inspect(&container)["State"]["Running"], true);
}

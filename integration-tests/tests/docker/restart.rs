//! The client node SIGKILLed and started again: it finds its container by
//! the id its handle recorded (the same container, no second one), and
//! removes the containers of allocs it no longer runs.

use caravan_integration_tests::docker::{
    ALLOC_LABEL, ContainerSweeper, NODE_LABEL, containers_of_alloc, docker, inspect,
};
use caravan_integration_tests::{Progress, wait_for};

use crate::{
    STEP, docker_cluster, docker_job, docker_task, register, running, task, the_container,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_client_finds_its_container_and_removes_orphans() {
    let sweeper = ContainerSweeper::default();
    let (mut c, node) = docker_cluster("docker-restart", "restart-a", &[], &sweeper).await;
    register(
        &c.http().unwrap(),
        &docker_job("kept", docker_task("busybox:1", "echo up; exec sleep 300")),
    )
    .await;
    let alloc = running(&c, "kept").await;
    let id = the_container(&alloc.id).await;

    c.crash_client("restart-a").unwrap();
    // A container of this node for an alloc no server knows, as a client
    // that lost its record would leave behind.
    let orphan = docker(&[
        "run",
        "-d",
        "--label",
        &format!("{NODE_LABEL}={node}"),
        "--label",
        &format!("{ALLOC_LABEL}=00000000-dead-beef-0000-000000000000"),
        "busybox:1",
        "sleep",
        "300",
    ])
    .unwrap()
    .trim()
    .to_string();
    assert_eq!(
        inspect(&id)["State"]["Running"],
        true,
        "the task outlives its client"
    );

    c.restart_client("restart-a").await.unwrap();
    wait_for("the orphan's container to be removed", STEP, async || {
        Ok(if inspect(&orphan).is_null() {
            Progress::Done(())
        } else {
            Progress::Waiting(String::new())
        })
    })
    .await
    .unwrap();
    let after = running(&c, "kept").await;
    assert_eq!(after.id, alloc.id);
    assert_eq!(
        containers_of_alloc(&alloc.id).unwrap(),
        vec![id.clone()],
        "the same container, no second one"
    );
    assert_eq!(task(&after).restarts, 0);
    assert!(
        !task(&after).events.iter().any(|e| e.r#type == "Task Lost"),
        "{:?}",
        task(&after).events
    );
    // Still watched: stopping the job stops that container.
    let out = c.cli(&["job", "stop", "kept"]).await.unwrap();
    assert!(out.status.success(), "{out:?}");
    let cid = id.clone();
    wait_for("the re-attached container to stop", STEP, async || {
        Ok(
            if inspect(&cid).is_null() || inspect(&cid)["State"]["Running"] == false {
                Progress::Done(())
            } else {
                Progress::Waiting(String::new())
            },
        )
    })
    .await
    .unwrap();
}

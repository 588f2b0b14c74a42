//! The server layout: docker-compose.yml with docker/server.yml, the
//! eval-broker, plan-applier, deployment-watcher and a scheduler-worker as
//! two `caravan server` containers (health-checked by `caravan server
//! -health`). It runs the first jobs, loses the container that leads, and
//! the other takes every leadership over: a batch job still completes, the
//! killed container comes back healthy, and the invariants hold.

use crate::stack::{
    Layout, check_invariants, first_jobs_still_run, kill_leader, run_batch, run_first_jobs,
    up_and_ready,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Docker and the images of scripts/images: run by scripts/compose-test"]
async fn the_server_layout_runs_jobs_and_survives_its_leader() {
    let (stack, http) = up_and_ready(Layout::Server).await.unwrap();
    for gone in ["eval-broker-1", "plan-applier-1", "scheduler-worker"] {
        let running = stack.containers(gone).unwrap();
        assert!(
            running.is_empty(),
            "{gone} runs beside the servers: {running:?}"
        );
    }
    run_first_jobs(&stack, &http).await.unwrap();

    let (service, container) = kill_leader(&stack, "eval-broker").await.unwrap();
    assert!(service.starts_with("server-"), "{service}");
    run_batch(&stack, &http, "batch-server-killed")
        .await
        .unwrap();
    stack.restart(&service, &container).await.unwrap();
    run_batch(&stack, &http, "batch-server-back").await.unwrap();

    first_jobs_still_run(&http).await.unwrap();
    check_invariants(&stack).await.unwrap();
}

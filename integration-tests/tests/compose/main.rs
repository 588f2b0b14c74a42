//! The docker-compose stack (`docker-compose.yml` at the root) runs jobs and
//! keeps running them while parts of it die: it comes up healthy, runs a
//! raw_exec service job on the two real nodes, a mock service job across the
//! 100 simulated ones and a batch job; then loses the eval-broker leader's
//! container, the etcd leader's container, has its scheduler-workers scaled
//! 3 → 5 → 2, and one etcd member cut off the network and reconnected,
//! running a batch job to completion after each; finally the invariants are
//! checked straight from etcd and the stack is removed with its volumes.
//! The server layout (`docker/server.yml`, the control plane as two
//! `caravan server` containers) runs the same first jobs and survives the
//! loss of its leading server (server.rs).
//!
//! It needs Docker, docker-compose (or Compose v2) and the images
//! `scripts/images` builds, so `cargo test` skips it; `scripts/compose-test`
//! builds the images and runs it, one stack at a time. Every wait is
//! bounded; the run takes about three minutes on a two-core machine, 10-36 s
//! of it with an etcd member cut off (the script prints each step's time).

mod server;
mod stack;

use stack::{
    ETCD, Layout, check_invariants, docker, first_jobs_still_run, kill_leader, run_batch,
    run_first_jobs, up_and_ready,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Docker and the images of scripts/images: run by scripts/compose-test"]
async fn the_compose_stack_runs_jobs_while_its_parts_die() {
    let (stack, http) = up_and_ready(Layout::Separate).await.unwrap();

    // Nomad Variables work: the gateways share the stack's key.
    let var = serde_json::json!({"Items": {"greeting": "hello"}});
    http.put_json("/v1/var/compose/check", &var)
        .await
        .and_then(|reply| reply.ok_json())
        .expect("a variable written");
    let read = http.get_json("/v1/var/compose/check").await.unwrap();
    assert_eq!(read["Items"]["greeting"], "hello", "{read}");
    stack.step("a Nomad Variable written and read back");

    run_first_jobs(&stack, &http).await.unwrap();

    // The eval-broker leader's container dies.
    let (service, container) = kill_leader(&stack, "eval-broker").await.unwrap();
    run_batch(&stack, &http, "batch-broker-killed")
        .await
        .unwrap();
    stack.restart(&service, &container).await.unwrap();

    // The etcd leader's container dies.
    let etcd_leader = stack.etcd_leader("etcd-1").unwrap();
    let container = stack.container(&etcd_leader).unwrap();
    docker(&["kill", &container]).unwrap();
    stack.step(&format!("killed the etcd leader {etcd_leader}"));
    run_batch(&stack, &http, "batch-etcd-killed").await.unwrap();
    stack.restart(&etcd_leader, &container).await.unwrap();

    // Workers scaled up, then down.
    for replicas in [5, 2] {
        stack
            .compose_run(&[
                "up",
                "-d",
                "--no-deps",
                "--scale",
                &format!("scheduler-worker={replicas}"),
                "scheduler-worker",
            ])
            .unwrap();
        stack
            .wait_healthy(&[("scheduler-worker", replicas)])
            .await
            .unwrap();
        stack.step(&format!("scheduler-worker scaled to {replicas}"));
        run_batch(&stack, &http, &format!("batch-workers-{replicas}"))
            .await
            .unwrap();
    }

    // One etcd member cut off the network, then reconnected.
    let leader_now = stack.etcd_leader("etcd-1").unwrap();
    let cut = ETCD
        .iter()
        .find(|m| **m != leader_now)
        .copied()
        .unwrap_or("etcd-3");
    let container = stack.container(cut).unwrap();
    let network = stack.network(&container).unwrap();
    docker(&["network", "disconnect", &network, &container]).unwrap();
    stack.step(&format!("disconnected {cut} from {network}"));
    run_batch(&stack, &http, "batch-etcd-cut").await.unwrap();
    docker(&["network", "connect", "--alias", cut, &network, &container]).unwrap();
    stack.wait_healthy(&[(cut, 1)]).await.unwrap();
    stack.step(&format!("reconnected {cut}"));
    run_batch(&stack, &http, "batch-etcd-back").await.unwrap();

    first_jobs_still_run(&http).await.unwrap();
    check_invariants(&stack).await.unwrap();
}

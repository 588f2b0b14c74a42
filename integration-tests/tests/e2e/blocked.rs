//! Scenario 3: a job that fits no node blocks, and is placed as soon as a
//! node with room joins, without any new user action.

use caravan_integration_tests::{Cluster, Progress, jobs, wait_for};
use caravan_proto::EvalStatus;

use crate::{STEP, job_evals, wait_eval, wait_running};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_does_not_fit_blocks_until_a_node_joins() {
    let mut c = Cluster::new("blocked-until-node").await.unwrap();
    c.start_control_plane().await.unwrap();
    let small = [
        ("drivers", "mock"),
        ("cpu_total_mhz", "1000"),
        ("memory_mb", "2048"),
    ];
    c.start_client("small", &small).await.unwrap();
    let http = c.http().unwrap();

    let job = jobs::service_job("big", 1, jobs::mock_task(1500, 64));
    let reply = http.put_json("/v1/jobs", &job).await.unwrap();
    let register = jobs::eval_id(&reply.ok_json().unwrap()).unwrap();

    let done = wait_eval(&c, &register, EvalStatus::Complete).await;
    let metrics = done
        .failed_tg_allocs
        .get("g")
        .unwrap_or_else(|| panic!("no failed placement for group g: {done:?}"));
    assert_eq!(metrics.nodes_exhausted, 1, "{metrics:?}");
    assert!(
        metrics.dimension_exhausted.contains_key("cpu"),
        "cpu named as the exhausted dimension: {metrics:?}"
    );
    let blocked_id = done.blocked_eval.clone();
    assert!(
        !blocked_id.is_empty(),
        "the register eval names its blocked eval"
    );
    wait_eval(&c, &blocked_id, EvalStatus::Blocked).await;
    let allocs = c.state.allocs().await.unwrap();
    assert!(allocs.is_empty(), "nothing placed: {allocs:?}");

    let big = [
        ("drivers", "mock"),
        ("cpu_total_mhz", "4000"),
        ("memory_mb", "2048"),
    ];
    let big_node = c.start_client("large", &big).await.unwrap();

    let running = wait_running(&c, "big", 1).await;
    assert_eq!(running[0].node_id, big_node);
    let state = c.state.clone();
    let evals = wait_for("the blocked eval to finish", STEP, async || {
        let evals = crate::job_evals_of(&state, "big").await?;
        Ok(
            match evals
                .iter()
                .find(|e| e.id == blocked_id)
                .map(|e| e.status())
            {
                Some(EvalStatus::Complete) => Progress::Done(evals),
                other => Progress::Waiting(format!("blocked eval {other:?}")),
            },
        )
    })
    .await
    .unwrap();
    assert!(
        evals.iter().all(|e| e.status() == EvalStatus::Complete),
        "{:?}",
        evals
            .iter()
            .map(|e| (e.triggered_by.as_str(), e.status()))
            .collect::<Vec<_>>()
    );
    assert_eq!(job_evals(&c, "big").await.len(), evals.len());
}

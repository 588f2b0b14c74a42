//! Issue 4's end-to-end scenarios: the real service binaries as processes
//! around the test etcd (`CARAVAN_TEST_ETCD`), one cluster and key prefix
//! per test. Build the binaries first (`cargo build --workspace --bins`;
//! `scripts/test` does it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod alloc_exec;
mod blocked;
mod failover;
mod hcl2_vars;
mod http_api;
mod nomad_cli;
mod raw_exec;
mod server;
mod traces;
mod validation;
mod workload_identity;

use std::time::Duration;

use caravan_integration_tests::{Cluster, ClusterState, Progress, wait_for};
use caravan_model::AllocExt;
use caravan_proto::{AllocClientStatus, Allocation, EvalStatus, Evaluation};

/// Deadline of a scheduling step (register → placed → running).
pub const STEP: Duration = Duration::from_secs(60);

/// Waits until `job_id` has `count` allocations desired to run and running
/// on their clients; returns them.
pub async fn wait_running(c: &Cluster, job_id: &str, count: usize) -> Vec<Allocation> {
    let state = c.state.clone();
    wait_for(
        &format!("{count} running allocations of {job_id}"),
        STEP,
        async || {
            let allocs: Vec<Allocation> = state
                .allocs()
                .await?
                .into_iter()
                .filter(|a| a.job_id == job_id)
                .collect();
            let running: Vec<Allocation> = allocs
                .iter()
                .filter(|a| a.is_live() && a.client_status() == AllocClientStatus::Running)
                .cloned()
                .collect();
            Ok(if running.len() == count {
                Progress::Done(running)
            } else {
                Progress::Waiting(format!(
                    "{} running of {}: {:?}",
                    running.len(),
                    allocs.len(),
                    caravan_integration_tests::state::alloc_histogram(&allocs)
                ))
            })
        },
    )
    .await
    .unwrap()
}

/// The evaluations of one job, oldest first.
pub async fn job_evals(c: &Cluster, job_id: &str) -> Vec<Evaluation> {
    job_evals_of(&c.state, job_id).await.unwrap()
}

/// The evaluations of one job in `state`, oldest first.
pub async fn job_evals_of(state: &ClusterState, job_id: &str) -> anyhow::Result<Vec<Evaluation>> {
    let mut evals: Vec<Evaluation> = state
        .evals()
        .await?
        .into_iter()
        .filter(|e| e.job_id == job_id)
        .collect();
    evals.sort_by_key(|e| e.create_revision);
    Ok(evals)
}

/// Waits until the eval `id` has `status`; returns it.
pub async fn wait_eval(c: &Cluster, id: &str, status: EvalStatus) -> Evaluation {
    let state = c.state.clone();
    let key = state.keys().eval(id);
    wait_for(&format!("eval {id} {status:?}"), STEP, async || {
        let Some(kv) = state.store().get(&key).await? else {
            return Ok(Progress::Waiting("no such eval".into()));
        };
        let eval: Evaluation = caravan_state::decode(&kv)?;
        Ok(if eval.status() == status {
            Progress::Done(eval)
        } else {
            Progress::Waiting(format!("{:?} {}", eval.status(), eval.status_description))
        })
    })
    .await
    .unwrap()
}

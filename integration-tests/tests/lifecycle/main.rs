//! Issue 5's lifecycle scenarios: rolling updates, auto-revert, canaries,
//! restarts and rescheduling, node loss, drains, periodic and parameterized
//! jobs, and garbage collection, with the real service binaries (the
//! deployment-watcher among them) and raw_exec tasks around the test etcd
//! (`CARAVAN_TEST_ETCD`). Build the binaries first
//! (`cargo build --workspace --bins`; `scripts/test` does it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bridge;
mod canary;
mod disconnect;
mod drain;
mod gc;
mod host_networks;
mod identities;
mod node_loss;
mod periodic;
mod reschedule;
mod revert;
mod rollout;
mod services;
mod templates;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use caravan_integration_tests::process::process_alive;
use caravan_integration_tests::state::alloc_histogram;
use caravan_integration_tests::{Cluster, ClusterState, HttpApi, Progress, jobs, wait_for};
use caravan_model::AllocExt;
use caravan_proto::{AllocClientStatus, Allocation, Deployment, DeploymentStatus, Evaluation, Job};
use caravan_state::Kind;
use serde_json::Value;

/// Deadline of one lifecycle step (a batch, a reschedule, a drain).
pub const STEP: Duration = Duration::from_secs(40);

/// One second in the nanoseconds of Nomad's JSON durations.
pub const SECOND_NS: i64 = 1_000_000_000;

/// A control plane (deployment-watcher included) and one raw_exec client
/// node per name; returns the cluster and the node ids, in order.
pub async fn raw_exec_cluster(name: &str, nodes: &[&str]) -> (Cluster, Vec<String>) {
    let mut c = Cluster::new(name).await.unwrap();
    c.start_control_plane().await.unwrap();
    let mut ids = Vec::new();
    for n in nodes {
        ids.push(c.start_client(n, &[("drivers", "raw_exec")]).await.unwrap());
    }
    (c, ids)
}

/// A task script that records its pid in `dir/<alloc id>.pid`, prints
/// `greeting` and sleeps.
pub fn sleeper_script(dir: &Path, greeting: &str) -> String {
    format!(
        "echo $$ > {}/$NOMAD_ALLOC_ID.pid; echo {greeting}; exec sleep 300",
        dir.display()
    )
}

/// A directory for the pid files of a cluster's tasks.
pub fn pid_dir(c: &Cluster) -> PathBuf {
    let dir = c.dir().join("pids");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Registers `job` through `PUT /v1/jobs`; returns the eval id.
pub async fn register(http: &HttpApi, job: &Value) -> String {
    let reply = http.put_json("/v1/jobs", job).await.unwrap();
    jobs::eval_id(&reply.ok_json().unwrap()).unwrap()
}

/// The allocations of one job, oldest first.
pub async fn job_allocs(state: &ClusterState, job_id: &str) -> anyhow::Result<Vec<Allocation>> {
    let mut allocs: Vec<Allocation> = state
        .allocs()
        .await?
        .into_iter()
        .filter(|a| a.job_id == job_id)
        .collect();
    allocs.sort_by_key(|a| a.create_revision);
    Ok(allocs)
}

/// The allocations of `job_id` desired to run and running on their client.
pub fn running(allocs: &[Allocation]) -> Vec<Allocation> {
    allocs
        .iter()
        .filter(|a| a.is_live() && a.client_status() == AllocClientStatus::Running)
        .cloned()
        .collect()
}

/// Waits until `done` holds for the allocations of `job_id`; returns them.
pub async fn wait_allocs(
    c: &Cluster,
    what: &str,
    job_id: &str,
    done: impl Fn(&[Allocation]) -> bool,
) -> Vec<Allocation> {
    let state = c.state.clone();
    wait_for(what, STEP, async || {
        let allocs = job_allocs(&state, job_id).await?;
        Ok(if done(&allocs) {
            Progress::Done(allocs)
        } else {
            Progress::Waiting(describe(&allocs))
        })
    })
    .await
    .unwrap()
}

/// Waits until `job_id` has `count` running allocations of job `version`
/// and nothing else live; returns the running ones.
pub async fn wait_running_version(
    c: &Cluster,
    job_id: &str,
    count: usize,
    version: u64,
) -> Vec<Allocation> {
    let allocs = wait_allocs(
        c,
        &format!("{count} running allocations of {job_id} version {version}"),
        job_id,
        |allocs| {
            let run = running(allocs);
            run.len() == count
                && run.iter().all(|a| a.job_version == version)
                && allocs.iter().filter(|a| a.is_live()).count() == count
        },
    )
    .await;
    running(&allocs)
}

/// Allocations in one line each: name, version, node, statuses, health.
pub fn describe(allocs: &[Allocation]) -> String {
    let mut out = format!("{:?}", alloc_histogram(allocs));
    for a in allocs {
        out.push_str(&format!(
            "\n  {} {} v{} node {} {:?}/{:?} healthy {:?}",
            &a.id[..8.min(a.id.len())],
            a.name,
            a.job_version,
            &a.node_id[..8.min(a.node_id.len())],
            a.desired_status(),
            a.client_status(),
            a.deployment_status.as_ref().and_then(|d| d.healthy),
        ));
    }
    out
}

/// The evaluations of one job.
pub async fn job_evals(state: &ClusterState, job_id: &str) -> anyhow::Result<Vec<Evaluation>> {
    Ok(state
        .evals()
        .await?
        .into_iter()
        .filter(|e| e.job_id == job_id)
        .collect())
}

/// The deployments of one job, oldest first.
pub async fn job_deployments(
    state: &ClusterState,
    job_id: &str,
) -> anyhow::Result<Vec<Deployment>> {
    let mut deps: Vec<Deployment> = state
        .list::<Deployment>(Kind::Deployments)
        .await?
        .into_iter()
        .filter(|d| d.job_id == job_id)
        .collect();
    deps.sort_by_key(|d| d.create_revision);
    Ok(deps)
}

/// Waits until the deployment of `job_id` at `version` has `status`.
pub async fn wait_deployment(
    c: &Cluster,
    job_id: &str,
    version: u64,
    status: DeploymentStatus,
) -> Deployment {
    let state = c.state.clone();
    wait_for(
        &format!("the deployment of {job_id} v{version} to be {status:?}"),
        STEP,
        async || {
            let deps = job_deployments(&state, job_id).await?;
            let seen: Vec<String> = deps
                .iter()
                .map(|d| {
                    format!(
                        "v{} {:?} ({}) {:?}",
                        d.job_version,
                        d.status(),
                        d.status_description,
                        d.task_groups
                    )
                })
                .collect();
            Ok(
                match deps
                    .into_iter()
                    .find(|d| d.job_version == version && d.status() == status)
                {
                    Some(d) => Progress::Done(d),
                    None => Progress::Waiting(format!("{seen:?}")),
                },
            )
        },
    )
    .await
    .unwrap()
}

/// The current version of a job in the default namespace, if registered.
pub async fn job(state: &ClusterState, id: &str) -> anyhow::Result<Option<Job>> {
    let key = state.keys().job("default", id);
    match state.store().get(&key).await? {
        Some(kv) => Ok(Some(caravan_state::decode(&kv)?)),
        None => Ok(None),
    }
}

/// Waits until none of `pids` is alive.
pub async fn wait_exited(pids: &[i32]) {
    wait_for("the old task processes to exit", STEP, async || {
        let alive: Vec<i32> = pids.iter().copied().filter(|p| process_alive(*p)).collect();
        Ok(if alive.is_empty() {
            Progress::Done(())
        } else {
            Progress::Waiting(format!("still running: {alive:?}"))
        })
    })
    .await
    .unwrap()
}

/// Kills, when dropped, every task process that recorded its pid in a
/// directory, so a failing test (or a crashed client node) leaves nothing
/// behind.
pub struct Reaper(pub PathBuf);

impl Drop for Reaper {
    fn drop(&mut self) {
        let Ok(entries) = std::fs::read_dir(&self.0) else {
            return;
        };
        for e in entries.flatten() {
            let pid = std::fs::read_to_string(e.path())
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok());
            if let Some(pid) = pid.filter(|p| process_alive(*p)) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

/// The events of task `task` of `alloc`, as (type, message) pairs.
pub fn task_events(alloc: &Allocation, task: &str) -> Vec<(String, String)> {
    alloc.task_states.get(task).map_or_else(Vec::new, |s| {
        s.events
            .iter()
            .map(|e| (e.r#type.clone(), e.message.clone()))
            .collect()
    })
}

/// Waits until the only alloc of `job_id` records the event
/// `(kind, message)` for task `task`; returns the alloc.
pub async fn wait_task_event(
    c: &Cluster,
    job_id: &str,
    task: &str,
    kind: &str,
    message: &str,
) -> Allocation {
    let want = (kind.to_string(), message.to_string());
    wait_for(
        &format!("{job_id}'s task {task} to record {want:?}"),
        STEP,
        async || {
            let allocs = job_allocs(&c.state, job_id).await?;
            Ok(match allocs.as_slice() {
                [a] if task_events(a, task).contains(&want) => Progress::Done(a.clone()),
                _ => Progress::Waiting(format!(
                    "{:?}",
                    allocs
                        .iter()
                        .map(|a| task_events(a, task))
                        .collect::<Vec<_>>()
                )),
            })
        },
    )
    .await
    .unwrap()
}

/// Sets `value` at `pointer` (a JSON pointer such as
/// `/Job/TaskGroups/0/Update`) in `job`.
pub fn set(job: &mut Value, pointer: &str, value: Value) {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let target = job
        .pointer_mut(parent)
        .unwrap_or_else(|| panic!("no {parent} in the job"));
    target
        .as_object_mut()
        .unwrap_or_else(|| panic!("{parent} is not an object"))
        .insert(key.to_string(), value);
}

/// Waits for every alloc's task to have written its pid file in `dir`;
/// returns alloc id → pid.
pub async fn wait_pids(dir: &Path, allocs: &[Allocation]) -> BTreeMap<String, i32> {
    caravan_integration_tests::wait_for_pids(dir, allocs, STEP)
        .await
        .unwrap()
}

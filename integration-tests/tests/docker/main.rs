//! The docker driver end to end: the real service binaries and client node
//! around the test etcd (`CARAVAN_TEST_ETCD`), running containers of this
//! machine's Docker daemon from the images `scripts/test-images` builds
//! (`busybox:1`, `redis:7`). Every container a test's nodes made is removed
//! when it ends. Build the binaries first (`cargo build --workspace
//! --bins`; `scripts/test` does both).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod daemon;
mod deploy;
mod exec;
mod lifecycle;
mod restart;
mod services;
mod serving;
mod volumes;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use caravan_integration_tests::docker::{ContainerSweeper, containers_of_alloc};
use caravan_integration_tests::{Cluster, HttpApi, Progress, jobs, wait_for};
use caravan_model::AllocExt;
use caravan_proto::{AllocClientStatus, Allocation, TaskState};
use serde_json::{Value, json};

/// Deadline of one step (placed, running, restarted, removed).
pub const STEP: Duration = Duration::from_secs(30);

/// One second in the nanoseconds of Nomad's JSON durations.
pub const SECOND_NS: i64 = 1_000_000_000;

/// A cluster with one docker client node named `node`; the sweeper removes
/// the node's containers when the test ends (declare it first: it must
/// outlive the cluster).
pub async fn docker_cluster(
    name: &str,
    node: &str,
    extra: &[(&str, &str)],
    sweeper: &ContainerSweeper,
) -> (Cluster, String) {
    let mut c = Cluster::new(name).await.unwrap();
    c.start_control_plane().await.unwrap();
    let mut settings = vec![("drivers", "docker")];
    settings.extend_from_slice(extra);
    let id = c.start_client(node, &settings).await.unwrap();
    sweeper.node(&id);
    (c, id)
}

/// A docker task `t` of `image` running `sh -c script`.
pub fn docker_task(image: &str, script: &str) -> Value {
    json!({
        "Name": "t",
        "Driver": "docker",
        "Config": {
            "image": image,
            "command": "sh",
            "args": ["-c", script],
        },
        "KillTimeout": SECOND_NS,
        "Resources": { "CPU": 100, "MemoryMB": 32 },
    })
}

/// A service job of one docker task whose failures are final: no restart,
/// no reschedule (unless a test sets its own policies).
pub fn docker_job(id: &str, task: Value) -> Value {
    let mut job = jobs::service_job(id, 1, task);
    job["Job"]["TaskGroups"][0]["RestartPolicy"] =
        json!({"Attempts": 0, "Interval": 60 * SECOND_NS, "Delay": SECOND_NS, "Mode": "fail"});
    job["Job"]["TaskGroups"][0]["ReschedulePolicy"] = json!({"Attempts": 0, "Unlimited": false});
    job
}

/// Registers `job` through `PUT /v1/jobs`.
pub async fn register(http: &HttpApi, job: &Value) -> Value {
    http.put_json("/v1/jobs", job)
        .await
        .unwrap()
        .ok_json()
        .unwrap()
}

/// Waits until `job_id` has one alloc running; returns it.
pub async fn running(c: &Cluster, job_id: &str) -> Allocation {
    wait_alloc(c, job_id, "running", |a| {
        a.is_live() && a.client_status() == AllocClientStatus::Running
    })
    .await
}

/// Waits until an alloc of `job_id` satisfies `f`; returns it.
pub async fn wait_alloc(
    c: &Cluster,
    job_id: &str,
    what: &str,
    f: impl Fn(&Allocation) -> bool,
) -> Allocation {
    let state = c.state.clone();
    wait_for(&format!("an alloc of {job_id} {what}"), STEP, async || {
        let allocs: Vec<Allocation> = state
            .allocs()
            .await?
            .into_iter()
            .filter(|a| a.job_id == job_id)
            .collect();
        Ok(match allocs.iter().find(|a| f(a)) {
            Some(a) => Progress::Done(a.clone()),
            None => Progress::Waiting(format!(
                "{:?}",
                allocs
                    .iter()
                    .map(|a| (a.client_status(), a.task_states.clone()))
                    .collect::<Vec<_>>()
            )),
        })
    })
    .await
    .unwrap()
}

/// The task `t`'s state in `alloc`.
pub fn task(alloc: &Allocation) -> TaskState {
    alloc.task_states.get("t").cloned().unwrap_or_default()
}

/// The host port of `label` in `alloc`.
pub fn host_port(alloc: &Allocation, label: &str) -> u32 {
    let res = alloc.allocated_resources.as_ref().unwrap();
    res.shared
        .iter()
        .flat_map(|s| s.ports.iter())
        .chain(res.tasks.values().flat_map(|t| t.ports.iter()))
        .find(|p| p.label == label)
        .unwrap_or_else(|| panic!("no port {label} in {alloc:?}"))
        .value
}

/// The one container of `alloc_id`, waited for.
pub async fn the_container(alloc_id: &str) -> String {
    let alloc_id = alloc_id.to_string();
    wait_for("the alloc's one container", STEP, async || {
        let ids = containers_of_alloc(&alloc_id)?;
        Ok(match ids.as_slice() {
            [one] => Progress::Done(one.clone()),
            _ => Progress::Waiting(format!("{ids:?}")),
        })
    })
    .await
    .unwrap()
}

/// `GET path` on 127.0.0.1:`port`: the body of a 200 answer.
pub fn http_get(port: u32, path: &str) -> Option<String> {
    let mut c = TcpStream::connect(("127.0.0.1", u16::try_from(port).ok()?)).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(c, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").ok()?;
    let mut out = String::new();
    c.read_to_string(&mut out).ok()?;
    out.lines()
        .next()
        .is_some_and(|status| status.contains(" 200 "))
        .then(|| {
            out.split_once("\r\n\r\n")
                .map_or(out.clone(), |(_, b)| b.to_string())
        })
}

/// Waits until `f` holds.
pub async fn eventually(what: &str, f: impl Fn() -> bool) {
    let f = Arc::new(f);
    wait_for(what, STEP, async || {
        Ok(if f() {
            Progress::Done(())
        } else {
            Progress::Waiting(String::new())
        })
    })
    .await
    .unwrap();
}

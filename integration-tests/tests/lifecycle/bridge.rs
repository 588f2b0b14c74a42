//! A Nomad job with `network { mode = "bridge" }` through the whole stack
//! (as root with the CNI plugins; failing elsewhere, naming what is missing): the node fingerprints
//! the bridge network, the scheduler places the group there with a host
//! port, the task serves on its `to` port inside the alloc's namespace and
//! is reached at the host port; stopping the job leaves no namespace or
//! iptables rule of the alloc behind.

use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use caravan_integration_tests::{Progress, jobs, wait_for};
use caravan_model::AllocExt;
use caravan_proto::AllocClientStatus;
use serde_json::json;

use crate::{STEP, job_allocs, raw_exec_cluster, register, set, wait_running_version};

const JOB: &str = "bridged";

fn ready() -> bool {
    let root = nix::unistd::Uid::effective().is_root();
    let plugins = ["bridge", "portmap", "firewall", "loopback", "host-local"]
        .iter()
        .all(|p| Path::new("/usr/lib/cni").join(p).is_file());
    assert!(
        root && plugins,
        "needs root and the CNI plugins in /usr/lib/cni (scripts/lib.sh installs them; CI runs as root)"
    );
    true
}

/// What `addr` answers to `GET path`, if 200.
fn get(addr: &str, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.0 200")
        .then(|| body.trim().to_string())
}

/// Lines of `iptables-save` and mounts naming `alloc_id`.
fn traces_of(alloc_id: &str) -> (usize, usize) {
    let rules = std::process::Command::new("iptables-save")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| l.contains(alloc_id))
                .count()
        })
        .unwrap_or(usize::MAX);
    let mounts = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(alloc_id) && l.contains("nsfs"))
        .count();
    (rules, mounts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_group_is_placed_served_at_its_host_port_and_cleaned_up() {
    if !ready() {
        return;
    }
    let (c, _nodes) = raw_exec_cluster("bridge", &["br-a"]).await;
    let http = c.http().unwrap();
    let mut job = jobs::service_job(
        JOB,
        1,
        jobs::raw_exec_task(
            "cd \"$NOMAD_TASK_DIR\" && echo \"$NOMAD_ALLOC_ID\" > id.txt && \
             exec python3 -m http.server \"$NOMAD_PORT_http\"",
        ),
    );
    set(
        &mut job,
        "/Job/TaskGroups/0/Networks",
        json!([{"Mode": "bridge", "DynamicPorts": [{"Label": "http", "To": 8080}]}]),
    );
    register(&http, &job).await;
    let alloc = wait_running_version(&c, JOB, 1, 0).await.remove(0);
    let port = alloc
        .allocated_resources
        .as_ref()
        .and_then(|r| r.shared.as_ref())
        .and_then(|s| s.ports.iter().find(|p| p.label == "http"))
        .map(|p| p.value)
        .unwrap();
    assert!(port >= 20000, "a dynamic host port: {port}");
    let addr = format!("127.0.0.1:{port}");
    wait_for("the task answers at its host port", STEP, async || {
        Ok(match get(&addr, "/id.txt") {
            Some(body) => Progress::Done(body),
            None => Progress::Waiting(format!("nothing at {addr}")),
        })
    })
    .await
    .map(|body| assert_eq!(body, alloc.id))
    .unwrap();
    assert!(traces_of(&alloc.id).0 > 0, "port mappings name the alloc");

    http.delete(&format!("/v1/job/{JOB}")).await.unwrap();
    let state = c.state.clone();
    let id = alloc.id.clone();
    wait_for(
        "the alloc stopped and its network torn down",
        STEP,
        async || {
            let allocs = job_allocs(&state, JOB).await?;
            let stopped = allocs
                .iter()
                .all(|a| !a.is_live() && a.client_status() != AllocClientStatus::Running);
            let traces = traces_of(&id);
            Ok(if stopped && traces == (0, 0) {
                Progress::Done(())
            } else {
                Progress::Waiting(format!("stopped {stopped}, (rules, mounts) {traces:?}"))
            })
        },
    )
    .await
    .unwrap();
    assert!(get(&addr, "/id.txt").is_none());
}

//! The `exec` driver under a real client node (as root, where the driver
//! is detected): a task runs isolated, outlives a client that stops without
//! stopping its tasks, is found again by the next client from its persisted
//! handle (never started twice), and is stopped when its alloc is.

// Helpers outside #[test] functions may unwrap too: a failure is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use caravan_client_node::driver::{Driver, ExecDriver};
use caravan_proto::{AllocClientStatus, JobType};
use common::*;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(15);

/// Counts its starts, says how many processes it sees, then beats.
const SCRIPT: &str = "echo started >> /alloc/starts; ls /proc | grep -cE '^[0-9]+$' > /alloc/seen; \
                      i=0; while true; do i=$((i+1)); echo $i > /alloc/beat; sleep 0.1; done";

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Whether the task still beats: its counter moves within a second. The
/// shell truncates the file before it writes the next count, so a read can
/// land in between and see it empty: only counts that were read are
/// compared.
async fn beating(alloc_dir: &Path) -> bool {
    let beat = alloc_dir.join("alloc/beat");
    let mut counts = std::collections::BTreeSet::new();
    for _ in 0..10 {
        let count = read(&beat);
        if !count.trim().is_empty() {
            counts.insert(count);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    counts.len() > 1
}

#[tokio::test]
async fn an_exec_task_outlives_a_client_restart_and_runs_once() {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_caravan-client-node"));
    let fp = ExecDriver::new(bin, &Default::default())
        .fingerprint()
        .await;
    if !fp.detected() {
        eprintln!("exec driver not detected here: {}", fp.description);
        return;
    }
    let stop_fake = CancellationToken::new();
    let fake = FakeGateway::new(Duration::from_secs(5));
    let gateway = fake.serve(stop_fake.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let conf = || {
        let mut c = config(gateway, dir.path());
        c.drivers = vec!["exec".into()];
        c.stop_tasks_on_shutdown = false;
        c
    };
    let shutdown = CancellationToken::new();
    let first = start(conf(), shutdown.clone()).await.unwrap();
    let node_id = first.ready.node_ids[0].clone();
    let mut t = sh_task("web", SCRIPT);
    t.driver = "exec".into();
    let job = job("svc", JobType::Service, vec![t]);
    let a = alloc(&job, 0);
    fake.push(&node_id, vec![a.clone()], vec![job.clone()]);
    until("alloc running", WAIT, || {
        fake.status(&a.id) == Some(AllocClientStatus::Running)
    })
    .await;
    let alloc_dir = dir.path().join("allocs").join(&a.id);
    until("the task beats", WAIT, || {
        !read(&alloc_dir.join("alloc/beat")).is_empty()
    })
    .await;
    let seen: u32 = read(&alloc_dir.join("alloc/seen")).trim().parse().unwrap();
    assert!(seen < 10, "the task sees {seen} processes");
    stop(first, shutdown).await;
    assert!(beating(&alloc_dir).await, "the task outlives the client");

    let calls_before = fake.seen.lock().update_calls.len();
    let shutdown = CancellationToken::new();
    let second = start(conf(), shutdown.clone()).await.unwrap();
    assert_eq!(second.ready.node_ids[0], node_id);
    until("running reported again", WAIT, || {
        let seen = fake.seen.lock();
        seen.update_calls[calls_before.min(seen.update_calls.len())..]
            .iter()
            .flat_map(|c| &c.updates)
            .any(|u| u.alloc_id == a.id && u.client_status() == AllocClientStatus::Running)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        read(&alloc_dir.join("alloc/starts")).lines().count(),
        1,
        "never two copies"
    );
    assert!(beating(&alloc_dir).await);

    fake.push(&node_id, vec![stopped(a.clone())], vec![]);
    until("complete after the stop", WAIT, || {
        fake.status(&a.id) == Some(AllocClientStatus::Complete)
    })
    .await;
    assert!(!beating(&alloc_dir).await, "the task was stopped");
    stop(second, shutdown).await;
    stop_fake.cancel();
}

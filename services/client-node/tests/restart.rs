//! A client that restarts finds its tasks again: it re-attaches to live
//! processes, marks the ones that died while it was down as lost, stops the
//! tasks of allocs the servers dropped meanwhile, and never runs an alloc twice.

// Helpers outside #[test] functions may unwrap too: a failure is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use caravan_client_node::proc_stat;
use caravan_proto::{AllocClientStatus, Allocation, JobType};
use common::*;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(10);

/// A long-running task that counts its starts in the alloc dir.
const SCRIPT: &str = "echo started >> $NOMAD_ALLOC_DIR/starts; echo $$ > $NOMAD_ALLOC_DIR/pid; \
                      trap 'exit 0' TERM; while true; do sleep 0.05; done";

struct Scene {
    fake: FakeGateway,
    stop_fake: CancellationToken,
    gateway: std::net::SocketAddr,
    dir: tempfile::TempDir,
}

impl Scene {
    async fn new() -> Scene {
        let stop_fake = CancellationToken::new();
        let fake = FakeGateway::new(Duration::from_secs(5));
        let gateway = fake.serve(stop_fake.clone()).await;
        Scene {
            fake,
            stop_fake,
            gateway,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// Starts a client that leaves its tasks running when it stops.
    async fn client(&self) -> (Client, CancellationToken) {
        let mut conf = config(self.gateway, self.dir.path());
        conf.stop_tasks_on_shutdown = false;
        let shutdown = CancellationToken::new();
        (start(conf, shutdown.clone()).await.unwrap(), shutdown)
    }

    fn alloc_dir(&self, a: &Allocation) -> PathBuf {
        self.dir.path().join("allocs").join(&a.id)
    }

    async fn run_one(&self, node_id: &str) -> (Allocation, i32) {
        let job = job("svc", JobType::Service, vec![sh_task("web", SCRIPT)]);
        let a = alloc(&job, 0);
        self.fake.push(node_id, vec![a.clone()], vec![job]);
        until("alloc running", WAIT, || {
            self.fake.status(&a.id) == Some(AllocClientStatus::Running)
        })
        .await;
        let pid_file = self.alloc_dir(&a).join("alloc/pid");
        until("pid file", WAIT, || {
            std::fs::read_to_string(&pid_file).is_ok_and(|t| t.ends_with('\n'))
        })
        .await;
        let pid = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        (a, pid)
    }
}

fn starts(alloc_dir: &Path) -> usize {
    std::fs::read_to_string(alloc_dir.join("alloc/starts"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

fn alive(pid: i32) -> bool {
    proc_stat(pid).is_some_and(|s| s.alive())
}

#[tokio::test]
async fn reattaches_to_a_live_task_and_stops_it_later() {
    let scene = Scene::new().await;
    let (first, shutdown) = scene.client().await;
    let node_id = first.ready.node_ids[0].clone();
    let (a, pid) = scene.run_one(&node_id).await;
    stop(first, shutdown).await;
    assert!(alive(pid), "the task outlives the client");

    let calls_before = scene.fake.seen.lock().update_calls.len();
    let (second, shutdown) = scene.client().await;
    assert_eq!(
        second.ready.node_ids[0], node_id,
        "the node id is persisted"
    );
    until("running reported again", WAIT, || {
        let seen = scene.fake.seen.lock();
        seen.update_calls[calls_before.min(seen.update_calls.len())..]
            .iter()
            .flat_map(|c| &c.updates)
            .any(|u| u.alloc_id == a.id && u.client_status() == AllocClientStatus::Running)
    })
    .await;
    // Give a wrong second start every chance to happen.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(starts(&scene.alloc_dir(&a)), 1, "never two copies");
    assert!(alive(pid));

    scene.fake.push(&node_id, vec![stopped(a.clone())], vec![]);
    until("complete after the stop", WAIT, || {
        scene.fake.status(&a.id) == Some(AllocClientStatus::Complete)
    })
    .await;
    until("process gone", WAIT, || !alive(pid)).await;
    stop(second, shutdown).await;
    scene.stop_fake.cancel();
}

#[tokio::test]
async fn a_task_that_died_while_the_client_was_down_is_lost_not_restarted() {
    let scene = Scene::new().await;
    let (first, shutdown) = scene.client().await;
    let node_id = first.ready.node_ids[0].clone();
    let (a, pid) = scene.run_one(&node_id).await;
    stop(first, shutdown).await;
    kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    until("process gone", WAIT, || !alive(pid)).await;

    let (second, shutdown) = scene.client().await;
    until("alloc failed", WAIT, || {
        scene.fake.status(&a.id) == Some(AllocClientStatus::Failed)
    })
    .await;
    let u = scene.fake.update(&a.id).unwrap();
    let web = &u.task_states["web"];
    assert!(web.failed);
    let last = web.events.last().unwrap();
    assert_eq!(last.r#type, "Task Lost");
    assert_eq!(last.message, "client restarted; task lost");
    assert_eq!(starts(&scene.alloc_dir(&a)), 1, "not started again");
    stop(second, shutdown).await;
    scene.stop_fake.cancel();
}

#[tokio::test]
async fn tasks_of_allocs_dropped_while_down_are_stopped_and_cleaned_up() {
    let scene = Scene::new().await;
    let (first, shutdown) = scene.client().await;
    let node_id = first.ready.node_ids[0].clone();
    let (a, pid) = scene.run_one(&node_id).await;
    stop(first, shutdown).await;
    scene.fake.push(&node_id, vec![], vec![]);

    let (second, shutdown) = scene.client().await;
    until("orphan process stopped", WAIT, || !alive(pid)).await;
    until("orphan alloc dir removed", WAIT, || {
        !scene.alloc_dir(&a).exists()
    })
    .await;
    assert!(
        !scene
            .dir
            .path()
            .join(format!("client/allocs/{}.json", a.id))
            .exists()
    );
    stop(second, shutdown).await;
    scene.stop_fake.cancel();
}

#[tokio::test]
async fn repeated_alloc_sets_never_start_a_second_copy() {
    let scene = Scene::new().await;
    let (client, shutdown) = scene.client().await;
    let node_id = client.ready.node_ids[0].clone();
    let (a, pid) = scene.run_one(&node_id).await;
    let job = scene.fake.current(&node_id).jobs[0].clone();
    for i in 0..5 {
        let mut again = a.clone();
        again.alloc_modify_revision += i;
        // The servers still say pending: a stale view must not start it again.
        scene.fake.push(&node_id, vec![again], vec![job.clone()]);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(starts(&scene.alloc_dir(&a)), 1);
    assert!(alive(pid));
    scene.fake.push(&node_id, vec![stopped(a.clone())], vec![]);
    until("process gone", WAIT, || !alive(pid)).await;
    stop(client, shutdown).await;
    scene.stop_fake.cancel();
}

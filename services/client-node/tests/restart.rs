//! A client that restarts finds its tasks again: it re-attaches to live
//! processes, learns the exit of the ones that ended while it was down from
//! their supervisors (and marks them lost when nothing was recorded), stops
//! the tasks of allocs the servers dropped meanwhile, and never runs an alloc
//! twice.

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

/// A client restarted while the gateway it reaches lags behind the view its
/// allocs came from must not take that gateway's older whole set for the
/// truth: it would stop the tasks of its allocs as orphans. It asks for a
/// view at least as new as its records.
#[tokio::test]
async fn a_restarted_client_never_takes_an_older_whole_set() {
    let scene = Scene::new().await;
    let (first, shutdown) = scene.client().await;
    let node_id = first.ready.node_ids[0].clone();
    let (a, pid) = scene.run_one(&node_id).await;
    let placed_at = scene.fake.current(&node_id).revision;
    stop(first, shutdown).await;
    // The gateway the next client reaches has a view from before the placement.
    scene.fake.end_streams_with(
        &node_id,
        caravan_proto::NodeAllocations {
            revision: placed_at - 1,
            full: true,
            ..Default::default()
        },
    );
    let calls_before = scene.fake.seen.lock().update_calls.len();
    let (second, shutdown) = scene.client().await;
    until("the stream opened again", WAIT, || {
        scene.fake.seen.lock().watch_min_revisions.len() >= 2
    })
    .await;
    let asked = scene.fake.seen.lock().watch_min_revisions.clone();
    assert!(asked[1] >= placed_at, "{asked:?}");
    // The view catches up: the task ran on, once.
    let job = job("svc", JobType::Service, vec![sh_task("web", SCRIPT)]);
    scene.fake.push(&node_id, vec![a.clone()], vec![job]);
    until("running reported again", WAIT, || {
        let seen = scene.fake.seen.lock();
        seen.update_calls[calls_before.min(seen.update_calls.len())..]
            .iter()
            .flat_map(|c| &c.updates)
            .any(|u| u.alloc_id == a.id && u.client_status() == AllocClientStatus::Running)
    })
    .await;
    assert!(alive(pid), "the task was stopped as an orphan");
    assert_eq!(starts(&scene.alloc_dir(&a)), 1, "never two copies");
    scene.fake.push(&node_id, vec![stopped(a.clone())], vec![]);
    until("the task stopped", WAIT, || !alive(pid)).await;
    stop(second, shutdown).await;
    scene.stop_fake.cancel();
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
    // Give a wrong second start every chance to happen. The only way to
    // state "never": the window covers the new client handling the alloc set
    // it re-read at start (already reported running above, so the set has
    // been taken in; a second start would follow within milliseconds).
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

/// The parent of `pid` (`/proc/<pid>/stat` field 4).
fn parent_of(pid: i32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 1..];
    after.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_task_that_died_unrecorded_while_the_client_was_down_is_lost_not_restarted() {
    let scene = Scene::new().await;
    let (first, shutdown) = scene.client().await;
    let node_id = first.ready.node_ids[0].clone();
    let (a, pid) = scene.run_one(&node_id).await;
    stop(first, shutdown).await;
    // The supervisor goes first, so nobody records how the task ended.
    let supervisor = parent_of(pid);
    kill(Pid::from_raw(supervisor), Signal::SIGKILL).unwrap();
    until("supervisor gone", WAIT, || !alive(supervisor)).await;
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
    // "Never a second copy" has no event to wait for: the window covers the
    // client taking in the last of the five sets pushed above.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(starts(&scene.alloc_dir(&a)), 1);
    assert!(alive(pid));
    scene.fake.push(&node_id, vec![stopped(a.clone())], vec![]);
    until("process gone", WAIT, || !alive(pid)).await;
    stop(client, shutdown).await;
    scene.stop_fake.cancel();
}

/// A client-node process (the real binary) serving the scene's fake gateway.
struct ClientProcess(std::process::Child);

impl ClientProcess {
    /// SIGKILL: no shutdown, no last words.
    fn kill9(mut self) {
        kill(Pid::from_raw(self.0.id() as i32), Signal::SIGKILL).unwrap();
        self.0.wait().unwrap();
    }
}

impl Drop for ClientProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Scene {
    /// Starts the client-node binary on the scene's data dir.
    fn spawn_client(&self) -> ClientProcess {
        let conf = self.dir.path().join("client.toml");
        std::fs::write(
            &conf,
            format!(
                "servers = [\"{}\"]\ngrpc_addr = \"127.0.0.1:0\"\ndata_dir = \"{}\"\n\
                 name = \"test-node\"\ncpu_total_mhz = 4000\nmemory_mb = 8192\n\
                 disk_mb = 10000\ndrivers = [\"raw_exec\"]\nupdate_interval_ms = 50\n",
                self.gateway,
                self.dir.path().display()
            ),
        )
        .unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("client.log"))
            .unwrap();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_caravan-client-node"))
            .arg("-c")
            .arg(&conf)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        ClientProcess(child)
    }

    async fn registered_node(&self) -> String {
        until("node registered", WAIT, || {
            !self.fake.seen.lock().registrations.is_empty()
        })
        .await;
        self.fake.seen.lock().registrations[0].id.clone()
    }

    /// Runs a batch task that waits for a `go` file in its alloc dir, then
    /// appends to `marker` and exits with `code`; SIGKILLs the client while
    /// it waits, lets it finish, and starts the client again.
    async fn batch_across_a_client_kill(&self, code: i32) -> (Allocation, ClientProcess) {
        let first = self.spawn_client();
        let node_id = self.registered_node().await;
        let script = format!(
            "while [ ! -e $NOMAD_ALLOC_DIR/go ]; do sleep 0.05; done; \
             echo ran >> $NOMAD_ALLOC_DIR/marker; exit {code}"
        );
        let mut job = job("batch", JobType::Batch, vec![sh_task("work", &script)]);
        if let Some(p) = job.task_groups[0].restart_policy.as_mut() {
            p.attempts = 0;
        }
        let a = alloc(&job, 0);
        self.fake.push(&node_id, vec![a.clone()], vec![job]);
        until("alloc running", WAIT, || {
            self.fake.status(&a.id) == Some(AllocClientStatus::Running)
        })
        .await;
        first.kill9();
        let dir = self.alloc_dir(&a);
        std::fs::write(dir.join("alloc/go"), "").unwrap();
        until("the task finished while the client was down", WAIT, || {
            dir.join(".work.exit.json").exists()
        })
        .await;
        assert_eq!(ran(&dir), 1);
        (a, self.spawn_client())
    }
}

fn ran(alloc_dir: &Path) -> usize {
    std::fs::read_to_string(alloc_dir.join("alloc/marker"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_batch_task_that_succeeds_while_the_client_is_killed_completes_once() {
    let scene = Scene::new().await;
    let (a, second) = scene.batch_across_a_client_kill(0).await;
    until("alloc complete", WAIT, || {
        scene.fake.status(&a.id) == Some(AllocClientStatus::Complete)
    })
    .await;
    let u = scene.fake.update(&a.id).unwrap();
    let work = &u.task_states["work"];
    assert!(!work.failed, "{work:?}");
    assert_eq!(work.state, "dead");
    let term = work
        .events
        .iter()
        .rfind(|e| e.r#type == "Terminated")
        .unwrap();
    assert_eq!((term.exit_code, term.signal), (0, 0), "{term:?}");
    assert!(
        !work.events.iter().any(|e| e.r#type == "Task Lost"),
        "{work:?}"
    );
    let history = scene.fake.seen.lock().history[&a.id].clone();
    assert!(
        !history
            .iter()
            .any(|s| matches!(s, AllocClientStatus::Failed | AllocClientStatus::Lost)),
        "never reported failed: {history:?}"
    );
    // Nothing starts it again.
    let again = caravan_testkit::wait::holds_within(Duration::from_millis(500), || {
        std::future::ready(ran(&scene.alloc_dir(&a)) != 1)
    })
    .await;
    assert!(!again, "the task ran exactly once");
    second.kill9();
    scene.stop_fake.cancel();
}

#[tokio::test]
async fn a_task_that_fails_while_the_client_is_killed_reports_its_exit_code() {
    let scene = Scene::new().await;
    let (a, second) = scene.batch_across_a_client_kill(3).await;
    until("alloc failed", WAIT, || {
        scene.fake.status(&a.id) == Some(AllocClientStatus::Failed)
    })
    .await;
    let u = scene.fake.update(&a.id).unwrap();
    let work = &u.task_states["work"];
    assert!(work.failed);
    let term = work
        .events
        .iter()
        .rfind(|e| e.r#type == "Terminated")
        .unwrap();
    assert_eq!(term.exit_code, 3, "{term:?}");
    assert!(term.message.starts_with("Exit Code: 3"), "{term:?}");
    assert_eq!(ran(&scene.alloc_dir(&a)), 1);
    second.kill9();
    scene.stop_fake.cancel();
}

/// A restarted client re-attached to a live task registers its service
/// again (the registry may have lost or swept it meanwhile; the same value
/// twice is harmless) and runs its script check in the recovered run.
#[tokio::test]
async fn a_restarted_client_registers_a_reattached_tasks_service_again() {
    use caravan_proto::{Service, ServiceCheck};

    let scene = Scene::new().await;
    let (first, shutdown) = scene.client().await;
    let node_id = first.ready.node_ids[0].clone();
    let mut t = sh_task("web", SCRIPT);
    t.services = vec![Service {
        name: "svc-web".into(),
        task_name: "web".into(),
        checks: vec![ServiceCheck {
            name: "inside".into(),
            r#type: "script".into(),
            command: "/bin/sh".into(),
            args: vec!["-c".into(), "test -f $NOMAD_ALLOC_DIR/pid".into()],
            interval_ns: 200_000_000,
            timeout_ns: 2_000_000_000,
            ..Default::default()
        }],
        ..Default::default()
    }];
    let job = job("svc", JobType::Service, vec![t]);
    let a = alloc(&job, 0);
    scene.fake.push(&node_id, vec![a.clone()], vec![job]);
    let id = format!("_nomad-task-{}-web-svc-web-", a.id);
    let passing_since = |from: usize| {
        let seen = scene.fake.seen.lock();
        seen.update_calls[from.min(seen.update_calls.len())..]
            .iter()
            .flat_map(|c| &c.updates)
            .flat_map(|u| &u.registered)
            .any(|r| r.id == id && r.checks[0].status == "passing")
    };
    until("registered with its check passing", WAIT, || {
        passing_since(0)
    })
    .await;
    stop(first, shutdown).await;

    let calls_before = scene.fake.seen.lock().update_calls.len();
    let (second, shutdown) = scene.client().await;
    until(
        "registered again, its check passing in the recovered run",
        WAIT,
        || passing_since(calls_before),
    )
    .await;
    assert_eq!(starts(&scene.alloc_dir(&a)), 1, "never two copies");
    scene.fake.push(&node_id, vec![stopped(a.clone())], vec![]);
    until("deregistered", WAIT, || {
        let seen = scene.fake.seen.lock();
        seen.update_calls[calls_before..]
            .iter()
            .flat_map(|c| &c.updates)
            .any(|u| u.deregistered.iter().any(|r| r.id == id))
    })
    .await;
    stop(second, shutdown).await;
    scene.stop_fake.cancel();
}

//! The task runner runs its prestart hooks before each start: their events
//! come first, a failure goes to the restart policy, and a stop asked
//! while they run ends them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use caravan_proto::{RestartPolicy, TaskState};
use futures::FutureExt;
use nix::sys::signal::Signal;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::driver::{MockDriver, TaskConfig, string_value};
use crate::restart::RestartTracker;
use crate::task_runner::{KillRequest, TaskRunner, TaskUpdate, event, states};

/// Fails its first `failures` runs, then succeeds; waits `hold` first.
#[derive(Debug)]
struct Flaky {
    failures: u32,
    recoverable: bool,
    hold: Duration,
    runs: AtomicU32,
}

impl PrestartHook for Flaky {
    fn name(&self) -> &'static str {
        "flaky"
    }

    fn prestart<'a>(
        &'a self,
        ctx: &'a mut PrestartCtx<'_>,
    ) -> BoxFuture<'a, Result<(), HookFailure>> {
        async move {
            let n = self.runs.fetch_add(1, Ordering::SeqCst);
            (ctx.events)(event("Preparing", format!("run {n}")));
            tokio::time::sleep(self.hold).await;
            if n < self.failures {
                return Err(HookFailure {
                    event_type: "Failed Preparing".into(),
                    message: format!("run {n} failed"),
                    recoverable: self.recoverable,
                });
            }
            Ok(())
        }
        .boxed()
    }
}

struct Run {
    updates: mpsc::UnboundedReceiver<Box<TaskUpdate>>,
    kill: watch::Sender<Option<KillRequest>>,
    join: tokio::task::JoinHandle<Option<crate::task_runner::ParkedTask>>,
    hook: Arc<Flaky>,
}

fn run(hook: Flaky, attempts: i32) -> Run {
    let hook = Arc::new(hook);
    let (tx, updates) = mpsc::unbounded_channel();
    let (kill, kill_rx) = watch::channel(None);
    let (control_tx, control) = mpsc::unbounded_channel();
    let prestart = Prestart {
        hooks: vec![hook.clone() as Arc<dyn PrestartHook>],
        task: Arc::default(),
        alloc: Arc::default(),
        job: Arc::default(),
        api: None,
        control: control_tx,
    };
    let policy = RestartPolicy {
        attempts,
        interval_ns: 3_600_000_000_000,
        delay_ns: 1_000_000_000,
        mode: "fail".into(),
        on_success: false,
    };
    let r = TaskRunner {
        name: "t".into(),
        driver: Arc::new(MockDriver::new()),
        spec: crate::driver::TaskSpec {
            alloc_id: "a".into(),
            task: "t".into(),
            config: TaskConfig::from_pairs([("run_for", string_value("1s"))]),
            env: None,
            dirs: None,
            logs: Default::default(),
            user: String::new(),
            resources: None,
            volume_mounts: Vec::new(),
            netns: None,
            group_net: Default::default(),
        },
        kill_signal: Signal::SIGTERM,
        kill_timeout: Duration::from_secs(5),
        shutdown_delay: Duration::ZERO,
        restart: RestartTracker::new(&policy, true).without_jitter(),
        state: TaskState {
            state: states::PENDING.into(),
            ..Default::default()
        },
        updates: tx,
        kill: kill_rx,
        detach: CancellationToken::new(),
        control,
        trace_context: BTreeMap::new(),
        unrecorded: None,
        parked: None,
        prestart: Some(Box::new(prestart)),
    };
    Run {
        updates,
        kill,
        join: tokio::spawn(r.run(None)),
        hook,
    }
}

/// Every state sent, in order, each update answered as persisted.
async fn states_sent(mut run: Run) -> (Vec<TaskState>, Arc<Flaky>) {
    let mut all = Vec::new();
    while let Some(mut u) = run.updates.recv().await {
        if let Some(answer) = u.persisted.take() {
            let _ = answer.send(true);
        }
        all.push(u.state);
    }
    run.join.await.unwrap();
    (all, run.hook)
}

fn kinds(s: &TaskState) -> Vec<&str> {
    s.events.iter().map(|e| e.r#type.as_str()).collect()
}

#[tokio::test(start_paused = true)]
async fn a_hook_event_is_reported_before_the_hook_ends_and_the_task_starts_after_it() {
    let run = run(
        Flaky {
            failures: 0,
            recoverable: true,
            hold: Duration::from_secs(30),
            runs: AtomicU32::new(0),
        },
        0,
    );
    let (all, hook) = states_sent(run).await;
    assert_eq!(hook.runs.load(Ordering::SeqCst), 1);
    // The first state sent carries the hook's event while it still ran.
    assert_eq!(kinds(&all[0]), vec!["Preparing"]);
    assert_eq!(all[0].state, states::PENDING);
    let last = all.last().unwrap();
    assert_eq!(kinds(last), vec!["Preparing", "Started", "Terminated"]);
    assert!(!last.failed);
}

#[tokio::test(start_paused = true)]
async fn a_recoverable_failure_is_retried_under_the_restart_policy() {
    let run = run(
        Flaky {
            failures: 1,
            recoverable: true,
            hold: Duration::ZERO,
            runs: AtomicU32::new(0),
        },
        2,
    );
    let (all, hook) = states_sent(run).await;
    assert_eq!(hook.runs.load(Ordering::SeqCst), 2);
    let last = all.last().unwrap();
    assert_eq!(
        kinds(last),
        vec![
            "Preparing",
            "Failed Preparing",
            "Restarting",
            "Preparing",
            "Started",
            "Terminated"
        ]
    );
    assert_eq!(last.events[1].message, "run 0 failed");
    assert_eq!(last.restarts, 1);
    assert!(!last.failed);
}

#[tokio::test(start_paused = true)]
async fn an_unrecoverable_failure_fails_the_task_without_starting_it() {
    let run = run(
        Flaky {
            failures: 5,
            recoverable: false,
            hold: Duration::ZERO,
            runs: AtomicU32::new(0),
        },
        2,
    );
    let (all, hook) = states_sent(run).await;
    assert_eq!(hook.runs.load(Ordering::SeqCst), 1);
    let last = all.last().unwrap();
    assert_eq!(
        kinds(last),
        vec!["Preparing", "Failed Preparing", "Not Restarting"]
    );
    assert_eq!(last.state, states::DEAD);
    assert!(last.failed);
}

#[tokio::test(start_paused = true)]
async fn a_stop_asked_while_a_hook_runs_ends_it_and_the_task_never_starts() {
    let mut run = run(
        Flaky {
            failures: 0,
            recoverable: true,
            hold: Duration::from_secs(3600),
            runs: AtomicU32::new(0),
        },
        0,
    );
    // The hook's event shows it is running.
    let first = run.updates.recv().await.unwrap();
    assert_eq!(kinds(&first.state), vec!["Preparing"]);
    run.kill.send(Some(KillRequest::default())).unwrap();
    let (all, _) = states_sent(run).await;
    let last = all.last().unwrap();
    assert_eq!(kinds(last), vec!["Preparing", "Killed"]);
    assert_eq!(last.events[1].message, "Task killed before it ran");
    assert_eq!(last.state, states::DEAD);
}

//! `mock`: a task that runs for `run_for`, exits with `exit_code`, or fails to
//! start with `start_error`, without any process. For tests and simulated nodes.

use std::sync::Arc;
use std::time::Duration;

use caravan_model::now_unix_ns;
use caravan_proto::TaskResourceUsage;
use nix::sys::signal::Signal;
use parking_lot::Mutex;
use serde::Deserialize;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::handle_state::LEGACY_VERSION;
use super::{
    Capabilities, Driver, DriverError, ExecRequest, ExitResult, Fingerprint, FsIsolation,
    HandleState, TaskHandle, TaskSpec,
};

/// The driver's name.
const NAME: &str = "mock";

/// The format of the handle state: four numbers, little-endian (see
/// [`MockState`]).
const STATE_VERSION: u32 = 1;

/// The mock driver. Config keys: `run_for` (duration; absent means exit at
/// once, or run until stopped on simulated nodes), `exit_code`, `exit_signal`,
/// `start_error` (+ `start_error_recoverable`), `kill_after` (time to honour a
/// stop signal), `stdout_string` (written to the stdout log when there is one).
#[derive(Debug, Clone, Copy, Default)]
pub struct MockDriver {
    run_forever_by_default: bool,
}

impl MockDriver {
    /// Tasks without `run_for` exit at once.
    pub fn new() -> Self {
        MockDriver {
            run_forever_by_default: false,
        }
    }

    /// Tasks without `run_for` run until stopped (simulated nodes).
    pub fn simulated() -> Self {
        MockDriver {
            run_forever_by_default: true,
        }
    }
}

/// A simulated task.
#[derive(Debug)]
pub struct MockHandle {
    started_at_unix_ns: i64,
    run_for: Option<Duration>,
    deadline: Option<Instant>,
    natural: ExitResult,
    kill_after: Duration,
    /// How it ended, once it has. (Not a watch channel: a simulated node
    /// holds one handle per running task, and a watch costs 400 bytes.)
    exit: Mutex<Option<ExitResult>>,
    ended: Notify,
}

fn ns(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// What a simulated task's handle persists. Encoded by hand in 28 bytes: a
/// simulated node keeps thousands of runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
struct MockState {
    started_at_unix_ns: i64,
    run_for_ns: Option<i64>,
    exit_code: i32,
    kill_after_ns: i64,
}

impl MockState {
    fn encode(&self) -> HandleState {
        let mut b = Vec::with_capacity(28);
        b.extend_from_slice(&self.started_at_unix_ns.to_le_bytes());
        b.extend_from_slice(&self.run_for_ns.unwrap_or(i64::MIN).to_le_bytes());
        b.extend_from_slice(&self.exit_code.to_le_bytes());
        b.extend_from_slice(&self.kill_after_ns.to_le_bytes());
        HandleState::new(NAME, STATE_VERSION, b)
    }

    fn decode(state: &HandleState) -> Option<MockState> {
        if state.driver() != NAME {
            return None;
        }
        match state.version() {
            STATE_VERSION => {
                let b = state.bytes();
                let i64_at = |at: usize| {
                    b.get(at..at + 8)
                        .and_then(|s| <[u8; 8]>::try_from(s).ok())
                        .map(i64::from_le_bytes)
                };
                let exit_code = b
                    .get(16..20)
                    .and_then(|s| <[u8; 4]>::try_from(s).ok())
                    .map(i32::from_le_bytes)?;
                let run_for = i64_at(8)?;
                Some(MockState {
                    started_at_unix_ns: i64_at(0)?,
                    run_for_ns: (run_for != i64::MIN).then_some(run_for),
                    exit_code,
                    kill_after_ns: i64_at(20)?,
                })
            }
            LEGACY_VERSION => serde_json::from_slice(state.bytes()).ok(),
            _ => None,
        }
    }
}

#[async_trait::async_trait]
impl Driver for MockDriver {
    fn name(&self) -> &'static str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            send_signals: true,
            exec: false,
            fs_isolation: FsIsolation::None,
            network_isolation: false,
            mounts: true,
        }
    }

    async fn fingerprint(&self) -> Fingerprint {
        Fingerprint::healthy(Default::default())
    }

    fn wants_env(&self) -> bool {
        false
    }

    async fn start(&self, spec: TaskSpec) -> Result<Arc<dyn TaskHandle>, DriverError> {
        let c = &spec.config;
        if let Some(msg) = c.string("start_error")?.filter(|m| !m.is_empty()) {
            return Err(DriverError {
                message: msg,
                recoverable: c.boolean("start_error_recoverable")?.unwrap_or(false),
            });
        }
        let run_for = match c.duration("run_for")? {
            Some(d) => Some(d),
            None if self.run_forever_by_default => None,
            None => Some(Duration::ZERO),
        };
        let exit_code = c
            .int("exit_code")?
            .map(|n| i32::try_from(n).unwrap_or(i32::MAX))
            .unwrap_or(0);
        let exit_signal = c
            .int("exit_signal")?
            .map(|n| i32::try_from(n).unwrap_or(0))
            .unwrap_or(0);
        let kill_after = c.duration("kill_after")?.unwrap_or(Duration::ZERO);
        if let (Some(text), Some(dirs)) = (c.string("stdout_string")?, spec.dirs.as_ref()) {
            let path = &dirs.stdout;
            let mut existing = std::fs::read(path).unwrap_or_default();
            existing.extend_from_slice(text.as_bytes());
            std::fs::write(path, existing)
                .map_err(|e| DriverError::recoverable(format!("write {}: {e}", path.display())))?;
        }
        Ok(Arc::new(MockHandle::new(
            now_unix_ns(),
            run_for,
            Duration::ZERO,
            ExitResult {
                exit_code,
                signal: exit_signal,
                ..Default::default()
            },
            kill_after,
        )))
    }

    async fn recover(&self, _spec: &TaskSpec, state: &HandleState) -> Option<Arc<dyn TaskHandle>> {
        let MockState {
            started_at_unix_ns,
            run_for_ns,
            exit_code,
            kill_after_ns,
        } = MockState::decode(state)?;
        let elapsed = Duration::from_nanos(
            u64::try_from(now_unix_ns().saturating_sub(started_at_unix_ns)).unwrap_or(0),
        );
        let run_for = run_for_ns.map(|n| Duration::from_nanos(u64::try_from(n).unwrap_or(0)));
        Some(Arc::new(MockHandle::new(
            started_at_unix_ns,
            run_for,
            elapsed,
            ExitResult {
                exit_code,
                ..Default::default()
            },
            Duration::from_nanos(u64::try_from(kill_after_ns).unwrap_or(0)),
        )))
    }
}

impl MockHandle {
    fn new(
        started_at_unix_ns: i64,
        run_for: Option<Duration>,
        elapsed: Duration,
        natural: ExitResult,
        kill_after: Duration,
    ) -> Self {
        let deadline = run_for.map(|d| Instant::now() + d.saturating_sub(elapsed));
        MockHandle {
            started_at_unix_ns,
            run_for,
            deadline,
            natural,
            kill_after,
            exit: Mutex::new(None),
            ended: Notify::new(),
        }
    }

    fn finish(&self, result: ExitResult) {
        let mut exit = self.exit.lock();
        if exit.is_none() {
            *exit = Some(result);
            self.ended.notify_waiters();
        }
    }
}

#[async_trait::async_trait]
impl TaskHandle for MockHandle {
    fn state(&self) -> HandleState {
        MockState {
            started_at_unix_ns: self.started_at_unix_ns,
            run_for_ns: self.run_for.map(ns),
            exit_code: self.natural.exit_code,
            kill_after_ns: ns(self.kill_after),
        }
        .encode()
    }

    async fn wait(&self) -> ExitResult {
        loop {
            // Registered before the look, so an end in between still wakes it.
            let ended = self.ended.notified();
            let mut ended = std::pin::pin!(ended);
            ended.as_mut().enable();
            if let Some(r) = self.exit.lock().clone() {
                return r;
            }
            match self.deadline {
                Some(at) => tokio::select! {
                    _ = tokio::time::sleep_until(at) => self.finish(self.natural.clone()),
                    _ = ended => {}
                },
                None => ended.await,
            }
        }
    }

    fn unwatched_until(&self) -> Option<Option<Instant>> {
        // Once it has ended, or its end is here, someone must see the end.
        let ending = self.deadline.is_some_and(|at| at <= Instant::now());
        (self.exit.lock().is_none() && !ending).then_some(self.deadline)
    }

    async fn stop(&self, signal: Signal, timeout: Duration) -> ExitResult {
        let honoured = self.kill_after <= timeout;
        let delay = self.kill_after.min(timeout);
        tokio::select! {
            r = self.wait() => return r,
            _ = tokio::time::sleep(delay) => {}
        }
        self.finish(ExitResult {
            signal: if honoured { signal } else { Signal::SIGKILL } as i32,
            ..Default::default()
        });
        self.wait().await
    }

    /// A simulated task has no process: a signal is taken as delivered.
    async fn signal(&self, _signal: Signal) -> Result<(), DriverError> {
        Ok(())
    }

    /// A simulated task uses nothing.
    async fn stats(&self, _cpu_total_mhz: u64) -> Result<TaskResourceUsage, DriverError> {
        Ok(crate::stats::idle_task_usage())
    }

    async fn exec(&self, _request: ExecRequest) -> Result<i32, DriverError> {
        Err(DriverError::unsupported(NAME, "exec"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::TaskConfig;
    use crate::driver::config::{number_value, string_value};

    fn spec(pairs: Vec<(&str, prost_types::Value)>) -> TaskSpec {
        TaskSpec {
            alloc_id: "a".into(),
            task: "t".into(),
            config: TaskConfig::from_pairs(pairs),
            env: None,
            dirs: None,
            logs: Default::default(),
            user: String::new(),
            resources: None,
            volume_mounts: Vec::new(),
            netns: None,
            group_net: Default::default(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn runs_for_then_exits_with_the_code() {
        let h = MockDriver::new()
            .start(spec(vec![
                ("run_for", string_value("10s")),
                ("exit_code", number_value(7.0)),
            ]))
            .await
            .unwrap();
        let began = Instant::now();
        let r = h.wait().await;
        assert_eq!(r.exit_code, 7);
        assert_eq!(began.elapsed(), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn without_run_for_exits_at_once_or_runs_forever_when_simulated() {
        let h = MockDriver::new().start(spec(vec![])).await.unwrap();
        assert!(h.wait().await.successful());
        let h = MockDriver::simulated().start(spec(vec![])).await.unwrap();
        let waited = tokio::time::timeout(Duration::from_secs(3600), h.wait()).await;
        assert!(waited.is_err(), "a simulated task runs until stopped");
        let r = h.stop(Signal::SIGTERM, Duration::from_secs(5)).await;
        assert_eq!(r.signal, Signal::SIGTERM as i32);
    }

    #[tokio::test(start_paused = true)]
    async fn kill_after_past_the_timeout_means_sigkill() {
        let h = MockDriver::new()
            .start(spec(vec![
                ("run_for", string_value("1h")),
                ("kill_after", string_value("10s")),
            ]))
            .await
            .unwrap();
        let began = Instant::now();
        let r = h.stop(Signal::SIGINT, Duration::from_secs(2)).await;
        assert_eq!(r.signal, Signal::SIGKILL as i32);
        assert_eq!(began.elapsed(), Duration::from_secs(2));
    }

    #[tokio::test]
    async fn start_errors_and_recovery() {
        let e = MockDriver::new()
            .start(spec(vec![("start_error", string_value("boom"))]))
            .await
            .unwrap_err();
        assert_eq!(e.message, "boom");
        assert!(!e.recoverable);
        let h = MockDriver::new()
            .start(spec(vec![("run_for", string_value("1h"))]))
            .await
            .unwrap();
        let s = spec(vec![]);
        let again = MockDriver::new().recover(&s, &h.state()).await.unwrap();
        assert_eq!(again.state(), h.state());
        assert_eq!(h.state().bytes().len(), 28);
        let bad = HandleState::new("raw_exec", 1, b"{}".to_vec());
        assert!(MockDriver::new().recover(&s, &bad).await.is_none());
        let legacy: HandleState = serde_json::from_str(
            r#"{"driver":"mock","started_at_unix_ns":5,"run_for_ns":null,"exit_code":3,"kill_after_ns":0}"#,
        )
        .unwrap();
        let old = MockDriver::new().recover(&s, &legacy).await.unwrap();
        assert_eq!(
            MockState::decode(&old.state()),
            Some(MockState {
                started_at_unix_ns: 5,
                run_for_ns: None,
                exit_code: 3,
                kill_after_ns: 0
            })
        );
    }
}

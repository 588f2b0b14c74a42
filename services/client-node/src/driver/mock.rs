//! `mock`: a task that runs for `run_for`, exits with `exit_code`, or fails to
//! start with `start_error`, without any process. For tests and simulated nodes.

use std::sync::Arc;
use std::time::Duration;

use caravan_model::now_unix_ns;
use caravan_proto::DriverInfo;
use nix::sys::signal::Signal;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::{Driver, DriverError, ExitResult, HandleState, TaskHandle, TaskSpec};

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

#[async_trait::async_trait]
impl Driver for MockDriver {
    fn name(&self) -> &'static str {
        "mock"
    }

    fn info(&self) -> DriverInfo {
        DriverInfo {
            detected: true,
            healthy: true,
            health_description: "Healthy".into(),
            ..Default::default()
        }
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
                err: None,
            },
            kill_after,
        )))
    }

    fn recover(&self, state: &HandleState) -> Option<Arc<dyn TaskHandle>> {
        let HandleState::Mock {
            started_at_unix_ns,
            run_for_ns,
            exit_code,
            kill_after_ns,
        } = *state
        else {
            return None;
        };
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
        HandleState::Mock {
            started_at_unix_ns: self.started_at_unix_ns,
            run_for_ns: self.run_for.map(ns),
            exit_code: self.natural.exit_code,
            kill_after_ns: ns(self.kill_after),
        }
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
        let again = MockDriver::new().recover(&h.state()).unwrap();
        assert_eq!(again.state(), h.state());
        let bad = HandleState::RawExec {
            pid: 1,
            start_ticks: 1,
            started_at_unix_ns: 0,
            supervisor: None,
        };
        assert!(MockDriver::new().recover(&bad).is_none());
    }
}

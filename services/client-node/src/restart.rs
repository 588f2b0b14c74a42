//! The restart policy of a task: after an exit (or a failed start), restart
//! after a delay while attempts within the interval remain; then fail
//! (`mode = "fail"`) or wait out the interval (`mode = "delay"`). Batch tasks
//! that exit 0 are complete.

use std::time::{Duration, Instant};

use caravan_model::JobTypeExt;
use caravan_proto::{JobType, RestartPolicy};

use crate::driver::ExitResult;

/// Share of the delay added at random so restarts of many tasks spread out.
const JITTER: f64 = 0.25;

/// The policy of a task whose job sets none (canonical jobs always carry
/// one): service and system 2 attempts in 30m, batch and sysbatch 3 in 24h,
/// 15s delay, mode `fail`.
pub fn default_policy(job_type: JobType) -> RestartPolicy {
    let batch = job_type.runs_to_completion();
    RestartPolicy {
        attempts: if batch { 3 } else { 2 },
        interval_ns: if batch { 24 * 3600 } else { 30 * 60 } * 1_000_000_000,
        delay_ns: 15_000_000_000,
        mode: "fail".into(),
        on_success: false,
    }
}

/// What to do after a task stopped on its own.
#[derive(Debug, Clone, PartialEq)]
pub enum RestartDecision {
    /// Start it again after `delay`.
    Restart {
        /// How long to wait.
        delay: Duration,
        /// Why, for the `Restarting` event.
        reason: String,
    },
    /// The task finished successfully; it stays dead, not failed.
    Complete,
    /// The task has failed for good.
    Fail {
        /// Why, for the `Not Restarting` event.
        reason: String,
    },
}

/// Counts restarts within the policy's interval.
#[derive(Debug, Clone)]
pub struct RestartTracker {
    attempts: u32,
    interval: Duration,
    delay: Duration,
    delay_mode: bool,
    on_success: bool,
    batch: bool,
    jitter: bool,
    count: u32,
    window_start: Option<Instant>,
}

impl RestartTracker {
    /// A tracker for `policy`; `batch` is true for batch and sysbatch jobs,
    /// whose tasks are done when they exit 0.
    pub fn new(policy: &RestartPolicy, batch: bool) -> Self {
        RestartTracker {
            attempts: u32::try_from(policy.attempts).unwrap_or(0),
            interval: Duration::from_nanos(u64::try_from(policy.interval_ns).unwrap_or(0)),
            delay: Duration::from_nanos(u64::try_from(policy.delay_ns).unwrap_or(0)),
            delay_mode: policy.mode == "delay",
            on_success: policy.on_success,
            batch,
            jitter: true,
            count: 0,
            window_start: None,
        }
    }

    /// The same tracker without random jitter (deterministic delays).
    #[cfg(test)]
    pub fn without_jitter(mut self) -> Self {
        self.jitter = false;
        self
    }

    /// The decision after the task exited at `now` with `exit`.
    pub fn on_exit(&mut self, now: Instant, exit: &ExitResult) -> RestartDecision {
        if exit.successful() && self.batch && !self.on_success {
            return RestartDecision::Complete;
        }
        self.next(now)
    }

    /// The decision after the driver failed to start the task.
    pub fn on_start_error(&mut self, now: Instant, recoverable: bool) -> RestartDecision {
        if !recoverable {
            return RestartDecision::Fail {
                reason: "Error was unrecoverable".to_string(),
            };
        }
        self.next(now)
    }

    /// The decision after a service check's `check_restart` stopped the
    /// task: a failure, counted like a failed exit.
    pub fn on_check_failure(&mut self, now: Instant) -> RestartDecision {
        self.next(now)
    }

    fn next(&mut self, now: Instant) -> RestartDecision {
        if self.attempts == 0 && !self.delay_mode {
            return RestartDecision::Fail {
                reason: "Policy allows no restarts".to_string(),
            };
        }
        let window_over = match self.window_start {
            None => true,
            Some(start) => now.saturating_duration_since(start) > self.interval,
        };
        if window_over {
            self.count = 0;
            self.window_start = Some(now);
        }
        self.count += 1;
        if self.count > self.attempts {
            if !self.delay_mode {
                return RestartDecision::Fail {
                    reason: format!(
                        "Exceeded allowed attempts {} in interval {} and mode is \"fail\"",
                        self.attempts,
                        caravan_jobspec::format_duration(
                            i64::try_from(self.interval.as_nanos()).unwrap_or(i64::MAX)
                        )
                    ),
                };
            }
            let start = self.window_start.unwrap_or(now);
            let rest = (start + self.interval).saturating_duration_since(now);
            return RestartDecision::Restart {
                delay: rest.max(self.delay),
                reason: "Exceeded allowed attempts, applying a delay".to_string(),
            };
        }
        RestartDecision::Restart {
            delay: self.jittered(),
            reason: "Restart within policy".to_string(),
        }
    }

    fn jittered(&self) -> Duration {
        if !self.jitter || self.delay.is_zero() {
            return self.delay;
        }
        let extra = self.delay.mul_f64(rand::random::<f64>() * JITTER);
        self.delay + extra
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn policy(attempts: i32, interval: Duration, delay: Duration, mode: &str) -> RestartPolicy {
        RestartPolicy {
            attempts,
            interval_ns: interval.as_nanos() as i64,
            delay_ns: delay.as_nanos() as i64,
            mode: mode.to_string(),
            on_success: false,
        }
    }

    fn failed() -> ExitResult {
        ExitResult {
            exit_code: 1,
            ..Default::default()
        }
    }

    fn restart(delay: Duration) -> RestartDecision {
        RestartDecision::Restart {
            delay,
            reason: "Restart within policy".into(),
        }
    }

    #[test]
    fn fail_mode_allows_attempts_within_the_interval_then_fails() {
        let mut t = RestartTracker::new(&policy(2, 60 * S, 15 * S, "fail"), false).without_jitter();
        let t0 = Instant::now();
        assert_eq!(t.on_exit(t0, &failed()), restart(15 * S));
        assert_eq!(t.on_exit(t0 + 20 * S, &failed()), restart(15 * S));
        assert_eq!(
            t.on_exit(t0 + 40 * S, &failed()),
            RestartDecision::Fail {
                reason: "Exceeded allowed attempts 2 in interval 1m0s and mode is \"fail\"".into()
            }
        );
    }

    #[test]
    fn a_new_interval_resets_the_attempts() {
        let mut t = RestartTracker::new(&policy(1, 60 * S, S, "fail"), false).without_jitter();
        let t0 = Instant::now();
        assert_eq!(t.on_exit(t0, &failed()), restart(S));
        assert_eq!(t.on_exit(t0 + 61 * S, &failed()), restart(S));
        assert!(matches!(
            t.on_exit(t0 + 62 * S, &failed()),
            RestartDecision::Fail { .. }
        ));
    }

    #[test]
    fn delay_mode_waits_out_the_interval() {
        let mut t = RestartTracker::new(&policy(1, 60 * S, 5 * S, "delay"), false).without_jitter();
        let t0 = Instant::now();
        assert_eq!(t.on_exit(t0, &failed()), restart(5 * S));
        assert_eq!(
            t.on_exit(t0 + 10 * S, &failed()),
            RestartDecision::Restart {
                delay: 50 * S,
                reason: "Exceeded allowed attempts, applying a delay".into()
            }
        );
        // After the interval, attempts are available again.
        assert_eq!(t.on_exit(t0 + 61 * S, &failed()), restart(5 * S));
    }

    #[test]
    fn batch_success_completes_but_service_success_restarts() {
        let ok = ExitResult::default();
        let p = policy(2, 60 * S, S, "fail");
        let mut batch = RestartTracker::new(&p, true).without_jitter();
        assert_eq!(
            batch.on_exit(Instant::now(), &ok),
            RestartDecision::Complete
        );
        let mut service = RestartTracker::new(&p, false).without_jitter();
        assert_eq!(service.on_exit(Instant::now(), &ok), restart(S));
        let mut again = RestartTracker::new(
            &RestartPolicy {
                on_success: true,
                ..p
            },
            true,
        )
        .without_jitter();
        assert_eq!(again.on_exit(Instant::now(), &ok), restart(S));
    }

    #[test]
    fn zero_attempts_and_unrecoverable_start_errors_fail_at_once() {
        let mut t = RestartTracker::new(&policy(0, 60 * S, S, "fail"), false);
        assert_eq!(
            t.on_exit(Instant::now(), &failed()),
            RestartDecision::Fail {
                reason: "Policy allows no restarts".into()
            }
        );
        let mut t = RestartTracker::new(&policy(3, 60 * S, S, "fail"), false).without_jitter();
        assert!(matches!(
            t.on_start_error(Instant::now(), false),
            RestartDecision::Fail { .. }
        ));
        assert_eq!(t.on_start_error(Instant::now(), true), restart(S));
    }

    #[test]
    fn jitter_stays_within_a_quarter_of_the_delay() {
        let mut t = RestartTracker::new(&policy(100, 3600 * S, 4 * S, "fail"), false);
        let t0 = Instant::now();
        for i in 0..50 {
            match t.on_exit(t0 + i * S, &failed()) {
                RestartDecision::Restart { delay, .. } => {
                    assert!(delay >= 4 * S && delay <= 5 * S, "{delay:?}")
                }
                other => panic!("{other:?}"),
            }
        }
    }
}

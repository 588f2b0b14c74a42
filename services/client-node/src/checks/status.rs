//! What a check's results add up to: its status, moved by the thresholds of
//! its `check` block (`success_before_passing`, `failures_before_warning`,
//! `failures_before_critical`), and the `check_restart` count that restarts
//! its task.

use std::time::Duration;

use caravan_proto::{CheckRestart, ServiceCheck};

/// The result of one probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A good answer.
    Success,
    /// An answer that is neither good nor bad (an HTTP 429).
    Warning,
    /// A bad answer, or none.
    Failure,
}

/// A check's status, as Nomad names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// No probe has decided it yet.
    Pending,
    /// Healthy.
    Passing,
    /// Neither healthy nor failing.
    Warning,
    /// Failing.
    Critical,
}

impl Status {
    /// Nomad's name of the status.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Passing => "passing",
            Status::Warning => "warning",
            Status::Critical => "critical",
        }
    }
}

/// Folds probe outcomes into a status with the check's thresholds.
#[derive(Clone, Debug)]
pub struct Tracker {
    status: Status,
    successes: u32,
    failures: u32,
    before_passing: u32,
    before_warning: u32,
    before_critical: u32,
}

impl Tracker {
    /// A tracker in the check's `initial_status` (pending when unset).
    pub fn new(check: &ServiceCheck) -> Self {
        let status = match check.initial_status.as_str() {
            "passing" => Status::Passing,
            "warning" => Status::Warning,
            "critical" => Status::Critical,
            _ => Status::Pending,
        };
        let count = |n: i32| u32::try_from(n).unwrap_or(0).max(1);
        let before_critical = count(check.failures_before_critical);
        Tracker {
            status,
            successes: 0,
            failures: 0,
            before_passing: count(check.success_before_passing),
            // Unset: warn no sooner than it turns critical, so never.
            before_warning: if check.failures_before_warning > 0 {
                count(check.failures_before_warning)
            } else {
                before_critical
            },
            before_critical,
        }
    }

    /// The status now.
    pub fn status(&self) -> Status {
        self.status
    }

    /// Takes one probe's outcome; true when the status changed.
    pub fn record(&mut self, outcome: Outcome) -> bool {
        let before = self.status;
        match outcome {
            Outcome::Success => {
                self.failures = 0;
                self.successes = self.successes.saturating_add(1);
                if self.successes >= self.before_passing {
                    self.status = Status::Passing;
                }
            }
            Outcome::Warning => {
                self.successes = 0;
                self.failures = 0;
                self.status = Status::Warning;
            }
            Outcome::Failure => {
                self.successes = 0;
                self.failures = self.failures.saturating_add(1);
                if self.failures >= self.before_critical {
                    self.status = Status::Critical;
                } else if self.failures >= self.before_warning {
                    self.status = Status::Warning;
                }
            }
        }
        self.status != before
    }
}

/// Counts a task's unhealthy check results for its `check_restart` block.
#[derive(Clone, Debug)]
pub struct RestartWatch {
    limit: u32,
    grace: Duration,
    ignore_warnings: bool,
    unhealthy: u32,
}

impl RestartWatch {
    /// None when the block asks for no restarts (`limit = 0` or no block).
    pub fn new(block: Option<&CheckRestart>) -> Option<Self> {
        let block = block?;
        let limit = u32::try_from(block.limit).ok().filter(|l| *l > 0)?;
        Some(RestartWatch {
            limit,
            grace: Duration::from_nanos(u64::try_from(block.grace_ns).unwrap_or(0)),
            ignore_warnings: block.ignore_warnings,
            unhealthy: 0,
        })
    }

    /// Takes the status after one probe, `running_for` after the task's
    /// (re)start; true when the task is to be restarted now (the count then
    /// starts again). Results inside the grace period do not count.
    pub fn observe(&mut self, running_for: Duration, status: Status) -> bool {
        if running_for < self.grace {
            return false;
        }
        let unhealthy = match status {
            Status::Critical => true,
            Status::Warning => !self.ignore_warnings,
            Status::Passing | Status::Pending => false,
        };
        if !unhealthy {
            self.unhealthy = 0;
            return false;
        }
        self.unhealthy += 1;
        if self.unhealthy >= self.limit {
            self.unhealthy = 0;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(passing: i32, warning: i32, critical: i32) -> ServiceCheck {
        ServiceCheck {
            success_before_passing: passing,
            failures_before_warning: warning,
            failures_before_critical: critical,
            ..Default::default()
        }
    }

    #[test]
    fn without_thresholds_each_result_decides_at_once() {
        let mut t = Tracker::new(&check(0, 0, 0));
        assert_eq!(t.status(), Status::Pending);
        assert!(t.record(Outcome::Success));
        assert_eq!(t.status(), Status::Passing);
        assert!(!t.record(Outcome::Success), "no change, nothing to write");
        assert!(t.record(Outcome::Failure));
        assert_eq!(t.status(), Status::Critical);
        assert!(t.record(Outcome::Warning));
        assert_eq!(t.status(), Status::Warning);
    }

    #[test]
    fn thresholds_count_results_in_a_row() {
        let mut t = Tracker::new(&check(2, 2, 3));
        t.record(Outcome::Success);
        assert_eq!(t.status(), Status::Pending, "one success of two");
        t.record(Outcome::Success);
        assert_eq!(t.status(), Status::Passing);
        t.record(Outcome::Failure);
        assert_eq!(t.status(), Status::Passing, "one failure of two");
        t.record(Outcome::Success);
        t.record(Outcome::Failure);
        t.record(Outcome::Failure);
        assert_eq!(t.status(), Status::Warning, "two in a row");
        t.record(Outcome::Failure);
        assert_eq!(t.status(), Status::Critical, "three in a row");
        t.record(Outcome::Success);
        assert_eq!(t.status(), Status::Critical, "one success of two");
        t.record(Outcome::Success);
        assert_eq!(t.status(), Status::Passing);
    }

    #[test]
    fn the_initial_status_holds_until_a_threshold_is_met() {
        let mut t = Tracker::new(&ServiceCheck {
            initial_status: "critical".into(),
            success_before_passing: 2,
            ..Default::default()
        });
        assert_eq!(t.status(), Status::Critical);
        t.record(Outcome::Success);
        assert_eq!(t.status(), Status::Critical);
        t.record(Outcome::Success);
        assert_eq!(t.status(), Status::Passing);
    }

    fn watch(limit: i32, grace_s: i64, ignore_warnings: bool) -> Option<RestartWatch> {
        RestartWatch::new(Some(&CheckRestart {
            limit,
            grace_ns: grace_s * 1_000_000_000,
            ignore_warnings,
        }))
    }

    #[test]
    fn check_restart_after_limit_unhealthy_results_past_grace() {
        let s = Duration::from_secs;
        let mut w = watch(3, 10, false).expect("limit 3");
        for _ in 0..5 {
            assert!(!w.observe(s(5), Status::Critical), "inside the grace");
        }
        assert!(!w.observe(s(11), Status::Critical));
        assert!(!w.observe(s(12), Status::Warning));
        assert!(w.observe(s(13), Status::Critical), "the third in a row");
        assert!(
            !w.observe(s(14), Status::Critical),
            "the count starts again"
        );
        assert!(!w.observe(s(15), Status::Passing));
        assert!(!w.observe(s(16), Status::Critical));
        assert!(
            !w.observe(s(17), Status::Critical),
            "a pass reset the count"
        );
        assert!(w.observe(s(18), Status::Critical));
    }

    #[test]
    fn check_restart_may_ignore_warnings_and_limit_zero_is_off() {
        let mut w = watch(1, 0, true).expect("limit 1");
        assert!(!w.observe(Duration::ZERO, Status::Warning));
        assert!(w.observe(Duration::ZERO, Status::Critical));
        assert!(watch(0, 0, false).is_none());
        assert!(RestartWatch::new(None).is_none());
    }
}

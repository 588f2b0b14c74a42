//! Deployment health of an alloc, decided on the client as Nomad does: healthy
//! once every task has run for `min_healthy_time` without a break (with
//! `health_check = "checks"`, counted from when its checks all pass too),
//! unhealthy when a task fails or `healthy_deadline` passes first. Groups
//! whose update strategy says `manual` (or that have no deployment) are left
//! alone.

use std::time::Duration;

use caravan_proto::{Allocation, Job, JobType, SmallMap, TaskGroup, TaskState};
use tokio::time::Instant;

use crate::lifecycle::Phase;
use crate::task_runner::states;

/// Nomad's default `min_healthy_time`.
const DEFAULT_MIN_HEALTHY: Duration = Duration::from_secs(10);
/// Nomad's default `healthy_deadline`.
const DEFAULT_DEADLINE: Duration = Duration::from_secs(300);

fn duration(ns: i64, default: Duration) -> Duration {
    u64::try_from(ns)
        .ok()
        .filter(|n| *n > 0)
        .map_or(default, Duration::from_nanos)
}

/// Watches one alloc's tasks for its deployment.
#[derive(Debug, Clone)]
pub struct HealthTracker {
    min_healthy: Duration,
    deadline: Instant,
    running_since: Option<Instant>,
    verdict: Option<bool>,
    /// `health_check = "checks"`: the service checks must pass as well.
    checks: bool,
}

impl HealthTracker {
    /// A tracker for `alloc`, if it is part of a deployment whose health the
    /// client decides, or a service alloc's replacement outside one (a
    /// drain's migration, judged by the group's migrate strategy as Nomad's
    /// client does, so the drain moves on only once it is healthy), and
    /// hasn't been decided already.
    pub fn for_alloc(
        alloc: &Allocation,
        job: &Job,
        group: &TaskGroup,
        now: Instant,
    ) -> Option<Self> {
        if alloc
            .deployment_status
            .as_ref()
            .is_some_and(|d| d.healthy.is_some())
        {
            return None;
        }
        if alloc.deployment_id.is_empty() {
            if alloc.previous_allocation.is_empty() || job.r#type() != JobType::Service {
                return None;
            }
            let migrate = group.migrate.clone().unwrap_or_default();
            return Some(HealthTracker {
                min_healthy: duration(migrate.min_healthy_time_ns, DEFAULT_MIN_HEALTHY),
                deadline: now + duration(migrate.healthy_deadline_ns, DEFAULT_DEADLINE),
                running_since: None,
                verdict: None,
                checks: migrate.health_check == "checks",
            });
        }
        let update = group.update.as_ref().or(job.update.as_ref())?;
        if update.max_parallel <= 0 || update.health_check == "manual" {
            return None;
        }
        Some(HealthTracker {
            min_healthy: duration(update.min_healthy_time_ns, DEFAULT_MIN_HEALTHY),
            deadline: now + duration(update.healthy_deadline_ns, DEFAULT_DEADLINE),
            running_since: None,
            verdict: None,
            checks: update.health_check == "checks",
        })
    }

    /// Looks at the tasks at `now`, and whether the alloc's service checks
    /// all pass (read only under `health_check = "checks"`); returns the
    /// verdict when it is reached now.
    pub fn observe(
        &mut self,
        now: Instant,
        group: &TaskGroup,
        task_states: &SmallMap<TaskState>,
        checks_pass: bool,
    ) -> Option<bool> {
        if self.verdict.is_some() {
            return None;
        }
        let state = |name: &str| task_states.get(name);
        let failed = task_states.values().any(|s| s.failed);
        // Ephemeral hooks only have to not fail; everything else must run.
        let all_up = group.tasks.iter().all(|t| {
            let s = state(&t.name);
            if Phase::of(t).is_ephemeral() {
                !s.is_some_and(|s| s.failed)
            } else {
                s.is_some_and(|s| s.state == states::RUNNING)
            }
        });
        if all_up && (checks_pass || !self.checks) {
            let since = *self.running_since.get_or_insert(now);
            if now.saturating_duration_since(since) >= self.min_healthy {
                self.verdict = Some(true);
            }
        } else {
            self.running_since = None;
        }
        if failed || (self.verdict.is_none() && now >= self.deadline) {
            self.verdict = Some(false);
        }
        self.verdict
    }

    /// When the verdict may change without any task changing.
    pub fn next_check(&self) -> Option<Instant> {
        if self.verdict.is_some() {
            return None;
        }
        let healthy_at = self.running_since.map(|s| s + self.min_healthy);
        Some(healthy_at.map_or(self.deadline, |h| h.min(self.deadline)))
    }
}

#[cfg(test)]
mod tests {
    use caravan_proto::{AllocDeploymentStatus, Task, UpdateStrategy};

    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn fixture(health_check: &str) -> (Allocation, Job, TaskGroup) {
        let alloc = Allocation {
            deployment_id: "d1".into(),
            ..Default::default()
        };
        let group = TaskGroup {
            name: "g".into(),
            tasks: vec![
                Task {
                    name: "web".into(),
                    ..Default::default()
                },
                Task {
                    name: "init".into(),
                    lifecycle: Some(caravan_proto::TaskLifecycle {
                        hook: "prestart".into(),
                        sidecar: false,
                    }),
                    ..Default::default()
                },
            ],
            update: Some(UpdateStrategy {
                max_parallel: 1,
                health_check: health_check.into(),
                min_healthy_time_ns: 10_000_000_000,
                healthy_deadline_ns: 60_000_000_000,
                ..Default::default()
            }),
            ..Default::default()
        };
        (alloc, Job::default(), group)
    }

    fn states(web: &str, failed: bool) -> SmallMap<TaskState> {
        SmallMap::from([
            (
                "web".to_string(),
                TaskState {
                    state: web.into(),
                    failed,
                    ..Default::default()
                },
            ),
            (
                "init".to_string(),
                TaskState {
                    state: "dead".into(),
                    ..Default::default()
                },
            ),
        ])
    }

    #[test]
    fn healthy_after_running_for_min_healthy_time_without_a_break() {
        let (alloc, job, group) = fixture("checks");
        let t0 = Instant::now();
        let mut h = HealthTracker::for_alloc(&alloc, &job, &group, t0).unwrap();
        assert_eq!(h.observe(t0, &group, &states("running", false), true), None);
        assert_eq!(h.next_check(), Some(t0 + 10 * S));
        // A restart breaks the streak.
        assert_eq!(
            h.observe(t0 + 5 * S, &group, &states("pending", false), true),
            None
        );
        assert_eq!(
            h.observe(t0 + 6 * S, &group, &states("running", false), true),
            None
        );
        assert_eq!(
            h.observe(t0 + 15 * S, &group, &states("running", false), true),
            None
        );
        assert_eq!(
            h.observe(t0 + 16 * S, &group, &states("running", false), true),
            Some(true)
        );
        assert_eq!(h.next_check(), None);
        assert_eq!(
            h.observe(t0 + 17 * S, &group, &states("dead", true), true),
            None,
            "decided once"
        );
    }

    #[test]
    fn under_checks_min_healthy_time_counts_from_passing_checks() {
        let (alloc, job, group) = fixture("checks");
        let t0 = Instant::now();
        let mut h = HealthTracker::for_alloc(&alloc, &job, &group, t0).unwrap();
        let up = states("running", false);
        assert_eq!(h.observe(t0, &group, &up, false), None);
        assert_eq!(h.next_check(), Some(t0 + 60 * S), "only the deadline");
        assert_eq!(h.observe(t0 + 5 * S, &group, &up, true), None);
        assert_eq!(h.next_check(), Some(t0 + 15 * S));
        // A check failing again starts the count over.
        assert_eq!(h.observe(t0 + 8 * S, &group, &up, false), None);
        assert_eq!(h.observe(t0 + 9 * S, &group, &up, true), None);
        assert_eq!(h.observe(t0 + 15 * S, &group, &up, true), None);
        assert_eq!(h.observe(t0 + 19 * S, &group, &up, true), Some(true));

        // Checks that never pass: unhealthy at the deadline.
        let mut h = HealthTracker::for_alloc(&alloc, &job, &group, t0).unwrap();
        assert_eq!(h.observe(t0 + 30 * S, &group, &up, false), None);
        assert_eq!(h.observe(t0 + 60 * S, &group, &up, false), Some(false));
    }

    #[test]
    fn task_states_ignores_the_checks() {
        let (alloc, job, group) = fixture("task_states");
        let t0 = Instant::now();
        let mut h = HealthTracker::for_alloc(&alloc, &job, &group, t0).unwrap();
        let up = states("running", false);
        assert_eq!(h.observe(t0, &group, &up, false), None);
        assert_eq!(h.observe(t0 + 10 * S, &group, &up, false), Some(true));
    }

    #[test]
    fn a_migration_under_checks_waits_for_them() {
        let (mut alloc, mut job, mut group) = fixture("checks");
        alloc.deployment_id.clear();
        alloc.previous_allocation = "old".into();
        job.set_type(JobType::Service);
        group.migrate = Some(caravan_proto::MigrateStrategy {
            max_parallel: 1,
            health_check: "checks".into(),
            min_healthy_time_ns: 1_000_000_000,
            healthy_deadline_ns: 60_000_000_000,
        });
        let t0 = Instant::now();
        let mut h = HealthTracker::for_alloc(&alloc, &job, &group, t0).unwrap();
        let up = states("running", false);
        assert_eq!(h.observe(t0 + 5 * S, &group, &up, false), None);
        assert_eq!(h.observe(t0 + 6 * S, &group, &up, true), None);
        assert_eq!(h.observe(t0 + 7 * S, &group, &up, true), Some(true));
    }

    #[test]
    fn unhealthy_on_failure_or_after_the_deadline() {
        let (alloc, job, group) = fixture("task_states");
        let t0 = Instant::now();
        let mut h = HealthTracker::for_alloc(&alloc, &job, &group, t0).unwrap();
        assert_eq!(
            h.observe(t0 + S, &group, &states("dead", true), true),
            Some(false)
        );
        let mut h = HealthTracker::for_alloc(&alloc, &job, &group, t0).unwrap();
        assert_eq!(h.observe(t0, &group, &states("pending", false), true), None);
        assert_eq!(h.next_check(), Some(t0 + 60 * S));
        assert_eq!(
            h.observe(t0 + 60 * S, &group, &states("pending", false), true),
            Some(false)
        );
    }

    #[test]
    fn manual_no_deployment_or_already_decided_means_no_tracker() {
        let (alloc, job, group) = fixture("manual");
        assert!(HealthTracker::for_alloc(&alloc, &job, &group, Instant::now()).is_none());
        let (mut alloc, job, group) = fixture("checks");
        alloc.deployment_status = Some(AllocDeploymentStatus {
            healthy: Some(true),
            ..Default::default()
        });
        assert!(HealthTracker::for_alloc(&alloc, &job, &group, Instant::now()).is_none());
        alloc.deployment_status = None;
        alloc.deployment_id.clear();
        assert!(HealthTracker::for_alloc(&alloc, &job, &group, Instant::now()).is_none());
    }

    #[test]
    fn a_service_replacement_outside_a_deployment_uses_the_migrate_strategy() {
        let (mut alloc, mut job, mut group) = fixture("checks");
        alloc.deployment_id.clear();
        alloc.previous_allocation = "old".into();
        job.set_type(JobType::Service);
        group.migrate = Some(caravan_proto::MigrateStrategy {
            max_parallel: 1,
            health_check: "task_states".into(),
            min_healthy_time_ns: 2_000_000_000,
            healthy_deadline_ns: 60_000_000_000,
        });
        let t0 = Instant::now();
        let mut h = HealthTracker::for_alloc(&alloc, &job, &group, t0).unwrap();
        assert_eq!(h.observe(t0, &group, &states("running", false), true), None);
        assert_eq!(
            h.observe(t0 + S, &group, &states("running", false), true),
            None
        );
        assert_eq!(
            h.observe(t0 + 2 * S, &group, &states("running", false), true),
            Some(true)
        );
        // Batch replacements are not watched.
        job.set_type(JobType::Batch);
        assert!(HealthTracker::for_alloc(&alloc, &job, &group, t0).is_none());
    }
}

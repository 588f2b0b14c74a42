//! Sanity of the policies a group carries: restart, reschedule, update, migrate and
//! scaling.

use super::Errors;
use crate::duration::format_duration as fmt;
use caravan_proto::{MigrateStrategy, ReschedulePolicy, RestartPolicy, UpdateStrategy};

const SECOND: i64 = 1_000_000_000;
/// Shortest restart interval Nomad accepts.
const RESTART_MIN_INTERVAL: i64 = 5 * SECOND;
/// Shortest reschedule interval Nomad accepts.
const RESCHEDULE_MIN_INTERVAL: i64 = 15 * SECOND;
/// Shortest reschedule delay Nomad accepts.
const RESCHEDULE_MIN_DELAY: i64 = 5 * SECOND;
const DELAY_FUNCTIONS: &[&str] = &["constant", "exponential", "fibonacci"];

/// Nomad's `RestartPolicy.Validate`.
pub(super) fn restart(r: &RestartPolicy, path: &str, e: &mut Errors) {
    if !matches!(r.mode.as_str(), "delay" | "fail") {
        e.at(
            path,
            "mode",
            format!(
                "unsupported restart mode {:?}; must be \"delay\" or \"fail\"",
                r.mode
            ),
        );
    }
    if r.attempts < 0 {
        e.at(
            path,
            "attempts",
            format!("must be >= 0 (got {})", r.attempts),
        );
    } else if r.attempts == 0 && r.mode != "fail" {
        e.at(
            path,
            "attempts",
            format!("restart mode {:?} with 0 attempts is ambiguous", r.mode),
        );
    }
    if r.delay_ns < 0 {
        e.at(
            path,
            "delay",
            format!("must be >= 0 (got {})", fmt(r.delay_ns)),
        );
    }
    if r.interval_ns < RESTART_MIN_INTERVAL {
        e.at(
            path,
            "interval",
            format!(
                "can not be less than {} (got {})",
                fmt(RESTART_MIN_INTERVAL),
                fmt(r.interval_ns)
            ),
        );
    }
    let needed = i128::from(r.attempts) * i128::from(r.delay_ns);
    if r.attempts > 0 && needed > i128::from(r.interval_ns) {
        e.at(
            path,
            "interval",
            format!(
                "cannot restart {} times in an interval of {} with a delay of {}",
                r.attempts,
                fmt(r.interval_ns),
                fmt(r.delay_ns)
            ),
        );
    }
}

/// Nomad's `ReschedulePolicy.Validate`; a disabled policy (no attempts, not unlimited) is fine.
pub(super) fn reschedule(r: &ReschedulePolicy, path: &str, e: &mut Errors) {
    if r.attempts < 0 {
        e.at(
            path,
            "attempts",
            format!("must be >= 0 (got {})", r.attempts),
        );
        return;
    }
    if r.attempts == 0 && !r.unlimited {
        return;
    }
    if r.attempts > 0 {
        if r.interval_ns <= 0 {
            e.at(
                path,
                "interval",
                "must be greater than zero when attempts > 0",
            );
        }
        if r.unlimited {
            e.at(
                path,
                "unlimited",
                format!(
                    "cannot be true when attempts is set (attempts = {})",
                    r.attempts
                ),
            );
        }
    }
    let mut delays_ok = true;
    if r.delay_ns < RESCHEDULE_MIN_DELAY {
        e.at(
            path,
            "delay",
            format!(
                "cannot be less than {} (got {})",
                fmt(RESCHEDULE_MIN_DELAY),
                fmt(r.delay_ns)
            ),
        );
        delays_ok = false;
    }
    if !DELAY_FUNCTIONS.contains(&r.delay_function.as_str()) {
        e.at(
            path,
            "delay_function",
            format!(
                "invalid delay function {:?}; must be one of constant, exponential, fibonacci",
                r.delay_function
            ),
        );
        delays_ok = false;
    }
    if r.delay_function != "constant" {
        if r.max_delay_ns < RESCHEDULE_MIN_DELAY {
            e.at(
                path,
                "max_delay",
                format!(
                    "cannot be less than {} (got {})",
                    fmt(RESCHEDULE_MIN_DELAY),
                    fmt(r.max_delay_ns)
                ),
            );
            delays_ok = false;
        }
        if r.max_delay_ns < r.delay_ns {
            e.at(
                path,
                "max_delay",
                format!(
                    "cannot be less than delay {} (got {})",
                    fmt(r.delay_ns),
                    fmt(r.max_delay_ns)
                ),
            );
            delays_ok = false;
        }
    }
    if r.unlimited {
        return;
    }
    if r.interval_ns < RESCHEDULE_MIN_INTERVAL {
        e.at(
            path,
            "interval",
            format!(
                "cannot be less than {} (got {})",
                fmt(RESCHEDULE_MIN_INTERVAL),
                fmt(r.interval_ns)
            ),
        );
    }
    if delays_ok && let Some((possible, recommended)) = unviable_attempts(r) {
        e.at(
            path,
            "interval",
            format!(
                "only {possible} of {} attempts fit in {} with delay {} and delay function {:?}; \
                     set the interval to at least {}",
                r.attempts,
                fmt(r.interval_ns),
                fmt(r.delay_ns),
                r.delay_function,
                fmt(recommended)
            ),
        );
    }
}

/// When the attempts cannot all happen within the interval: how many can, and the interval
/// that would fit them all (Nomad's `viableAttempts`).
fn unviable_attempts(r: &ReschedulePolicy) -> Option<(i64, i64)> {
    let attempts = i64::from(r.attempts);
    let (delay, max_delay, interval) = (
        i128::from(r.delay_ns),
        i128::from(r.max_delay_ns),
        i128::from(r.interval_ns),
    );
    let clamp = |v: i128| i64::try_from(v).unwrap_or(i64::MAX);
    match r.delay_function.as_str() {
        "constant" => {
            let recommended = i128::from(attempts) * delay;
            (interval < recommended).then(|| (clamp(interval / delay.max(1)), clamp(recommended)))
        }
        "exponential" => {
            let mut recommended: i128 = 0;
            let mut possible = 0;
            for i in 0..attempts.min(64) {
                let next = delay.saturating_mul(1i128 << i.min(100));
                if next > max_delay {
                    recommended = recommended.saturating_add(max_delay);
                } else {
                    recommended = next;
                }
                if recommended < interval {
                    possible += 1;
                }
            }
            // Past 64 attempts every delay is capped: each adds max_delay.
            if attempts > 64 {
                recommended =
                    recommended.saturating_add(max_delay.saturating_mul(i128::from(attempts - 64)));
            }
            (possible < attempts).then(|| (possible, clamp(recommended)))
        }
        "fibonacci" => {
            let mut slots = vec![delay, delay];
            let mut ceiling = false;
            for i in 2..attempts.min(10_000) as usize {
                let next = if ceiling {
                    slots[i - 1].saturating_add(max_delay)
                } else {
                    let n = slots[i - 1].saturating_add(slots[i - 2]);
                    if n > max_delay {
                        ceiling = true;
                        max_delay
                    } else {
                        n
                    }
                };
                slots.push(next);
            }
            let mut recommended = slots.last().copied().unwrap_or(delay);
            let computed = i64::try_from(slots.len()).unwrap_or(i64::MAX);
            if attempts > computed {
                // Beyond the computed slots every attempt adds at least max_delay.
                recommended = recommended
                    .saturating_add(max_delay.saturating_mul(i128::from(attempts - computed)));
            }
            if interval < recommended {
                let possible = slots
                    .iter()
                    .position(|s| *s > interval)
                    .unwrap_or(slots.len());
                Some((possible as i64, clamp(recommended)))
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Nomad's `UpdateStrategy.Validate`.
pub(super) fn update(u: &UpdateStrategy, path: &str, e: &mut Errors) {
    if !matches!(u.health_check.as_str(), "checks" | "task_states" | "manual") {
        e.at(
            path,
            "health_check",
            format!(
                "invalid health check {:?}; must be checks, task_states or manual",
                u.health_check
            ),
        );
    }
    if u.max_parallel < 0 {
        e.at(
            path,
            "max_parallel",
            format!("must be >= 0 (got {})", u.max_parallel),
        );
    }
    if u.canary < 0 {
        e.at(path, "canary", format!("must be >= 0 (got {})", u.canary));
    }
    if u.canary == 0 && u.auto_promote {
        e.at(
            path,
            "auto_promote",
            "requires a canary count greater than zero",
        );
    }
    if u.min_healthy_time_ns < 0 {
        e.at(
            path,
            "min_healthy_time",
            format!("must be >= 0 (got {})", fmt(u.min_healthy_time_ns)),
        );
    }
    if u.healthy_deadline_ns <= 0 {
        e.at(
            path,
            "healthy_deadline",
            format!(
                "must be greater than zero (got {})",
                fmt(u.healthy_deadline_ns)
            ),
        );
    }
    if u.progress_deadline_ns < 0 {
        e.at(
            path,
            "progress_deadline",
            format!("must be >= 0 (got {})", fmt(u.progress_deadline_ns)),
        );
    }
    if u.min_healthy_time_ns >= u.healthy_deadline_ns {
        e.at(
            path,
            "min_healthy_time",
            format!(
                "must be less than healthy_deadline ({} >= {})",
                fmt(u.min_healthy_time_ns),
                fmt(u.healthy_deadline_ns)
            ),
        );
    }
    if u.progress_deadline_ns != 0 && u.healthy_deadline_ns >= u.progress_deadline_ns {
        e.at(
            path,
            "healthy_deadline",
            format!(
                "must be less than progress_deadline ({} >= {})",
                fmt(u.healthy_deadline_ns),
                fmt(u.progress_deadline_ns)
            ),
        );
    }
    if u.stagger_ns <= 0 {
        e.at(
            path,
            "stagger",
            format!("must be greater than zero (got {})", fmt(u.stagger_ns)),
        );
    }
}

/// Nomad's `MigrateStrategy.Validate`.
pub(super) fn migrate(m: &MigrateStrategy, path: &str, e: &mut Errors) {
    if m.max_parallel < 0 {
        e.at(
            path,
            "max_parallel",
            format!("must be >= 0 (got {})", m.max_parallel),
        );
    }
    match m.health_check.as_str() {
        "checks" | "task_states" => {}
        "" if m.max_parallel == 0 => {}
        "" => e.at(path, "health_check", "missing health check"),
        other => e.at(
            path,
            "health_check",
            format!("invalid health check {other:?}; must be checks or task_states"),
        ),
    }
    if m.min_healthy_time_ns < 0 {
        e.at(
            path,
            "min_healthy_time",
            format!("must be >= 0 (got {})", fmt(m.min_healthy_time_ns)),
        );
    }
    if m.healthy_deadline_ns < 0 {
        e.at(
            path,
            "healthy_deadline",
            format!("must be >= 0 (got {})", fmt(m.healthy_deadline_ns)),
        );
    }
    if m.min_healthy_time_ns > m.healthy_deadline_ns {
        e.at(
            path,
            "min_healthy_time",
            "must be less than healthy_deadline",
        );
    }
}

/// Nomad's checks of a group's scaling policy: a horizontal policy whose
/// bounds are ordered, not negative, and hold the group's count.
pub(super) fn scaling(count: i32, s: &caravan_proto::ScalingPolicy, base: &str, e: &mut Errors) {
    if s.r#type != crate::defaults::SCALING_HORIZONTAL {
        e.on(
            base,
            "type",
            format!(
                "scaling policy type {:?} is not valid for a task group (only {:?})",
                s.r#type,
                crate::defaults::SCALING_HORIZONTAL
            ),
        );
    }
    if s.max < 0 {
        e.on(
            base,
            "max",
            "maximum count must be specified and non-negative",
        );
    } else if s.max < s.min {
        e.on(
            base,
            "max",
            "maximum count must not be less than minimum count",
        );
    }
    if s.min < 0 {
        e.on(
            base,
            "min",
            "minimum count must be specified and non-negative",
        );
    }
    if s.max >= 0 && s.max < i64::from(count) {
        e.on(
            base,
            "max",
            "task group count must not be greater than maximum count in scaling policy",
        );
    }
    if i64::from(count) < s.min {
        e.on(
            base,
            "min",
            "task group count must not be less than minimum count in scaling policy",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::defaults::{default_migrate, default_reschedule, default_restart, default_update};
    use caravan_proto::JobType;

    fn errors(f: impl FnOnce(&mut Errors)) -> Vec<String> {
        let mut e = Errors::default();
        f(&mut e);
        e.0.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn defaults_are_valid() {
        for t in [JobType::Service, JobType::Batch] {
            assert!(errors(|e| restart(&default_restart(t), "restart", e)).is_empty());
            let r = default_reschedule(t).expect("has a policy");
            assert!(
                errors(|e| reschedule(&r, "reschedule", e)).is_empty(),
                "{t:?}"
            );
        }
        assert!(errors(|e| update(&default_update(), "update", e)).is_empty());
        assert!(errors(|e| migrate(&default_migrate(), "migrate", e)).is_empty());
    }

    #[test]
    fn restart_errors_name_fields() {
        let r = RestartPolicy {
            attempts: 10,
            interval_ns: SECOND,
            delay_ns: SECOND,
            mode: "sometimes".into(),
            on_success: false,
        };
        let errs = errors(|e| restart(&r, "group \"g\": restart", e));
        assert!(
            errs.iter()
                .any(|m| m.starts_with("group \"g\": restart.mode: unsupported restart mode"))
        );
        assert!(
            errs.iter()
                .any(|m| m.contains("restart.interval: can not be less than 5s (got 1s)"))
        );
        assert!(
            errs.iter()
                .any(|m| m.contains("cannot restart 10 times in an interval of 1s"))
        );
    }

    #[test]
    fn reschedule_cross_checks_attempts_against_interval() {
        let r = ReschedulePolicy {
            attempts: 10,
            interval_ns: 60 * SECOND,
            delay_ns: 30 * SECOND,
            delay_function: "constant".into(),
            max_delay_ns: 0,
            unlimited: false,
        };
        let errs = errors(|e| reschedule(&r, "reschedule", e));
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].contains("only 2 of 10 attempts fit in 1m0s"),
            "{errs:?}"
        );
        assert!(errs[0].contains("at least 5m0s"), "{errs:?}");
    }

    #[test]
    fn reschedule_exponential_and_fibonacci_do_not_overflow() {
        for f in ["exponential", "fibonacci"] {
            let r = ReschedulePolicy {
                attempts: i32::MAX,
                interval_ns: 3600 * SECOND,
                delay_ns: 5 * SECOND,
                delay_function: f.into(),
                max_delay_ns: i64::MAX,
                unlimited: false,
            };
            let errs = errors(|e| reschedule(&r, "reschedule", e));
            assert_eq!(errs.len(), 1, "{f}: {errs:?}");
        }
    }

    #[test]
    fn update_deadlines_are_ordered() {
        let u = UpdateStrategy {
            healthy_deadline_ns: 600 * SECOND,
            progress_deadline_ns: 300 * SECOND,
            ..default_update()
        };
        let errs = errors(|e| update(&u, "update", e));
        assert_eq!(
            errs,
            vec!["update.healthy_deadline: must be less than progress_deadline (10m0s >= 5m0s)"]
        );
        let u = UpdateStrategy {
            max_parallel: -1,
            canary: -1,
            health_check: "vibes".into(),
            stagger_ns: 0,
            ..default_update()
        };
        assert_eq!(errors(|e| update(&u, "update", e)).len(), 4);
    }
}

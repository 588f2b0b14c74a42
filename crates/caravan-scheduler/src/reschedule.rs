//! Reschedule policy: whether and when a failed allocation is replaced.

use caravan_model::AllocExt;
use caravan_proto::{Allocation, RescheduleEvent, ReschedulePolicy, RescheduleTracker};

/// Failed allocations due within this window are replaced now.
pub const WINDOW_NS: i64 = 1_000_000_000;
/// Follow-up evaluations batch failures this close together.
pub const BATCH_WINDOW_NS: i64 = 5_000_000_000;
/// Unlimited policies keep this many past events.
const MAX_PAST_EVENTS: usize = 5;

/// When the allocation last changed: the latest task finish, else its modify time.
pub fn last_event_time(a: &Allocation) -> i64 {
    let finished = a
        .task_states
        .values()
        .map(|t| t.finished_at_unix_ns)
        .max()
        .unwrap_or(0);
    if finished > 0 {
        finished
    } else {
        a.modify_time_unix_ns
    }
}

fn events(a: &Allocation) -> &[RescheduleEvent] {
    a.reschedule_tracker
        .as_ref()
        .map_or(&[], |t| t.events.as_slice())
}

/// The delay before the next reschedule of `a` under `policy`.
pub fn next_delay(a: &Allocation, policy: &ReschedulePolicy) -> i64 {
    let ev = events(a);
    let base = policy.delay_ns;
    let Some(last) = ev.last() else {
        return base;
    };
    let mut delay = match policy.delay_function.as_str() {
        "exponential" => last.delay_ns.saturating_mul(2),
        "fibonacci" => {
            if ev.len() >= 2 {
                let n1 = last.delay_ns;
                let n2 = ev[ev.len() - 2].delay_ns;
                // After a reset to the base delay a new series starts.
                if n2 == policy.max_delay_ns && n1 == base {
                    n1
                } else {
                    n1.saturating_add(n2)
                }
            } else {
                base
            }
        }
        _ => return base,
    };
    if policy.max_delay_ns > 0 && delay > policy.max_delay_ns {
        delay = policy.max_delay_ns;
        // A long healthy stretch since the last reschedule resets the series.
        if last_event_time(a).saturating_sub(last.reschedule_time_unix_ns) > delay {
            delay = base;
        }
    }
    delay
}

/// When `a` may be replaced and whether it may be at all.
pub fn next_time(a: &Allocation, policy: &ReschedulePolicy) -> Option<i64> {
    let fail = last_event_time(a);
    if !a.is_reschedule_candidate() || fail == 0 {
        return None;
    }
    let delay = next_delay(a, policy);
    let eligible = if policy.unlimited {
        true
    } else if policy.attempts <= 0 {
        false
    } else {
        let window_start = fail.saturating_sub(policy.interval_ns);
        let attempted = events(a)
            .iter()
            .filter(|e| policy.interval_ns <= 0 || e.reschedule_time_unix_ns > window_start)
            .count();
        attempted < policy.attempts as usize && (events(a).is_empty() || delay < policy.interval_ns)
    };
    eligible.then_some(fail.saturating_add(delay))
}

/// The tracker a replacement of `prev` carries.
pub fn tracker_for_replacement(
    prev: &Allocation,
    policy: &ReschedulePolicy,
    now: i64,
) -> RescheduleTracker {
    let mut events: Vec<RescheduleEvent> = if policy.unlimited {
        let ev = events(prev);
        ev[ev.len().saturating_sub(MAX_PAST_EVENTS)..].to_vec()
    } else {
        events(prev)
            .iter()
            .filter(|e| {
                policy.interval_ns <= 0
                    || now.saturating_sub(e.reschedule_time_unix_ns) <= policy.interval_ns
            })
            .cloned()
            .collect()
    };
    events.push(RescheduleEvent {
        reschedule_time_unix_ns: now,
        prev_alloc_id: prev.id.clone(),
        prev_node_id: prev.node_id.clone(),
        delay_ns: next_delay(prev, policy),
    });
    RescheduleTracker { events }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caravan_proto::{AllocClientStatus, AllocDesiredStatus, TaskState};

    const S: i64 = 1_000_000_000;

    fn failed(at: i64, delays: &[i64]) -> Allocation {
        let mut a = Allocation {
            id: "a".into(),
            client_status: AllocClientStatus::Failed as i32,
            desired_status: AllocDesiredStatus::Run as i32,
            ..Default::default()
        };
        a.task_states.insert(
            "t".into(),
            TaskState {
                state: "dead".into(),
                failed: true,
                finished_at_unix_ns: at,
                ..Default::default()
            },
        );
        if !delays.is_empty() {
            a.reschedule_tracker = Some(Box::new(RescheduleTracker {
                events: delays
                    .iter()
                    .enumerate()
                    .map(|(i, d)| RescheduleEvent {
                        reschedule_time_unix_ns: at - (delays.len() - i) as i64 * S,
                        delay_ns: *d,
                        ..Default::default()
                    })
                    .collect(),
            }));
        }
        a
    }

    fn policy(f: &str, delay: i64, max: i64) -> ReschedulePolicy {
        ReschedulePolicy {
            attempts: 0,
            interval_ns: 0,
            delay_ns: delay,
            delay_function: f.into(),
            max_delay_ns: max,
            unlimited: true,
        }
    }

    /// (function, past delays, expected next delay) in seconds.
    #[test]
    fn delays_for_each_function() {
        let rows: &[(&str, &[i64], i64)] = &[
            ("constant", &[], 5),
            ("constant", &[5, 5], 5),
            ("exponential", &[], 5),
            ("exponential", &[5], 10),
            ("exponential", &[5, 10, 20], 40),
            ("exponential", &[5, 10, 20, 40], 60),
            ("fibonacci", &[], 5),
            ("fibonacci", &[5], 5),
            ("fibonacci", &[5, 5], 10),
            ("fibonacci", &[5, 5, 10, 15], 25),
            ("fibonacci", &[20, 40], 60),
            ("fibonacci", &[60, 5], 5),
        ];
        for (f, past, want) in rows {
            let delays: Vec<i64> = past.iter().map(|d| d * S).collect();
            let a = failed(1_000 * S, &delays);
            let got = next_delay(&a, &policy(f, 5 * S, 60 * S));
            assert_eq!(got, want * S, "{f} after {past:?}");
        }
    }

    #[test]
    fn ceiling_resets_after_a_long_healthy_run() {
        // Last reschedule 100s before the failure, ceiling 60s: back to the base.
        let mut a = failed(1_000 * S, &[40 * S, 60 * S]);
        if let Some(t) = a.reschedule_tracker.as_mut() {
            t.events[1].reschedule_time_unix_ns = 900 * S;
        }
        let p = policy("exponential", 5 * S, 60 * S);
        assert_eq!(next_delay(&a, &p), 5 * S);
    }

    #[test]
    fn attempts_within_interval_limit_rescheduling() {
        let p = ReschedulePolicy {
            attempts: 1,
            interval_ns: 3600 * S,
            delay_ns: 5 * S,
            delay_function: "constant".into(),
            max_delay_ns: 0,
            unlimited: false,
        };
        let fresh = failed(1_000 * S, &[]);
        assert_eq!(next_time(&fresh, &p), Some(1_005 * S));
        let once = failed(1_000 * S, &[5 * S]);
        assert_eq!(next_time(&once, &p), None);
        let none = ReschedulePolicy {
            attempts: 0,
            unlimited: false,
            ..p.clone()
        };
        assert_eq!(next_time(&fresh, &none), None);
        let t = tracker_for_replacement(&fresh, &p, 1_010 * S);
        assert_eq!(t.events.len(), 1);
        assert_eq!(t.events[0].delay_ns, 5 * S);
    }
}

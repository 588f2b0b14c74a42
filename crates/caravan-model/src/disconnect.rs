//! How a task group rides out its node going quiet: the effective
//! `disconnect` strategy of a group (the block, or the older
//! `max_client_disconnect` alone), and the questions the servers and the
//! client ask of it.

use caravan_proto::{Allocation, DisconnectStrategy, Job, TaskGroup};

/// Reconcile strategy: keep the copy placed with the better score.
pub const BEST_SCORE: &str = "best_score";
/// Reconcile strategy: keep the allocation that came back.
pub const KEEP_ORIGINAL: &str = "keep_original";
/// Reconcile strategy: keep the replacement.
pub const KEEP_REPLACEMENT: &str = "keep_replacement";
/// Reconcile strategy: keep the copy whose tasks started first.
pub const LONGEST_RUNNING: &str = "longest_running";
/// Every reconcile strategy, in Nomad's spelling.
pub const RECONCILE_STRATEGIES: [&str; 4] =
    [BEST_SCORE, KEEP_ORIGINAL, KEEP_REPLACEMENT, LONGEST_RUNNING];

/// The group's strategy with defaults filled; `None` when it has neither
/// the block nor `max_client_disconnect`.
pub fn strategy(tg: &TaskGroup) -> Option<DisconnectStrategy> {
    match &tg.disconnect {
        Some(d) => Some(DisconnectStrategy {
            replace: Some(d.replace.unwrap_or(true)),
            reconcile: if d.reconcile.is_empty() {
                BEST_SCORE.to_string()
            } else {
                d.reconcile.clone()
            },
            ..d.clone()
        }),
        None if tg.max_client_disconnect_ns > 0 => Some(DisconnectStrategy {
            lost_after_ns: tg.max_client_disconnect_ns,
            stop_on_client_after_ns: None,
            replace: Some(true),
            reconcile: BEST_SCORE.to_string(),
        }),
        None => None,
    }
}

/// How long the group's allocations stay `unknown` on a disconnected node
/// before they are lost; 0 when they are lost at once.
pub fn lost_after_ns(tg: &TaskGroup) -> i64 {
    strategy(tg).map_or(0, |d| d.lost_after_ns.max(0))
}

/// Whether the group's allocations are replaced while `unknown`.
pub fn replace(tg: &TaskGroup) -> bool {
    strategy(tg).is_none_or(|d| d.replace != Some(false))
}

/// The group's reconcile strategy.
pub fn reconcile(tg: &TaskGroup) -> String {
    strategy(tg).map_or_else(|| BEST_SCORE.to_string(), |d| d.reconcile)
}

/// How long a client keeps the group's tasks running without reaching any
/// server; `None`: for as long as it takes.
pub fn stop_on_client_after_ns(tg: &TaskGroup) -> Option<i64> {
    strategy(tg).and_then(|d| d.stop_on_client_after_ns)
}

/// Whether any group of the job gives its allocations a disconnect window.
pub fn job_has_window(job: &Job) -> bool {
    job.task_groups.iter().any(|tg| lost_after_ns(tg) > 0)
}

/// Whether the allocation was marked `unknown` and has not reconnected.
pub fn needs_to_reconnect(a: &Allocation) -> bool {
    a.unknown_since_unix_ns != 0
}

/// When an `unknown` allocation of `tg` is lost; `None` when it is not
/// unknown.
pub fn expires_at(a: &Allocation, tg: &TaskGroup) -> Option<i64> {
    (a.client_status() == caravan_proto::AllocClientStatus::Unknown && a.unknown_since_unix_ns != 0)
        .then(|| a.unknown_since_unix_ns.saturating_add(lost_after_ns(tg)))
}

/// Whether an `unknown` allocation of `tg` stayed away past its window.
pub fn expired(a: &Allocation, tg: &TaskGroup, now: i64) -> bool {
    expires_at(a, tg).is_some_and(|at| at <= now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use caravan_proto::AllocClientStatus;

    #[test]
    fn the_block_wins_and_the_older_field_alone_is_a_lost_after() {
        let mut tg = TaskGroup::default();
        assert!(strategy(&tg).is_none());
        assert!(replace(&tg));
        assert_eq!(lost_after_ns(&tg), 0);
        tg.max_client_disconnect_ns = 60;
        assert_eq!(lost_after_ns(&tg), 60);
        assert_eq!(reconcile(&tg), BEST_SCORE);
        tg.disconnect = Some(DisconnectStrategy {
            lost_after_ns: 5,
            replace: Some(false),
            reconcile: KEEP_ORIGINAL.into(),
            stop_on_client_after_ns: Some(3),
        });
        assert_eq!(lost_after_ns(&tg), 5);
        assert!(!replace(&tg));
        assert_eq!(reconcile(&tg), KEEP_ORIGINAL);
        assert_eq!(stop_on_client_after_ns(&tg), Some(3));
        tg.disconnect = Some(DisconnectStrategy::default());
        assert!(replace(&tg), "unset replace is true");
        assert_eq!(reconcile(&tg), BEST_SCORE);
    }

    #[test]
    fn an_unknown_allocation_expires_after_its_window() {
        let tg = TaskGroup {
            max_client_disconnect_ns: 100,
            ..Default::default()
        };
        let mut a = Allocation {
            unknown_since_unix_ns: 1_000,
            ..Default::default()
        };
        a.set_client_status(AllocClientStatus::Running);
        assert!(!expired(&a, &tg, 5_000), "running again: not expired");
        assert!(needs_to_reconnect(&a));
        a.set_client_status(AllocClientStatus::Unknown);
        assert!(!expired(&a, &tg, 1_099));
        assert!(expired(&a, &tg, 1_100));
    }
}

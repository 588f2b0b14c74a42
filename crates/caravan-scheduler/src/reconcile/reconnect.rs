//! Which copy of a name survives when a disconnected node comes back: the
//! allocation that reconnects or its replacement, by the group's
//! `disconnect.reconcile` strategy (Nomad's reconnecting picker).

use caravan_model::disconnect;
use caravan_proto::{AllocClientStatus, Allocation, TaskGroup};

/// Which of the two copies to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// The allocation that reconnected.
    Original,
    /// The allocation placed while it was away.
    Replacement,
}

/// Picks the copy to keep. A replacement of a newer job version always
/// wins; otherwise the group's strategy decides, and the original is kept
/// when the strategy cannot tell them apart.
pub fn pick(tg: &TaskGroup, original: &Allocation, replacement: &Allocation) -> Keep {
    if replacement.job_version > original.job_version {
        return Keep::Replacement;
    }
    match disconnect::reconcile(tg).as_str() {
        disconnect::KEEP_ORIGINAL => Keep::Original,
        disconnect::KEEP_REPLACEMENT => Keep::Replacement,
        disconnect::LONGEST_RUNNING => longest_running(tg, original, replacement),
        _ => best_score(original, replacement),
    }
}

/// The replacement when it was placed with a better score, unless that
/// would swap a running original for a copy that is not running.
fn best_score(original: &Allocation, replacement: &Allocation) -> Keep {
    let known = |a: &Allocation| (a.placement_score != 0.0).then_some(a.placement_score);
    let better = match (known(original), known(replacement)) {
        (None, Some(_)) => true,
        (Some(o), Some(r)) => r > o,
        _ => false,
    };
    let running = |a: &Allocation| a.client_status() == AllocClientStatus::Running;
    if better && (running(replacement) || !running(original)) {
        Keep::Replacement
    } else {
        Keep::Original
    }
}

/// The copy whose tasks started first (the leader task's start when the
/// group has one); best score when neither started.
fn longest_running(tg: &TaskGroup, original: &Allocation, replacement: &Allocation) -> Keep {
    match (started_at(tg, original), started_at(tg, replacement)) {
        (None, Some(_)) => Keep::Replacement,
        (Some(_), None) => Keep::Original,
        (None, None) => best_score(original, replacement),
        (Some(o), Some(r)) if o <= r => Keep::Original,
        _ => Keep::Replacement,
    }
}

/// When the allocation's leader task started, else its oldest started task;
/// from the client's summary when the task states are not at hand.
fn started_at(tg: &TaskGroup, a: &Allocation) -> Option<i64> {
    if a.task_states.is_empty() {
        return (a.running_since_unix_ns > 0).then_some(a.running_since_unix_ns);
    }
    let start = |name: &str| {
        a.task_states
            .get(name)
            .map(|s| s.started_at_unix_ns)
            .filter(|t| *t > 0)
    };
    if let Some(leader) = tg.tasks.iter().find(|t| t.leader) {
        return start(&leader.name);
    }
    tg.tasks.iter().filter_map(|t| start(&t.name)).min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use caravan_proto::{DisconnectStrategy, Task, TaskState};

    fn group(reconcile: &str) -> TaskGroup {
        TaskGroup {
            name: "web".into(),
            tasks: vec![
                Task {
                    name: "main".into(),
                    ..Default::default()
                },
                Task {
                    name: "side".into(),
                    ..Default::default()
                },
            ],
            disconnect: Some(DisconnectStrategy {
                lost_after_ns: 60_000_000_000,
                reconcile: reconcile.into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn alloc(
        id: &str,
        score: Option<f32>,
        status: AllocClientStatus,
        started: &[i64],
    ) -> Allocation {
        let mut a = Allocation {
            id: id.into(),
            placement_score: score.unwrap_or(0.0),
            ..Default::default()
        };
        a.set_client_status(status);
        for (name, at) in ["main", "side"].iter().zip(started) {
            a.task_states.insert(
                (*name).to_string(),
                TaskState {
                    state: "running".into(),
                    started_at_unix_ns: *at,
                    ..Default::default()
                },
            );
        }
        a
    }

    use AllocClientStatus::{Pending, Running};

    #[test]
    fn best_score_keeps_the_better_placed_copy_but_never_trades_running_for_not_running() {
        let tg = group(disconnect::BEST_SCORE);
        let orig = alloc("o", Some(0.4), Running, &[]);
        let better = alloc("r", Some(0.9), Running, &[]);
        assert_eq!(pick(&tg, &orig, &better), Keep::Replacement);
        let worse = alloc("r", Some(0.1), Running, &[]);
        assert_eq!(pick(&tg, &orig, &worse), Keep::Original);
        let pending = alloc("r", Some(0.9), Pending, &[]);
        assert_eq!(
            pick(&tg, &orig, &pending),
            Keep::Original,
            "a running original is not swapped for a copy that is not running"
        );
        let unscored = alloc("o", None, Running, &[]);
        assert_eq!(pick(&tg, &unscored, &better), Keep::Replacement);
        let equal = alloc("r", Some(0.4), Running, &[]);
        assert_eq!(
            pick(&tg, &orig, &equal),
            Keep::Original,
            "ties keep the original"
        );
        let default = group("");
        assert_eq!(
            pick(&default, &orig, &better),
            Keep::Replacement,
            "the default"
        );
    }

    #[test]
    fn keep_original_and_keep_replacement_do_what_they_say() {
        let orig = alloc("o", Some(0.1), Running, &[]);
        let repl = alloc("r", Some(0.9), Running, &[]);
        assert_eq!(
            pick(&group(disconnect::KEEP_ORIGINAL), &orig, &repl),
            Keep::Original
        );
        let orig = alloc("o", Some(0.9), Running, &[]);
        let repl = alloc("r", Some(0.1), Running, &[]);
        assert_eq!(
            pick(&group(disconnect::KEEP_REPLACEMENT), &orig, &repl),
            Keep::Replacement
        );
    }

    #[test]
    fn longest_running_keeps_the_copy_that_started_first() {
        let tg = group(disconnect::LONGEST_RUNNING);
        let orig = alloc("o", Some(0.9), Running, &[100, 300]);
        let repl = alloc("r", Some(0.1), Running, &[200, 250]);
        assert_eq!(
            pick(&tg, &orig, &repl),
            Keep::Original,
            "oldest task 100 < 200"
        );
        let early = alloc("r", Some(0.1), Running, &[50, 400]);
        assert_eq!(pick(&tg, &orig, &early), Keep::Replacement);
        let not_started = alloc("r", Some(0.99), Running, &[]);
        assert_eq!(pick(&tg, &orig, &not_started), Keep::Original);
        let never = alloc("o", Some(0.1), Running, &[]);
        assert_eq!(pick(&tg, &never, &repl), Keep::Replacement);
        let both_never = alloc("r", Some(0.5), Running, &[]);
        assert_eq!(
            pick(&tg, &never, &both_never),
            Keep::Replacement,
            "neither started: best score"
        );
        // A leader task decides alone.
        let mut led = tg.clone();
        led.tasks[1].leader = true;
        assert_eq!(
            pick(&led, &orig, &repl),
            Keep::Replacement,
            "leader 250 < 300"
        );
    }

    #[test]
    fn longest_running_reads_the_clients_summary_when_task_states_are_not_cached() {
        let tg = group(disconnect::LONGEST_RUNNING);
        let mut orig = alloc("o", Some(0.9), Running, &[]);
        orig.running_since_unix_ns = 100;
        let mut repl = alloc("r", Some(0.1), Running, &[]);
        repl.running_since_unix_ns = 200;
        assert_eq!(pick(&tg, &orig, &repl), Keep::Original);
        repl.running_since_unix_ns = 50;
        assert_eq!(pick(&tg, &orig, &repl), Keep::Replacement);
    }

    #[test]
    fn a_replacement_of_a_newer_version_always_wins() {
        let orig = alloc("o", Some(0.9), Running, &[1]);
        let mut repl = alloc("r", Some(0.1), Running, &[]);
        repl.job_version = 1;
        assert_eq!(
            pick(&group(disconnect::KEEP_ORIGINAL), &orig, &repl),
            Keep::Replacement
        );
    }
}

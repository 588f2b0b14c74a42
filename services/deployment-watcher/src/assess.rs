//! What one active deployment needs, decided from its stored value and the
//! allocations placed for it at one instant: the health counts and progress
//! deadline to record, and whether it failed, succeeded or may promote its
//! canaries itself. Pure: the caller passes the time in. The allocations are
//! read as [`Facts`]: what an assessment reads of each, which a term keeps
//! per deployment as allocations change, so an assessment is a pass over
//! small records, not over the cache's indexes.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use caravan_model::{AllocExt, DeploymentStatusExt};
use caravan_proto::{Allocation, Deployment, DeploymentState, DeploymentStatus};
use caravan_state::Id;
use tokio::time::Instant;

/// Description of a deployment that runs.
pub const DESC_RUNNING: &str = "Deployment is running";
/// Description of a deployment whose canaries wait for an operator.
pub const DESC_NEEDS_PROMOTION: &str = "Deployment is running but requires manual promotion";
/// Description of a deployment whose canaries promote themselves once healthy.
pub const DESC_AUTO_PROMOTION: &str = "Deployment is running pending automatic promotion";
/// Description of a paused deployment.
pub const DESC_PAUSED: &str = "Deployment is paused";
/// Description of a deployment every group of which is healthy.
pub const DESC_SUCCESSFUL: &str = "Deployment completed successfully";
/// Failure: an allocation of the deployment turned unhealthy.
pub const DESC_FAILED_ALLOCS: &str = "Failed due to unhealthy allocations";
/// Failure: no allocation turned healthy before the progress deadline.
pub const DESC_PROGRESS_DEADLINE: &str = "Failed due to progress deadline";
/// Failure: an operator failed the deployment.
pub const DESC_FAILED_BY_USER: &str = "Deployment marked as failed";

/// An allocation's deployment health: `Some(true)` healthy, `Some(false)`
/// unhealthy, `None` undecided.
pub fn health(a: &Allocation) -> Option<bool> {
    a.deployment_status.as_ref().and_then(|s| s.healthy)
}

/// What the allocations of one group say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupHealth {
    /// Allocations that turned healthy, terminal ones included (counts only
    /// grow, as in Nomad).
    pub healthy: i32,
    /// Allocations that turned unhealthy.
    pub unhealthy: i32,
    /// Healthy allocations still running: what a group needs to be done.
    pub healthy_running: i32,
    /// Healthy allocations among the group's placed canaries.
    pub healthy_canaries: i32,
    /// When the earliest allocation was placed (0: none yet).
    pub first_placed_unix_ns: i64,
    /// When the latest allocation turned healthy (0: none yet).
    pub last_healthy_unix_ns: i64,
}

/// Everything an assessment reads of one allocation ([`group_health`] and
/// the failure check): two versions of an allocation with the same
/// contribution assess alike, so a change between them (a client status
/// from pending to running, new task states) needs no assessment.
#[derive(Debug, PartialEq, Eq)]
pub struct Contribution<'a> {
    deployment_id: &'a str,
    task_group: &'a str,
    placed_unix_ns: i64,
    health: Option<bool>,
    terminal: bool,
    health_unix_ns: i64,
}

/// What `a` contributes to the assessment of its deployment.
pub fn contribution(a: &Allocation) -> Contribution<'_> {
    let health = health(a);
    Contribution {
        deployment_id: &a.deployment_id,
        task_group: &a.task_group,
        placed_unix_ns: placed_at(a),
        health,
        terminal: a.is_terminal(),
        // Read only of a healthy allocation (when it turned healthy).
        health_unix_ns: match health {
            Some(true) => health_set_at(a),
            _ => 0,
        },
    }
}

/// What an assessment reads of one allocation of a deployment, owned: the
/// [`Contribution`] without the deployment id. A term keeps one per
/// allocation of every followed deployment (a million at C1M), so it holds
/// no heap allocation of its own: ids and group names are inline [`Id`]s.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fact {
    task_group: Id,
    placed_unix_ns: i64,
    health: Option<bool>,
    terminal: bool,
    health_unix_ns: i64,
}

impl Fact {
    /// What `a` contributes, kept.
    pub fn of(a: &Allocation) -> Fact {
        let c = contribution(a);
        Fact {
            task_group: Id::from(c.task_group),
            placed_unix_ns: c.placed_unix_ns,
            health: c.health,
            terminal: c.terminal,
            health_unix_ns: c.health_unix_ns,
        }
    }
}

/// The facts of one deployment's allocations, by allocation id.
pub type Facts = HashMap<Id, Fact>;

/// The facts of the allocations of `allocs` placed for deployment
/// `deployment_id` (the others are left out).
pub fn facts_of<'a>(
    deployment_id: &str,
    allocs: impl IntoIterator<Item = &'a Allocation>,
) -> Facts {
    allocs
        .into_iter()
        .filter(|a| a.deployment_id == deployment_id)
        .map(|a| (Id::from(a.id.as_str()), Fact::of(a)))
        .collect()
}

/// When `a`'s deployment health was last set (0: never).
fn health_set_at(a: &Allocation) -> i64 {
    a.deployment_status
        .as_ref()
        .map_or(0, |s| s.timestamp_unix_ns)
}

/// When `a` was placed, as the progress deadline counts it.
fn placed_at(a: &Allocation) -> i64 {
    if a.create_time_unix_ns != 0 {
        a.create_time_unix_ns
    } else {
        a.modify_time_unix_ns
    }
}

/// The health of each group of `d` from the facts of its allocations.
pub fn group_health(d: &Deployment, facts: &Facts) -> BTreeMap<String, GroupHealth> {
    let mut out: BTreeMap<String, GroupHealth> = d
        .task_groups
        .keys()
        .map(|g| (g.clone(), GroupHealth::default()))
        .collect();
    for (id, f) in facts {
        let Some(state) = d.task_groups.get(f.task_group.as_str()) else {
            continue;
        };
        let Some(g) = out.get_mut(f.task_group.as_str()) else {
            continue;
        };
        let placed = f.placed_unix_ns;
        if placed != 0 && (g.first_placed_unix_ns == 0 || placed < g.first_placed_unix_ns) {
            g.first_placed_unix_ns = placed;
        }
        match f.health {
            Some(true) => {
                g.healthy += 1;
                if !f.terminal {
                    g.healthy_running += 1;
                }
                if state.placed_canaries.iter().any(|c| c == id.as_str()) {
                    g.healthy_canaries += 1;
                }
                g.last_healthy_unix_ns = g.last_healthy_unix_ns.max(f.health_unix_ns);
            }
            Some(false) => g.unhealthy += 1,
            None => {}
        }
    }
    out
}

/// Whether a group waits for its canaries to be promoted.
pub fn awaits_promotion(state: &DeploymentState) -> bool {
    state.desired_canaries > 0 && !state.promoted
}

/// Whether a group is done: promoted (or without canaries) and with as many
/// healthy running allocations as it wants.
fn group_done(state: &DeploymentState, health: &GroupHealth) -> bool {
    !awaits_promotion(state) && health.healthy_running >= state.desired_total
}

/// The progress deadline of a group given its allocations: it starts with
/// the first placement and moves out with every allocation that turns
/// healthy; 0 when the group has none.
fn require_progress_by(state: &DeploymentState, health: &GroupHealth) -> i64 {
    let deadline = state.progress_deadline_ns;
    if deadline <= 0 {
        return state.require_progress_by_unix_ns;
    }
    let mut by = state.require_progress_by_unix_ns;
    if by == 0 && health.first_placed_unix_ns != 0 {
        by = health.first_placed_unix_ns.saturating_add(deadline);
    }
    if health.last_healthy_unix_ns != 0 {
        by = by.max(health.last_healthy_unix_ns.saturating_add(deadline));
    }
    by
}

/// Whether a group has made the progress its deadline asks for: it is done,
/// or it waits for promotion with every canary it wants healthy (the
/// operator's promotion is not progress the group owes).
fn made_progress(state: &DeploymentState, health: &GroupHealth) -> bool {
    group_done(state, health)
        || (awaits_promotion(state) && health.healthy_canaries >= state.desired_canaries)
}

/// The earliest progress deadline among the groups of `d` still owing
/// progress, or `None` when no group has one running.
pub fn progress_cutoff(d: &Deployment, health: &BTreeMap<String, GroupHealth>) -> Option<i64> {
    d.task_groups
        .iter()
        .filter(|(name, state)| {
            let h = health.get(*name).copied().unwrap_or_default();
            state.require_progress_by_unix_ns != 0 && !made_progress(state, &h)
        })
        .map(|(_, s)| s.require_progress_by_unix_ns)
        .min()
}

/// The description a running deployment shows, given its canaries.
pub fn running_description(d: &Deployment) -> &'static str {
    let waiting: Vec<&DeploymentState> = d
        .task_groups
        .values()
        .filter(|s| awaits_promotion(s))
        .collect();
    if waiting.is_empty() {
        DESC_RUNNING
    } else if waiting.iter().all(|s| s.auto_promote) {
        DESC_AUTO_PROMOTION
    } else {
        DESC_NEEDS_PROMOTION
    }
}

/// What should happen to a deployment beyond recording its counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing: it keeps going.
    Continue,
    /// It failed; `rollback` when its job should go back to the last stable
    /// version.
    Fail {
        /// The failure's description before any rollback note.
        description: &'static str,
        /// Whether auto-revert applies.
        rollback: bool,
    },
    /// Every group is done.
    Succeed,
    /// Every canary is healthy and every group waiting for promotion has
    /// `auto_promote`: promote them all.
    AutoPromote,
}

/// The assessment of one deployment.
#[derive(Debug, Clone, PartialEq)]
pub struct Assessment {
    /// The deployment with its counts, progress deadlines and running
    /// description brought up to date (status untouched).
    pub deployment: Deployment,
    /// Whether that differs from the stored value.
    pub changed: bool,
    /// What else should happen.
    pub outcome: Outcome,
    /// The earliest progress deadline still running (unix ns), to wake for.
    pub cutoff: Option<i64>,
}

/// A progress cutoff as a term times it: the wall-clock time the
/// deployment's state gives, turned into a monotonic instant when the term
/// first sees it, so a step of the watcher's wall clock (NTP correcting it
/// by minutes) neither fails a deployment early nor lets it run on late.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimedCutoff {
    /// The cutoff (unix ns).
    pub unix_ns: i64,
    /// When it passes on the monotonic clock.
    pub at: Instant,
}

impl TimedCutoff {
    /// The cutoff `unix_ns` seen when the wall clock read `now_unix_ns` and
    /// the monotonic one `now`.
    pub fn seen(unix_ns: i64, now_unix_ns: i64, now: Instant) -> TimedCutoff {
        let wait = u64::try_from(unix_ns.saturating_sub(now_unix_ns)).unwrap_or(0);
        TimedCutoff {
            unix_ns,
            at: now + Duration::from_nanos(wait),
        }
    }

    /// Whether the cutoff `by` has passed at `now`: by this timing when it
    /// is the cutoff timed, else by the wall clock read at `now_unix_ns`.
    pub fn judge(timed: Option<TimedCutoff>, by: i64, now_unix_ns: i64, now: Instant) -> bool {
        match timed {
            Some(t) if t.unix_ns == by => t.at <= now,
            _ => now_unix_ns >= by,
        }
    }
}

/// Assesses `d` with the allocations of its job at `now_unix_ns`, every
/// cutoff judged by that wall-clock time (the tests' shorthand).
#[cfg(test)]
pub fn assess<'a>(
    d: &Deployment,
    allocs: impl IntoIterator<Item = &'a Allocation>,
    now_unix_ns: i64,
) -> Assessment {
    assess_judged(d, &facts_of(&d.id, allocs), |by| now_unix_ns >= by)
}

/// Assesses `d` with the facts of its allocations, `passed` telling
/// whether a progress cutoff (unix ns) has passed: the term judges it on
/// the monotonic clock ([`TimedCutoff`]).
pub fn assess_judged(d: &Deployment, facts: &Facts, passed: impl Fn(i64) -> bool) -> Assessment {
    let health = group_health(d, facts);
    let mut next = d.clone();
    for (name, state) in next.task_groups.iter_mut() {
        let h = health.get(name).copied().unwrap_or_default();
        state.healthy_allocs = h.healthy;
        state.unhealthy_allocs = h.unhealthy;
        state.require_progress_by_unix_ns = require_progress_by(state, &h);
    }
    let known_running = [DESC_RUNNING, DESC_NEEDS_PROMOTION, DESC_AUTO_PROMOTION];
    if next.status() == DeploymentStatus::Running
        && (next.status_description.is_empty()
            || known_running.contains(&next.status_description.as_str()))
    {
        next.status_description = running_description(&next).to_string();
    }
    let changed = next != *d;
    let paused = next.status() == DeploymentStatus::Paused;
    let cutoff = if paused {
        None
    } else {
        progress_cutoff(&next, &health)
    };
    let outcome = outcome(&next, facts, &health, cutoff.filter(|by| passed(*by)));
    Assessment {
        deployment: next,
        changed,
        outcome,
        cutoff,
    }
}

/// `passed_cutoff` is the progress cutoff when it has passed.
fn outcome(
    d: &Deployment,
    facts: &Facts,
    health: &BTreeMap<String, GroupHealth>,
    passed_cutoff: Option<i64>,
) -> Outcome {
    if !d.status().is_followed() {
        return Outcome::Continue;
    }
    let mut unhealthy_groups = facts
        .values()
        .filter(|f| f.health == Some(false))
        .filter_map(|f| d.task_groups.get(f.task_group.as_str()))
        .peekable();
    if unhealthy_groups.peek().is_some() {
        let rollback = unhealthy_groups.any(|s| s.auto_revert);
        return Outcome::Fail {
            description: DESC_FAILED_ALLOCS,
            rollback,
        };
    }
    if d.status() != DeploymentStatus::Running {
        return Outcome::Continue;
    }
    if passed_cutoff.is_some() {
        // As Nomad: auto-revert applies when a group that fell short of its
        // progress asks for it.
        let rollback = d.task_groups.iter().any(|(name, state)| {
            state.auto_revert
                && !made_progress(state, &health.get(name).copied().unwrap_or_default())
        });
        return Outcome::Fail {
            description: DESC_PROGRESS_DEADLINE,
            rollback,
        };
    }
    let done = |(name, state): (&String, &DeploymentState)| {
        group_done(state, &health.get(name).copied().unwrap_or_default())
    };
    if d.task_groups.iter().all(done) {
        return Outcome::Succeed;
    }
    let waiting: Vec<(&String, &DeploymentState)> = d
        .task_groups
        .iter()
        .filter(|(_, s)| awaits_promotion(s))
        .collect();
    let canaries_ready = |(name, state): &(&String, &DeploymentState)| {
        state.auto_promote
            && state.placed_canaries.len() as i32 >= state.desired_canaries
            && health
                .get(*name)
                .is_some_and(|h| h.healthy_canaries >= state.desired_canaries)
    };
    if !waiting.is_empty() && waiting.iter().all(canaries_ready) {
        return Outcome::AutoPromote;
    }
    Outcome::Continue
}

/// Whether any group of `d` asks for auto-revert.
pub fn wants_rollback(d: &Deployment) -> bool {
    d.task_groups.values().any(|s| s.auto_revert)
}

/// `d` promoted: the named groups (all when `groups` is `None`) marked
/// promoted, their progress deadlines restarted from `now_unix_ns`, and the
/// running description updated.
pub fn promoted(d: &Deployment, groups: Option<&[String]>, now_unix_ns: i64) -> Deployment {
    let mut next = d.clone();
    for (name, state) in next.task_groups.iter_mut() {
        if groups.is_some_and(|g| !g.contains(name)) {
            continue;
        }
        state.promoted = true;
        if state.progress_deadline_ns > 0 {
            state.require_progress_by_unix_ns =
                now_unix_ns.saturating_add(state.progress_deadline_ns);
        }
    }
    if next.status() == DeploymentStatus::Running {
        next.status_description = running_description(&next).to_string();
    }
    next.modify_time_unix_ns = now_unix_ns;
    next
}

#[cfg(test)]
mod tests {
    use caravan_proto::{AllocClientStatus, AllocDeploymentStatus, AllocDesiredStatus};

    use super::*;

    const SEC: i64 = 1_000_000_000;

    fn deployment(groups: &[(&str, i32, i32)]) -> Deployment {
        let mut d = Deployment {
            id: "d1".into(),
            namespace: "default".into(),
            job_id: "web".into(),
            job_version: 1,
            status: DeploymentStatus::Running as i32,
            status_description: DESC_RUNNING.into(),
            ..Default::default()
        };
        for (name, total, canaries) in groups {
            d.task_groups.insert(
                (*name).into(),
                DeploymentState {
                    desired_total: *total,
                    desired_canaries: *canaries,
                    progress_deadline_ns: 600 * SEC,
                    ..Default::default()
                },
            );
        }
        d
    }

    fn alloc(id: &str, group: &str, healthy: Option<bool>, at: i64) -> Allocation {
        Allocation {
            id: id.into(),
            task_group: group.into(),
            deployment_id: "d1".into(),
            desired_status: AllocDesiredStatus::Run as i32,
            client_status: AllocClientStatus::Running as i32,
            create_time_unix_ns: 100 * SEC,
            deployment_status: Some(AllocDeploymentStatus {
                healthy,
                timestamp_unix_ns: at,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_change_the_assessment_does_not_read_contributes_alike() {
        let d = deployment(&[("web", 2, 0)]);
        let pending = Allocation {
            client_status: AllocClientStatus::Pending as i32,
            deployment_status: None,
            ..alloc("a", "web", None, 0)
        };
        let mut running = pending.clone();
        running.client_status = AllocClientStatus::Running as i32;
        running.modify_time_unix_ns = 130 * SEC;
        running.task_states.insert("t".into(), Default::default());
        running.deployment_status = Some(AllocDeploymentStatus {
            timestamp_unix_ns: 130 * SEC,
            ..Default::default()
        });
        assert_eq!(contribution(&pending), contribution(&running));
        assert_eq!(
            assess_judged(&d, &facts_of(&d.id, [&pending]), |_| false),
            assess_judged(&d, &facts_of(&d.id, [&running]), |_| false)
        );
        // Health, the end of a healthy allocation, or another deployment
        // are read.
        let healthy = alloc("a", "web", Some(true), 140 * SEC);
        assert_ne!(contribution(&running), contribution(&healthy));
        let mut finished = healthy.clone();
        finished.client_status = AllocClientStatus::Complete as i32;
        assert_ne!(contribution(&healthy), contribution(&finished));
        let mut moved = running.clone();
        moved.deployment_id = "d2".into();
        assert_ne!(contribution(&running), contribution(&moved));
    }

    #[test]
    fn counts_healthy_and_unhealthy_per_group_of_this_deployment_only() {
        let d = deployment(&[("web", 3, 0), ("api", 1, 0)]);
        let mut stopped = alloc("c", "web", Some(true), 120 * SEC);
        stopped.desired_status = AllocDesiredStatus::Stop as i32;
        let mut other = alloc("x", "web", Some(true), 0);
        other.deployment_id = "d0".into();
        let allocs = [
            alloc("a", "web", Some(true), 110 * SEC),
            alloc("b", "web", None, 0),
            stopped,
            alloc("e", "api", Some(false), 105 * SEC),
            other,
        ];
        let h = group_health(&d, &facts_of(&d.id, &allocs));
        assert_eq!(h["web"].healthy, 2);
        assert_eq!(h["web"].healthy_running, 1);
        assert_eq!(h["web"].unhealthy, 0);
        assert_eq!(h["web"].last_healthy_unix_ns, 120 * SEC);
        assert_eq!(h["api"].unhealthy, 1);
        assert_eq!(h["api"].healthy, 0);
    }

    #[test]
    fn a_cutoff_is_timed_from_when_it_is_seen_and_wall_clock_steps_do_not_move_it() {
        let t0 = Instant::now();
        let secs = |n: u64| t0 + Duration::from_secs(n);
        // Seen 100 s before it falls due, by the wall clock then.
        let timed = Some(TimedCutoff::seen(200 * SEC, 100 * SEC, t0));
        // 10 s later the wall clock stepped 5 minutes ahead: not passed.
        assert!(!TimedCutoff::judge(timed, 200 * SEC, 410 * SEC, secs(10)));
        // Then 10 minutes back: it still passes on time.
        assert!(!TimedCutoff::judge(timed, 200 * SEC, -201 * SEC, secs(99)));
        assert!(TimedCutoff::judge(timed, 200 * SEC, -200 * SEC, secs(100)));
        // A cutoff the term has not timed yet is judged by the wall clock.
        assert!(!TimedCutoff::judge(timed, 500 * SEC, 499 * SEC, secs(10)));
        assert!(TimedCutoff::judge(None, 300 * SEC, 300 * SEC, t0));

        // A deployment past its cutoff by a stepped wall clock runs on while
        // the cutoff is judged not passed, and fails once it is.
        let d = deployment(&[("web", 2, 0)]);
        let placed = [alloc("a", "web", None, 0)];
        let a = assess_judged(&d, &facts_of(&d.id, &placed), |_| false);
        assert_eq!(a.cutoff, Some(700 * SEC));
        assert_eq!(a.outcome, Outcome::Continue);
        let a = assess_judged(&a.deployment, &facts_of(&d.id, &placed), |by| {
            by == 700 * SEC
        });
        assert!(matches!(a.outcome, Outcome::Fail { .. }), "{:?}", a.outcome);
    }

    #[test]
    fn the_progress_deadline_starts_at_placement_and_moves_with_each_healthy_alloc() {
        let d = deployment(&[("web", 2, 0)]);
        let a = assess(&d, &[], 0);
        assert_eq!(
            a.deployment.task_groups["web"].require_progress_by_unix_ns,
            0
        );
        assert_eq!(a.cutoff, None, "nothing placed yet");

        let placed = [alloc("a", "web", None, 0)];
        let a = assess(&d, &placed, 101 * SEC);
        assert!(a.changed);
        assert_eq!(
            a.deployment.task_groups["web"].require_progress_by_unix_ns,
            700 * SEC
        );
        assert_eq!(a.cutoff, Some(700 * SEC));
        assert_eq!(a.outcome, Outcome::Continue);

        let healthy = [
            alloc("a", "web", Some(true), 300 * SEC),
            alloc("b", "web", None, 0),
        ];
        let a = assess(&a.deployment, &healthy, 301 * SEC);
        assert_eq!(
            a.deployment.task_groups["web"].require_progress_by_unix_ns,
            900 * SEC
        );
        assert_eq!(a.deployment.task_groups["web"].healthy_allocs, 1);
        // Without progress, the deadline fails it.
        let late = assess(&a.deployment, &healthy, 900 * SEC);
        assert_eq!(
            late.outcome,
            Outcome::Fail {
                description: DESC_PROGRESS_DEADLINE,
                rollback: false
            }
        );
        // Unchanged input, unchanged deployment.
        assert!(!assess(&a.deployment, &healthy, 302 * SEC).changed);
    }

    #[test]
    fn a_paused_deployment_does_not_fail_at_its_deadline() {
        let mut d = deployment(&[("web", 2, 0)]);
        d.task_groups
            .get_mut("web")
            .unwrap()
            .require_progress_by_unix_ns = 10 * SEC;
        d.set_status(DeploymentStatus::Paused);
        let placed = [alloc("a", "web", None, 0)];
        let a = assess(&d, &placed, 1_000 * SEC);
        assert_eq!(a.outcome, Outcome::Continue);
        assert_eq!(a.cutoff, None);
    }

    #[test]
    fn an_unhealthy_alloc_fails_it_with_the_groups_auto_revert() {
        let mut d = deployment(&[("web", 2, 0), ("api", 1, 0)]);
        d.task_groups.get_mut("api").unwrap().auto_revert = true;
        let allocs = [alloc("a", "web", Some(false), 5)];
        assert_eq!(
            assess(&d, &allocs, 6).outcome,
            Outcome::Fail {
                description: DESC_FAILED_ALLOCS,
                rollback: false
            }
        );
        let allocs = [alloc("a", "api", Some(false), 5)];
        let a = assess(&d, &allocs, 6);
        assert_eq!(
            a.outcome,
            Outcome::Fail {
                description: DESC_FAILED_ALLOCS,
                rollback: true
            }
        );
        assert_eq!(a.deployment.task_groups["api"].unhealthy_allocs, 1);
        // Even paused.
        d.set_status(DeploymentStatus::Paused);
        assert!(matches!(
            assess(&d, &allocs, 6).outcome,
            Outcome::Fail { .. }
        ));
        // A terminal deployment is left alone.
        d.set_status(DeploymentStatus::Failed);
        assert_eq!(assess(&d, &allocs, 6).outcome, Outcome::Continue);
    }

    #[test]
    fn success_needs_every_group_healthy_and_promoted() {
        let d = deployment(&[("web", 2, 0)]);
        let one = [alloc("a", "web", Some(true), 5), alloc("b", "web", None, 0)];
        assert_eq!(assess(&d, &one, 6).outcome, Outcome::Continue);
        let two = [
            alloc("a", "web", Some(true), 5),
            alloc("b", "web", Some(true), 5),
        ];
        assert_eq!(assess(&d, &two, 6).outcome, Outcome::Succeed);
        // Paused deployments wait for resume.
        let mut paused = d.clone();
        paused.set_status(DeploymentStatus::Paused);
        assert_eq!(assess(&paused, &two, 6).outcome, Outcome::Continue);

        // Canaries unpromoted: not done even with enough healthy.
        let mut c = deployment(&[("web", 2, 1)]);
        c.task_groups.get_mut("web").unwrap().placed_canaries = vec!["a".into()];
        let a = assess(&c, &two, 6);
        assert_eq!(a.outcome, Outcome::Continue);
        assert_eq!(a.deployment.status_description, DESC_NEEDS_PROMOTION);
        let promoted = promoted(&a.deployment, None, 7);
        assert_eq!(promoted.status_description, DESC_RUNNING);
        assert_eq!(assess(&promoted, &two, 8).outcome, Outcome::Succeed);
    }

    #[test]
    fn auto_promote_waits_for_every_canary_to_be_healthy() {
        let mut d = deployment(&[("web", 3, 2)]);
        {
            let web = d.task_groups.get_mut("web").unwrap();
            web.auto_promote = true;
            web.placed_canaries = vec!["a".into(), "b".into()];
        }
        let one = [alloc("a", "web", Some(true), 5), alloc("b", "web", None, 0)];
        let a = assess(&d, &one, 6);
        assert_eq!(a.outcome, Outcome::Continue);
        assert_eq!(a.deployment.status_description, DESC_AUTO_PROMOTION);
        let both = [
            alloc("a", "web", Some(true), 5),
            alloc("b", "web", Some(true), 5),
        ];
        assert_eq!(assess(&d, &both, 6).outcome, Outcome::AutoPromote);
        // A group without auto_promote holds everyone back.
        let mut mixed = d.clone();
        mixed.task_groups.insert(
            "api".into(),
            DeploymentState {
                desired_total: 1,
                desired_canaries: 1,
                ..Default::default()
            },
        );
        assert_eq!(assess(&mixed, &both, 6).outcome, Outcome::Continue);
    }

    #[test]
    fn healthy_canaries_waiting_for_promotion_do_not_fail_at_the_deadline() {
        let mut d = deployment(&[("web", 3, 1), ("api", 1, 0)]);
        {
            let web = d.task_groups.get_mut("web").unwrap();
            web.placed_canaries = vec!["c".into()];
            web.auto_revert = true;
            web.require_progress_by_unix_ns = 10 * SEC;
        }
        d.task_groups
            .get_mut("api")
            .unwrap()
            .require_progress_by_unix_ns = 20 * SEC;
        let api_healthy = alloc("a", "api", Some(true), 5 * SEC);
        let waiting = [alloc("c", "web", None, 0), api_healthy.clone()];
        let a = assess(&d, &waiting, 11 * SEC);
        assert_eq!(
            a.outcome,
            Outcome::Fail {
                description: DESC_PROGRESS_DEADLINE,
                rollback: true
            },
            "the canary never turned healthy"
        );
        let healthy = [alloc("c", "web", Some(true), 5 * SEC), api_healthy];
        let a = assess(&d, &healthy, 1_000 * SEC);
        assert_eq!(a.outcome, Outcome::Continue, "waits for the operator");
        assert_eq!(a.cutoff, None, "no deadline left to wake for");
        // A group without auto_revert falling short does not roll back.
        d.task_groups.get_mut("web").unwrap().auto_revert = false;
        d.task_groups.get_mut("api").unwrap().auto_revert = true;
        let a = assess(&d, &waiting, 11 * SEC);
        assert_eq!(
            a.outcome,
            Outcome::Fail {
                description: DESC_PROGRESS_DEADLINE,
                rollback: false
            }
        );
    }

    #[test]
    fn promotion_restarts_the_progress_deadline_of_the_named_groups() {
        let d = deployment(&[("web", 2, 1), ("api", 1, 1)]);
        let p = promoted(&d, Some(&["web".to_string()]), 50 * SEC);
        assert!(p.task_groups["web"].promoted);
        assert!(!p.task_groups["api"].promoted);
        assert_eq!(p.task_groups["web"].require_progress_by_unix_ns, 650 * SEC);
        assert_eq!(p.task_groups["api"].require_progress_by_unix_ns, 0);
        assert_eq!(p.status_description, DESC_NEEDS_PROMOTION);
    }
}

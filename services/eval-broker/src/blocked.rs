//! Blocked evals: at most one per job, held with the class eligibility the
//! scheduler recorded, and released when capacity changes for a class they
//! could use (any class if they escaped), when an unblock happened after the
//! snapshot they were computed from, or periodically when a plan failure
//! blocked them. Pure: the caller writes the consequences.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use caravan_model::trigger;
use caravan_proto::Evaluation;
use caravan_store::Revision;
use tokio::time::Instant;

use crate::queues::{JobKey, job_key};

/// What holding a blocked eval did.
#[derive(Clone, Debug, Default)]
pub struct BlockOutcome {
    /// A blocked eval of the same job that lost to a newer one; the caller
    /// cancels it in the store. It may be the eval just offered.
    pub cancel: Option<Arc<Evaluation>>,
    /// The eval just offered missed an unblock that happened after its
    /// snapshot; the caller unblocks it at once.
    pub unblock: Option<Arc<Evaluation>>,
}

/// The blocked evals of one leadership term.
#[derive(Debug, Default)]
pub struct BlockedEvals {
    evals: HashMap<String, Arc<Evaluation>>,
    jobs: HashMap<JobKey, String>,
    /// Per computed class: the newest revision capacity changed at, and
    /// when that was recorded (for pruning).
    unblocked_at: HashMap<String, (Revision, Instant)>,
}

impl BlockedEvals {
    /// An empty set.
    pub fn new() -> Self {
        BlockedEvals::default()
    }

    /// Number of blocked evals held.
    pub fn len(&self) -> usize {
        self.evals.len()
    }

    /// Blocked evals per scheduler type.
    pub fn count_by_scheduler(&self) -> BTreeMap<String, u64> {
        let mut counts = BTreeMap::new();
        for eval in self.evals.values() {
            crate::queues::count_one(&mut counts, &eval.r#type);
        }
        counts
    }

    /// Whether none are held.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.evals.is_empty()
    }

    /// Whether the eval is held.
    pub fn contains(&self, eval_id: &str) -> bool {
        self.evals.contains_key(eval_id)
    }

    /// Records that capacity for `class` changed at `revision` without
    /// unblocking anything: for evals restored from the store, whose
    /// snapshots may predate changes nobody was leading for.
    pub fn note_capacity_change(&mut self, class: &str, revision: Revision, now: Instant) {
        let slot = self
            .unblocked_at
            .entry(class.to_string())
            .or_insert((revision, now));
        if revision >= slot.0 {
            *slot = (revision, now);
        }
    }

    /// Holds a blocked eval as the store has it (new, or a newer copy of one
    /// held). A job keeps only its newest blocked eval, by create revision.
    pub fn block(&mut self, eval: Arc<Evaluation>) -> BlockOutcome {
        let mut outcome = BlockOutcome::default();
        let job = job_key(&eval);
        if let Some(held_id) = self.jobs.get(&job).cloned()
            && held_id != eval.id
        {
            let held_is_newer = self.evals.get(&held_id).is_some_and(|held| {
                (held.create_revision, held.id.as_str()) > (eval.create_revision, eval.id.as_str())
            });
            if held_is_newer {
                outcome.cancel = Some(eval);
                return outcome;
            }
            outcome.cancel = self.evals.remove(&held_id);
        }
        if self.missed_unblock(&eval) {
            self.jobs.remove(&job);
            self.evals.remove(&eval.id);
            outcome.unblock = Some(eval);
            return outcome;
        }
        self.jobs.insert(job, eval.id.clone());
        self.evals.insert(eval.id.clone(), eval);
        outcome
    }

    /// Forgets an eval the store no longer has blocked.
    pub fn remove(&mut self, eval_id: &str) -> Option<Arc<Evaluation>> {
        let eval = self.evals.remove(eval_id)?;
        let job = job_key(&eval);
        if self.jobs.get(&job).is_some_and(|id| id == eval_id) {
            self.jobs.remove(&job);
        }
        Some(eval)
    }

    /// A later eval of the job completed without failed placements, from a
    /// snapshot newer than the job's blocked eval: the blocked eval has
    /// nothing left to place. Returns it for canceling.
    pub fn untrack_satisfied(
        &mut self,
        job: &JobKey,
        snapshot_revision: Revision,
    ) -> Option<Arc<Evaluation>> {
        let held = self.jobs.get(job)?.clone();
        let stale = self
            .evals
            .get(&held)
            .is_some_and(|e| e.snapshot_revision < snapshot_revision);
        if stale { self.remove(&held) } else { None }
    }

    /// Capacity for `class` changed at `revision` (a node of it became
    /// ready or eligible, changed, or had allocations stop): releases every
    /// eval that escaped, that found the class eligible, or that never saw
    /// the class.
    pub fn unblock_class(
        &mut self,
        class: &str,
        revision: Revision,
        now: Instant,
    ) -> Vec<Arc<Evaluation>> {
        self.note_capacity_change(class, revision, now);
        let chosen: Vec<String> = self
            .evals
            .values()
            .filter(|e| could_use(e, class))
            .map(|e| e.id.clone())
            .collect();
        chosen.iter().filter_map(|id| self.remove(id)).collect()
    }

    /// Releases the evals blocked because plans kept failing; retried
    /// periodically since no capacity change may ever come for them.
    pub fn unblock_failed(&mut self) -> Vec<Arc<Evaluation>> {
        let chosen: Vec<String> = self
            .evals
            .values()
            .filter(|e| e.triggered_by == trigger::MAX_PLAN_ATTEMPTS)
            .map(|e| e.id.clone())
            .collect();
        chosen.iter().filter_map(|id| self.remove(id)).collect()
    }

    /// Forgets capacity changes recorded longer ago than `keep`: an eval
    /// blocked from a snapshot that old is long processed.
    pub fn prune(&mut self, now: Instant, keep: Duration) {
        self.unblocked_at
            .retain(|_, (_, at)| now.saturating_duration_since(*at) <= keep);
    }

    /// Whether capacity changed for a class the eval could use after the
    /// snapshot it was computed from.
    fn missed_unblock(&self, eval: &Evaluation) -> bool {
        let seen = eval.snapshot_revision;
        let mut newest = 0;
        for (class, (revision, _)) in &self.unblocked_at {
            newest = newest.max(*revision);
            if *revision > seen && could_use(eval, class) {
                return true;
            }
        }
        eval.escaped_computed_class && newest > seen
    }
}

/// Whether capacity on `class` may let the eval place: it escaped class
/// caching, found the class eligible, or never saw it.
fn could_use(eval: &Evaluation, class: &str) -> bool {
    eval.escaped_computed_class || eval.class_eligibility.get(class).copied() != Some(false)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn blocked(id: &str, job: &str, create: i64, classes: &[(&str, bool)]) -> Arc<Evaluation> {
        Arc::new(Evaluation {
            id: id.into(),
            namespace: "default".into(),
            job_id: job.into(),
            r#type: "service".into(),
            status: caravan_proto::EvalStatus::Blocked as i32,
            create_revision: create,
            snapshot_revision: create,
            class_eligibility: classes
                .iter()
                .map(|(c, e)| (c.to_string(), *e))
                .collect::<BTreeMap<_, _>>(),
            ..Default::default()
        })
    }

    fn ids(evals: &[Arc<Evaluation>]) -> Vec<&str> {
        let mut v: Vec<&str> = evals.iter().map(|e| e.id.as_str()).collect();
        v.sort();
        v
    }

    #[test]
    fn unblocks_by_class_eligibility() {
        let now = Instant::now();
        let mut b = BlockedEvals::new();
        b.block(blocked(
            "eligible",
            "a",
            10,
            &[("gpu", true), ("cpu", false)],
        ));
        b.block(blocked("ineligible", "b", 11, &[("gpu", false)]));
        b.block(blocked("unseen", "c", 12, &[("cpu", false)]));
        assert_eq!(b.len(), 3);

        let released = b.unblock_class("gpu", 20, now);
        assert_eq!(ids(&released), ["eligible", "unseen"]);
        assert_eq!(b.len(), 1);
        assert!(b.contains("ineligible"));
        assert!(b.unblock_class("gpu", 21, now).is_empty());
    }

    #[test]
    fn escaped_evals_unblock_on_any_class() {
        let now = Instant::now();
        let mut b = BlockedEvals::new();
        let mut e = (*blocked("escaped", "a", 10, &[("gpu", false)])).clone();
        e.escaped_computed_class = true;
        b.block(Arc::new(e));
        assert_eq!(ids(&b.unblock_class("gpu", 20, now)), ["escaped"]);
    }

    #[test]
    fn one_blocked_eval_per_job_the_newest_wins() {
        let mut b = BlockedEvals::new();
        assert!(b.block(blocked("old", "web", 10, &[])).cancel.is_none());
        let out = b.block(blocked("new", "web", 20, &[]));
        assert_eq!(out.cancel.map(|e| e.id.clone()).as_deref(), Some("old"));
        assert!(b.contains("new") && !b.contains("old"));
        let out = b.block(blocked("older", "web", 5, &[]));
        assert_eq!(out.cancel.map(|e| e.id.clone()).as_deref(), Some("older"));
        assert!(b.contains("new") && !b.contains("older"));
        // A newer copy of the held eval replaces it without a cancel.
        let out = b.block(blocked("new", "web", 20, &[("c", true)]));
        assert!(out.cancel.is_none() && out.unblock.is_none());
        assert_eq!(b.len(), 1);
    }

    #[test]
    fn an_unblock_after_the_snapshot_is_not_missed() {
        let now = Instant::now();
        let mut b = BlockedEvals::new();
        b.unblock_class("gpu", 50, now);
        // Computed at 40, before the gpu node appeared at 50.
        let mut e = (*blocked("late", "a", 60, &[("cpu", false)])).clone();
        e.snapshot_revision = 40;
        let out = b.block(Arc::new(e));
        assert_eq!(out.unblock.map(|e| e.id.clone()).as_deref(), Some("late"));
        assert!(b.is_empty());

        // Computed after the change, or finding the class ineligible: held.
        let mut e = (*blocked("fresh", "b", 70, &[])).clone();
        e.snapshot_revision = 55;
        assert!(b.block(Arc::new(e)).unblock.is_none());
        let mut e = (*blocked("ineligible", "c", 70, &[("gpu", false)])).clone();
        e.snapshot_revision = 40;
        assert!(b.block(Arc::new(e)).unblock.is_none());
        assert_eq!(b.len(), 2);
    }

    #[test]
    fn escaped_evals_miss_any_later_unblock() {
        let now = Instant::now();
        let mut b = BlockedEvals::new();
        b.note_capacity_change("cpu", 50, now);
        let mut e = (*blocked("escaped", "a", 60, &[("cpu", false)])).clone();
        e.escaped_computed_class = true;
        e.snapshot_revision = 49;
        assert!(b.block(Arc::new(e)).unblock.is_some());
    }

    #[test]
    fn plan_failures_are_retried_periodically() {
        let mut b = BlockedEvals::new();
        let mut e = (*blocked("plans", "a", 10, &[])).clone();
        e.triggered_by = trigger::MAX_PLAN_ATTEMPTS.into();
        b.block(Arc::new(e));
        b.block(blocked("capacity", "b", 11, &[]));
        assert_eq!(ids(&b.unblock_failed()), ["plans"]);
        assert_eq!(b.len(), 1);
    }

    #[test]
    fn removal_frees_the_job() {
        let mut b = BlockedEvals::new();
        b.block(blocked("x", "web", 10, &[]));
        assert!(b.remove("x").is_some());
        assert!(b.remove("x").is_none());
        assert!(b.block(blocked("y", "web", 5, &[])).cancel.is_none());
        assert!(b.contains("y"));
    }

    #[test]
    fn a_later_complete_eval_untracks_the_blocked_one() {
        let mut b = BlockedEvals::new();
        let mut e = (*blocked("b", "web", 10, &[])).clone();
        e.snapshot_revision = 30;
        b.block(Arc::new(e));
        let job = ("default".to_string(), "web".to_string());
        assert!(b.untrack_satisfied(&job, 25).is_none(), "computed earlier");
        assert!(b.contains("b"));
        let other = ("default".to_string(), "api".to_string());
        assert!(b.untrack_satisfied(&other, 99).is_none());
        let gone = b.untrack_satisfied(&job, 31).expect("stale");
        assert_eq!(gone.id, "b");
        assert!(b.is_empty());
    }

    #[test]
    fn prune_forgets_old_changes() {
        let now = Instant::now();
        let mut b = BlockedEvals::new();
        b.note_capacity_change("gpu", 50, now);
        b.prune(now + Duration::from_secs(3600), Duration::from_secs(900));
        let mut e = (*blocked("e", "a", 60, &[])).clone();
        e.snapshot_revision = 40;
        assert!(b.block(Arc::new(e)).unblock.is_none());
    }
}

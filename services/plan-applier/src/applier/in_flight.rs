//! A plan's commit in flight: the background task that commits a cleared
//! plan and answers its submitter, and what the pipeline keeps of it to
//! know which later plans must wait for it.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use caravan_proto::Plan;
use caravan_store::{GroupCommit, LeadershipError, Revision};
use tokio::task::JoinHandle;

use super::PlanApplier;
use super::result::plan_result;
use crate::commit::{Changes, CommitOutcome, Committer, PlanMarks};
use crate::error::ApplierError;
use crate::metrics;
use crate::mutation::Target;
use crate::overlay::{OverlayLayer, View};
use crate::queue::PendingPlan;
use crate::verify::Verdict;

/// A commit running while later plans are verified (and, when they touch
/// nothing it touches, committed alongside it).
pub(super) struct InFlight {
    pub(super) seq: u64,
    pub(super) task: JoinHandle<CommitReport>,
    /// Every object it writes.
    pub(super) targets: HashSet<Target>,
    /// The jobs whose allocations it changes.
    pub(super) jobs: BTreeSet<(String, String)>,
    /// Nodes where it stops or evicts allocations: a plan verified against
    /// that room must wait for the room to be real.
    pub(super) frees: HashSet<String>,
    /// Nodes where it places allocations: a plan refused there for want of
    /// that room must wait for it, so the refusal's refresh revision covers
    /// the commit that took the room (or the room comes back).
    pub(super) places: HashSet<String>,
}

impl InFlight {
    /// Whether a plan with these jobs, targets and placement nodes must wait
    /// for this commit before committing.
    pub(super) fn blocks(
        &self,
        jobs: &BTreeSet<(String, String)>,
        targets: &HashSet<Target>,
        placing: &HashSet<String>,
        refused: &HashSet<String>,
    ) -> bool {
        !self.jobs.is_disjoint(jobs)
            || !self.targets.is_disjoint(targets)
            || !self.frees.is_disjoint(placing)
            || !self.places.is_disjoint(refused)
    }
}

/// What the pipeline learns from a finished commit.
pub(super) struct CommitReport {
    pub(super) layer: OverlayLayer,
    /// Something verified was not committed: plans verified on the
    /// optimistic view must be verified again.
    pub(super) fell_short: bool,
    /// A transaction's outcome is unknown: the cache must catch up with the
    /// store before the next verification.
    pub(super) unknown: bool,
}

/// Answers the submitter of `plan` with what `outcome` committed (an error
/// when nothing did and the commit failed), and tells the pipeline what it
/// must do about it.
fn answer(
    applier: &PlanApplier,
    plan: &Plan,
    rejected: BTreeMap<String, String>,
    view_revision: Revision,
    mut outcome: CommitOutcome,
    pending: PendingPlan,
) -> CommitReport {
    let unknown = matches!(
        outcome.error,
        Some(ApplierError::OutcomeUnknown(_) | ApplierError::Store(_))
    );
    let fell_short = !outcome.refused.is_empty() || outcome.error.is_some();
    let answer = match outcome.error.take() {
        Some(err) if outcome.revision == 0 => {
            // A full store refuses every plan until an operator frees it;
            // the gateway reports that once, not per plan.
            if matches!(&err, ApplierError::Store(e) if e.is_no_space()) {
                tracing::debug!(eval = %plan.eval_id, %err, "plan not committed");
            } else {
                tracing::warn!(eval = %plan.eval_id, %err, "plan not committed");
            }
            Err(err)
        }
        _ => {
            let result = plan_result(plan, rejected, &outcome, view_revision);
            applier.count(&result);
            Ok(result)
        }
    };
    pending.respond(answer);
    CommitReport {
        layer: std::mem::take(&mut outcome.layer),
        fell_short,
        unknown,
    }
}

/// A plan verified, past the commits it must not overtake and not refused
/// whole: what its commit needs.
pub(super) struct Cleared {
    pub(super) pending: PendingPlan,
    pub(super) plan: Arc<Plan>,
    pub(super) verdict: Verdict,
    /// The view it commits against.
    pub(super) view: View,
    pub(super) changes: Changes,
    pub(super) timings: Timings,
}

/// Commits a cleared plan and answers its submitter.
pub(super) async fn commit_and_answer(
    applier: Arc<PlanApplier>,
    txns: GroupCommit<LeadershipError>,
    cleared: Cleared,
    marks: PlanMarks,
    seq: u64,
    now: i64,
) -> CommitReport {
    let Cleared {
        pending,
        plan,
        verdict,
        view,
        changes,
        timings,
    } = cleared;
    let committer = Committer {
        store: applier.store.as_ref(),
        txns: &txns,
        keyspace: &applier.keyspace,
        max_ops: applier.settings.txn_max_ops,
        max_bytes: applier.settings.txn_max_bytes,
        retries: applier.settings.conflict_retries,
        now,
        marks,
    };
    let committing = Instant::now();
    let outcome = committer
        .commit(&view, changes, plan.all_at_once, seq)
        .await;
    metrics::committed(committing.elapsed());
    timings.log(&plan.eval_id, committing);
    answer(
        &applier,
        &plan,
        verdict.rejected,
        view.revision(),
        outcome,
        pending,
    )
}

/// How long a plan's stages took, for its timings line.
#[derive(Clone, Copy, Debug)]
pub(super) struct Timings {
    pub(super) started: Instant,
    /// Until the cache had caught up.
    pub(super) cache: Duration,
    /// Until the plan was verified.
    pub(super) verified: Duration,
}

impl Timings {
    pub(super) fn start() -> Self {
        Timings {
            started: Instant::now(),
            cache: Duration::ZERO,
            verified: Duration::ZERO,
        }
    }

    pub(super) fn cache_ready(&mut self) {
        self.cache = self.started.elapsed();
    }

    pub(super) fn verified(&mut self) {
        self.verified = self.started.elapsed();
    }

    /// Logs the stages of the plan of `eval`, whose commit started at
    /// `committing` and just ended.
    pub(super) fn log(&self, eval: &str, committing: Instant) {
        tracing::debug!(
            eval = %eval,
            cache_ms = self.cache.as_secs_f64() * 1e3,
            verify_ms = (self.verified - self.cache).as_secs_f64() * 1e3,
            queued_ms = (committing.duration_since(self.started) - self.verified).as_secs_f64() * 1e3,
            commit_ms = committing.elapsed().as_secs_f64() * 1e3,
            "plan timings"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_flight(targets: &[&str], job: &str, frees: &[&str]) -> InFlight {
        InFlight {
            seq: 1,
            task: tokio::spawn(async {
                CommitReport {
                    layer: OverlayLayer::new(1),
                    fell_short: false,
                    unknown: false,
                }
            }),
            targets: targets
                .iter()
                .map(|t| Target::Alloc(t.to_string()))
                .collect(),
            jobs: [("default".to_string(), job.to_string())].into(),
            frees: frees.iter().map(|n| n.to_string()).collect(),
            places: ["n3".to_string()].into(),
        }
    }

    #[tokio::test]
    async fn a_commit_blocks_plans_that_share_objects_jobs_or_freed_room() {
        let f = in_flight(&["a1"], "web", &["n1"]);
        let jobs = |j: &str| BTreeSet::from([("default".to_string(), j.to_string())]);
        let targets = |ids: &[&str]| -> HashSet<Target> {
            ids.iter().map(|t| Target::Alloc(t.to_string())).collect()
        };
        let nodes = |ns: &[&str]| -> HashSet<String> { ns.iter().map(|n| n.to_string()).collect() };
        let none = nodes(&[]);
        assert!(!f.blocks(&jobs("api"), &targets(&["b1"]), &nodes(&["n2"]), &none));
        assert!(f.blocks(&jobs("web"), &targets(&["b1"]), &nodes(&["n2"]), &none));
        assert!(f.blocks(&jobs("api"), &targets(&["a1"]), &nodes(&["n2"]), &none));
        assert!(f.blocks(&jobs("api"), &targets(&["b1"]), &nodes(&["n1"]), &none));
        assert!(
            f.blocks(
                &jobs("api"),
                &targets(&["b1"]),
                &nodes(&["n2"]),
                &nodes(&["n3"])
            ),
            "refused where the commit places"
        );
        assert!(!f.blocks(
            &jobs("api"),
            &targets(&["b1"]),
            &nodes(&["n2"]),
            &nodes(&["n2"])
        ));
    }
}

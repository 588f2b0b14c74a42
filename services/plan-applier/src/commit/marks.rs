//! The fencing of a plan against other plans of the same jobs: the plan
//! marks every transaction of a plan compares and rewrites.

use caravan_proto::Plan;
use caravan_state::Keyspace;
use caravan_store::{Compare, CompareOp, Op, Revision, Store, Txn};

use crate::error::ApplierError;

/// The plan marks a plan's transactions are guarded by: one key per job the
/// plan touches (`job_plans/<ns>/<job>`), rewritten by each of them. The
/// first transaction needs every mark to be no newer than the snapshot the
/// plan was computed on, each later one the mark its predecessor wrote, so
/// a commit can never land next to a plan of the same job it did not see,
/// even one whose outcome was unknown and that the store applied late.
#[derive(Clone, Debug, Default)]
pub(crate) struct PlanMarks {
    /// The mark keys.
    pub(crate) keys: Vec<Vec<u8>>,
    /// The snapshot revision the plan was computed on.
    pub(crate) snapshot: Revision,
    /// What the marks are set to (the plan's eval).
    pub(crate) value: Vec<u8>,
}

impl PlanMarks {
    /// The marks of `plan`, over the jobs it touches.
    pub(crate) fn of<'a>(
        keyspace: &Keyspace,
        jobs: impl IntoIterator<Item = &'a (String, String)>,
        plan: &Plan,
    ) -> Self {
        PlanMarks {
            keys: jobs
                .into_iter()
                .map(|(ns, job)| keyspace.job_plan(ns, job))
                .collect(),
            snapshot: plan.snapshot_revision,
            value: plan.eval_id.clone().into_bytes(),
        }
    }

    /// Adds the guards and writes of the marks to `txn`; `prior` is the
    /// revision an earlier transaction of the same plan wrote them at.
    pub(super) fn guard(&self, mut txn: Txn, prior: Option<Revision>) -> Txn {
        for key in &self.keys {
            txn = txn.when(match prior {
                None => Compare::mod_revision(key.clone(), CompareOp::Less, self.snapshot + 1),
                Some(rev) => Compare::mod_revision(key.clone(), CompareOp::Equal, rev),
            });
            txn = txn.and_then(Op::put(key.clone(), self.value.clone()));
        }
        txn
    }

    /// The newest revision a mark moved to behind the plan's back, if one
    /// did: the plan must be computed again on a snapshot that has it.
    pub(super) async fn moved(
        &self,
        store: &dyn Store,
        prior: Option<Revision>,
    ) -> Result<Option<Revision>, ApplierError> {
        let mut newest = None;
        for key in &self.keys {
            let rev = store
                .get(key)
                .await
                .map_err(ApplierError::Store)?
                .map_or(0, |kv| kv.mod_revision);
            let moved = match prior {
                None => rev > self.snapshot,
                Some(p) => rev != p,
            };
            if moved {
                newest = Some(newest.unwrap_or(0).max(rev));
            }
        }
        Ok(newest)
    }
}

/// Why the rest of a plan is refused once a mark moved to `rev`.
pub(super) fn marks_moved(rev: Revision) -> String {
    format!("a plan of the same job committed at revision {rev}, after this plan's snapshot")
}

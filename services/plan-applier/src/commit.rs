//! Committing the verified part of a plan: the changes per node, split into
//! transactions within the op and byte budget (never splitting one node's
//! part), each a fenced transaction that compares every object it rewrites,
//! recomputed from fresh values and retried when a client status write got
//! in between. The plan's eval completion rides on the last transaction when
//! nothing was refused, so a fully committed plan costs one write, not two.
//!
//! What to write is pure: `changes` turns a plan into changes per part,
//! `writes` turns a part's changes and the current values into keys,
//! values and the revisions they must still be at. How to write is
//! `txn`'s: batches, the fenced transaction, conflicts and retries.

mod batches;
mod changes;
mod marks;
mod outcome;
mod read;
mod txn;
mod writes;

pub(crate) use changes::{Changes, Completion, plan_changes};
pub(crate) use marks::PlanMarks;
pub(crate) use outcome::CommitOutcome;
pub(crate) use txn::{Committer, plan_commits};
pub(crate) use writes::optimistic_layer;

#[cfg(test)]
mod tests;

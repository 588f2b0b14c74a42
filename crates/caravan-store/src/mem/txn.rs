//! The embedded store's write path: transactions checked the way etcd checks
//! them, applied at one revision, and lease revocation deleting attached keys.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use tokio::time::Instant;

use crate::error::{Result, StoreError};
use crate::types::{
    Compare, CompareOp, CompareTarget, LeaseId, Op, OpResult, Range, Revision, Txn, TxnResult,
};

use super::keyspace::KeySpace;
use super::lease::Leases;

/// The limits etcd enforces on a request.
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    /// Most compares, and most ops per branch, in one transaction.
    pub max_txn_ops: usize,
    /// Most bytes of keys and values in one request.
    pub max_request_bytes: usize,
    /// Revisions of history kept before automatic compaction; 0 keeps all.
    pub history_revisions: i64,
}

/// Everything behind the embedded store's lock.
#[derive(Debug)]
pub(super) struct State {
    pub kv: KeySpace,
    pub leases: Leases,
    limits: Limits,
}

impl State {
    pub fn new(limits: Limits, min_lease_ttl: i64) -> Self {
        State {
            kv: KeySpace::new(),
            leases: Leases::new(min_lease_ttl),
            limits,
        }
    }

    /// Runs a transaction: checks it, evaluates the compares, applies one
    /// branch at one revision (none if it writes nothing).
    pub fn txn(&mut self, txn: &Txn) -> Result<TxnResult> {
        self.check_request(txn)?;
        let succeeded = txn.compares.iter().all(|c| self.holds(c));
        let ops = if succeeded {
            &txn.success
        } else {
            &txn.failure
        };
        self.check_branch(ops)?;
        let mut results = Vec::with_capacity(ops.len());
        for op in ops {
            results.push(self.apply(op)?);
        }
        let revision = self.commit();
        for result in &mut results {
            if let OpResult::Get(range) = result {
                range.revision = revision;
            }
        }
        Ok(TxnResult {
            succeeded,
            revision,
            results,
        })
    }

    /// Revokes a lease: its keys are deleted in one revision.
    pub fn revoke(&mut self, id: LeaseId) -> Result<Revision> {
        let keys = self
            .leases
            .remove(id)
            .ok_or(StoreError::LeaseNotFound(id))?;
        for key in keys {
            self.kv.delete(&Range::key(key));
        }
        Ok(self.commit())
    }

    /// Revokes every lease whose deadline has passed; returns whether any was.
    pub fn expire(&mut self, now: Instant) -> bool {
        let due = self.leases.due(now);
        for id in &due {
            if let Err(err) = self.revoke(*id) {
                tracing::debug!(lease = id, %err, "expired lease already gone");
            }
        }
        !due.is_empty()
    }

    /// Discards history before `revision`.
    pub fn compact(&mut self, revision: Revision) -> Result<()> {
        self.kv.compact(revision)
    }

    fn commit(&mut self) -> Revision {
        let before = self.kv.revision();
        let revision = self.kv.commit();
        let history = self.limits.history_revisions;
        if revision != before && history > 0 && revision - history > self.kv.compact_revision() {
            // Cannot fail: the target is above the compaction point and below
            // the current revision.
            let _ = self.kv.compact(revision - history);
        }
        revision
    }

    fn apply(&mut self, op: &Op) -> Result<OpResult> {
        Ok(match op {
            Op::Put { key, value, lease } => {
                let old = self.kv.put(key, value, *lease);
                if old != 0 && old != *lease {
                    self.leases.detach(old, key);
                }
                if *lease != 0 {
                    self.leases.attach(*lease, key);
                }
                OpResult::Put
            }
            Op::Delete(range) => {
                let deleted = self.kv.delete(range);
                for kv in &deleted {
                    if kv.lease != 0 {
                        self.leases.detach(kv.lease, &kv.key);
                    }
                }
                OpResult::Delete(deleted.len() as i64)
            }
            Op::Get(range) => OpResult::Get(self.kv.range(range)?),
        })
    }

    fn holds(&self, compare: &Compare) -> bool {
        let kv = self.kv.get(&compare.key);
        let ordering = match (&compare.target, kv) {
            // etcd: a value compare on a missing key always fails, since an
            // empty value and no value cannot be told apart.
            (CompareTarget::Value(_), None) => return false,
            (CompareTarget::Value(value), Some(kv)) => kv.value.as_slice().cmp(value.as_slice()),
            (CompareTarget::ModRevision(rev), kv) => kv.map_or(0, |kv| kv.mod_revision).cmp(rev),
            (CompareTarget::CreateRevision(rev), kv) => {
                kv.map_or(0, |kv| kv.create_revision).cmp(rev)
            }
            (CompareTarget::Version(version), kv) => kv.map_or(0, |kv| kv.version).cmp(version),
        };
        match compare.op {
            CompareOp::Equal => ordering == Ordering::Equal,
            CompareOp::NotEqual => ordering != Ordering::Equal,
            CompareOp::Less => ordering == Ordering::Less,
            CompareOp::Greater => ordering == Ordering::Greater,
        }
    }

    /// The checks etcd makes before a transaction reaches its store: sizes,
    /// counts, empty keys, and keys written twice in one branch.
    fn check_request(&self, txn: &Txn) -> Result<()> {
        let max = self.limits.max_txn_ops;
        if txn.compares.len() > max || txn.success.len() > max || txn.failure.len() > max {
            return Err(StoreError::InvalidArgument(format!(
                "too many operations in txn request (max {max})"
            )));
        }
        let mut bytes = 0usize;
        for compare in &txn.compares {
            if compare.key.is_empty() {
                return Err(StoreError::InvalidArgument("key is not provided".into()));
            }
            bytes += compare.key.len();
            if let CompareTarget::Value(value) = &compare.target {
                bytes += value.len();
            }
        }
        for op in txn.success.iter().chain(&txn.failure) {
            let (key, extra) = match op {
                Op::Put { key, value, .. } => (key, value.len()),
                Op::Delete(range) | Op::Get(range) => (&range.start, range.end.len()),
            };
            if key.is_empty() {
                return Err(StoreError::InvalidArgument("key is not provided".into()));
            }
            bytes += key.len() + extra;
        }
        if bytes > self.limits.max_request_bytes {
            return Err(StoreError::InvalidArgument(format!(
                "request is too large ({bytes} bytes, max {})",
                self.limits.max_request_bytes
            )));
        }
        check_intervals(&txn.success)?;
        check_intervals(&txn.failure)
    }

    /// The checks etcd makes on the branch it is about to apply.
    fn check_branch(&self, ops: &[Op]) -> Result<()> {
        for op in ops {
            match op {
                Op::Put { lease, .. } if *lease != 0 && !self.leases.contains(*lease) => {
                    return Err(StoreError::LeaseNotFound(*lease));
                }
                Op::Get(range) => self.kv.check_readable(range.revision)?,
                _ => {}
            }
        }
        Ok(())
    }
}

/// etcd refuses a branch that puts a key twice or deletes a key it puts.
fn check_intervals(ops: &[Op]) -> Result<()> {
    let mut puts = BTreeSet::new();
    for op in ops {
        if let Op::Put { key, .. } = op
            && !puts.insert(key.as_slice())
        {
            return Err(duplicate_key());
        }
    }
    for op in ops {
        if let Op::Delete(range) = op
            && puts.iter().any(|key| range.contains(key))
        {
            return Err(duplicate_key());
        }
    }
    Ok(())
}

fn duplicate_key() -> StoreError {
    StoreError::InvalidArgument("duplicate key given in txn request".into())
}

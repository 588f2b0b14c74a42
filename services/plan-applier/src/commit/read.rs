//! Reading the current values of the objects a commit writes from the
//! store: the full values of the allocations it rewrites (the cache keeps
//! lean copies), and every object again after a conflict.

use std::collections::BTreeSet;
use std::sync::Arc;

use caravan_proto::Deployment;
use caravan_state::{
    AllocDetail, Keyspace, StateError, StoredAlloc, decode, read_alloc_values,
    read_alloc_values_of_jobs,
};
use caravan_store::{KeyValue, Op, OpResult, Store, StoreError, Txn};

use super::writes::{Current, Stored, key_of};
use crate::mutation::Target;

/// Reads the stored values of `targets`, in read-only transactions of at
/// most `max_ops` operations each: an allocation as its record folded with
/// its client's statuses (its status key and its job's status batches, see
/// `caravan_state::read_alloc_values`), compared on its record's revision.
/// `job_of` names the job of an allocation where the caller knows it,
/// which saves a read of its record first.
pub(super) async fn read_current(
    store: &dyn Store,
    keyspace: &Keyspace,
    targets: &BTreeSet<Target>,
    job_of: &(dyn Fn(&str) -> Option<(String, String)> + Sync),
    max_ops: usize,
) -> Result<Vec<(Target, Current)>, StoreError> {
    let mut out = Vec::with_capacity(targets.len());
    let mut known = Vec::new();
    let mut unknown = Vec::new();
    for target in targets {
        if let Target::Alloc(id) = target {
            match job_of(id) {
                Some((ns, job)) => known.push((id.as_str(), ns, job)),
                None => unknown.push(id.as_str()),
            }
        }
    }
    let with_jobs: Vec<(&str, &str, &str)> = known
        .iter()
        .map(|(id, ns, job)| (*id, ns.as_str(), job.as_str()))
        .collect();
    let read = read_alloc_values_of_jobs(store, keyspace, &with_jobs, max_ops)
        .await
        .map_err(store_error)?;
    out.extend(
        with_jobs
            .iter()
            .map(|(id, _, _)| *id)
            .zip(read)
            .map(alloc_current),
    );
    let read = read_alloc_values(store, keyspace, &unknown, max_ops)
        .await
        .map_err(store_error)?;
    out.extend(unknown.iter().copied().zip(read).map(alloc_current));
    let others: Vec<&Target> = targets
        .iter()
        .filter(|t| !matches!(t, Target::Alloc(_)))
        .collect();
    for chunk in others.chunks(max_ops.max(1)) {
        let txn = chunk.iter().fold(Txn::new(), |txn, t| {
            txn.and_then(Op::get(key_of(keyspace, t)))
        });
        let res = store.txn(txn).await?;
        let read = res.results.into_iter().map(|result| match result {
            OpResult::Get(r) => r.kvs.into_iter().next(),
            _ => None,
        });
        for (target, kv) in chunk.iter().zip(read) {
            let current = kv.and_then(|kv| current_of(target, &kv));
            out.push(((*target).clone(), current));
        }
    }
    Ok(out)
}

/// What reading the allocations' values can fail with, as a store error.
fn store_error(e: StateError) -> StoreError {
    match e {
        StateError::Store(e) => e,
        other => StoreError::Unavailable(other.to_string()),
    }
}

/// The current value of allocation `id` as read; `None` if it does not
/// decode.
fn alloc_current((id, stored): (&str, Option<StoredAlloc>)) -> (Target, Current) {
    let current = stored.and_then(|s| {
        let rev = s.record.mod_revision;
        s.fold(AllocDetail::Full)
            .ok()
            .map(|a| (Stored::Alloc(Arc::new(a)), rev))
    });
    (Target::Alloc(id.to_owned()), current)
}

/// The current value `kv` holds for `target`, an object other than an
/// allocation; `None` if it does not decode.
fn current_of(target: &Target, kv: &KeyValue) -> Current {
    let rev = kv.mod_revision;
    match target {
        Target::Deployment(_) => decode::<Deployment>(kv)
            .ok()
            .map(|d| (Stored::Deployment(Arc::new(d)), rev)),
        Target::Eval(_) => Some((Stored::Eval, rev)),
        Target::Alloc(_) => None,
    }
}

//! Reading the current values of the objects a commit writes from the
//! store: the full values of the allocations it rewrites (the cache keeps
//! lean copies), and every object again after a conflict.

use std::collections::BTreeSet;
use std::sync::Arc;

use caravan_proto::Deployment;
use caravan_state::{AllocDetail, Keyspace, decode, fold};
use caravan_store::{KeyValue, Op, OpResult, Store, StoreError, Txn};

use super::writes::{Current, Stored, key_of};
use crate::mutation::Target;

/// Reads the stored values of `targets`, in read-only transactions of at
/// most `max_ops` gets each: an allocation as its record folded with its
/// client's status (two gets), compared on its record's revision.
pub(super) async fn read_current(
    store: &dyn Store,
    keyspace: &Keyspace,
    targets: &BTreeSet<Target>,
    max_ops: usize,
) -> Result<Vec<(Target, Current)>, StoreError> {
    let targets: Vec<&Target> = targets.iter().collect();
    let mut out = Vec::with_capacity(targets.len());
    for chunk in targets.chunks((max_ops / 2).max(1)) {
        let mut txn = Txn::new();
        for target in chunk {
            txn = txn.and_then(Op::get(key_of(keyspace, target)));
            if let Target::Alloc(id) = target {
                txn = txn.and_then(Op::get(keyspace.alloc_status(id)));
            }
        }
        let res = store.txn(txn).await?;
        let mut read = res.results.into_iter().map(|result| match result {
            OpResult::Get(r) => r.kvs.into_iter().next(),
            _ => None,
        });
        for target in chunk {
            let kv = read.next().flatten();
            let status = match target {
                Target::Alloc(_) => read.next().flatten(),
                _ => None,
            };
            let current = kv.and_then(|kv| current_of(target, &kv, status.as_ref()));
            out.push(((*target).clone(), current));
        }
    }
    Ok(out)
}

/// The current value `kv` (and, for an allocation, `status`) holds for
/// `target`; `None` if it does not decode.
fn current_of(target: &Target, kv: &KeyValue, status: Option<&KeyValue>) -> Current {
    let rev = kv.mod_revision;
    match target {
        Target::Alloc(_) => fold(kv, status, AllocDetail::Full)
            .ok()
            .map(|a| (Stored::Alloc(Arc::new(a)), rev)),
        Target::Deployment(_) => decode::<Deployment>(kv)
            .ok()
            .map(|d| (Stored::Deployment(Arc::new(d)), rev)),
        Target::Eval(_) => Some((Stored::Eval, rev)),
    }
}

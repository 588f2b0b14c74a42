//! Reading the current values of the objects a commit writes from the
//! store: the full values of the allocations it rewrites (the cache keeps
//! lean copies), and every object again after a conflict.

use std::collections::BTreeSet;
use std::sync::Arc;

use caravan_proto::{Allocation, Deployment};
use caravan_state::{Keyspace, decode};
use caravan_store::{KeyValue, Op, OpResult, Store, StoreError, Txn};

use super::writes::{Current, Stored, key_of};
use crate::mutation::Target;

/// Reads the stored values of `targets`, in read-only transactions of at
/// most `max_ops` gets each.
pub(super) async fn read_current(
    store: &dyn Store,
    keyspace: &Keyspace,
    targets: &BTreeSet<Target>,
    max_ops: usize,
) -> Result<Vec<(Target, Current)>, StoreError> {
    let targets: Vec<&Target> = targets.iter().collect();
    let mut out = Vec::with_capacity(targets.len());
    for chunk in targets.chunks(max_ops.max(1)) {
        let mut txn = Txn::new();
        for target in chunk {
            txn = txn.and_then(Op::get(key_of(keyspace, target)));
        }
        let res = store.txn(txn).await?;
        for (target, result) in chunk.iter().zip(res.results) {
            let kv = match result {
                OpResult::Get(r) => r.kvs.into_iter().next(),
                _ => None,
            };
            out.push(((*target).clone(), kv.and_then(|kv| current_of(target, &kv))));
        }
    }
    Ok(out)
}

/// The current value `kv` holds for `target`; `None` if it does not decode.
fn current_of(target: &Target, kv: &KeyValue) -> Current {
    let rev = kv.mod_revision;
    match target {
        Target::Alloc(_) => decode::<Allocation>(kv)
            .ok()
            .map(|a| (Stored::Alloc(Arc::new(a)), rev)),
        Target::Deployment(_) => decode::<Deployment>(kv)
            .ok()
            .map(|d| (Stored::Deployment(Arc::new(d)), rev)),
        Target::Eval(_) => Some((Stored::Eval, rev)),
    }
}

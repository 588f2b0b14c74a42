//! Elections on the embedded store, built from its own keys and leases the
//! way etcd's v3election builds them: a candidate owns `<name>/<lease hex>`,
//! and the key with the lowest create revision leads.

use std::sync::Arc;

use crate::error::{Result, StoreError};
use crate::types::{
    Compare, CompareOp, LeaderInfo, LeaderKey, LeaseId, Op, OpResult, Range, Revision, Txn,
};

use super::Shared;

/// The prefix every candidate key of election `name` lives under.
fn candidates(name: &[u8]) -> Vec<u8> {
    let mut prefix = name.to_vec();
    prefix.push(b'/');
    prefix
}

/// The key a candidate on `lease` owns in election `name`.
pub(super) fn candidate_key(name: &[u8], lease: LeaseId) -> Vec<u8> {
    let mut key = candidates(name);
    key.extend_from_slice(format!("{lease:x}").as_bytes());
    key
}

/// Deletes the candidate key if the campaign is abandoned before it wins, as
/// etcd's election server resigns a campaign whose caller went away.
struct AbandonGuard {
    shared: Arc<Shared>,
    key: Vec<u8>,
    create_revision: Revision,
    armed: bool,
}

impl Drop for AbandonGuard {
    fn drop(&mut self) {
        if self.armed {
            resign_key(&self.shared, &self.key, self.create_revision);
        }
    }
}

/// Campaigns until every candidate created before this one is gone.
pub(super) async fn campaign(
    shared: Arc<Shared>,
    name: &[u8],
    value: &[u8],
    lease: LeaseId,
) -> Result<LeaderKey> {
    let key = candidate_key(name, lease);
    let create_revision = shared.with_state(|state| -> Result<Revision> {
        let txn = Txn::new()
            .when(Compare::absent(key.clone()))
            .and_then(Op::put_with_lease(key.clone(), value.to_vec(), lease))
            .or_else(Op::get(key.clone()));
        let res = state.txn(&txn)?;
        let create_revision = if res.succeeded {
            res.revision
        } else {
            let existing = match res.results.first() {
                Some(OpResult::Get(range)) => range.kvs.first().cloned(),
                _ => None,
            };
            let existing = existing.ok_or_else(|| {
                StoreError::Internal("candidate key vanished inside a transaction".into())
            })?;
            if existing.value != value {
                // Re-campaigning with a new value proclaims it, keeping the
                // key (and so the place in line) and its lease.
                let proclaim = Txn::new()
                    .when(Compare::create_revision(
                        key.clone(),
                        CompareOp::Equal,
                        existing.create_revision,
                    ))
                    .and_then(Op::put_with_lease(
                        key.clone(),
                        value.to_vec(),
                        existing.lease,
                    ));
                state.txn(&proclaim)?;
            }
            existing.create_revision
        };
        Ok(create_revision)
    })?;
    let mut guard = AbandonGuard {
        shared: shared.clone(),
        key: key.clone(),
        create_revision,
        armed: true,
    };
    let mut revisions = shared.revisions.subscribe();
    let prefix = Range::prefix(candidates(name));
    loop {
        revisions.borrow_and_update();
        let waiting = shared.with_state(|state| {
            state
                .kv
                .live_keys(&prefix)
                .iter()
                .any(|kv| kv.create_revision < create_revision)
        });
        if !waiting {
            break;
        }
        if revisions.changed().await.is_err() {
            return Err(StoreError::Closed("store shut down".into()));
        }
    }
    guard.armed = false;
    Ok(LeaderKey {
        name: name.to_vec(),
        key,
        create_revision,
        lease,
    })
}

/// The candidate with the lowest create revision.
pub(super) fn leader(shared: &Shared, name: &[u8]) -> Option<LeaderInfo> {
    let candidates =
        shared.with_state(|state| state.kv.live_keys(&Range::prefix(candidates(name))));
    candidates
        .into_iter()
        .min_by_key(|kv| kv.create_revision)
        .map(|kv| LeaderInfo {
            key: kv.key,
            value: kv.value,
            create_revision: kv.create_revision,
            lease: kv.lease,
        })
}

/// Deletes the candidate key if it is still the one that campaigned.
pub(super) fn resign_key(shared: &Shared, key: &[u8], create_revision: Revision) {
    let txn = Txn::new()
        .when(Compare::create_revision(
            key.to_vec(),
            CompareOp::Equal,
            create_revision,
        ))
        .and_then(Op::delete(key.to_vec()));
    if let Err(err) = shared.with_state(|state| state.txn(&txn)) {
        tracing::warn!(%err, "resigning an election key failed");
    }
}

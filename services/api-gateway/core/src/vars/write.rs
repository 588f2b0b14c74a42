//! Writing a variable: validated and sealed once, then read, checked
//! (check-and-set, lock) and committed in one fenced transaction, retried
//! while other writers keep moving it.

use std::collections::BTreeMap;

use caravan_proto::{Variable, VariableDecrypted, VariableItems, VariableLock};
use caravan_state::encode;
use caravan_store::{Compare, CompareOp, Op, Range, Revision, Txn, TxnResult};
use prost::Message;

use super::{
    LockOp, VarWrite, VariableKey, absent_view, conflict_view, current_of, decode_var, decrypt,
    key_of, lock, metadata, rules,
};
use crate::error::{GatewayError, Result};
use crate::gateway::Gateway;

/// Writes `items` at `namespace`/`path`. With `cas`, only if the variable's
/// modify revision is `cas` (0: only if it does not exist); a lost
/// check-and-set answers the current variable. Without, it overwrites,
/// keeping the first write's create time.
pub async fn put(
    gw: &Gateway,
    namespace: &str,
    path: &str,
    items: BTreeMap<String, String>,
    cas: Option<Revision>,
    op: LockOp,
) -> Result<VarWrite> {
    let lock_only = validate(namespace, path, &items, cas, &op)?;
    let seal_key = key_of(gw)?;
    let sealed = seal(seal_key, namespace, path, &items)?;
    // Only into a namespace that exists; the write's compare on it keeps
    // one deleted meanwhile (its deletion checks for variables) from
    // getting a variable nobody can list.
    let object = format!("variable {path:?}");
    crate::namespaces::check_exists(gw, namespace, &object).await?;
    let conflict = || {
        GatewayError::Conflict(format!(
            "variable {namespace}/{path} kept changing under this write; try again"
        ))
    };
    let write = Put {
        gw,
        namespace,
        path,
        key: &gw.keys.var(namespace, path),
        items: &items,
        cas,
        op: &op,
        lock_only,
        object: &object,
        seal_key,
        sealed: &sealed,
    };
    crate::cas::retry(gw, conflict, move |_| write.attempt()).await
}

/// Checks a write's namespace, path, items and `cas`; answers whether it
/// only takes a lock (on a variable without items, whose items are kept).
fn validate(
    namespace: &str,
    path: &str,
    items: &BTreeMap<String, String>,
    cas: Option<Revision>,
    op: &LockOp,
) -> Result<bool> {
    rules::check_namespace(namespace)?;
    rules::check_path(path)?;
    let lock_only = matches!(op, LockOp::Acquire { .. }) && items.is_empty();
    if !lock_only {
        rules::check_items(items)?;
    }
    if cas.is_some_and(|c| c < 0) {
        return Err(GatewayError::field("cas", "must not be negative"));
    }
    Ok(lock_only)
}

/// `items` sealed for `namespace`/`path`.
fn seal(
    key: &VariableKey,
    namespace: &str,
    path: &str,
    items: &BTreeMap<String, String>,
) -> Result<Vec<u8>> {
    let plain = VariableItems {
        items: items.clone(),
    }
    .encode_to_vec();
    Ok(key.seal(namespace, path, &plain)?)
}

/// What the lock step decided.
enum LockStep {
    /// Write, with this lock on the variable.
    Write(Option<VariableLock>),
    /// Another holder's lock (or its delay) keeps an acquire out.
    KeptOut,
}

/// One write, validated and sealed: what each attempt copies.
#[derive(Clone, Copy)]
struct Put<'a> {
    gw: &'a Gateway,
    namespace: &'a str,
    path: &'a str,
    key: &'a Vec<u8>,
    items: &'a BTreeMap<String, String>,
    cas: Option<Revision>,
    op: &'a LockOp,
    lock_only: bool,
    object: &'a str,
    seal_key: &'a VariableKey,
    sealed: &'a Vec<u8>,
}

impl Put<'_> {
    /// Reads the variable, checks `cas` and the lock, and commits fenced on
    /// what was read: `None` when a concurrent writer moved it (try again).
    async fn attempt(self) -> Result<Option<VarWrite>> {
        // Read first only to keep the create time; the write below is
        // fenced on what was read, so a concurrent writer makes it retry
        // (or, with `cas`, lose) instead of being overwritten unseen.
        let found = self.gw.store.range(Range::key(self.key.clone())).await?;
        let existing = found
            .kvs
            .first()
            .map(|kv| decode_var(self.gw, kv))
            .transpose()?;
        if self.cas_lost(existing.as_ref()) {
            return self.lost(existing.as_ref(), found.revision).map(Some);
        }
        let now = caravan_model::now_unix_ns();
        let lock = match self.lock_step(existing.as_ref(), now)? {
            LockStep::Write(lock) => lock,
            LockStep::KeptOut => return Ok(Some(self.kept_out(found.revision))),
        };
        let (stored, items) = self.record(existing.as_ref(), lock, now)?;
        let result = self
            .gw
            .store
            .txn(self.txn(existing.as_ref(), &stored))
            .await?;
        if result.succeeded {
            return Ok(Some(written(stored, existing.as_ref(), items, &result)));
        }
        crate::namespaces::check_exists(self.gw, self.namespace, self.object).await?;
        if self.cas.is_some() {
            // The variable moved since the read that matched `cas`: lost.
            let current = current_of(self.gw, &result.results)?;
            return self.lost(current.as_ref(), result.revision).map(Some);
        }
        Ok(None)
    }

    /// Whether `cas` does not match the variable read.
    fn cas_lost(&self, existing: Option<&Variable>) -> bool {
        self.cas.is_some_and(|cas| match existing {
            None => cas != 0,
            Some(v) => v.modify_revision != cas,
        })
    }

    /// A lost check-and-set: the current variable as a conflict shows it.
    fn lost(&self, current: Option<&Variable>, revision: Revision) -> Result<VarWrite> {
        let view = match current {
            Some(v) => conflict_view(self.seal_key, v)?,
            None => absent_view(self.namespace, self.path),
        };
        Ok(VarWrite {
            applied: false,
            variable: Some(view),
            revision,
        })
    }

    /// An acquire another holder's lock keeps out: not applied.
    fn kept_out(&self, revision: Revision) -> VarWrite {
        VarWrite {
            applied: false,
            variable: Some(absent_view(self.namespace, self.path)),
            revision,
        }
    }

    /// The lock the written variable holds, refusing a write into another
    /// holder's lock and a release or renewal (which write no items).
    fn lock_step(&self, existing: Option<&Variable>, now: i64) -> Result<LockStep> {
        let held = existing.and_then(|v| v.lock.as_ref());
        Ok(match self.op {
            LockOp::Write { id } if lock::refuses(held, id.as_deref(), now) => {
                return Err(GatewayError::Conflict(
                    "attempting to modify locked variable".into(),
                ));
            }
            LockOp::Write { .. } => LockStep::Write(lock::shown(held, now)),
            LockOp::Acquire { .. } if lock::keeps_out(held, now) => LockStep::KeptOut,
            LockOp::Acquire { ttl_ns, delay_ns } => {
                LockStep::Write(Some(lock::new_lock(*ttl_ns, *delay_ns, now)?))
            }
            LockOp::Release { .. } | LockOp::Renew { .. } => {
                return Err(GatewayError::field(
                    "lock",
                    "a lock release or renewal does not write items",
                ));
            }
        })
    }

    /// The variable to store, and its items in clear: a lock-only write of
    /// an existing variable keeps its sealed items.
    fn record(
        &self,
        existing: Option<&Variable>,
        lock: Option<VariableLock>,
        now: i64,
    ) -> Result<(Variable, BTreeMap<String, String>)> {
        let (sealed_items, key_id, items) = match existing {
            Some(v) if self.lock_only => (
                v.sealed_items.clone(),
                v.key_id.clone(),
                decrypt(self.seal_key, v)?.items,
            ),
            _ => (
                self.sealed.clone(),
                self.seal_key.id().to_string(),
                self.items.clone(),
            ),
        };
        let stored = Variable {
            namespace: self.namespace.to_string(),
            path: self.path.to_string(),
            sealed_items,
            key_id,
            create_time: existing.map_or(now, |v| v.create_time),
            modify_time: now,
            create_revision: 0,
            modify_revision: 0,
            lock,
        };
        Ok((stored, items))
    }

    /// The write of `stored`, fenced on the version read (or its absence)
    /// and on the namespace still existing; reads the variable when fenced
    /// out.
    fn txn(&self, existing: Option<&Variable>, stored: &Variable) -> Txn {
        let key = self.key.clone();
        let guard = match existing {
            Some(v) => Compare::mod_revision(key.clone(), CompareOp::Equal, v.modify_revision),
            None => Compare::absent(key.clone()),
        };
        let mut txn = Txn::new()
            .when(guard)
            .and_then(Op::put(key.clone(), encode(stored)))
            .or_else(Op::get(key));
        if let Some(exists) = crate::namespaces::register_guard(self.gw, self.namespace) {
            txn = txn.when(exists);
        }
        txn
    }
}

/// The answer to a committed write: `stored` with the revisions it got.
fn written(
    mut stored: Variable,
    existing: Option<&Variable>,
    items: BTreeMap<String, String>,
    result: &TxnResult,
) -> VarWrite {
    stored.create_revision = existing.map_or(result.revision, |v| v.create_revision);
    stored.modify_revision = result.revision;
    VarWrite {
        applied: true,
        variable: Some(VariableDecrypted {
            meta: Some(metadata(&stored)),
            items,
        }),
        revision: result.revision,
    }
}

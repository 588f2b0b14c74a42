//! Nomad Variables: items sealed at rest under `vars/<ns>/<path>`, metadata
//! in clear so lists never decrypt, check-and-set writes fenced by the key's
//! mod revision in one transaction, and blocking reads that wait on a watch
//! of exactly the keys they read.
//!
//! Variables are not in the watch cache: every read goes to the store.
//! With ACLs on, the transports check Nomad's variable capabilities before
//! each operation; a lost check-and-set still shows the writer the current
//! items ([`may_read_conflict`] is where reading them would be checked).

pub mod lock;
pub mod rules;
pub mod seal;
mod write;

use std::collections::BTreeMap;
use std::sync::Arc;

use caravan_proto::{
    QueryMeta, Variable, VariableDecrypted, VariableItems, VariableLock, VariableMetadata,
};
use caravan_state::{Kind, StateKey, decode, encode};
use caravan_store::{Compare, CompareOp, KeyValue, Op, OpResult, Range, Revision};
use prost::Message;

use crate::error::{GatewayError, Result};
use crate::gateway::Gateway;
use crate::query::{ALL_NAMESPACES, Query};
use crate::uncached;

pub use lock::LockOp;
pub use seal::VariableKey;
pub use write::put;

/// The outcome of a check-and-set write or delete.
#[derive(Debug, Clone, PartialEq)]
pub struct VarWrite {
    /// Whether the write (or delete) happened; false when the check-and-set
    /// lost.
    pub applied: bool,
    /// The variable written, or the one that won the conflict (only its
    /// namespace and path when it does not exist); `None` after a delete.
    pub variable: Option<VariableDecrypted>,
    /// The revision of the write, or of the read that found the conflict.
    pub revision: Revision,
}

/// Whether the caller may see the items of a variable that beat its
/// check-and-set. Nomad shows them to readers of the path; without ACLs
/// every caller is one.
fn may_read_conflict(_namespace: &str, _path: &str) -> bool {
    true
}

fn key_of(gw: &Gateway) -> Result<&Arc<VariableKey>> {
    gw.variables_key.as_ref().ok_or_else(|| {
        GatewayError::Keyring(
            "variables are unavailable: this api-gateway has no variables key \
             (set variables_key or variables_key_file in its configuration)"
                .into(),
        )
    })
}

fn metadata(v: &Variable) -> VariableMetadata {
    VariableMetadata {
        namespace: v.namespace.clone(),
        path: v.path.clone(),
        create_revision: v.create_revision,
        modify_revision: v.modify_revision,
        create_time: v.create_time,
        modify_time: v.modify_time,
        lock: lock::shown(v.lock.as_ref(), caravan_model::now_unix_ns()),
    }
}

/// Decodes a stored variable; the namespace and path come from the key, so a
/// value copied under another key is not taken for that key's variable.
fn decode_var(gw: &Gateway, kv: &KeyValue) -> Result<Variable> {
    let mut v: Variable = decode(kv)?;
    if let StateKey::Var { namespace, path } = gw.keys.parse(&kv.key)? {
        v.namespace = namespace;
        v.path = path;
    }
    Ok(v)
}

/// Opens a stored variable's items.
fn decrypt(key: &VariableKey, v: &Variable) -> Result<VariableDecrypted> {
    let plain = key.open(&v.namespace, &v.path, &v.key_id, &v.sealed_items)?;
    let items = VariableItems::decode(plain.as_slice()).map_err(|e| {
        GatewayError::Keyring(format!(
            "variable {}/{}: decrypted items do not decode: {e}",
            v.namespace, v.path
        ))
    })?;
    Ok(VariableDecrypted {
        meta: Some(metadata(v)),
        items: items.items,
    })
}

/// What a conflict shows of `current`: all of it to a reader, else its
/// metadata.
fn conflict_view(key: &VariableKey, current: &Variable) -> Result<VariableDecrypted> {
    if may_read_conflict(&current.namespace, &current.path) {
        decrypt(key, current)
    } else {
        Ok(VariableDecrypted {
            meta: Some(metadata(current)),
            items: BTreeMap::new(),
        })
    }
}

/// The conflict when the variable does not exist: its namespace and path.
fn absent_view(namespace: &str, path: &str) -> VariableDecrypted {
    VariableDecrypted {
        meta: Some(VariableMetadata {
            namespace: namespace.to_string(),
            path: path.to_string(),
            ..Default::default()
        }),
        items: BTreeMap::new(),
    }
}

/// The namespace a read targets: a single one.
fn read_namespace(q: &Query) -> Result<&str> {
    rules::check_namespace(&q.namespace)?;
    Ok(&q.namespace)
}

fn meta(gw: &Gateway, revision: Revision) -> QueryMeta {
    QueryMeta {
        revision,
        known_leader: gw.leader_contact().known,
    }
}

/// The metadata of the variables `q` selects: one namespace or every one
/// (`*`), paths starting with `q.prefix`, sorted by namespace and path.
/// Nothing is decrypted.
pub async fn list(gw: &Gateway, q: &Query) -> Result<(Vec<VariableMetadata>, QueryMeta)> {
    let all = q.namespace == ALL_NAMESPACES;
    if !all {
        rules::check_namespace(&q.namespace)?;
    }
    let prefix = if all {
        gw.keys.prefix_of(Kind::Vars)
    } else {
        gw.keys.vars_in(&q.namespace, &q.prefix)
    };
    let selects = |key: &[u8]| match gw.keys.parse(key) {
        Ok(StateKey::Var { path, .. }) => path.starts_with(&q.prefix),
        _ => false,
    };
    uncached::wait_for_change(gw, &prefix, q, selects).await;
    let (kvs, revision) = uncached::range_all(gw, &prefix).await?;
    let mut out = Vec::new();
    for kv in kvs.iter().filter(|kv| selects(&kv.key)) {
        out.push(metadata(&decode_var(gw, kv)?));
    }
    out.sort_by(|a, b| (&a.namespace, &a.path).cmp(&(&b.namespace, &b.path)));
    Ok((out, meta(gw, revision)))
}

/// The variable at `path` in `q.namespace`, decrypted; NOT_FOUND when there
/// is none.
pub async fn get(gw: &Gateway, path: &str, q: &Query) -> Result<(VariableDecrypted, QueryMeta)> {
    let namespace = read_namespace(q)?;
    rules::check_lookup_path(path)?;
    let key = gw.keys.var(namespace, path);
    uncached::wait_for_change(gw, &key, q, |k| k == key.as_slice()).await;
    let found = gw.store.range(Range::key(key.clone())).await?;
    let kv = found
        .kvs
        .first()
        .ok_or_else(|| GatewayError::NotFound("variable not found".into()))?;
    let var = decrypt(key_of(gw)?, &decode_var(gw, kv)?)?;
    Ok((var, meta(gw, found.revision)))
}

/// The variable an `or_else(get)` branch read, if any.
fn current_of(gw: &Gateway, responses: &[OpResult]) -> Result<Option<Variable>> {
    match responses.first() {
        Some(OpResult::Get(range)) => range.kvs.first().map(|kv| decode_var(gw, kv)).transpose(),
        _ => Ok(None),
    }
}

/// Deletes `namespace`/`path`; deleting what does not exist succeeds. With
/// `cas`, only if the variable's modify revision is `cas` (0: only if it
/// does not exist, which deletes nothing), in one transaction.
pub async fn delete(
    gw: &Gateway,
    namespace: &str,
    path: &str,
    cas: Option<Revision>,
    lock_id: Option<&str>,
) -> Result<VarWrite> {
    rules::check_namespace(namespace)?;
    rules::check_lookup_path(path)?;
    let key = gw.keys.var(namespace, path);
    let mut txn = caravan_store::Txn::new();
    // A variable locked by someone else is not deleted; the delete is
    // fenced on the version whose lock was checked.
    let found = gw.store.range(Range::key(key.clone())).await?;
    if let Some(current) = found.kvs.first().map(|kv| decode_var(gw, kv)).transpose()? {
        if lock::refuses(current.lock.as_ref(), lock_id, caravan_model::now_unix_ns()) {
            return Err(GatewayError::Conflict(
                "attempting to modify locked variable".into(),
            ));
        }
        if current.lock.is_some() && cas.is_none() {
            txn = txn.when(Compare::mod_revision(
                key.clone(),
                CompareOp::Equal,
                current.modify_revision,
            ));
        }
    }
    match cas {
        None => {}
        Some(c) if c < 0 => return Err(GatewayError::field("cas", "must not be negative")),
        Some(0) => txn = txn.when(Compare::absent(key.clone())),
        Some(c) => txn = txn.when(Compare::mod_revision(key.clone(), CompareOp::Equal, c)),
    }
    let result = gw
        .store
        .txn(
            txn.and_then(Op::delete(key.clone()))
                .or_else(Op::get(key.clone())),
        )
        .await?;
    if result.succeeded {
        return Ok(VarWrite {
            applied: true,
            variable: None,
            revision: result.revision,
        });
    }
    let view = match current_of(gw, &result.results)? {
        Some(v) => conflict_view(key_of(gw)?, &v)?,
        None => absent_view(namespace, path),
    };
    Ok(VarWrite {
        applied: false,
        variable: Some(view),
        revision: result.revision,
    })
}

/// Releases or renews the lock of `namespace`/`path` for its holder `id`;
/// the variable's items are kept. Answers the variable's metadata.
pub async fn update_lock(
    gw: &Gateway,
    namespace: &str,
    path: &str,
    op: &LockOp,
) -> Result<(VariableMetadata, Revision)> {
    rules::check_namespace(namespace)?;
    rules::check_lookup_path(path)?;
    let key = &gw.keys.var(namespace, path);
    let conflict = || {
        GatewayError::Conflict(format!(
            "variable {namespace}/{path} kept changing under this lock update; try again"
        ))
    };
    crate::cas::retry(gw, conflict, move |_| async move {
        let found = gw.store.range(Range::key(key.clone())).await?;
        let Some(mut current) = found.kvs.first().map(|kv| decode_var(gw, kv)).transpose()? else {
            return Err(GatewayError::NotFound("variable doesn't exist".into()));
        };
        let now = caravan_model::now_unix_ns();
        let held = current
            .lock
            .as_ref()
            .filter(|_| lock::keeps_out(current.lock.as_ref(), now));
        let Some(held) = held.cloned() else {
            return Err(GatewayError::Conflict(
                "variable doesn't hold a lock".into(),
            ));
        };
        let lock: Option<VariableLock> = match op {
            LockOp::Release { id } if *id == held.id => None,
            LockOp::Renew { id } if lock::held_by(Some(&held), id, now) => Some(VariableLock {
                expires_unix_ns: now.saturating_add(held.ttl_ns),
                ..held
            }),
            LockOp::Release { .. } | LockOp::Renew { .. } => {
                return Err(GatewayError::Conflict(
                    "attempting to modify locked variable".into(),
                ));
            }
            LockOp::Write { .. } | LockOp::Acquire { .. } => {
                return Err(GatewayError::field("lock", "not a lock release or renewal"));
            }
        };
        let previous = current.modify_revision;
        current.lock = lock;
        current.modify_time = now;
        let mut stored = current.clone();
        stored.create_revision = 0;
        stored.modify_revision = 0;
        let result = gw
            .store
            .txn(
                caravan_store::Txn::new()
                    .when(Compare::mod_revision(
                        key.clone(),
                        CompareOp::Equal,
                        previous,
                    ))
                    .and_then(Op::put(key.clone(), encode(&stored))),
            )
            .await?;
        if result.succeeded {
            current.modify_revision = result.revision;
            return Ok(Some((metadata(&current), result.revision)));
        }
        Ok(None)
    })
    .await
}

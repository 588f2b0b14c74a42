//! Namespaces as objects: the built-in `default` (always there, never
//! deleted, its description rewritable) and the namespaces written under
//! `namespaces/<name>`. A job is registered only in a namespace that exists:
//! the registration's transaction compares the namespace's key, so a
//! namespace deleted meanwhile fails it ([`register_guard`]). Variables are
//! written the same way (Nomad, by a known bug, writes them anywhere).

use caravan_model::AllocExt;
use caravan_proto::{JobStatus, Namespace};
use caravan_state::{Kind, StateKey, decode, encode};
use caravan_store::{Compare, CompareOp, Op, Range, Revision, Txn};

use crate::error::{GatewayError, Result};
use crate::gateway::Gateway;
use crate::query::DEFAULT_NAMESPACE;

/// The built-in namespace's description until one is written.
pub const DEFAULT_DESCRIPTION: &str = "Default shared namespace";

/// Longest description accepted.
const MAX_DESCRIPTION: usize = 256;

/// Whether `name` is a valid namespace name: 1 to 128 of `[a-zA-Z0-9-]`.
pub fn valid_name(name: &str) -> bool {
    (1..=128).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// Checks a namespace as written: its name and description.
pub fn validate(ns: &Namespace) -> Result<()> {
    if !valid_name(&ns.name) {
        return Err(GatewayError::field(
            "Name",
            format!(
                "Invalid namespace {:?}: invalid name {:?}. Must match regex ^[a-zA-Z0-9-]{{1,128}}$",
                ns.name, ns.name
            ),
        ));
    }
    if ns.description.len() > MAX_DESCRIPTION {
        return Err(GatewayError::field(
            "Description",
            format!(
                "Invalid namespace {:?}: description longer than {MAX_DESCRIPTION}",
                ns.name
            ),
        ));
    }
    Ok(())
}

/// The built-in namespace as it reads before anything is written to it.
fn builtin_default() -> Namespace {
    Namespace {
        name: DEFAULT_NAMESPACE.into(),
        description: DEFAULT_DESCRIPTION.into(),
        create_revision: 1,
        modify_revision: 1,
        ..Default::default()
    }
}

/// Every namespace whose name starts with `prefix`, sorted by name, and the
/// store revision read at.
pub async fn list(gw: &Gateway, prefix: &str) -> Result<(Vec<Namespace>, Revision)> {
    let res = gw
        .store
        .range(Range::prefix(gw.keys.prefix_of(Kind::Namespaces)))
        .await?;
    let mut out: Vec<Namespace> = Vec::with_capacity(res.kvs.len() + 1);
    for kv in &res.kvs {
        let mut ns: Namespace = decode(kv)?;
        if let StateKey::Namespace(name) = gw.keys.parse(&kv.key)? {
            ns.name = name;
        }
        out.push(ns);
    }
    if !out.iter().any(|ns| ns.name == DEFAULT_NAMESPACE) {
        out.push(builtin_default());
    }
    out.retain(|ns| ns.name.starts_with(prefix));
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok((out, res.revision))
}

/// The namespace called `name`, if it exists.
pub async fn get(gw: &Gateway, name: &str) -> Result<Option<Namespace>> {
    let stored: Option<Namespace> = gw.read(&gw.keys.namespace(name)).await?;
    Ok(match stored {
        Some(mut ns) => {
            ns.name = name.to_string();
            Some(ns)
        }
        None if name == DEFAULT_NAMESPACE => Some(builtin_default()),
        None => None,
    })
}

/// Creates or updates a namespace; returns the revision of the write.
pub async fn upsert(gw: &Gateway, mut ns: Namespace) -> Result<Revision> {
    validate(&ns)?;
    ns.create_revision = 0;
    ns.modify_revision = 0;
    let res = gw
        .store
        .txn(Txn::new().and_then(Op::put(gw.keys.namespace(&ns.name), encode(&ns))))
        .await?;
    gw.settle(res.revision).await;
    tracing::info!(namespace = %ns.name, revision = res.revision, "namespace written");
    Ok(res.revision)
}

/// Deletes a namespace, refused (as Nomad refuses it) for `default` and for
/// a namespace that still has non-terminal jobs or allocations, or
/// variables. Deleting a namespace that does not exist succeeds.
pub async fn delete(gw: &Gateway, name: &str) -> Result<Revision> {
    if name == DEFAULT_NAMESPACE {
        return Err(GatewayError::FailedPrecondition(
            "can not delete default namespace".into(),
        ));
    }
    let key = gw.keys.namespace(name);
    let Some(kv) = gw.store.get(&key).await? else {
        return Ok(gw.cache.revision());
    };
    let region = &gw.config.region;
    let snap = gw.cache.snapshot();
    let mut problems = Vec::new();
    if snap
        .jobs_in(name)
        .any(|job| job.status() != JobStatus::Dead)
    {
        problems.push(format!(
            "namespace {name:?} has non-terminal jobs in regions: [{region}]"
        ));
    }
    if snap
        .allocs()
        .any(|alloc| alloc.namespace == name && !alloc.is_terminal())
    {
        problems.push(format!(
            "namespace {name:?} has non-terminal allocations in regions: [{region}]"
        ));
    }
    let vars = gw
        .store
        .range(Range::prefix(gw.keys.vars_in(name, "")).with_limit(1))
        .await?;
    if !vars.kvs.is_empty() {
        problems.push(format!(
            "namespace {name:?} has variables associated with it in regions: [{region}]"
        ));
    }
    if !problems.is_empty() {
        return Err(GatewayError::FailedPrecondition(multi_error(&problems)));
    }
    // Compared on the key as read, so a namespace rewritten meanwhile is
    // looked at again rather than deleted blind.
    let revision = gw
        .delete_unchanged(key, kv.mod_revision, &format!("namespace {name:?}"))
        .await?;
    tracing::info!(namespace = %name, revision, "namespace deleted");
    Ok(revision)
}

/// Nomad's multierror text for one or more problems.
fn multi_error(problems: &[String]) -> String {
    if let [one] = problems {
        return one.clone();
    }
    format!(
        "{} errors occurred:\n{}",
        problems.len(),
        problems
            .iter()
            .map(|p| format!("\t* {p}"))
            .collect::<Vec<_>>()
            .join("\n")
    )
}

/// The compare a write into `namespace` carries: the namespace exists
/// (nothing for `default`, which always does).
pub fn register_guard(gw: &Gateway, namespace: &str) -> Option<Compare> {
    (namespace != DEFAULT_NAMESPACE)
        .then(|| Compare::create_revision(gw.keys.namespace(namespace), CompareOp::Greater, 0))
}

/// Before a write into `namespace`, or after one guarded by
/// [`register_guard`] failed: the error to answer when the namespace does
/// not exist, naming the `object` written (`job "web"`).
pub async fn check_exists(gw: &Gateway, namespace: &str, object: &str) -> Result<()> {
    if namespace == DEFAULT_NAMESPACE
        || gw.store.get(&gw.keys.namespace(namespace)).await?.is_some()
    {
        return Ok(());
    }
    Err(GatewayError::FailedPrecondition(format!(
        "{object} is in nonexistent namespace {namespace:?}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_nomads_rule() {
        assert!(valid_name("prod-1"));
        assert!(valid_name(&"a".repeat(128)));
        assert!(!valid_name(""));
        assert!(!valid_name(&"a".repeat(129)));
        assert!(!valid_name("a_b"));
        assert!(!valid_name("a/b"));
        let err = validate(&Namespace {
            name: "bad name".into(),
            ..Default::default()
        })
        .unwrap_err();
        assert!(
            err.to_string().contains("invalid name \"bad name\""),
            "{err}"
        );
        let err = validate(&Namespace {
            name: "ok".into(),
            description: "x".repeat(257),
            ..Default::default()
        })
        .unwrap_err();
        assert!(
            err.to_string().contains("description longer than 256"),
            "{err}"
        );
    }

    #[test]
    fn several_problems_read_as_nomads_multierror() {
        assert_eq!(multi_error(&["a".into()]), "a");
        assert_eq!(
            multi_error(&["a".into(), "b".into()]),
            "2 errors occurred:\n\t* a\n\t* b"
        );
    }
}

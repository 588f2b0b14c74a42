//! Node pools as objects: the built-in `default` and `all`, the pools
//! written under `node_pools/<name>`, and the pools client nodes register
//! into without one being written first (a node's registration creates its
//! pool, as Nomad's does; such a pool reads with no description until one
//! is written).

use std::collections::BTreeMap;

use caravan_proto::{JobStatus, NodePool};
use caravan_state::{Kind, StateKey, decode, encode};
use caravan_store::{Op, Range, Revision, Txn};

use crate::error::{GatewayError, Result};
use crate::gateway::Gateway;

/// The pool every node is in.
pub const ALL: &str = "all";
/// The pool of nodes and jobs that name none.
pub const DEFAULT: &str = "default";

/// Longest description accepted.
const MAX_DESCRIPTION: usize = 256;

fn builtin(name: &str) -> Option<NodePool> {
    let description = match name {
        ALL => "Node pool with all nodes in the cluster.",
        DEFAULT => "Default node pool.",
        _ => return None,
    };
    Some(NodePool {
        name: name.into(),
        description: description.into(),
        create_revision: 1,
        modify_revision: 1,
        ..Default::default()
    })
}

/// Whether `name` is a valid pool name: 1 to 128 of `[a-zA-Z0-9-_]`.
pub fn valid_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Checks a pool as written: its name, description, and that it is not a
/// built-in one.
pub fn validate(pool: &NodePool) -> Result<()> {
    let invalid = |field: &str, why: String| {
        GatewayError::field(field, format!("invalid node pool {:?}: {why}", pool.name))
    };
    if !valid_name(&pool.name) {
        return Err(invalid(
            "Name",
            format!(
                "invalid name {:?}, must match regex ^[a-zA-Z0-9-_]{{1,128}}$",
                pool.name
            ),
        ));
    }
    if pool.description.len() > MAX_DESCRIPTION {
        return Err(invalid(
            "Description",
            format!("description longer than {MAX_DESCRIPTION}"),
        ));
    }
    if builtin(&pool.name).is_some() {
        return Err(GatewayError::field(
            "Name",
            format!("modifying node pool {:?} is not allowed", pool.name),
        ));
    }
    Ok(())
}

/// Every pool whose name starts with `prefix`, sorted by name, and the
/// store revision read at.
pub async fn list(gw: &Gateway, prefix: &str) -> Result<(Vec<NodePool>, Revision)> {
    let res = gw
        .store
        .range(Range::prefix(gw.keys.prefix_of(Kind::NodePools)))
        .await?;
    let mut pools: BTreeMap<String, NodePool> = BTreeMap::new();
    for name in [ALL, DEFAULT] {
        if let Some(pool) = builtin(name) {
            pools.insert(name.into(), pool);
        }
    }
    let snap = gw.cache.snapshot();
    for node in snap.nodes() {
        pools
            .entry(node.node_pool.clone())
            .or_insert_with(|| NodePool {
                name: node.node_pool.clone(),
                create_revision: node.create_revision,
                modify_revision: node.create_revision,
                ..Default::default()
            });
    }
    for kv in &res.kvs {
        let mut pool: NodePool = decode(kv)?;
        if let StateKey::NodePool(name) = gw.keys.parse(&kv.key)? {
            pool.name = name;
        }
        pools.insert(pool.name.clone(), pool);
    }
    let out = pools
        .into_values()
        .filter(|p| !p.name.is_empty() && p.name.starts_with(prefix))
        .collect();
    Ok((out, res.revision))
}

/// The pool called `name`, if it exists.
pub async fn get(gw: &Gateway, name: &str) -> Result<Option<NodePool>> {
    if let Some(pool) = builtin(name) {
        return Ok(Some(pool));
    }
    let stored: Option<NodePool> = gw.read(&gw.keys.node_pool(name)).await?;
    if let Some(mut pool) = stored {
        pool.name = name.to_string();
        return Ok(Some(pool));
    }
    Ok(gw
        .cache
        .snapshot()
        .nodes()
        .find(|n| n.node_pool == name)
        .map(|n| NodePool {
            name: name.to_string(),
            create_revision: n.create_revision,
            modify_revision: n.create_revision,
            ..Default::default()
        }))
}

/// Creates or updates a pool; returns the revision of the write.
pub async fn upsert(gw: &Gateway, mut pool: NodePool) -> Result<Revision> {
    validate(&pool)?;
    pool.create_revision = 0;
    pool.modify_revision = 0;
    let res = gw
        .store
        .txn(Txn::new().and_then(Op::put(gw.keys.node_pool(&pool.name), encode(&pool))))
        .await?;
    gw.settle(res.revision).await;
    tracing::info!(pool = %pool.name, revision = res.revision, "node pool written");
    Ok(res.revision)
}

/// Deletes a pool, refused (as Nomad refuses it) for a built-in one, one
/// that does not exist, and one that still has nodes or non-terminal jobs.
pub async fn delete(gw: &Gateway, name: &str) -> Result<Revision> {
    if builtin(name).is_some() {
        return Err(GatewayError::FailedPrecondition(format!(
            "deleting node pool {name:?} is not allowed"
        )));
    }
    let key = gw.keys.node_pool(name);
    let region = &gw.config.region;
    let snap = gw.cache.snapshot();
    let mut problems = Vec::new();
    if snap
        .jobs()
        .any(|job| job.node_pool == name && job.status() != JobStatus::Dead)
    {
        problems.push(format!(
            "node pool {name:?} has non-terminal jobs in regions: [{region}]"
        ));
    }
    if snap.nodes().any(|node| node.node_pool == name) {
        problems.push(format!(
            "node pool {name:?} has nodes in regions: [{region}]"
        ));
    }
    if !problems.is_empty() {
        return Err(GatewayError::FailedPrecondition(problems.join("\n")));
    }
    let Some(kv) = gw.store.get(&key).await? else {
        return Err(GatewayError::NotFound(format!(
            "node pool {name} not found"
        )));
    };
    let revision = gw
        .delete_unchanged(key, kv.mod_revision, &format!("node pool {name:?}"))
        .await?;
    tracing::info!(pool = %name, revision, "node pool deleted");
    Ok(revision)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_nomads_rule_and_builtins_are_read_only() {
        assert!(valid_name("gpu_a-1"));
        assert!(!valid_name(""));
        assert!(!valid_name("a b"));
        for name in [ALL, DEFAULT] {
            let err = validate(&NodePool {
                name: name.into(),
                ..Default::default()
            })
            .unwrap_err();
            assert!(
                err.to_string()
                    .contains(&format!("modifying node pool {name:?} is not allowed")),
                "{err}"
            );
        }
        let err = validate(&NodePool {
            name: "gpu".into(),
            description: "x".repeat(257),
            ..Default::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("description longer than 256"));
    }
}

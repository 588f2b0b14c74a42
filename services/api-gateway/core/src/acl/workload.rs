//! Workload identity tokens as ACL callers: a presented token shaped like a
//! JWT is verified against the identity keyring (key by `kid`, signature,
//! `nbf`/`exp`, audience), then its allocation is looked up: a missing or
//! terminal allocation (stopped by the servers or finished on its client)
//! makes the token worthless. What a valid one may do is the workload's
//! implicit policy ([`Acl::workload`]).

use std::sync::Arc;

use caravan_model::AllocExt;
use caravan_proto::Allocation;

use super::check::{Acl, WorkloadClaim};
use super::store::{AclCache, Caller, ResolveError};
use crate::gateway::Gateway;

/// The answer to a token whose allocation is gone or stopped.
pub const STOPPED: &str = "workload identity token is expired or its allocation is stopped";

/// Whether `secret` is shaped like a JWT: three non-empty dot-separated
/// parts (an ACL token's secret is a UUID, which has none).
pub fn is_jwt(secret: &str) -> bool {
    let parts: Vec<&str> = secret.split('.').collect();
    parts.len() == 3 && parts.iter().all(|p| !p.is_empty())
}

/// Resolves a request's secret: a workload identity when it is a JWT, else
/// an ACL token (none: anonymous) from `cache`.
pub async fn resolve(
    gw: &Gateway,
    cache: &AclCache,
    secret: Option<&str>,
) -> Result<Caller, ResolveError> {
    match secret {
        Some(token) if is_jwt(token) => resolve_workload(gw, token).await,
        _ => cache.resolve(secret),
    }
}

/// The allocation `id`: from the cache, else (a token used right after
/// its task started, through a gateway whose cache lags the one that
/// placed it) from the store.
async fn alloc_of(gw: &Gateway, id: &str) -> Result<Option<Arc<Allocation>>, ResolveError> {
    if let Some(alloc) = gw.cache.snapshot().alloc(id) {
        return Ok(Some(Arc::clone(alloc)));
    }
    let unavailable = |e: String| ResolveError::Unavailable(format!("reading the allocation: {e}"));
    gw.read_alloc(id)
        .await
        .map(|a| a.map(Arc::new))
        .map_err(|e| unavailable(e.to_string()))
}

async fn resolve_workload(gw: &Gateway, token: &str) -> Result<Caller, ResolveError> {
    let keyring = crate::identity::keyring(gw)
        .await
        .map_err(|e| ResolveError::Unavailable(e.to_string()))?;
    let claims = keyring
        .verify(token)
        .map_err(|e| ResolveError::Workload(e.to_string()))?;
    let alloc = alloc_of(gw, &claims.nomad_allocation_id)
        .await?
        .ok_or_else(|| ResolveError::Workload(STOPPED.into()))?;
    if alloc.is_terminal() {
        return Err(ResolveError::Workload(STOPPED.into()));
    }
    if alloc.namespace != claims.nomad_namespace || alloc.job_id != claims.nomad_job_id {
        return Err(ResolveError::Workload(
            "invalid workload identity token: its claims do not match its allocation".into(),
        ));
    }
    let claim = WorkloadClaim {
        namespace: claims.nomad_namespace,
        job: claims.nomad_job_id,
        group: alloc.task_group.clone(),
        task: claims.nomad_task,
    };
    Ok(Caller {
        token: None,
        secret: Some(token.to_string()),
        acl: Arc::new(Acl::workload(claim, [])),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_three_part_tokens_are_taken_for_jwts() {
        assert!(is_jwt("a.b.c"));
        assert!(!is_jwt("8f2b1a9e-0000-4000-8000-000000000000"));
        assert!(!is_jwt("a.b"));
        assert!(!is_jwt("a..c"));
        assert!(!is_jwt("a.b.c.d"));
    }
}

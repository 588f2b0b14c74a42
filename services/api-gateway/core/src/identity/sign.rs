//! Signing a task's identities for the node that runs it: the node proves
//! itself with its secret, and only for an allocation placed on it that the
//! servers have not stopped, a task of its job and identities that task
//! declares (or the default one every task has).

use caravan_model::AllocExt;
use caravan_proto::{Allocation, Job, Task, WorkloadIdentity};
use caravan_state::decode;
use caravan_store::Range;

use super::claims::{DEFAULT_AUDIENCE, DEFAULT_IDENTITY, IdentityClaims};
use crate::error::{GatewayError, Result};
use crate::gateway::Gateway;

/// Most identities asked for in one call.
const MAX_NAMES: usize = 64;

/// One signed identity: its name and the JWT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    /// The identity's name (`default`, or a task's `identity "<name>"`).
    pub name: String,
    /// The token.
    pub jwt: String,
}

/// The identity `name` of `task`: declared in its job, or the default one.
pub fn identity_of(task: &Task, name: &str) -> Option<WorkloadIdentity> {
    if let Some(declared) = task.identities.iter().find(|i| i.name == name) {
        return Some(declared.clone());
    }
    (name == DEFAULT_IDENTITY).then(|| WorkloadIdentity {
        name: DEFAULT_IDENTITY.into(),
        audience: vec![DEFAULT_AUDIENCE.into()],
        ..WorkloadIdentity::default()
    })
}

/// The claims of `identity` of `task` in `alloc`, issued at `now_secs`.
pub fn claims_for(
    region: &str,
    alloc: &Allocation,
    task: &str,
    identity: &WorkloadIdentity,
    now_secs: i64,
) -> IdentityClaims {
    let exp =
        (identity.ttl_ns > 0).then(|| now_secs + (identity.ttl_ns + 999_999_999) / 1_000_000_000);
    IdentityClaims {
        nomad_namespace: alloc.namespace.clone(),
        nomad_job_id: alloc.job_id.clone(),
        nomad_allocation_id: alloc.id.clone(),
        nomad_task: task.to_string(),
        iss: String::new(),
        sub: [
            region,
            &alloc.namespace,
            &alloc.job_id,
            &alloc.task_group,
            task,
            &identity.name,
        ]
        .join(":"),
        aud: identity.audience.clone(),
        iat: now_secs,
        nbf: now_secs,
        exp,
        jti: uuid::Uuid::new_v4().to_string(),
    }
}

async fn stored_alloc(gw: &Gateway, alloc_id: &str) -> Result<Allocation> {
    gw.read_alloc(alloc_id)
        .await?
        .ok_or_else(|| GatewayError::NotFound(format!("alloc not found: {alloc_id}")))
}

async fn job_of(gw: &Gateway, alloc: &Allocation) -> Result<Job> {
    let cached = gw
        .cache
        .snapshot()
        .job_version(&alloc.namespace, &alloc.job_id, alloc.job_version)
        .map(|j| j.as_ref().clone());
    if let Some(job) = cached {
        return Ok(job);
    }
    let key = gw
        .keys
        .job_version(&alloc.namespace, &alloc.job_id, alloc.job_version);
    let listed = gw.store.range(Range::key(key)).await?;
    let kv = listed.kvs.first().ok_or_else(|| {
        GatewayError::NotFound(format!(
            "job {} version {} of alloc {} not found",
            alloc.job_id, alloc.job_version, alloc.id
        ))
    })?;
    Ok(decode(kv)?)
}

/// Signs the identities `names` (none: the default one) of `task` in the
/// allocation `alloc_id`, for the node `node_id` (already authenticated).
pub async fn sign_identities(
    gw: &Gateway,
    node_id: &str,
    alloc_id: &str,
    task: &str,
    names: &[String],
) -> Result<Vec<Signed>> {
    if alloc_id.is_empty() {
        return Err(GatewayError::field("alloc_id", "missing alloc id"));
    }
    if task.is_empty() {
        return Err(GatewayError::field("task", "missing task name"));
    }
    if names.len() > MAX_NAMES {
        return Err(GatewayError::field(
            "identities",
            format!("more than {MAX_NAMES} identities"),
        ));
    }
    let alloc = stored_alloc(gw, alloc_id).await?;
    if alloc.node_id != node_id {
        return Err(GatewayError::PermissionDenied(format!(
            "alloc {alloc_id} is not placed on node {node_id}"
        )));
    }
    if alloc.is_server_terminal() {
        return Err(GatewayError::PermissionDenied(format!(
            "alloc {alloc_id} is stopped: its identities are no longer issued"
        )));
    }
    let job = job_of(gw, &alloc).await?;
    let spec = job
        .task_groups
        .iter()
        .find(|g| g.name == alloc.task_group)
        .and_then(|g| g.tasks.iter().find(|t| t.name == task))
        .ok_or_else(|| {
            GatewayError::field(
                "task",
                format!("alloc {alloc_id} has no task {task:?} in its job"),
            )
        })?;
    let default = [DEFAULT_IDENTITY.to_string()];
    let names = if names.is_empty() {
        &default[..]
    } else {
        names
    };
    let keyring = super::keyring(gw).await?;
    let now = caravan_model::now_unix_ns() / 1_000_000_000;
    names
        .iter()
        .map(|name| {
            let identity = identity_of(spec, name).ok_or_else(|| {
                GatewayError::field(
                    "identities",
                    format!("task {task:?} has no identity {name:?}"),
                )
            })?;
            let mut claims = claims_for(&gw.config.region, &alloc, task, &identity, now);
            claims.iss = gw.config.oidc_issuer.clone();
            Ok(Signed {
                name: name.clone(),
                jwt: keyring.sign(&claims)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_task_has_the_default_identity_and_its_declared_ones() {
        let mut task = Task {
            name: "t".into(),
            ..Task::default()
        };
        let default = identity_of(&task, "default").unwrap();
        assert_eq!(default.audience, vec![DEFAULT_AUDIENCE.to_string()]);
        assert!(identity_of(&task, "vault").is_none());
        task.identities.push(WorkloadIdentity {
            name: "vault".into(),
            audience: vec!["vault.io".into()],
            ttl_ns: 1_500_000_000,
            ..WorkloadIdentity::default()
        });
        let vault = identity_of(&task, "vault").unwrap();
        let alloc = Allocation {
            id: "a1".into(),
            namespace: "ns".into(),
            job_id: "web".into(),
            task_group: "g".into(),
            ..Allocation::default()
        };
        let claims = claims_for("global", &alloc, "t", &vault, 100);
        assert_eq!(claims.sub, "global:ns:web:g:t:vault");
        assert_eq!(claims.exp, Some(102));
        assert_eq!(claims.aud, vec!["vault.io".to_string()]);
        assert_eq!(claims_for("global", &alloc, "t", &default, 100).exp, None);
    }
}

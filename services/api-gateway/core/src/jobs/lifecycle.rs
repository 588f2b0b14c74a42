//! Job operations built on registration: revert to an older version, mark a
//! version stable, scale a group, and dispatch a parameterized job.

use std::collections::BTreeMap;

use caravan_model::{now_unix_ns, trigger};
use caravan_proto::Job;
use caravan_state::{as_spec, encode};
use caravan_store::{Compare, CompareOp, Op, Revision, Txn};

use crate::cas;
use crate::error::{GatewayError, Result};
use crate::gateway::Gateway;
use crate::jobs::register::{Registered, register, register_with};
use crate::query::DEFAULT_NAMESPACE;

fn namespace_or_default(namespace: &str) -> &str {
    if namespace.is_empty() {
        DEFAULT_NAMESPACE
    } else {
        namespace
    }
}

fn conflict(job_id: &str) -> GatewayError {
    cas::kept_changing(format_args!("job {job_id}"))
}

async fn current(gw: &Gateway, namespace: &str, job_id: &str) -> Result<Job> {
    if job_id.is_empty() {
        return Err(GatewayError::field("job_id", "missing job ID"));
    }
    gw.read::<Job>(&gw.keys.job(namespace, job_id))
        .await?
        .ok_or_else(|| GatewayError::NotFound(format!("job not found: {job_id}")))
}

/// Registers the specification of `version` again as the job's newest
/// version. With `enforce_prior_version`, only if the current version is it.
pub async fn revert(
    gw: &Gateway,
    namespace: &str,
    job_id: &str,
    version: u64,
    enforce_prior_version: Option<u64>,
) -> Result<Registered> {
    let namespace = namespace_or_default(namespace);
    let job = current(gw, namespace, job_id).await?;
    if let Some(prior) = enforce_prior_version
        && prior != job.version
    {
        return Err(GatewayError::FailedPrecondition(format!(
            "current job has version {}; enforcing version {prior}",
            job.version
        )));
    }
    if version == job.version {
        return Err(GatewayError::field(
            "job_version",
            format!("can't revert to current version {version}"),
        ));
    }
    let old: Job = gw
        .read(&gw.keys.job_version(namespace, job_id, version))
        .await?
        .ok_or_else(|| GatewayError::NotFound(format!("job {job_id} has no version {version}")))?;
    register(gw, as_spec(old), Some(job.job_modify_revision)).await
}

/// Marks one version of a job stable (or not). The current job carries the
/// flag too when it is that version.
pub async fn set_stability(
    gw: &Gateway,
    namespace: &str,
    job_id: &str,
    version: u64,
    stable: bool,
) -> Result<Revision> {
    let namespace = namespace_or_default(namespace);
    let version_key = &gw.keys.job_version(namespace, job_id, version);
    let job_key = &gw.keys.job(namespace, job_id);
    cas::retry(
        gw,
        || conflict(job_id),
        move |_| async move {
            let job = current(gw, namespace, job_id).await?;
            let Some(mut at) = gw.read::<Job>(version_key).await? else {
                return Err(GatewayError::NotFound(format!(
                    "job {job_id} has no version {version}"
                )));
            };
            let mut txn = Txn::new().when(Compare::mod_revision(
                version_key.clone(),
                CompareOp::Equal,
                at.modify_revision,
            ));
            at.stable = stable;
            txn = txn.and_then(Op::put(version_key.clone(), encode(&at)));
            if job.version == version {
                let mut updated = job.clone();
                updated.stable = stable;
                txn = txn
                    .when(Compare::mod_revision(
                        job_key.clone(),
                        CompareOp::Equal,
                        job.modify_revision,
                    ))
                    .and_then(Op::put(job_key.clone(), encode(&updated)));
            }
            cas::commit(gw, txn).await
        },
    )
    .await
}

/// Sets the count of one task group: a new version and a `job-scaling`
/// evaluation, compared on the spec revision that was read; with
/// `enforce_revision`, only while the job's spec revision is that one.
pub async fn scale(
    gw: &Gateway,
    namespace: &str,
    job_id: &str,
    group: &str,
    count: i64,
    enforce_revision: Option<Revision>,
) -> Result<Registered> {
    let namespace = namespace_or_default(namespace);
    let count = i32::try_from(count)
        .ok()
        .filter(|c| *c >= 0)
        .ok_or_else(|| GatewayError::field("count", "must be between 0 and 50000"))?;
    cas::retry(gw, || conflict(job_id), move |_| async move {
        let job = current(gw, namespace, job_id).await?;
        if let Some(wanted) = enforce_revision
            && wanted != job.job_modify_revision
        {
            return Err(GatewayError::FailedPrecondition(format!(
                "enforcing job modify index {wanted}: job exists with conflicting job modify index: {}",
                job.job_modify_revision
            )));
        }
        if job.stop {
            return Err(GatewayError::FailedPrecondition(format!(
                "job {job_id:?} is stopped; scaling is not possible"
            )));
        }
        let mut spec = as_spec(job.clone());
        let Some(tg) = spec.task_groups.iter_mut().find(|tg| tg.name == group) else {
            return Err(GatewayError::field(
                "group",
                format!("task group {group:?} not found in job {job_id:?}"),
            ));
        };
        if let Some(bounds) = &tg.scaling {
            if i64::from(count) < bounds.min {
                return Err(GatewayError::field(
                    "count",
                    format!(
                        "group count was less than scaling policy minimum: {count} < {}",
                        bounds.min
                    ),
                ));
            }
            if bounds.max < i64::from(count) {
                return Err(GatewayError::field(
                    "count",
                    format!(
                        "group count was greater than scaling policy maximum: {count} > {}",
                        bounds.max
                    ),
                ));
            }
        }
        tg.count = count;
        match register_with(
            gw,
            spec,
            Some(job.job_modify_revision),
            trigger::JOB_SCALING,
        )
        .await
        {
            // The job changed since it was read: scale the newer one.
            Err(GatewayError::FailedPrecondition(_)) => Ok(None),
            other => other.map(Some),
        }
    })
    .await
}

/// What a dispatch created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dispatched {
    /// The child job's id.
    pub job_id: String,
    /// The child's registration.
    pub registered: Registered,
    /// The revision the child was created at.
    pub job_create_revision: Revision,
}

/// Checks a dispatch's payload and meta against the parent's rules.
fn check_dispatch(parent: &Job, payload: &[u8], meta: &BTreeMap<String, String>) -> Result<()> {
    let Some(rules) = &parent.parameterized else {
        return Err(GatewayError::FailedPrecondition(format!(
            "job {:?} is not a parameterized job",
            parent.id
        )));
    };
    if parent.stop {
        return Err(GatewayError::FailedPrecondition(format!(
            "job {:?} is stopped; it can't be dispatched",
            parent.id
        )));
    }
    match rules.payload.as_str() {
        "required" if payload.is_empty() => {
            return Err(GatewayError::field("payload", "payload is required"));
        }
        "forbidden" if !payload.is_empty() => {
            return Err(GatewayError::field("payload", "payload is forbidden"));
        }
        _ => {}
    }
    for key in &rules.meta_required {
        if !meta.contains_key(key) {
            return Err(GatewayError::field(
                "meta",
                format!("dispatch did not provide required meta key {key:?}"),
            ));
        }
    }
    for key in meta.keys() {
        if !rules.meta_required.contains(key) && !rules.meta_optional.contains(key) {
            return Err(GatewayError::field(
                "meta",
                format!("dispatch provided meta key {key:?} the job does not allow"),
            ));
        }
    }
    Ok(())
}

/// What a dispatch asks for beside the parent job.
#[derive(Debug, Clone, Default)]
pub struct DispatchRequest {
    /// The payload, at most the parent's rules allow.
    pub payload: Vec<u8>,
    /// Meta added to the child.
    pub meta: BTreeMap<String, String>,
    /// Put into the child's id after `dispatch-`.
    pub id_prefix_template: String,
    /// A token whose child, while it exists, answers a repeated dispatch.
    pub idempotency_token: String,
}

/// Dispatches a parameterized job: registers the child
/// `<parent>/dispatch-[<template>-]<unix seconds>-<8 hex>` with the payload
/// and meta, which is evaluated like any job. A dispatch carrying the
/// idempotency token of a child that still exists answers that child.
pub async fn dispatch(
    gw: &Gateway,
    namespace: &str,
    job_id: &str,
    req: DispatchRequest,
) -> Result<Dispatched> {
    let namespace = namespace_or_default(namespace);
    let parent = current(gw, namespace, job_id).await?;
    check_dispatch(&parent, &req.payload, &req.meta)?;
    if !req.idempotency_token.is_empty()
        && let Some(found) = gw.cache.snapshot().jobs_in(namespace).find(|j| {
            j.parent_id == parent.id && j.dispatch_idempotency_token == req.idempotency_token
        })
    {
        return Ok(Dispatched {
            job_id: found.id.clone(),
            job_create_revision: found.create_revision,
            registered: Registered {
                eval_id: String::new(),
                eval_create_revision: 0,
                job_modify_revision: found.job_modify_revision,
                warnings: Vec::new(),
                revision: found.modify_revision,
            },
        });
    }
    // Random bits: a time-ordered id's first eight digits are its clock.
    let suffix: String = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
    let template = if req.id_prefix_template.is_empty() {
        String::new()
    } else {
        format!("{}-", req.id_prefix_template)
    };
    let child_id = format!(
        "{job_id}/dispatch-{template}{}-{suffix}",
        now_unix_ns() / 1_000_000_000
    );
    let mut child = as_spec(parent.clone());
    child.id = child_id.clone();
    child.name = child_id.clone();
    child.parent_id = parent.id.clone();
    child.dispatched = true;
    child.payload = req.payload;
    child.meta.extend(req.meta);
    child.dispatch_idempotency_token = req.idempotency_token;
    let registered = register(gw, child, Some(0)).await?;
    Ok(Dispatched {
        job_id: child_id,
        job_create_revision: registered.revision,
        registered,
    })
}

#[cfg(test)]
mod tests {
    use caravan_proto::ParameterizedJobConfig;

    use super::*;

    #[test]
    fn dispatch_follows_the_parents_rules() {
        let mut parent = Job {
            id: "p".into(),
            parameterized: Some(ParameterizedJobConfig {
                payload: "required".into(),
                meta_required: vec!["who".into()],
                meta_optional: vec!["why".into()],
            }),
            ..Default::default()
        };
        let meta = BTreeMap::from([("who".to_string(), "me".to_string())]);
        assert!(check_dispatch(&parent, b"x", &meta).is_ok());
        let err = check_dispatch(&parent, b"", &meta).unwrap_err();
        assert!(err.to_string().starts_with("payload"), "{err}");
        let err = check_dispatch(&parent, b"x", &BTreeMap::new()).unwrap_err();
        assert!(err.to_string().contains("who"), "{err}");
        let extra = BTreeMap::from([
            ("who".to_string(), "me".to_string()),
            ("what".to_string(), "?".to_string()),
        ]);
        assert!(check_dispatch(&parent, b"x", &extra).is_err());
        parent.parameterized = None;
        assert!(matches!(
            check_dispatch(&parent, b"", &BTreeMap::new()),
            Err(GatewayError::FailedPrecondition(_))
        ));
    }

    #[test]
    fn a_spec_forgets_the_servers_fields() {
        let job = Job {
            id: "web".into(),
            version: 4,
            stable: true,
            job_modify_revision: 9,
            ..Default::default()
        };
        let spec = as_spec(job);
        assert_eq!(
            (spec.version, spec.stable, spec.job_modify_revision),
            (0, false, 0)
        );
        assert_eq!(spec.id, "web");
    }
}

//! `/v1/job/:id/revert`, `/stable`, `/scale`, `/dispatch` and `/periodic/force`.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::{Path, Query as QueryString, State};
use base64::Engine;
use caravan_model::AllocExt;
use caravan_proto::AllocClientStatus;
use serde_json::{Value, json};

use crate::render::index;
use crate::{
    ApiError, ApiResult, Http, Params, body_field, decode, query, read_answer, with_index,
};
use caravan_gateway_core::jobs::lifecycle;
use caravan_gateway_core::jobs::register::Registered;
use caravan_gateway_core::query::{self as blocking, DEFAULT_NAMESPACE};

fn namespace(p: &Params) -> &str {
    p.get("namespace").map_or(DEFAULT_NAMESPACE, String::as_str)
}

fn registered(r: &Registered) -> axum::response::Response {
    with_index(
        index(r.revision),
        json!({
            "EvalID": r.eval_id,
            "EvalCreateIndex": index(r.eval_create_revision),
            "JobModifyIndex": index(r.job_modify_revision),
            "Warnings": r.warnings.join("\n"),
            "Index": index(r.revision),
        }),
    )
}

fn version_field(v: &Value, field: &str) -> Result<Option<u64>, ApiError> {
    match body_field(v, field) {
        None | Some(Value::Null) => Ok(None),
        Some(n) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| ApiError::field(field, "must be a non-negative integer")),
    }
}

/// `POST /v1/job/:id/revert` with `{"JobVersion": n, "EnforcePriorVersion": m}`.
pub(crate) async fn revert(
    State(http): State<Http>,
    Path(id): Path<String>,
    QueryString(p): QueryString<Params>,
    body: Bytes,
) -> ApiResult {
    let v: Value = decode(&body)?;
    let version = version_field(&v, "JobVersion")?
        .ok_or_else(|| ApiError::field("JobVersion", "missing job version"))?;
    let prior = version_field(&v, "EnforcePriorVersion")?;
    let r = lifecycle::revert(&http.gw, namespace(&p), &id, version, prior).await?;
    Ok(registered(&r))
}

/// `POST /v1/job/:id/stable` with `{"JobVersion": n, "Stable": bool}`.
pub(crate) async fn stable(
    State(http): State<Http>,
    Path(id): Path<String>,
    QueryString(p): QueryString<Params>,
    body: Bytes,
) -> ApiResult {
    let v: Value = decode(&body)?;
    let version = version_field(&v, "JobVersion")?
        .ok_or_else(|| ApiError::field("JobVersion", "missing job version"))?;
    let stable = match body_field(&v, "Stable") {
        Some(Value::Bool(b)) => *b,
        _ => return Err(ApiError::field("Stable", "must be true or false")),
    };
    let revision = lifecycle::set_stability(&http.gw, namespace(&p), &id, version, stable).await?;
    Ok(with_index(
        index(revision),
        json!({"Index": index(revision)}),
    ))
}

/// `GET /v1/job/:id/scale`: desired and actual counts per group.
pub(crate) async fn scale_status(
    State(http): State<Http>,
    Path(id): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let q = query(&http, &p)?;
    let snap = blocking::block(&http.gw, &q).await;
    let Some(job) = snap.job(&q.namespace, &id) else {
        return Err(ApiError::from(
            caravan_gateway_core::error::GatewayError::NotFound(format!("job not found: {id}")),
        ));
    };
    let mut groups = serde_json::Map::new();
    for tg in &job.task_groups {
        let (mut placed, mut running, mut healthy, mut unhealthy) = (0, 0, 0, 0);
        for a in snap
            .allocs_by_job(&job.namespace, &job.id)
            .filter(|a| a.task_group == tg.name && !a.is_terminal())
        {
            placed += 1;
            if a.client_status() == AllocClientStatus::Running {
                running += 1;
            }
            match a.deployment_status.as_ref().and_then(|d| d.healthy) {
                Some(true) => healthy += 1,
                Some(false) => unhealthy += 1,
                None => {}
            }
        }
        groups.insert(
            tg.name.clone(),
            json!({
                "Desired": tg.count,
                "Placed": placed,
                "Running": running,
                "Healthy": healthy,
                "Unhealthy": unhealthy,
                "Events": Value::Null,
            }),
        );
    }
    let meta = blocking::meta(&http.gw, &snap);
    Ok(read_answer(
        &meta,
        json!({
            "JobID": job.id,
            "Namespace": job.namespace,
            "JobCreateIndex": index(job.create_revision),
            "JobModifyIndex": index(job.job_modify_revision),
            "JobStopped": job.stop,
            "TaskGroups": groups,
        }),
    ))
}

/// `POST /v1/job/:id/scale` with `{"Count": n, "Target": {"Group": "web"}}`.
pub(crate) async fn scale(
    State(http): State<Http>,
    Path(id): Path<String>,
    QueryString(p): QueryString<Params>,
    body: Bytes,
) -> ApiResult {
    let v: Value = decode(&body)?;
    let group = v
        .pointer("/Target/Group")
        .and_then(Value::as_str)
        .filter(|g| !g.is_empty())
        .ok_or_else(|| ApiError::field("Target.Group", "missing task group name"))?;
    let count = match body_field(&v, "Count") {
        Some(c) => c
            .as_i64()
            .ok_or_else(|| ApiError::field("Count", "must be an integer"))?,
        None => return Err(ApiError::field("Count", "missing count")),
    };
    if let Some(target_job) = v.pointer("/Target/Job").and_then(Value::as_str)
        && !target_job.is_empty()
        && target_job != id
    {
        return Err(ApiError::field(
            "Target.Job",
            "job ID in payload did not match URL",
        ));
    }
    // Nomad keeps a scaling event with the request's Meta; Caravan keeps
    // none, so Meta would be dropped: refused by name.
    if body_field(&v, "Meta")
        .is_some_and(|m| !m.is_null() && m.as_object().is_none_or(|o| !o.is_empty()))
    {
        return Err(ApiError::field(
            "Meta",
            "not supported: Caravan keeps no scaling events to record it in",
        ));
    }
    if crate::bool_field(&v, "PolicyOverride")? {
        return Err(ApiError::field(
            "PolicyOverride",
            "not supported: Caravan has no Sentinel policies to override",
        ));
    }
    if crate::bool_field(&v, "Error")? {
        return Err(ApiError::field(
            "Error",
            "not supported: Caravan does not record scaling events",
        ));
    }
    let enforce = match body_field(&v, "JobModifyIndex") {
        None | Some(Value::Null) => None,
        Some(n) => match n.as_i64() {
            Some(0) => None,
            Some(i) if i > 0 => Some(i),
            _ => {
                return Err(ApiError::field(
                    "JobModifyIndex",
                    "must be a non-negative integer",
                ));
            }
        },
    };
    let r = lifecycle::scale(&http.gw, namespace(&p), &id, group, count, enforce).await?;
    Ok(registered(&r))
}

/// `POST /v1/job/:id/dispatch` with `{"Payload": base64, "Meta": {...}}`.
pub(crate) async fn dispatch(
    State(http): State<Http>,
    Path(id): Path<String>,
    QueryString(p): QueryString<Params>,
    body: Bytes,
) -> ApiResult {
    let v: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        decode(&body)?
    };
    let payload = match body_field(&v, "Payload") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(|e| ApiError::field("Payload", format!("invalid base64: {e}")))?,
        Some(_) => return Err(ApiError::field("Payload", "must be a base64 string")),
    };
    let mut meta = BTreeMap::new();
    match body_field(&v, "Meta") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (k, val) in m {
                let s = val
                    .as_str()
                    .ok_or_else(|| ApiError::field(format!("Meta.{k}"), "must be a string"))?;
                meta.insert(k.clone(), s.to_string());
            }
        }
        Some(_) => return Err(ApiError::field("Meta", "must be an object of strings")),
    }
    if let Value::Object(fields) = &v {
        for (key, value) in fields {
            // The write options a client may encode beside them, and
            // python-nomad's spelling of the token (which Nomad's decoder
            // would ignore; Caravan honours it). A null says nothing.
            let known = [
                "JobID",
                "Payload",
                "Meta",
                "IdPrefixTemplate",
                "Region",
                "Namespace",
                "SecretID",
                "IdempotencyToken",
                "idempotency_token",
            ];
            if !value.is_null() && !known.iter().any(|k| k.eq_ignore_ascii_case(key)) {
                return Err(ApiError::field(key.clone(), "unknown dispatch field"));
            }
        }
    }
    if let Some(Value::String(body_id)) = body_field(&v, "JobID")
        && !body_id.is_empty()
        && *body_id != id
    {
        return Err(ApiError::field("JobID", "Job ID does not match"));
    }
    let asked = lifecycle::DispatchRequest {
        payload,
        meta,
        id_prefix_template: crate::text_field(&v, "IdPrefixTemplate")?,
        idempotency_token: match p.get("idempotency_token").filter(|t| !t.is_empty()) {
            Some(token) => token.clone(),
            None => match crate::text_field(&v, "IdempotencyToken")? {
                token if token.is_empty() => crate::text_field(&v, "idempotency_token")?,
                token => token,
            },
        },
    };
    let d = lifecycle::dispatch(&http.gw, namespace(&p), &id, asked).await?;
    Ok(with_index(
        index(d.registered.revision),
        json!({
            "DispatchedJobID": d.job_id,
            "EvalID": d.registered.eval_id,
            "EvalCreateIndex": index(d.registered.eval_create_revision),
            "JobCreateIndex": index(d.job_create_revision),
            "Index": index(d.registered.revision),
        }),
    ))
}

/// `PUT|POST /v1/job/:id/periodic/force`: a child launched now by the
/// eval-broker leader.
pub(crate) async fn periodic_force(
    State(http): State<Http>,
    Path(id): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let launched =
        caravan_gateway_core::broker::force_periodic(&http.gw, namespace(&p), &id).await?;
    let revision = index(launched.eval_create_revision);
    Ok(with_index(
        revision,
        json!({
            "EvalID": launched.eval_id,
            "EvalCreateIndex": revision,
            "Index": revision,
        }),
    ))
}

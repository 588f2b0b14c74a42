//! `GET /v1/scaling/policies` and `GET /v1/scaling/policy/:id`, in Nomad's
//! `ScalingPolicyListStub` and `ScalingPolicy` shapes; both block.

use axum::extract::{Path, Query as QueryString, State};
use serde_json::{Map, Value};

use crate::{ApiResult, Http, Params, query, read_answer};
use caravan_gateway_core::error::GatewayError;
use caravan_gateway_core::query as blocking;
use caravan_gateway_core::scaling::{self, Found};

/// The policy in Nomad's JSON (null only if its group lost it, which a
/// found policy cannot).
fn policy(found: &Found) -> Value {
    caravan_jobspec::render_scaling_policy(&found.job, found.group()).unwrap_or(Value::Null)
}

/// Nomad's list stub: the policy without its bounds and settings.
fn stub(found: &Found) -> Value {
    let Value::Object(full) = policy(found) else {
        return Value::Null;
    };
    let keep = [
        "ID",
        "Enabled",
        "Type",
        "Target",
        "CreateIndex",
        "ModifyIndex",
    ];
    Value::Object(
        full.into_iter()
            .filter(|(k, _)| keep.contains(&k.as_str()))
            .collect::<Map<String, Value>>(),
    )
}

/// A query parameter, absent when empty (as Nomad reads `?job=` and `?type=`).
fn given<'a>(p: &'a Params, name: &str) -> Option<&'a str> {
    p.get(name).map(String::as_str).filter(|v| !v.is_empty())
}

/// `GET /v1/scaling/policies[?job=…][&type=…]`.
pub(crate) async fn list(
    State(http): State<Http>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let q = query(&http, &p)?;
    let snap = blocking::block(&http.gw, &q).await;
    let found = scaling::list(&snap, &q, given(&p, "job"), given(&p, "type"));
    let meta = blocking::meta(&http.gw, &snap);
    Ok(read_answer(
        &meta,
        Value::Array(found.iter().map(stub).collect()),
    ))
}

/// `GET /v1/scaling/policy/:id`: 404 `policy not found` for an unknown id.
pub(crate) async fn get(
    State(http): State<Http>,
    Path(id): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let q = query(&http, &p)?;
    let snap = blocking::block(&http.gw, &q).await;
    let found = scaling::get(&snap, &id)
        .ok_or_else(|| GatewayError::NotFound("policy not found".into()))?;
    let meta = blocking::meta(&http.gw, &snap);
    Ok(read_answer(&meta, policy(&found)))
}

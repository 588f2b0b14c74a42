//! Nomad's ACL endpoints: `/v1/acl/bootstrap`, `/v1/acl/policies`,
//! `/v1/acl/policy/:name`, `/v1/acl/tokens`, `/v1/acl/token[/:accessor]`
//! and `/v1/acl/token/self`, in Nomad's JSON. With ACLs disabled each
//! answers 400 "ACL support disabled", as Nomad does.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Map, Value, json};

use crate::render::{index, time};
use crate::{ApiError, ApiResult, Http, body_field, bool_field, decode, text_field, with_index};
use caravan_gateway_core::acl::store::{
    self, AclCache, Caller, PolicyEntry, StoredPolicy, TokenEntry, TokenRequest, TokenWritten,
};
use caravan_gateway_core::error::GatewayError;

fn cache(http: &Http) -> Result<&Arc<AclCache>, ApiError> {
    http.gw.acl.as_ref().ok_or_else(|| {
        ApiError::from(GatewayError::FailedPrecondition(
            "ACL support disabled".into(),
        ))
    })
}

fn denied() -> ApiError {
    ApiError::from(GatewayError::PermissionDenied("Permission denied".into()))
}

/// The caller the guard resolved; without one (a route the guard did not
/// see) nothing is allowed.
fn caller(c: Option<Extension<Caller>>) -> Result<Caller, ApiError> {
    c.map(|Extension(c)| c).ok_or_else(denied)
}

fn empty_answer(revision: i64) -> Response {
    let mut response = with_index(index(revision), Value::Null);
    *response.body_mut() = axum::body::Body::empty();
    response
}

fn policy_json(p: &PolicyEntry) -> Value {
    json!({
        "Name": p.stored.name,
        "Description": p.stored.description,
        "Rules": p.stored.rules,
        "JobACL": null,
        "CreateIndex": index(p.create_index),
        "ModifyIndex": index(p.modify_index),
    })
}

fn policy_stub(p: &PolicyEntry) -> Value {
    json!({
        "Name": p.stored.name,
        "Description": p.stored.description,
        "JobACL": null,
        "CreateIndex": index(p.create_index),
        "ModifyIndex": index(p.modify_index),
    })
}

fn token_fields(t: &TokenEntry) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("AccessorID".into(), json!(t.stored.accessor_id));
    out.insert("Name".into(), json!(t.stored.name));
    out.insert("Type".into(), json!(t.stored.token_type));
    // Go renders a management token's nil list as null.
    let policies = if t.stored.policies.is_empty() {
        Value::Null
    } else {
        json!(t.stored.policies)
    };
    out.insert("Policies".into(), policies);
    out.insert("Roles".into(), Value::Null);
    out.insert("Global".into(), json!(t.stored.global));
    out.insert("CreateTime".into(), json!(time(t.stored.create_time)));
    out.insert("ExpirationTime".into(), Value::Null);
    out.insert("CreateIndex".into(), json!(index(t.create_index)));
    out.insert("ModifyIndex".into(), json!(index(t.modify_index)));
    out
}

/// Nomad's `ACLToken`: `SecretID` only when the secret is at hand (just
/// made, or presented by the caller); stored secrets are only hashes.
fn token_json(t: &TokenEntry, secret: Option<&str>) -> Value {
    let mut out = token_fields(t);
    out.insert("SecretID".into(), json!(secret.unwrap_or_default()));
    out.insert("ExpirationTTL".into(), json!(0));
    Value::Object(out)
}

fn written_json(w: &TokenWritten) -> Value {
    token_json(&w.token, w.secret.as_deref())
}

fn object(body: &[u8]) -> Result<Value, ApiError> {
    let value = decode::<Value>(body)?;
    if value.is_object() {
        Ok(value)
    } else {
        Err(ApiError::field("body", "must be a JSON object"))
    }
}

/// `POST /v1/acl/bootstrap`: the first management token, once.
async fn bootstrap(State(http): State<Http>) -> ApiResult {
    let cache = cache(&http)?;
    let w = store::bootstrap(http.gw.store.as_ref(), &http.gw.keys, cache).await?;
    Ok(with_index(index(w.token.create_index), written_json(&w)))
}

/// `GET /v1/acl/policies`: every policy for a management token, else the
/// caller's own.
async fn list_policies(State(http): State<Http>, c: Option<Extension<Caller>>) -> ApiResult {
    let cache = cache(&http)?;
    let caller = caller(c)?;
    let list: Vec<Value> = cache
        .policies()
        .iter()
        .filter(|p| caller.may_read_policy(&p.stored.name))
        .map(|p| policy_stub(p))
        .collect();
    Ok(with_index(index(cache.revision()), Value::Array(list)))
}

/// `GET /v1/acl/policy/:name`: for a management token or one holding it.
async fn get_policy(
    State(http): State<Http>,
    Path(name): Path<String>,
    c: Option<Extension<Caller>>,
) -> ApiResult {
    let cache = cache(&http)?;
    let caller = caller(c)?;
    if !caller.may_read_policy(&name) {
        return Err(denied());
    }
    let policy = cache
        .policy(&name)
        .ok_or_else(|| ApiError::from(GatewayError::NotFound("ACL policy not found".into())))?;
    Ok(with_index(index(cache.revision()), policy_json(&policy)))
}

/// `PUT|POST /v1/acl/policy/:name`: creates or replaces the policy; its
/// rules must parse.
async fn put_policy(State(http): State<Http>, Path(name): Path<String>, body: Bytes) -> ApiResult {
    let cache = cache(&http)?;
    let obj = object(&body)?;
    let body_name = text_field(&obj, "Name")?;
    if !body_name.is_empty() && body_name != name {
        return Err(ApiError::from(GatewayError::FailedPrecondition(
            "ACL policy name does not match request path".into(),
        )));
    }
    let stored = StoredPolicy {
        name,
        description: text_field(&obj, "Description")?,
        rules: text_field(&obj, "Rules")?,
    };
    let revision =
        store::upsert_policy(http.gw.store.as_ref(), &http.gw.keys, cache, stored).await?;
    Ok(empty_answer(revision))
}

/// `DELETE /v1/acl/policy/:name`.
async fn delete_policy(State(http): State<Http>, Path(name): Path<String>) -> ApiResult {
    let cache = cache(&http)?;
    let revision =
        store::delete_policy(http.gw.store.as_ref(), &http.gw.keys, cache, &name).await?;
    Ok(empty_answer(revision))
}

/// `GET /v1/acl/tokens`: every token's stub.
async fn list_tokens(State(http): State<Http>) -> ApiResult {
    let cache = cache(&http)?;
    let list: Vec<Value> = cache
        .tokens()
        .iter()
        .map(|t| Value::Object(token_fields(t)))
        .collect();
    Ok(with_index(index(cache.revision()), Value::Array(list)))
}

fn token_request(obj: &Value) -> Result<TokenRequest, ApiError> {
    let policies = match body_field(obj, "Policies") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| ApiError::field("Policies", "must be a list of strings"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(ApiError::field("Policies", "must be a list of strings")),
    };
    let global = bool_field(obj, "Global")?;
    Ok(TokenRequest {
        accessor_id: text_field(obj, "AccessorID")?,
        name: text_field(obj, "Name")?,
        token_type: text_field(obj, "Type")?,
        policies,
        global,
    })
}

/// `PUT|POST /v1/acl/token`: creates a token (policies it names need not
/// exist yet, as in Nomad); the answer carries its secret.
async fn create_token(State(http): State<Http>, body: Bytes) -> ApiResult {
    let cache = cache(&http)?;
    // A body naming an accessor updates that token, as Nomad's does.
    let req = token_request(&object(&body)?)?;
    update(&http, cache, req).await
}

/// Creates or updates the token `req` describes.
async fn update(http: &Http, cache: &AclCache, req: TokenRequest) -> ApiResult {
    let w = store::upsert_token(
        http.gw.store.as_ref(),
        &http.gw.keys,
        cache,
        http.gw.attempts(),
        req,
    )
    .await?;
    Ok(with_index(index(w.token.modify_index), written_json(&w)))
}

/// `PUT|POST /v1/acl/token/:accessor`: updates the token's name, type and
/// policies.
async fn update_token(
    State(http): State<Http>,
    Path(accessor): Path<String>,
    body: Bytes,
) -> ApiResult {
    let cache = cache(&http)?;
    let mut req = token_request(&object(&body)?)?;
    if req.accessor_id != accessor {
        return Err(ApiError::from(GatewayError::FailedPrecondition(
            "ACL token accessor does not match request path".into(),
        )));
    }
    req.accessor_id = accessor;
    update(&http, cache, req).await
}

/// `GET /v1/acl/token/:accessor`: for a management token or the token
/// itself.
async fn get_token(
    State(http): State<Http>,
    Path(accessor): Path<String>,
    c: Option<Extension<Caller>>,
) -> ApiResult {
    let cache = cache(&http)?;
    let caller = caller(c)?;
    let own = caller.owns(&accessor);
    if !caller.is_management() && !own {
        return Err(denied());
    }
    let token = cache
        .token(&accessor)
        .ok_or_else(|| ApiError::from(GatewayError::NotFound("ACL token not found".into())))?;
    let secret = if own { caller.secret.as_deref() } else { None };
    Ok(with_index(
        index(cache.revision()),
        token_json(&token, secret),
    ))
}

/// `GET /v1/acl/token/self`: the caller's token, with the secret it
/// presented.
async fn token_self(State(http): State<Http>, c: Option<Extension<Caller>>) -> ApiResult {
    let cache = cache(&http)?;
    let caller = caller(c)?;
    let token = caller
        .token
        .as_ref()
        .ok_or_else(|| ApiError::from(GatewayError::NotFound("ACL token not found".into())))?;
    Ok(with_index(
        index(cache.revision()),
        token_json(token, caller.secret.as_deref()),
    ))
}

/// `DELETE /v1/acl/token/:accessor`.
async fn delete_token(State(http): State<Http>, Path(accessor): Path<String>) -> ApiResult {
    let cache = cache(&http)?;
    let revision =
        store::delete_token(http.gw.store.as_ref(), &http.gw.keys, cache, &accessor).await?;
    Ok(empty_answer(revision))
}

/// 403 as Nomad words it for an unknown token.
pub(crate) fn token_not_found() -> Response {
    (StatusCode::FORBIDDEN, "ACL token not found").into_response()
}

/// 403 for a request the token may not make.
pub(crate) fn permission_denied() -> Response {
    (StatusCode::FORBIDDEN, "Permission denied").into_response()
}

/// The ACL routes, merged into the HTTP API's router.
pub(crate) fn routes() -> Router<Http> {
    Router::new()
        .route("/v1/acl/bootstrap", post(bootstrap).put(bootstrap))
        .route("/v1/acl/policies", get(list_policies))
        .route(
            "/v1/acl/policy/{name}",
            get(get_policy)
                .put(put_policy)
                .post(put_policy)
                .delete(delete_policy),
        )
        .route("/v1/acl/tokens", get(list_tokens))
        .route("/v1/acl/token", post(create_token).put(create_token))
        .route("/v1/acl/token/self", get(token_self))
        .route(
            "/v1/acl/token/{accessor}",
            get(get_token)
                .put(update_token)
                .post(update_token)
                .delete(delete_token),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_fields_match_case_insensitively() {
        let obj = object(br#"{"name": "a", "Type": "client", "policies": ["p"]}"#).unwrap();
        let req = token_request(&obj).unwrap();
        assert_eq!(req.name, "a");
        assert_eq!(req.token_type, "client");
        assert_eq!(req.policies, vec!["p"]);
        let bad = object(br#"{"Policies": "p"}"#).unwrap();
        assert!(token_request(&bad).is_err());
    }
}

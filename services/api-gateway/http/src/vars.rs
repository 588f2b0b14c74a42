//! `GET /v1/vars` and `GET|PUT|POST|DELETE /v1/var/:path`: Nomad Variables
//! in Nomad's JSON, check-and-set conflicts as 409 with the current variable.

use std::collections::BTreeMap;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query as QueryString, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{any, get};
use caravan_proto::{VariableDecrypted, VariableMetadata};
use serde_json::{Map, Value, json};

use crate::paging::{self, Key, PageOptions, Tokens};
use crate::render::index;
use crate::{
    ApiError, ApiResult, Http, Params, body_field, decode, query, read_answer, with_index,
};
use caravan_gateway_core::query::DEFAULT_NAMESPACE;
use caravan_gateway_core::vars::{self, LockOp, VarWrite};

fn metadata_json(m: &VariableMetadata) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("Namespace".into(), json!(m.namespace));
    out.insert("Path".into(), json!(m.path));
    out.insert("CreateIndex".into(), json!(index(m.create_revision)));
    out.insert("CreateTime".into(), json!(m.create_time));
    out.insert("ModifyIndex".into(), json!(index(m.modify_revision)));
    out.insert("ModifyTime".into(), json!(m.modify_time));
    if let Some(lock) = &m.lock {
        out.insert(
            "Lock".into(),
            json!({
                "ID": lock.id,
                "TTL": caravan_jobspec::format_duration(lock.ttl_ns),
                "LockDelay": caravan_jobspec::format_duration(lock.lock_delay_ns),
            }),
        );
    }
    out
}

/// Nomad's `VariableDecrypted`: the metadata with `Items` beside it (left
/// out when there are none, as Nomad's `omitempty`).
fn variable_json(v: &VariableDecrypted) -> Value {
    let mut out = metadata_json(&v.meta.clone().unwrap_or_default());
    if !v.items.is_empty() {
        out.insert("Items".into(), json!(v.items));
    }
    Value::Object(out)
}

/// `GET /v1/vars?prefix=&namespace=`: the metadata of the variables.
async fn list(State(http): State<Http>, QueryString(p): QueryString<Params>) -> ApiResult {
    let q = query(&http, &p)?;
    let options = PageOptions::read(&p)?;
    let (list, meta) = vars::list(&http.gw, &q).await?;
    let page = paging::page(
        list,
        &options,
        Tokens::NamespaceId,
        |m| Key {
            namespace: &m.namespace,
            id: &m.path,
            create_index: index(m.create_revision),
        },
        |m| Value::Object(metadata_json(m)),
    );
    Ok(paging::answer(&meta, page))
}

/// `GET /v1/var/:path`: the variable with its items; 404 when missing.
async fn get_var(
    State(http): State<Http>,
    Path(path): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let q = query(&http, &p)?;
    let (var, meta) = vars::get(&http.gw, &path, &q).await?;
    Ok(read_answer(&meta, variable_json(&var)))
}

/// The `?cas=` of a write: an unsigned index.
fn cas(p: &Params) -> Result<Option<i64>, ApiError> {
    p.get("cas")
        .map(|v| {
            v.parse::<u64>()
                .ok()
                .and_then(|c| i64::try_from(c).ok())
                .ok_or_else(|| ApiError::field("cas", format!("can not parse cas: {v:?}")))
        })
        .transpose()
}

/// The namespace a write targets: the body's, else `?namespace=`, else
/// the default.
fn write_namespace(body_ns: Option<&str>, p: &Params) -> String {
    body_ns
        .filter(|ns| !ns.is_empty())
        .or_else(|| {
            p.get("namespace")
                .map(String::as_str)
                .filter(|ns| !ns.is_empty())
        })
        .unwrap_or(DEFAULT_NAMESPACE)
        .to_string()
}

/// The answer to a write: 200 with the variable written, or 409 with the
/// one that won the check-and-set.
fn write_answer(w: VarWrite, success: StatusCode) -> ApiResult {
    if w.applied {
        let mut response = match &w.variable {
            Some(v) => with_index(index(w.revision), variable_json(v)),
            None => with_index(index(w.revision), Value::Null),
        };
        *response.status_mut() = success;
        if success == StatusCode::NO_CONTENT {
            *response.body_mut() = axum::body::Body::empty();
            response
                .headers_mut()
                .remove(axum::http::header::CONTENT_TYPE);
        }
        return Ok(response);
    }
    let conflict = w.variable.unwrap_or_default();
    let at = conflict.meta.as_ref().map_or(0, |m| m.modify_revision);
    let mut response = with_index(index(at), variable_json(&conflict));
    *response.status_mut() = StatusCode::CONFLICT;
    Ok(response.into_response())
}

/// `PUT|POST /v1/var/:path?cas=`: writes the variable in the body (its
/// `Items`; the URL's path wins over the body's).
async fn put(
    State(http): State<Http>,
    Path(path): Path<String>,
    QueryString(p): QueryString<Params>,
    body: Bytes,
) -> ApiResult {
    let op = lock_operation(&p)?;
    let v: Value = decode(&body)?;
    if !v.is_object() {
        return Err(ApiError::field(
            "body",
            "must be a JSON object (a variable)",
        ));
    }
    let namespace = match body_field(&v, "Namespace") {
        None | Some(Value::Null) => write_namespace(None, &p),
        Some(Value::String(ns)) => write_namespace(Some(ns), &p),
        Some(_) => return Err(ApiError::field("Namespace", "must be a string")),
    };
    let items = match body_field(&v, "Items") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(Value::Object(items)) => {
            let mut out = BTreeMap::new();
            for (k, v) in items {
                let Value::String(s) = v else {
                    return Err(ApiError::field(format!("Items.{k}"), "must be a string"));
                };
                out.insert(k.clone(), s.clone());
            }
            out
        }
        Some(_) => return Err(ApiError::field("Items", "must be an object of strings")),
    };
    let lock = body_lock(body_field(&v, "Lock"))?;
    let cas = cas(&p)?;
    if op.is_some() && cas.is_some() {
        return Err(ApiError::field(
            "cas",
            "CAS can't be used with lock operations",
        ));
    }
    let op = match op {
        None => LockOp::Write { id: lock.id },
        Some("lock-acquire") => LockOp::Acquire {
            ttl_ns: lock.ttl_ns,
            delay_ns: lock.delay_ns,
        },
        Some(other) => {
            let id = lock.id.ok_or_else(|| {
                ApiError::field("Lock.ID", format!("{other} needs the lock's ID"))
            })?;
            let op = if other == "lock-renew" {
                LockOp::Renew { id }
            } else {
                LockOp::Release { id }
            };
            let (meta, revision) = vars::update_lock(&http.gw, &namespace, &path, &op).await?;
            return Ok(with_index(
                index(revision),
                Value::Object(metadata_json(&meta)),
            ));
        }
    };
    let w = vars::put(&http.gw, &namespace, &path, items, cas, op).await?;
    write_answer(w, StatusCode::OK)
}

/// The `Lock` of a write's body: its holder's ID, and for an acquire its
/// TTL and delay (Go durations, or nanoseconds).
#[derive(Debug, Default)]
struct BodyLock {
    id: Option<String>,
    ttl_ns: i64,
    delay_ns: i64,
}

fn body_lock(v: Option<&Value>) -> Result<BodyLock, ApiError> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(BodyLock::default());
    };
    let Value::Object(_) = v else {
        return Err(ApiError::field("Lock", "must be an object"));
    };
    let duration = |name: &str| -> Result<i64, ApiError> {
        match body_field(v, name) {
            None | Some(Value::Null) => Ok(0),
            Some(Value::String(s)) if s.is_empty() => Ok(0),
            Some(Value::String(s)) => caravan_jobspec::parse_duration(s)
                .map_err(|e| ApiError::field(format!("Lock.{name}"), e)),
            Some(Value::Number(n)) => n.as_i64().ok_or_else(|| {
                ApiError::field(format!("Lock.{name}"), "must be whole nanoseconds")
            }),
            Some(_) => Err(ApiError::field(
                format!("Lock.{name}"),
                "must be a duration",
            )),
        }
    };
    let id = match body_field(v, "ID") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(ApiError::field("Lock.ID", "must be a string")),
    };
    Ok(BodyLock {
        id,
        ttl_ns: duration("TTL")?,
        delay_ns: duration("LockDelay")?,
    })
}

/// The lock operation a write names (`?lock-acquire`, `?lock-renew`,
/// `?lock-release`), at most one.
fn lock_operation(p: &Params) -> Result<Option<&'static str>, ApiError> {
    let named: Vec<&'static str> = ["lock-acquire", "lock-renew", "lock-release"]
        .into_iter()
        .filter(|op| p.contains_key(*op))
        .collect();
    match named.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(one)),
        _ => Err(ApiError::field(named[1], "multiple lock operations")),
    }
}

/// `DELETE /v1/var/:path?cas=`: 204 when deleted (or already absent), 409
/// when the check-and-set lost.
async fn delete(
    State(http): State<Http>,
    Path(path): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    if let Some(op) = lock_operation(&p)? {
        return Err(ApiError::field(op, "lock operations are writes (PUT)"));
    }
    let namespace = write_namespace(None, &p);
    let cas = cas(&p)?;
    let w = vars::delete(&http.gw, &namespace, &path, cas, None).await?;
    write_answer(w, StatusCode::NO_CONTENT)
}

/// `/v1/var/` without a path.
async fn missing_path() -> ApiResult {
    Err(ApiError::field("path", "missing variable path"))
}

/// The variables routes, merged into the HTTP API's router.
pub(crate) fn routes() -> Router<Http> {
    Router::new()
        .route("/v1/vars", get(list))
        .route("/v1/var/", any(missing_path))
        .route(
            "/v1/var/{*path}",
            get(get_var).put(put).post(put).delete(delete),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cas_is_an_unsigned_index() {
        let mut p = Params::new();
        assert_eq!(cas(&p).unwrap(), None);
        p.insert("cas".into(), "0".into());
        assert_eq!(cas(&p).unwrap(), Some(0));
        p.insert("cas".into(), "-1".into());
        assert!(cas(&p).is_err());
        p.insert("cas".into(), "x".into());
        assert!(cas(&p).is_err());
    }

    #[test]
    fn the_body_namespace_wins_over_the_query() {
        let mut p = Params::new();
        assert_eq!(write_namespace(None, &p), "default");
        p.insert("namespace".into(), "q".into());
        assert_eq!(write_namespace(None, &p), "q");
        assert_eq!(write_namespace(Some(""), &p), "q");
        assert_eq!(write_namespace(Some("b"), &p), "b");
    }
}

//! `GET /v1/namespaces` and `GET|PUT|POST|DELETE /v1/namespace/:name`:
//! namespaces in Nomad's JSON. Writes need a management token (the ACL
//! table); a read shows a namespace to a token granted anything in it.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::{Path, Query as QueryString, State};
use axum::response::Response;
use axum::routing::{self, any, get};
use axum::{Extension, Router};
use caravan_proto::Namespace;
use serde_json::{Value, json};

use crate::render::index;
use crate::{ApiError, ApiResult, Http, Params, body_field, decode, with_index};
use caravan_gateway_core::acl::Caller;
use caravan_gateway_core::error::GatewayError;
use caravan_gateway_core::namespaces;

/// Nomad's `Namespace` JSON.
fn namespace_json(ns: &Namespace) -> Value {
    json!({
        "Name": ns.name,
        "Description": ns.description,
        "Quota": "",
        "Capabilities": Value::Null,
        "NodePoolConfiguration": Value::Null,
        "VaultConfiguration": Value::Null,
        "ConsulConfiguration": Value::Null,
        "Meta": if ns.meta.is_empty() { Value::Null } else { json!(ns.meta) },
        "CreateIndex": index(ns.create_revision),
        "ModifyIndex": index(ns.modify_revision),
    })
}

/// Whether a JSON value says nothing: null, `""`, `false`, `0`, an empty
/// list, or an object of such values.
pub(crate) fn says_nothing(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(fields) => fields.values().all(says_nothing),
    }
}

/// A `Meta` object of strings.
pub(crate) fn meta_field(body: &Value) -> Result<BTreeMap<String, String>, ApiError> {
    match body_field(body, "Meta") {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                _ => Err(ApiError::field(format!("Meta.{k}"), "must be a string")),
            })
            .collect(),
        Some(_) => Err(ApiError::field("Meta", "must be an object of strings")),
    }
}

/// The fields of a namespace Caravan reads, those it writes itself (and
/// ignores on input, as Nomad does), and those it refuses unless they say
/// nothing.
const READ: &[&str] = &["Name", "Description", "Meta"];
const SERVER: &[&str] = &["CreateIndex", "ModifyIndex", "Hash"];
const REFUSED: &[(&str, &str)] = &[
    ("Quota", "Caravan has no resource quotas"),
    (
        "Capabilities",
        "Caravan does not restrict task drivers or network modes per namespace",
    ),
    (
        "NodePoolConfiguration",
        "Caravan does not restrict node pools per namespace",
    ),
    ("VaultConfiguration", "Caravan has no Vault integration"),
    ("ConsulConfiguration", "Caravan has no Consul integration"),
    (
        "RequiredExtraClaims",
        "Caravan adds no extra workload identity claims",
    ),
    (
        "OptionalExtraClaims",
        "Caravan adds no extra workload identity claims",
    ),
];

/// Reads a namespace body, refusing by name what Caravan does not honour.
fn namespace_from(body: &Value) -> Result<Namespace, ApiError> {
    let Value::Object(fields) = body else {
        return Err(ApiError::field(
            "body",
            "must be a JSON object (a namespace)",
        ));
    };
    for (key, value) in fields {
        if READ
            .iter()
            .chain(SERVER)
            .any(|k| k.eq_ignore_ascii_case(key))
        {
            continue;
        }
        match REFUSED.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)) {
            Some(_) if says_nothing(value) => {}
            Some((k, why)) => {
                return Err(ApiError::field(*k, format!("not supported: {why}")));
            }
            None => return Err(ApiError::field(key.clone(), "unknown namespace field")),
        }
    }
    Ok(Namespace {
        name: crate::text_field(body, "Name")?,
        description: crate::text_field(body, "Description")?,
        meta: meta_field(body)?,
        ..Default::default()
    })
}

fn may_see(caller: &Option<Extension<Caller>>, name: &str) -> bool {
    caller
        .as_ref()
        .is_none_or(|Extension(c)| c.acl.allow_namespace(name))
}

/// `GET /v1/namespaces?prefix=`: the namespaces the caller may see.
async fn list(
    State(http): State<Http>,
    caller: Option<Extension<Caller>>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    crate::query(&http, &p)?;
    let prefix = p.get("prefix").map_or("", String::as_str);
    let (all, revision) = namespaces::list(&http.gw, prefix).await?;
    let shown: Vec<Value> = all
        .iter()
        .filter(|ns| may_see(&caller, &ns.name))
        .map(namespace_json)
        .collect();
    Ok(with_index(index(revision), Value::Array(shown)))
}

/// `GET /v1/namespace/:name`: 404 when missing. (With ACLs on, the guard
/// has checked the caller is granted something in it.)
async fn get_one(
    State(http): State<Http>,
    Path(name): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    crate::query(&http, &p)?;
    match namespaces::get(&http.gw, &name).await? {
        Some(ns) => Ok(with_index(index(ns.modify_revision), namespace_json(&ns))),
        None => Err(GatewayError::NotFound("Namespace not found".into()).into()),
    }
}

fn written(revision: i64) -> Response {
    let mut response = with_index(index(revision), Value::Null);
    *response.body_mut() = axum::body::Body::empty();
    response
}

async fn upsert(http: &Http, path_name: Option<&str>, body: &Bytes) -> ApiResult {
    let v: Value = decode(body)?;
    let ns = namespace_from(&v)?;
    if let Some(name) = path_name
        && ns.name != name
    {
        return Err(ApiError::field(
            "Name",
            "Namespace name does not match request path",
        ));
    }
    let revision = namespaces::upsert(&http.gw, ns).await?;
    Ok(written(revision))
}

/// `PUT|POST /v1/namespace/:name`: create or update.
async fn put(State(http): State<Http>, Path(name): Path<String>, body: Bytes) -> ApiResult {
    upsert(&http, Some(&name), &body).await
}

/// `PUT|POST /v1/namespace`: create or update the namespace the body names.
async fn create(State(http): State<Http>, body: Bytes) -> ApiResult {
    upsert(&http, None, &body).await
}

/// `DELETE /v1/namespace/:name`.
async fn delete(State(http): State<Http>, Path(name): Path<String>) -> ApiResult {
    let revision = namespaces::delete(&http.gw, &name).await?;
    Ok(written(revision))
}

async fn missing_name() -> ApiResult {
    Err(ApiError::field("Name", "Missing Namespace Name"))
}

/// The namespace routes, merged into the HTTP API's router.
pub(crate) fn routes() -> Router<Http> {
    Router::new()
        .route("/v1/namespaces", get(list))
        .route("/v1/namespace", routing::put(create).post(create))
        .route("/v1/namespace/", any(missing_name))
        .route(
            "/v1/namespace/{name}",
            get(get_one).put(put).post(put).delete(delete),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_reads_back_as_written() {
        let body = json!({
            "Name": "prod", "Description": "d", "Meta": {"team": "a"},
            "Quota": "", "Capabilities": null, "CreateIndex": 7, "ModifyIndex": 9,
            "NodePoolConfiguration": {"Default": "", "Allowed": [], "Denied": null},
        });
        let ns = namespace_from(&body).unwrap();
        assert_eq!((ns.name.as_str(), ns.description.as_str()), ("prod", "d"));
        assert_eq!(ns.meta.get("team").map(String::as_str), Some("a"));
        let again = namespace_from(&namespace_json(&ns)).unwrap();
        assert_eq!(again, ns);
    }

    #[test]
    fn what_caravan_does_not_honour_is_refused_by_name() {
        for (body, field) in [
            (json!({"Name": "a", "Quota": "q"}), "Quota"),
            (
                json!({"Name": "a", "Capabilities": {"EnabledTaskDrivers": ["docker"]}}),
                "Capabilities",
            ),
            (
                json!({"Name": "a", "NodePoolConfiguration": {"Default": "gpu"}}),
                "NodePoolConfiguration",
            ),
            (json!({"Name": "a", "Bogus": 1}), "Bogus"),
            (json!({"Name": "a", "Meta": {"k": 1}}), "Meta.k"),
        ] {
            let err = namespace_from(&body).unwrap_err();
            assert!(format!("{err:?}").contains(field), "{field}: {err:?}");
        }
    }
}

//! `GET /v1/node/pools`, `GET|PUT|POST|DELETE /v1/node/pool/:name` and the
//! pool's `nodes` and `jobs`, in Nomad's JSON.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query as QueryString, State};
use axum::response::Response;
use axum::routing::get;
use caravan_proto::{NodePool, NodePoolSchedulerConfig, SchedulerAlgorithm};
use serde_json::{Value, json};

use crate::namespaces::{meta_field, says_nothing};
use crate::render::{self, NodeStubFields, index};
use crate::{ApiError, ApiResult, Http, Params, decode, flag, query, with_index};
use caravan_gateway_core::error::GatewayError;
use caravan_gateway_core::node_pools;
use caravan_gateway_core::query::ALL_NAMESPACES;

/// The identity TTL Nomad gives every pool; the only one Caravan takes.
const DEFAULT_IDENTITY_TTL_NS: u64 = 24 * 3600 * 1_000_000_000;

/// Nomad's `NodePoolSchedulerConfiguration` JSON; null when the pool sets
/// nothing.
fn scheduler_json(pool: &NodePool) -> Value {
    let algorithm = pool
        .scheduler_config
        .map_or(SchedulerAlgorithm::Unspecified, |c| c.scheduler_algorithm());
    let name = match algorithm {
        SchedulerAlgorithm::Unspecified => return Value::Null,
        SchedulerAlgorithm::Binpack => "binpack",
        SchedulerAlgorithm::Spread => "spread",
    };
    json!({"SchedulerAlgorithm": name, "MemoryOversubscriptionEnabled": null})
}

/// A pool body's `SchedulerConfiguration`: its `SchedulerAlgorithm`
/// (`binpack`, `spread`, or empty for the cluster's). A per-pool
/// `MemoryOversubscriptionEnabled` is refused by name: Caravan's scheduler
/// does not take it from a pool.
fn scheduler_from(value: &Value) -> Result<Option<NodePoolSchedulerConfig>, ApiError> {
    let fields = match value {
        Value::Null => return Ok(None),
        Value::Object(fields) => fields,
        _ => {
            return Err(ApiError::field(
                "SchedulerConfiguration",
                "must be an object",
            ));
        }
    };
    let mut algorithm = SchedulerAlgorithm::Unspecified;
    for (key, value) in fields {
        let is = |name: &str| name.eq_ignore_ascii_case(key);
        if is("SchedulerAlgorithm") {
            algorithm = match value {
                Value::Null => SchedulerAlgorithm::Unspecified,
                Value::String(s) if s.is_empty() => SchedulerAlgorithm::Unspecified,
                Value::String(s) if s == "binpack" => SchedulerAlgorithm::Binpack,
                Value::String(s) if s == "spread" => SchedulerAlgorithm::Spread,
                other => {
                    return Err(ApiError::field(
                        "SchedulerConfiguration.SchedulerAlgorithm",
                        format!("invalid scheduler algorithm {other}"),
                    ));
                }
            };
        } else if is("MemoryOversubscriptionEnabled") {
            if !value.is_null() {
                return Err(ApiError::field(
                    "SchedulerConfiguration.MemoryOversubscriptionEnabled",
                    "not supported per node pool: Caravan's scheduler takes memory \
                     oversubscription from the cluster's scheduler configuration only",
                ));
            }
        } else {
            return Err(ApiError::field(
                format!("SchedulerConfiguration.{key}"),
                "unknown node pool scheduler configuration field",
            ));
        }
    }
    Ok((algorithm != SchedulerAlgorithm::Unspecified).then(|| {
        let mut config = NodePoolSchedulerConfig::default();
        config.set_scheduler_algorithm(algorithm);
        config
    }))
}

/// Nomad's `NodePool` JSON.
fn pool_json(pool: &NodePool) -> Value {
    json!({
        "Name": pool.name,
        "Description": pool.description,
        "Meta": if pool.meta.is_empty() { Value::Null } else { json!(pool.meta) },
        "SchedulerConfiguration": scheduler_json(pool),
        "NodeIdentityTTL": DEFAULT_IDENTITY_TTL_NS,
        "CreateIndex": index(pool.create_revision),
        "ModifyIndex": index(pool.modify_revision),
    })
}

/// Reads a pool body, refusing by name what Caravan does not honour.
fn pool_from(body: &Value) -> Result<NodePool, ApiError> {
    let Value::Object(fields) = body else {
        return Err(ApiError::field(
            "body",
            "must be a JSON object (a node pool)",
        ));
    };
    for (key, value) in fields {
        let is = |name: &str| name.eq_ignore_ascii_case(key);
        if [
            "Name",
            "Description",
            "Meta",
            "CreateIndex",
            "ModifyIndex",
            "Hash",
        ]
        .iter()
        .any(|k| is(k))
        {
            continue;
        }
        if is("SchedulerConfiguration") {
            scheduler_from(value)?;
        } else if is("NodeIdentityTTL") {
            if !says_nothing(value) && value.as_u64() != Some(DEFAULT_IDENTITY_TTL_NS) {
                return Err(ApiError::field(
                    "NodeIdentityTTL",
                    "not supported: Caravan's node identities do not expire per pool",
                ));
            }
        } else {
            return Err(ApiError::field(key.clone(), "unknown node pool field"));
        }
    }
    Ok(NodePool {
        name: crate::text_field(body, "Name")?,
        description: crate::text_field(body, "Description")?,
        meta: meta_field(body)?,
        scheduler_config: match crate::body_field(body, "SchedulerConfiguration") {
            Some(value) => scheduler_from(value)?,
            None => None,
        },
        ..Default::default()
    })
}

/// `GET /v1/node/pools?prefix=`.
async fn list(State(http): State<Http>, QueryString(p): QueryString<Params>) -> ApiResult {
    query(&http, &p)?;
    let prefix = p.get("prefix").map_or("", String::as_str);
    let (pools, revision) = node_pools::list(&http.gw, prefix).await?;
    Ok(with_index(
        index(revision),
        Value::Array(pools.iter().map(pool_json).collect()),
    ))
}

/// `GET /v1/node/pool/:name`.
async fn get_one(
    State(http): State<Http>,
    Path(name): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    query(&http, &p)?;
    match node_pools::get(&http.gw, &name).await? {
        Some(pool) => Ok(with_index(index(pool.modify_revision), pool_json(&pool))),
        None => Err(GatewayError::NotFound("node pool not found".into()).into()),
    }
}

fn written(revision: i64) -> Response {
    let mut response = with_index(index(revision), Value::Null);
    *response.body_mut() = axum::body::Body::empty();
    response
}

async fn upsert(http: &Http, path_name: Option<&str>, body: &Bytes) -> ApiResult {
    let v: Value = decode(body)?;
    let pool = pool_from(&v)?;
    if let Some(name) = path_name
        && pool.name != name
    {
        return Err(ApiError::field(
            "Name",
            "Node pool name does not match request path",
        ));
    }
    Ok(written(node_pools::upsert(&http.gw, pool).await?))
}

/// `PUT|POST /v1/node/pool/:name`.
async fn put(State(http): State<Http>, Path(name): Path<String>, body: Bytes) -> ApiResult {
    upsert(&http, Some(&name), &body).await
}

/// `PUT|POST /v1/node/pools`: the pool the body names.
async fn create(State(http): State<Http>, body: Bytes) -> ApiResult {
    upsert(&http, None, &body).await
}

/// `DELETE /v1/node/pool/:name`.
async fn delete(State(http): State<Http>, Path(name): Path<String>) -> ApiResult {
    Ok(written(node_pools::delete(&http.gw, &name).await?))
}

/// Nomad refuses `prefix` on a pool's nodes and jobs.
fn no_prefix(p: &Params) -> Result<(), ApiError> {
    if p.get("prefix").is_some_and(|v| !v.is_empty()) {
        return Err(ApiError::field("prefix", "prefix argument not allowed"));
    }
    Ok(())
}

/// `GET /v1/node/pool/:name/nodes`: node stubs (`all`: every node).
async fn nodes(
    State(http): State<Http>,
    Path(name): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    query(&http, &p)?;
    no_prefix(&p)?;
    let fields = NodeStubFields {
        resources: flag(&p, "resources")?,
        os: flag(&p, "os")?,
    };
    let snap = http.gw.cache().snapshot();
    let mut list: Vec<_> = snap
        .nodes()
        .filter(|n| name == node_pools::ALL || n.node_pool == name)
        .collect();
    list.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(with_index(
        index(snap.revision()),
        Value::Array(list.iter().map(|n| render::node_stub(n, fields)).collect()),
    ))
}

/// `GET /v1/node/pool/:name/jobs?namespace=`: job stubs of the jobs that
/// run in the pool (`all`: every job), in the request's namespace or `*`.
async fn jobs(
    State(http): State<Http>,
    Path(name): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let q = query(&http, &p)?;
    no_prefix(&p)?;
    let snap = http.gw.cache().snapshot();
    let mut list: Vec<_> = snap
        .jobs()
        .filter(|j| q.namespace == ALL_NAMESPACES || j.namespace == q.namespace)
        .filter(|j| name == node_pools::ALL || j.node_pool == name)
        .collect();
    list.sort_by(|a, b| (&a.namespace, &a.id).cmp(&(&b.namespace, &b.id)));
    Ok(with_index(
        index(snap.revision()),
        Value::Array(list.iter().map(|j| render::job_stub(&snap, j)).collect()),
    ))
}

/// The node pool routes, merged into the HTTP API's router; their static
/// segments win over `/v1/node/{id}`.
pub(crate) fn routes() -> Router<Http> {
    Router::new()
        .route("/v1/node/pools", get(list).put(create).post(create))
        .route(
            "/v1/node/pool/{name}",
            get(get_one).put(put).post(put).delete(delete),
        )
        .route("/v1/node/pool/{name}/nodes", get(nodes))
        .route("/v1/node/pool/{name}/jobs", get(jobs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_reads_back_as_written() {
        let body = json!({"Name": "gpu", "Description": "d", "Meta": {"k": "v"},
            "SchedulerConfiguration": null, "CreateIndex": 3});
        let pool = pool_from(&body).unwrap();
        assert_eq!(pool_from(&pool_json(&pool)).unwrap(), pool);
    }

    #[test]
    fn a_pools_scheduler_algorithm_is_kept_and_the_rest_refused_by_name() {
        let body = json!({"Name": "gpu",
            "SchedulerConfiguration": {"SchedulerAlgorithm": "spread",
                "MemoryOversubscriptionEnabled": null}});
        let pool = pool_from(&body).unwrap();
        let config = pool.scheduler_config.unwrap();
        assert_eq!(config.scheduler_algorithm(), SchedulerAlgorithm::Spread);
        assert_eq!(
            pool_json(&pool)["SchedulerConfiguration"],
            body["SchedulerConfiguration"]
        );
        assert_eq!(pool_from(&pool_json(&pool)).unwrap(), pool);
        let unset = json!({"Name": "gpu", "SchedulerConfiguration": {"SchedulerAlgorithm": ""}});
        assert_eq!(pool_from(&unset).unwrap().scheduler_config, None);
        for (config, field) in [
            (json!({"SchedulerAlgorithm": "fast"}), "SchedulerAlgorithm"),
            (
                json!({"MemoryOversubscriptionEnabled": false}),
                "MemoryOversubscriptionEnabled",
            ),
            (
                json!({"Preemption": true}),
                "SchedulerConfiguration.Preemption",
            ),
            (json!("spread"), "SchedulerConfiguration"),
        ] {
            let body = json!({"Name": "gpu", "SchedulerConfiguration": config});
            let err = format!("{:?}", pool_from(&body).unwrap_err());
            assert!(err.contains(field), "{field}: {err}");
        }
        let err = pool_from(&json!({"Name": "gpu", "Color": "red"})).unwrap_err();
        assert!(format!("{err:?}").contains("Color"));
    }
}

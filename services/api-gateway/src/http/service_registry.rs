//! `GET /v1/services`, `GET /v1/service/:name` (`?tag=`, `?choose=`,
//! paging) and `DELETE /v1/service/:name/:id`: Nomad's native service
//! discovery in Nomad's JSON.

use axum::Router;
use axum::extract::{Path, Query as QueryString, State};
use axum::routing::{any, delete, get};
use caravan_proto::ServiceRegistration;
use serde_json::{Value, json};

use crate::http::paging::{self, Key, PageOptions, Tokens};
use crate::http::render::index;
use crate::http::{ApiError, ApiResult, Http, Params, query, read_answer, with_index};
use crate::query::DEFAULT_NAMESPACE;
use crate::service_registry::{self, NamespaceServices};

/// Nomad's `ServiceRegistration` JSON.
fn registration_json(reg: &ServiceRegistration) -> Value {
    json!({
        "ID": reg.id,
        "ServiceName": reg.service_name,
        "Namespace": reg.namespace,
        "NodeID": reg.node_id,
        "Datacenter": reg.datacenter,
        "JobID": reg.job_id,
        "AllocID": reg.alloc_id,
        "Tags": reg.tags,
        "Address": reg.address,
        "Port": reg.port,
        "CreateIndex": index(reg.create_revision),
        "ModifyIndex": index(reg.modify_revision),
    })
}

/// Nomad's `ServiceRegistrationListStub` JSON.
fn namespace_json(ns: &NamespaceServices) -> Value {
    json!({
        "Namespace": ns.namespace,
        "Services": ns.services.iter().map(|s| json!({
            "ServiceName": s.name,
            "Tags": s.tags,
        })).collect::<Vec<_>>(),
    })
}

/// `GET /v1/services`: the services of the namespace (or every one the
/// token reads, with `namespace=*`) and their tags.
async fn list(State(http): State<Http>, QueryString(p): QueryString<Params>) -> ApiResult {
    let q = query(&http, &p)?;
    let (list, meta) = service_registry::list(&http.gw, &q).await?;
    Ok(read_answer(
        &meta,
        Value::Array(list.iter().map(namespace_json).collect()),
    ))
}

/// `GET /v1/service/:name`: its instances, a page of them, or with
/// `?choose=<n>|<key>` the `n` a rendezvous hash picks for the key.
async fn get_service(
    State(http): State<Http>,
    Path(name): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let q = query(&http, &p)?;
    let options = PageOptions::read(&p)?;
    let tag = p.get("tag").map(String::as_str).filter(|t| !t.is_empty());
    let (regs, meta) = service_registry::get(&http.gw, &name, tag, &q).await?;
    let regs = match p.get("choose").filter(|c| !c.is_empty()) {
        Some(choose) => service_registry::choose(regs, choose)?,
        None => regs,
    };
    let page = paging::page(
        regs,
        &options,
        Tokens::NamespaceId,
        |r| Key {
            namespace: &r.namespace,
            id: &r.id,
            create_index: index(r.create_revision),
        },
        registration_json,
    );
    Ok(paging::answer(&meta, page))
}

/// `DELETE /v1/service/:name/:id`: removes one instance.
async fn delete_instance(
    State(http): State<Http>,
    Path((name, id)): Path<(String, String)>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let namespace = p
        .get("namespace")
        .filter(|ns| !ns.is_empty())
        .map_or(DEFAULT_NAMESPACE, String::as_str);
    let revision = service_registry::delete(&http.gw, namespace, &name, &id).await?;
    Ok(with_index(index(revision), Value::Null))
}

/// `/v1/service/` without a name.
async fn missing_name() -> ApiResult {
    Err(ApiError::field("name", "missing service name"))
}

/// The service discovery routes, merged into the HTTP API's router.
pub(crate) fn routes() -> Router<Http> {
    Router::new()
        .route("/v1/services", get(list))
        .route("/v1/service/", any(missing_name))
        .route("/v1/service/{name}", get(get_service))
        .route("/v1/service/{name}/{id}", delete(delete_instance))
}

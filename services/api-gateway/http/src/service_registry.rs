//! `GET /v1/services`, `GET /v1/service/:name` (`?tag=`, `?choose=`,
//! paging), `DELETE /v1/service/:name/:id` and an allocation's check
//! results (`GET /v1/client/allocation/:id/checks`): Nomad's native service
//! discovery in Nomad's JSON.

use axum::Router;
use axum::extract::{Path, Query as QueryString, State};
use axum::response::IntoResponse;
use axum::routing::{any, delete, get};
use caravan_proto::ServiceRegistration;
use serde_json::{Map, Value, json};

use crate::paging::{self, Key, PageOptions, Tokens};
use crate::render::index;
use crate::{ApiError, ApiResult, Http, Params, query, read_answer, with_index};
use caravan_gateway_core::query::DEFAULT_NAMESPACE;
use caravan_gateway_core::service_registry::{self, NamespaceServices};

/// Nomad's `ServiceRegistration` JSON.
pub(crate) fn registration_json(reg: &ServiceRegistration) -> Value {
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

/// Nomad's `CheckQueryResult` of each check of `regs` (the instances of
/// one allocation), by check ID.
pub(crate) fn checks_json(regs: &[ServiceRegistration]) -> Value {
    let mut out = Map::new();
    for reg in regs {
        for check in &reg.checks {
            let id = service_registry::check_id(&reg.alloc_id, check);
            let mut result = json!({
                "ID": id,
                "Mode": if check.mode.is_empty() { "healthiness" } else { &check.mode },
                "Status": service_registry::check_status(&check.status),
                "Output": check.output,
                "Timestamp": check.timestamp,
                "Group": check.group,
                "Service": if check.service.is_empty() { &reg.service_name } else { &check.service },
                "Check": check.check_name,
            });
            if check.status_code != 0 {
                result["StatusCode"] = json!(check.status_code);
            }
            if !check.task.is_empty() {
                result["Task"] = json!(check.task);
            }
            out.insert(id, result);
        }
    }
    Value::Object(out)
}

/// `GET /v1/client/allocation/:alloc_id/checks`: the latest result of each
/// of the allocation's service checks.
async fn alloc_checks(State(http): State<Http>, Path(alloc_id): Path<String>) -> ApiResult {
    let regs = service_registry::of_alloc(&http.gw, &alloc_id).await?;
    Ok(axum::Json(checks_json(&regs)).into_response())
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
        .route("/v1/client/allocation/{alloc_id}/checks", get(alloc_checks))
}

#[cfg(test)]
mod tests {
    use caravan_proto::CheckResult;

    use super::*;

    #[test]
    fn registrations_and_checks_use_nomads_field_names() {
        let reg = ServiceRegistration {
            id: "_nomad-task-a1-web-web-http".into(),
            service_name: "web".into(),
            namespace: "default".into(),
            node_id: "n1".into(),
            datacenter: "dc1".into(),
            job_id: "shop".into(),
            alloc_id: "a1".into(),
            tags: vec!["v1".into()],
            address: "10.0.0.7".into(),
            port: 8080,
            create_revision: 3,
            modify_revision: 4,
            checks: vec![
                CheckResult {
                    check_name: "alive".into(),
                    status: "passing".into(),
                    mode: "healthiness".into(),
                    output: "HTTP 200".into(),
                    status_code: 200,
                    timestamp: 1_700_000_000,
                    group: "web".into(),
                    task: "server".into(),
                    service: "web".into(),
                },
                CheckResult {
                    check_name: "port".into(),
                    status: "critical".into(),
                    group: "web".into(),
                    ..Default::default()
                },
            ],
        };
        let v = registration_json(&reg);
        let mut fields: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        fields.sort_unstable();
        assert_eq!(
            fields,
            [
                "Address",
                "AllocID",
                "CreateIndex",
                "Datacenter",
                "ID",
                "JobID",
                "ModifyIndex",
                "Namespace",
                "NodeID",
                "Port",
                "ServiceName",
                "Tags"
            ]
        );
        assert_eq!(v["Port"], 8080);
        assert_eq!(v["ModifyIndex"], 4);

        let checks = checks_json(std::slice::from_ref(&reg));
        let checks = checks.as_object().unwrap();
        assert_eq!(checks.len(), 2);
        let alive = checks
            .values()
            .find(|c| c["Check"] == "alive")
            .expect("the http check");
        assert_eq!(alive["Status"], "success");
        assert_eq!(alive["StatusCode"], 200);
        assert_eq!(alive["Task"], "server");
        assert_eq!(alive["Mode"], "healthiness");
        assert_eq!(alive["Timestamp"], 1_700_000_000);
        assert_eq!(checks[alive["ID"].as_str().unwrap()], *alive, "keyed by ID");
        let port = checks.values().find(|c| c["Check"] == "port").unwrap();
        assert_eq!(port["Status"], "failure");
        assert_eq!(port["Service"], "web", "the instance's service");
        assert!(port.get("StatusCode").is_none() && port.get("Task").is_none());
    }
}

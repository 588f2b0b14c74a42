//! Evaluations, allocations, nodes, deployments, status and agent
//! endpoints.

use axum::body::Bytes;
use axum::extract::{Path, Query as QueryString, State};
use caravan_model::NomadName;
use caravan_proto::{
    DrainStrategy, SchedulingEligibility, WatcherAllocHealthRequest, WatcherFailRequest,
    WatcherPauseRequest, WatcherPromoteRequest,
};
use serde_json::{Value, json};

use crate::paging::{self, Key, PageOptions, Tokens};
use crate::render::{self, NodeStubFields, index};
use crate::{
    ApiError, ApiResult, Http, Params, body_field, decode, flag, optional_body, query, read_answer,
    with_index,
};
use caravan_gateway_core::deployments::Steer;
use caravan_gateway_core::nodes::NodeUpdated;
use caravan_gateway_core::{allocs, deployments, evals, nodes, status};

/// `GET /v1/evaluations`.
pub(crate) async fn evals(
    State(http): State<Http>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let q = query(&http, &p)?;
    let options = PageOptions::read(&p)?;
    let (list, meta) = evals::list(&http.gw, &q).await;
    let page = paging::page(
        list,
        &options,
        Tokens::by_creation_unless_prefix(&p),
        |e| Key {
            namespace: &e.namespace,
            id: &e.id,
            create_index: render::index(e.create_revision),
        },
        render::evaluation,
    );
    Ok(paging::answer(&meta, page))
}

/// `GET /v1/evaluation/:id`.
pub(crate) async fn eval(
    State(http): State<Http>,
    Path(id): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let q = query(&http, &p)?;
    let (e, meta) = evals::get(&http.gw, &id, &q).await?;
    Ok(read_answer(&meta, render::evaluation(&e)))
}

/// `GET /v1/evaluation/:id/allocations`.
pub(crate) async fn eval_allocs(
    State(http): State<Http>,
    Path(id): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let q = query(&http, &p)?;
    // One snapshot for the allocations, their stubs' job types and the
    // index, so the answer is the state at the index it reports.
    let snap = caravan_gateway_core::query::block(&http.gw, &q).await;
    let (list, meta) = evals::allocations_in(&http.gw, &snap, &id)?;
    Ok(read_answer(
        &meta,
        Value::Array(list.iter().map(|a| render::alloc_stub(&snap, a)).collect()),
    ))
}

/// `GET /v1/allocations`.
pub(crate) async fn allocs(
    State(http): State<Http>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let q = query(&http, &p)?;
    let options = PageOptions::read(&p)?;
    // One snapshot for the allocations, their stubs and the index.
    let snap = caravan_gateway_core::query::block(&http.gw, &q).await;
    let (list, meta) = allocs::list_in(&http.gw, &snap, &q);
    let page = paging::page(
        list,
        &options,
        Tokens::by_creation_unless_prefix(&p),
        |a| Key {
            namespace: &a.namespace,
            id: &a.id,
            create_index: render::index(a.create_revision),
        },
        |a| render::alloc_stub(&snap, a),
    );
    Ok(paging::answer(&meta, page))
}

/// `GET /v1/allocation/:id`.
pub(crate) async fn alloc(
    State(http): State<Http>,
    Path(id): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let q = query(&http, &p)?;
    let (a, meta) = allocs::get(&http.gw, &id, &q).await?;
    let snap = http.gw.cache().snapshot();
    Ok(read_answer(&meta, render::allocation(&snap, &a)))
}

/// `POST /v1/allocation/:id/stop`.
pub(crate) async fn stop_alloc(State(http): State<Http>, Path(id): Path<String>) -> ApiResult {
    let (eval_id, revision) = allocs::stop(&http.gw, &id).await?;
    Ok(with_index(
        index(revision),
        json!({"EvalID": eval_id, "Index": index(revision)}),
    ))
}

/// `GET /v1/nodes` (`?resources=true` adds resources to the stubs, `?os=true`
/// the `os.name` attribute).
pub(crate) async fn nodes(
    State(http): State<Http>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let q = query(&http, &p)?;
    let fields = NodeStubFields {
        resources: flag(&p, "resources")?,
        os: flag(&p, "os")?,
    };
    let options = PageOptions::read(&p)?;
    let (list, meta) = nodes::list(&http.gw, &q).await;
    let page = paging::page(
        list,
        &options,
        Tokens::Id,
        |n| Key {
            namespace: "",
            id: &n.id,
            create_index: render::index(n.create_revision),
        },
        |n| render::node_stub(n, fields),
    );
    Ok(paging::answer(&meta, page))
}

/// `GET /v1/node/:id`.
pub(crate) async fn node(
    State(http): State<Http>,
    Path(id): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let q = query(&http, &p)?;
    let (n, meta) = nodes::get(&http.gw, &id, &q).await?;
    Ok(read_answer(&meta, render::node(&n)))
}

/// `GET /v1/node/:id/allocations`: full allocations, as Nomad returns them.
pub(crate) async fn node_allocs(
    State(http): State<Http>,
    Path(id): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let q = query(&http, &p)?;
    let (list, meta) = nodes::allocations(&http.gw, &id, &q).await?;
    let snap = http.gw.cache().snapshot();
    Ok(read_answer(
        &meta,
        Value::Array(list.iter().map(|a| render::allocation(&snap, a)).collect()),
    ))
}

fn node_update_answer(u: &NodeUpdated) -> axum::response::Response {
    with_index(
        index(u.revision),
        json!({
            "EvalIDs": u.eval_ids,
            "EvalCreateIndex": if u.eval_ids.is_empty() { 0 } else { index(u.revision) },
            "NodeModifyIndex": index(u.revision),
            "Index": index(u.revision),
        }),
    )
}

/// `POST /v1/node/:id/eligibility` with `{"Eligibility": "eligible"|"ineligible"}`.
pub(crate) async fn eligibility(
    State(http): State<Http>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult {
    let v: Value = decode(&body)?;
    let eligibility = match body_field(&v, "Eligibility").and_then(Value::as_str) {
        Some(name) => SchedulingEligibility::from_nomad_name(name).ok_or_else(|| {
            ApiError::field(
                "Eligibility",
                format!("invalid scheduling eligibility {name:?}"),
            )
        })?,
        None => return Err(ApiError::field("Eligibility", "missing eligibility")),
    };
    let u = nodes::update_eligibility(&http.gw, &id, eligibility).await?;
    Ok(node_update_answer(&u))
}

/// `POST /v1/node/:id/drain` with `{"DrainSpec": {"Deadline": ns,
/// "IgnoreSystemJobs": bool} | null, "MarkEligible": bool}`.
pub(crate) async fn drain(
    State(http): State<Http>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult {
    let v: Value = decode(&body)?;
    let strategy = match body_field(&v, "DrainSpec") {
        None | Some(Value::Null) => None,
        Some(spec @ Value::Object(_)) => {
            let deadline = match body_field(spec, "Deadline") {
                None | Some(Value::Null) => 0,
                Some(d) => d.as_i64().ok_or_else(|| {
                    ApiError::field("DrainSpec.Deadline", "must be an integer of nanoseconds")
                })?,
            };
            let ignore = match body_field(spec, "IgnoreSystemJobs") {
                None | Some(Value::Null) => false,
                Some(b) => b.as_bool().ok_or_else(|| {
                    ApiError::field("DrainSpec.IgnoreSystemJobs", "must be a boolean")
                })?,
            };
            Some(DrainStrategy {
                deadline_ns: deadline,
                ignore_system_jobs: ignore,
                ..Default::default()
            })
        }
        Some(_) => return Err(ApiError::field("DrainSpec", "must be an object or null")),
    };
    let mark_eligible = body_field(&v, "MarkEligible")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let u = nodes::update_drain(&http.gw, &id, strategy, mark_eligible).await?;
    Ok(node_update_answer(&u))
}

/// `GET /v1/deployments`.
pub(crate) async fn deployments(
    State(http): State<Http>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let q = query(&http, &p)?;
    let options = PageOptions::read(&p)?;
    let (list, meta) = deployments::list(&http.gw, &q).await;
    let page = paging::page(
        list,
        &options,
        Tokens::by_creation_unless_prefix(&p),
        |d| Key {
            namespace: &d.namespace,
            id: &d.id,
            create_index: render::index(d.create_revision),
        },
        render::deployment,
    );
    Ok(paging::answer(&meta, page))
}

/// `GET /v1/deployment/:id`.
pub(crate) async fn deployment(
    State(http): State<Http>,
    Path(id): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let q = query(&http, &p)?;
    let (d, meta) = deployments::get(&http.gw, &id, &q).await?;
    Ok(read_answer(&meta, render::deployment(&d)))
}

/// `GET /v1/deployment/allocations/:id`: the deployment's allocation stubs.
pub(crate) async fn deployment_allocs(
    State(http): State<Http>,
    Path(id): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let q = query(&http, &p)?;
    let (d, meta) = deployments::get(&http.gw, &id, &q).await?;
    let snap = http.gw.cache().snapshot();
    let stubs: Vec<Value> = snap
        .allocs_by_job(&d.namespace, &d.job_id)
        .filter(|a| a.deployment_id == d.id)
        .map(|a| render::alloc_stub(&snap, a))
        .collect();
    Ok(read_answer(&meta, Value::Array(stubs)))
}

/// `GET /v1/status/leader`: the address serving this API. Caravan has no
/// single server leader; every gateway answers for the cluster.
pub(crate) async fn leader(State(http): State<Http>) -> ApiResult {
    Ok(with_index(
        index(http.gw.cache().revision()),
        Value::String(http.advertised()),
    ))
}

/// `GET /v1/status/peers`.
pub(crate) async fn peers(State(http): State<Http>) -> ApiResult {
    Ok(with_index(
        index(http.gw.cache().revision()),
        json!([http.advertised()]),
    ))
}

/// This gateway as a member of Nomad's gossip pool (`/v1/agent/members`).
fn member(http: &Http) -> Value {
    let addr = http.advertised();
    let (host, port) = addr.rsplit_once(':').map_or((addr.clone(), 0), |(h, p)| {
        (h.to_string(), p.parse().unwrap_or(0))
    });
    json!({
        "Name": format!("caravan-api-gateway.{host}:{port}"),
        "Addr": host,
        "Port": port,
        "Tags": {
            "role": "nomad",
            "region": http.gw.config.region,
            "dc": "dc1",
            "build": env!("CARGO_PKG_VERSION"),
            "port": port.to_string(),
        },
        "Status": "alive",
        "ProtocolMin": 1,
        "ProtocolMax": 5,
        "ProtocolCur": 2,
        "DelegateMin": 2,
        "DelegateMax": 5,
        "DelegateCur": 4,
    })
}

/// `GET /v1/agent/self`.
pub(crate) async fn agent_self(State(http): State<Http>) -> ApiResult {
    let (leaders, _) = status::leaders(&http.gw).await?;
    Ok(axum::response::IntoResponse::into_response(axum::Json(
        json!({
            "config": {
                "Region": http.gw.config.region,
                "Datacenter": "dc1",
                "Version": {"Version": env!("CARGO_PKG_VERSION"), "VersionPrerelease": "", "Revision": ""},
                "Server": {"Enabled": true},
                "Client": {"Enabled": false},
                "Addresses": {"HTTP": http.bound.http.to_string(), "RPC": http.advertised()},
            },
            "member": member(&http),
            "stats": {
                "caravan": {
                    "cache_revision": http.gw.cache().revision().to_string(),
                    "leaders": leaders,
                },
            },
        }),
    )))
}

/// `GET /v1/agent/members`.
pub(crate) async fn members(State(http): State<Http>) -> ApiResult {
    Ok(axum::response::IntoResponse::into_response(axum::Json(
        json!({
            "ServerName": member(&http)["Name"],
            "ServerRegion": http.gw.config.region,
            "ServerDC": "dc1",
            "Members": [member(&http)],
        }),
    )))
}

/// `POST /v1/node/:id/evaluate`.
pub(crate) async fn evaluate_node(State(http): State<Http>, Path(id): Path<String>) -> ApiResult {
    let u = nodes::evaluate(&http.gw, &id).await?;
    Ok(node_update_answer(&u))
}

/// `POST /v1/node/:id/purge`.
pub(crate) async fn purge_node(State(http): State<Http>, Path(id): Path<String>) -> ApiResult {
    let u = nodes::purge(&http.gw, &id).await?;
    Ok(node_update_answer(&u))
}

fn steered(r: &caravan_proto::WatcherResponse) -> axum::response::Response {
    with_index(
        index(r.revision),
        json!({
            "EvalID": r.eval_id,
            "EvalCreateIndex": if r.eval_id.is_empty() { 0 } else { index(r.revision) },
            "DeploymentModifyIndex": index(r.revision),
            "Index": index(r.revision),
        }),
    )
}

fn id_list(v: &Value, field: &str) -> Result<Vec<String>, ApiError> {
    match body_field(v, field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| ApiError::field(field, "must be a list of strings"))
            })
            .collect(),
        Some(_) => Err(ApiError::field(field, "must be a list of strings")),
    }
}

/// A steering body's `DeploymentID`, which Nomad requires to match the path.
/// (Nomad also requires it present; Caravan takes the path's id when it is
/// left out.)
fn check_body_id(v: &Value, path_id: &str) -> Result<(), ApiError> {
    match body_field(v, "DeploymentID") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(id)) if id.is_empty() || id == path_id => Ok(()),
        Some(Value::String(_)) => Err(ApiError::field(
            "DeploymentID",
            "Deployment ID does not match",
        )),
        Some(_) => Err(ApiError::field("DeploymentID", "must be a string")),
    }
}

/// `POST /v1/deployment/promote/:id` with `{"All": bool, "Groups": [..]}`.
pub(crate) async fn promote(
    State(http): State<Http>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult {
    let v = optional_body(&body)?;
    check_body_id(&v, &id)?;
    let groups = id_list(&v, "Groups")?;
    let all = body_field(&v, "All")
        .and_then(Value::as_bool)
        .unwrap_or(groups.is_empty());
    let r = deployments::steer(
        &http.gw,
        Steer::Promote(WatcherPromoteRequest {
            deployment_id: id,
            all,
            groups,
        }),
    )
    .await?;
    Ok(steered(&r))
}

/// `POST /v1/deployment/fail/:id`.
pub(crate) async fn fail(
    State(http): State<Http>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult {
    check_body_id(&optional_body(&body)?, &id)?;
    let r = deployments::steer(
        &http.gw,
        Steer::Fail(WatcherFailRequest { deployment_id: id }),
    )
    .await?;
    Ok(steered(&r))
}

/// `POST /v1/deployment/pause/:id` with `{"Pause": bool}`.
pub(crate) async fn pause(
    State(http): State<Http>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult {
    let v = optional_body(&body)?;
    check_body_id(&v, &id)?;
    let pause = match body_field(&v, "Pause") {
        Some(Value::Bool(b)) => *b,
        _ => return Err(ApiError::field("Pause", "must be true or false")),
    };
    let r = deployments::steer(
        &http.gw,
        Steer::Pause(WatcherPauseRequest {
            deployment_id: id,
            pause,
        }),
    )
    .await?;
    Ok(steered(&r))
}

/// `POST /v1/deployment/allocation-health/:id` with
/// `{"HealthyAllocationIDs": [..], "UnhealthyAllocationIDs": [..]}`.
pub(crate) async fn alloc_health(
    State(http): State<Http>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult {
    let v: Value = decode(&body)?;
    check_body_id(&v, &id)?;
    // The arguments are checked before the deployment is looked at, as
    // Nomad does: a request naming no allocation is refused even for an
    // unknown or terminal deployment.
    let healthy_alloc_ids = id_list(&v, "HealthyAllocationIDs")?;
    let unhealthy_alloc_ids = id_list(&v, "UnhealthyAllocationIDs")?;
    if healthy_alloc_ids.is_empty() && unhealthy_alloc_ids.is_empty() {
        return Err(ApiError::field(
            "HealthyAllocationIDs",
            "must specify at least one healthy/unhealthy allocation ID",
        ));
    }
    let r = deployments::steer(
        &http.gw,
        Steer::AllocHealth(WatcherAllocHealthRequest {
            deployment_id: id,
            healthy_alloc_ids,
            unhealthy_alloc_ids,
        }),
    )
    .await?;
    Ok(steered(&r))
}

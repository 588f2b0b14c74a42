//! `GET|PUT /v1/operator/scheduler/configuration`,
//! `GET /v1/operator/raft/configuration` and `PUT /v1/system/gc`.

use axum::body::Bytes;
use axum::extract::{Query as QueryString, State};
use axum::response::IntoResponse;
use caravan_proto::{PreemptionConfig, SchedulerAlgorithm, SchedulerConfiguration};
use serde_json::{Value, json};

use crate::render::index;
use crate::{ApiError, ApiResult, Http, Params, body_field, decode, params, with_index};
use caravan_gateway_core::error::GatewayError;
use caravan_gateway_core::operator;

fn algorithm_name(a: SchedulerAlgorithm) -> &'static str {
    match a {
        SchedulerAlgorithm::Spread => "spread",
        SchedulerAlgorithm::Unspecified | SchedulerAlgorithm::Binpack => "binpack",
    }
}

/// The configuration in force.
pub(crate) async fn get_config(State(http): State<Http>) -> ApiResult {
    let (c, revision) = operator::get(&http.gw);
    let p = c.preemption_config.unwrap_or_default();
    let contact = http.gw.leader_contact();
    Ok(with_index(
        index(revision),
        json!({
            "SchedulerConfig": {
                "SchedulerAlgorithm": algorithm_name(c.scheduler_algorithm()),
                "PreemptionConfig": {
                    "SystemSchedulerEnabled": p.system_scheduler_enabled,
                    "SysBatchSchedulerEnabled": p.sysbatch_scheduler_enabled,
                    "BatchSchedulerEnabled": p.batch_scheduler_enabled,
                    "ServiceSchedulerEnabled": p.service_scheduler_enabled,
                },
                "MemoryOversubscriptionEnabled": c.memory_oversubscription_enabled,
                "RejectJobRegistration": c.reject_job_registration,
                "PauseEvalBroker": c.pause_eval_broker,
                "CreateIndex": index(c.create_revision),
                "ModifyIndex": index(c.modify_revision),
            },
            "Index": index(revision),
            "LastContact": contact.last_contact_ms,
            "KnownLeader": contact.known,
        }),
    ))
}

fn bool_at(v: &Value, pointer: &str, field: &str) -> Result<bool, ApiError> {
    match v.pointer(pointer) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ApiError::field(field, "must be true or false")),
    }
}

/// Replaces the configuration (`?cas=<index>` for check-and-set).
pub(crate) async fn set_config(
    State(http): State<Http>,
    QueryString(p): QueryString<Params>,
    body: Bytes,
) -> ApiResult {
    let v: Value = decode(&body)?;
    let algorithm = match body_field(&v, "SchedulerAlgorithm").and_then(Value::as_str) {
        None | Some("" | "binpack") => SchedulerAlgorithm::Binpack,
        Some("spread") => SchedulerAlgorithm::Spread,
        Some(other) => {
            return Err(ApiError::field(
                "SchedulerAlgorithm",
                format!("invalid scheduler algorithm {other:?}"),
            ));
        }
    };
    let mut config = SchedulerConfiguration {
        preemption_config: Some(PreemptionConfig {
            system_scheduler_enabled: bool_at(
                &v,
                "/PreemptionConfig/SystemSchedulerEnabled",
                "PreemptionConfig.SystemSchedulerEnabled",
            )?,
            sysbatch_scheduler_enabled: bool_at(
                &v,
                "/PreemptionConfig/SysBatchSchedulerEnabled",
                "PreemptionConfig.SysBatchSchedulerEnabled",
            )?,
            batch_scheduler_enabled: bool_at(
                &v,
                "/PreemptionConfig/BatchSchedulerEnabled",
                "PreemptionConfig.BatchSchedulerEnabled",
            )?,
            service_scheduler_enabled: bool_at(
                &v,
                "/PreemptionConfig/ServiceSchedulerEnabled",
                "PreemptionConfig.ServiceSchedulerEnabled",
            )?,
        }),
        memory_oversubscription_enabled: bool_at(
            &v,
            "/MemoryOversubscriptionEnabled",
            "MemoryOversubscriptionEnabled",
        )?,
        reject_job_registration: bool_at(&v, "/RejectJobRegistration", "RejectJobRegistration")?,
        pause_eval_broker: bool_at(&v, "/PauseEvalBroker", "PauseEvalBroker")?,
        ..Default::default()
    };
    config.set_scheduler_algorithm(algorithm);
    let cas = params::integer(&p, "cas", "index")?;
    let (updated, revision) = operator::set(&http.gw, config, cas).await?;
    Ok(with_index(
        index(revision),
        json!({"Updated": updated, "Index": index(revision)}),
    ))
}

/// `PUT /v1/system/gc`: a garbage collection now at the eval-broker leader;
/// an empty answer, as Nomad gives.
pub(crate) async fn garbage_collect(State(http): State<Http>) -> ApiResult {
    let counts = caravan_gateway_core::broker::garbage_collect(&http.gw).await?;
    tracing::info!(?counts, "forced garbage collection");
    Ok(axum::http::StatusCode::OK.into_response())
}

/// A raft peer address (`host:port`) from an etcd peer URL.
fn peer_address(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    rest.trim_end_matches('/').to_string()
}

/// `GET /v1/operator/raft/configuration`: the raft peers holding the state,
/// which for Caravan are the etcd cluster's members, in Nomad's
/// `RaftConfigurationResponse` shape. `ID` is the member id in hex (as
/// `etcdctl member list` prints it), `Address` its first peer address;
/// `RaftProtocol` names Nomad's raft protocol version, which etcd's raft
/// has none of, so it is `unknown` as Nomad says of a peer it cannot read.
/// The embedded store is one member without an address.
pub(crate) async fn raft_configuration(
    State(http): State<Http>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    params::stale(&p)?;
    let members = http.gw.store.members().await.map_err(GatewayError::from)?;
    let servers: Vec<Value> = members
        .iter()
        .map(|m| {
            json!({
                "ID": format!("{:x}", m.id),
                "Node": m.name,
                "Address": m.peer_urls.first().map(|u| peer_address(u)).unwrap_or_default(),
                "Leader": m.leader,
                "Voter": !m.learner,
                "RaftProtocol": "unknown",
            })
        })
        .collect();
    Ok(axum::Json(json!({
        "Servers": servers,
        "Index": index(http.gw.cache().revision()),
    }))
    .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_urls_become_host_port() {
        assert_eq!(peer_address("http://10.0.0.1:2380"), "10.0.0.1:2380");
        assert_eq!(peer_address("https://[::1]:2380/"), "[::1]:2380");
        assert_eq!(peer_address("etcd-0:2380"), "etcd-0:2380");
    }
}

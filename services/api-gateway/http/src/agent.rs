//! `/v1/regions` and the agent endpoints that manage membership:
//! `/v1/agent/servers`, `/v1/agent/join` and `/v1/agent/force-leave`.
//!
//! A Nomad cluster's membership is a gossip pool that agents join and leave.
//! Caravan's is its etcd cluster's: every gateway reads and writes the same
//! etcd, client nodes dial the gateways named in their own configuration,
//! and nothing is kept about a gateway that stops. These endpoints answer
//! for that cluster as a single-region Nomad would, and never claim a change
//! they did not make.

use axum::extract::{Query as QueryString, RawQuery, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::json;

use crate::{ApiError, ApiResult, Http, Params, flag, params};

/// Every value of `name` in the raw query string, in order (Nomad reads
/// `?address=a&address=b` as two addresses).
fn values(raw: Option<&str>, name: &str) -> Vec<String> {
    params::pairs(raw.unwrap_or_default())
        .into_iter()
        .filter(|(k, v)| k == name && !v.is_empty())
        .map(|(_, v)| v)
        .collect()
}

/// The addresses that name this gateway: its advertised gRPC address and the
/// addresses it listens on.
fn own_addresses(http: &Http) -> [String; 3] {
    [
        http.advertised(),
        http.bound.grpc.to_string(),
        http.bound.http.to_string(),
    ]
}

/// `GET /v1/agent/health[?type=server|client]`, in Nomad's shape:
/// `{"server": {"ok": true, "message": "ok"}}`, answered 500 with the same
/// body when a part asked for is not ok. A gateway is a server agent, never
/// a client one; the server is healthy while the store answers and has no
/// alarm raised (a full etcd names its NOSPACE alarm and what to do).
pub(crate) async fn health(State(http): State<Http>, RawQuery(raw): RawQuery) -> ApiResult {
    let types = values(raw.as_deref(), "type");
    let want = |t: &str| types.is_empty() || types.iter().any(|v| v == t);
    let part = |ok: bool, message: String| json!({"ok": ok, "message": message});
    let mut body = serde_json::Map::new();
    if want("client") && !types.is_empty() {
        body.insert("client".into(), part(false, "client not enabled".into()));
    }
    if want("server") {
        let server = match http.gw.store_health().await {
            Ok(()) => part(true, "ok".into()),
            Err(why) => part(false, why),
        };
        body.insert("server".into(), server);
    }
    let ok = body.values().all(|p| p["ok"] == json!(true));
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    };
    Ok((status, axum::Json(serde_json::Value::Object(body))).into_response())
}

/// `GET /v1/regions`: the one region this cluster is.
pub(crate) async fn regions(State(http): State<Http>) -> ApiResult {
    Ok(axum::Json(json!([http.gw.config.region])).into_response())
}

/// `GET /v1/agent/servers`: the servers a client of this agent uses, as
/// `host:port`. A client node of Caravan uses the gateways' gRPC API; this
/// gateway answers with its own advertised address (other gateways are not
/// recorded anywhere it could read them).
pub(crate) async fn servers(State(http): State<Http>) -> ApiResult {
    Ok(axum::Json(json!([http.advertised()])).into_response())
}

/// `PUT|POST /v1/agent/servers?address=…`: Nomad replaces a client's server
/// list. Caravan's client nodes take their servers from their own
/// configuration, so there is no list here to replace: naming this gateway
/// (the list it already serves) succeeds without change, and any other
/// address is refused rather than silently ignored.
pub(crate) async fn set_servers(State(http): State<Http>, RawQuery(raw): RawQuery) -> ApiResult {
    let addresses = values(raw.as_deref(), "address");
    if addresses.is_empty() {
        return Err(ApiError::field("address", "missing server address"));
    }
    let own = own_addresses(&http);
    if let Some(other) = addresses.iter().find(|a| !own.contains(a)) {
        return Err(ApiError::field(
            "address",
            format!(
                "{other} is not a server of this cluster: client nodes take their servers \
                 from their own configuration (this gateway is {})",
                http.advertised()
            ),
        ));
    }
    Ok(StatusCode::OK.into_response())
}

/// `PUT|POST /v1/agent/join?address=…`: Nomad's servers join a gossip pool.
/// Caravan's servers are members of one etcd cluster and have no pool to
/// join: an address naming this gateway is already joined (it counts, as a
/// Nomad server joining itself does); every other address is reported in
/// `error`, as Nomad reports addresses it failed to join.
pub(crate) async fn join(State(http): State<Http>, RawQuery(raw): RawQuery) -> ApiResult {
    let addresses = values(raw.as_deref(), "address");
    if addresses.is_empty() {
        return Err(ApiError::field("address", "missing address to join"));
    }
    let own = own_addresses(&http);
    let (joined, refused): (Vec<&String>, Vec<&String>) =
        addresses.iter().partition(|a| own.contains(a));
    let error = match refused.len() {
        0 => String::new(),
        n => format!(
            "{n} error{} occurred:\n{}",
            if n == 1 { "" } else { "s" },
            refused
                .iter()
                .map(|a| {
                    format!(
                        "\t* Failed to join {a}: Caravan's servers share membership through \
                         etcd; add a server by starting a gateway on the same etcd cluster"
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        ),
    };
    Ok(axum::Json(json!({
        "num_joined": joined.len(),
        "error": error,
        "warning": "",
    }))
    .into_response())
}

/// `PUT|POST /v1/agent/force-leave?node=…[&prune=]`: Nomad removes a failed
/// member from the gossip pool (and a name it does not know is no error).
/// Caravan keeps no record of a gateway that stops, so there is never a
/// failed member to remove: the request is checked and answered without
/// change. etcd members are managed with etcd's own tools.
pub(crate) async fn force_leave(
    State(_http): State<Http>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    if p.get("node").is_none_or(String::is_empty) {
        return Err(ApiError::field("node", "missing node to force leave"));
    }
    flag(&p, "prune")?;
    // Nomad answers a force-leave with an empty 200.
    Ok(StatusCode::OK.into_response())
}

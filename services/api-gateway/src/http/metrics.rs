//! `GET /v1/metrics`: gauges of the gateway's view of the cluster, in
//! Nomad's JSON layout or, with `?format=prometheus`, Prometheus text.

use std::collections::BTreeMap;

use axum::extract::{Query as QueryString, State};
use axum::http::{HeaderValue, header};
use axum::response::IntoResponse;
use caravan_model::now_unix_ns;
use serde_json::{Value, json};

use crate::http::render::{self, client_status, eval_status};
use crate::http::{ApiError, ApiResult, Http, Params};

/// (name, labels, value) of every gauge.
fn gauges(http: &Http) -> Vec<(String, BTreeMap<String, String>, f64)> {
    let snap = http.gw.cache().snapshot();
    let stats = http.gw.cache().stats();
    let plain = |name: &str, value: f64| {
        (
            format!("caravan.api_gateway.{name}"),
            BTreeMap::new(),
            value,
        )
    };
    let mut out = vec![
        plain("cache.revision", snap.revision() as f64),
        plain("cache.relists", stats.relists as f64),
        plain("cache.reconnects", stats.reconnects as f64),
        plain("cache.batches", stats.batches as f64),
        plain("cache.decode_errors", stats.decode_errors as f64),
        plain("jobs", snap.job_count() as f64),
        plain("nodes", snap.node_count() as f64),
        plain("nodes.live", snap.live_heartbeats().count() as f64),
    ];
    let mut evals: BTreeMap<&str, u64> = BTreeMap::new();
    for e in snap.evals() {
        *evals.entry(eval_status(e.status())).or_default() += 1;
    }
    for (status, n) in evals {
        out.push((
            "caravan.api_gateway.evals".into(),
            BTreeMap::from([("status".to_string(), status.to_string())]),
            n as f64,
        ));
    }
    let mut allocs: BTreeMap<&str, u64> = BTreeMap::new();
    for a in snap.allocs() {
        *allocs.entry(client_status(a.client_status())).or_default() += 1;
    }
    for (status, n) in allocs {
        out.push((
            "caravan.api_gateway.allocs".into(),
            BTreeMap::from([("client_status".to_string(), status.to_string())]),
            n as f64,
        ));
    }
    out
}

/// The gateway's gauges.
pub(crate) async fn metrics(
    State(http): State<Http>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let gauges = gauges(&http);
    match p.get("format").map(String::as_str) {
        None | Some("" | "json") => {
            let list: Vec<Value> = gauges
                .iter()
                .map(
                    |(name, labels, value)| json!({"Name": name, "Value": value, "Labels": labels}),
                )
                .collect();
            Ok(axum::Json(json!({
                "Timestamp": render::time(now_unix_ns()),
                "Gauges": list,
                "Points": [],
                "Counters": [],
                "Samples": [],
            }))
            .into_response())
        }
        Some("prometheus") => {
            let mut text = String::new();
            for (name, labels, value) in &gauges {
                let name = name.replace('.', "_");
                let labels: Vec<String> =
                    labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
                if labels.is_empty() {
                    text.push_str(&format!("{name} {value}\n"));
                } else {
                    text.push_str(&format!("{name}{{{}}} {value}\n", labels.join(",")));
                }
            }
            let mut response = text.into_response();
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4"),
            );
            Ok(response)
        }
        Some(other) => Err(ApiError::field(
            "format",
            format!("must be json or prometheus, not {other:?}"),
        )),
    }
}

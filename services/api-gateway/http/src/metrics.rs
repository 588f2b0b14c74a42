//! `GET /metrics` (Prometheus text) and `GET /v1/metrics` (Nomad's JSON
//! layout, or the same text with `?format=prometheus`): the process
//! registry and the cluster as the gateway's cache holds it.

use std::collections::BTreeMap;

use axum::extract::{Query as QueryString, State};
use axum::response::{IntoResponse, Response};
use caravan_metrics::MetricFamily;
use caravan_metrics::proto::MetricType;
use caravan_model::now_unix_ns;
use serde_json::{Value, json};

use crate::render;
use crate::{ApiError, ApiResult, Http, Params};

/// Every family the gateway exports.
fn families(http: &Http) -> Vec<MetricFamily> {
    caravan_gateway_core::metrics::all(&http.gw.cache().snapshot(), http.gw.waiting.count())
}

/// `GET /metrics`: the text exposition.
pub(crate) async fn prometheus(State(http): State<Http>) -> Response {
    caravan_runtime::metrics::text_response(&families(&http))
}

/// `GET /v1/metrics`: Nomad's JSON layout unless `format=prometheus`.
pub(crate) async fn metrics(
    State(http): State<Http>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let families = families(&http);
    match p.get("format").map(String::as_str) {
        None | Some("" | "json") => Ok(axum::Json(nomad_json(&families)).into_response()),
        Some("prometheus") => Ok(caravan_runtime::metrics::text_response(&families)),
        Some(other) => Err(ApiError::field(
            "format",
            format!("must be json or prometheus, not {other:?}"),
        )),
    }
}

/// `families` in the layout of Nomad's `/v1/metrics`: gauges, counters
/// (their total as Count and Sum) and histograms (as Samples: count, sum,
/// mean), each named `caravan.<rest of the Prometheus name>`.
fn nomad_json(families: &[MetricFamily]) -> Value {
    let (mut gauges, mut counters, mut samples) = (Vec::new(), Vec::new(), Vec::new());
    for family in families {
        let name = match family.name().strip_prefix("caravan_") {
            Some(rest) => format!("caravan.{rest}"),
            None => family.name().to_string(),
        };
        for metric in family.get_metric() {
            let labels: BTreeMap<&str, &str> = metric
                .get_label()
                .iter()
                .map(|l| (l.name(), l.value()))
                .collect();
            match family.get_field_type() {
                MetricType::GAUGE => gauges.push(json!({
                    "Name": name, "Value": metric.get_gauge().get_value(), "Labels": labels,
                })),
                MetricType::COUNTER => {
                    // Counters hold whole numbers: Nomad's Count is one.
                    let total = metric.get_counter().get_value();
                    counters.push(json!({
                        "Name": name, "Count": total.round() as u64, "Sum": total, "Labels": labels,
                    }));
                }
                MetricType::HISTOGRAM => {
                    let h = metric.get_histogram();
                    let count = h.get_sample_count();
                    let sum = h.get_sample_sum();
                    let mean = if count == 0 { 0.0 } else { sum / count as f64 };
                    samples.push(json!({
                        "Name": name, "Count": count, "Sum": sum, "Mean": mean, "Labels": labels,
                    }));
                }
                _ => {}
            }
        }
    }
    json!({
        "Timestamp": render::time(now_unix_ns()),
        "Gauges": gauges,
        "Points": [],
        "Counters": counters,
        "Samples": samples,
    })
}

//! `GET /v1/event/stream`: Nomad's event stream as NDJSON, fed by a watch of
//! the store from `?index=` on, filtered by `?topic=Topic:Key` and
//! `?namespace=`, with a `{}` heartbeat every 30 seconds.

use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, header};
use axum::response::IntoResponse;
use caravan_proto::event::Payload;
use caravan_state::Snapshot;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::{ApiError, ApiResult, Http, params};
use crate::{render, service_registry};
use caravan_gateway_core::events::{self, Change, Filter, RevisionEvents, Tick};

/// Reads the subscription from the query string.
fn parse_filter(raw: Option<&str>) -> Result<Filter, ApiError> {
    let mut filter = Filter::default();
    for (k, v) in params::pairs(raw.unwrap_or_default()) {
        match k.as_str() {
            "topic" => filter.add_topic("topic", &v)?,
            "namespace" => filter.set_namespace(&v),
            // An empty index is absent, as Go's `query.Get` reads it.
            "index" if v.is_empty() => {}
            "index" => {
                let index = params::unsigned(&v)
                    .and_then(|i| i64::try_from(i).ok())
                    .ok_or_else(|| ApiError::field("index", format!("invalid index {v:?}")))?;
                filter.set_index(index)?;
            }
            _ => {}
        }
    }
    Ok(filter.finish())
}

/// One change as a Nomad event.
fn to_event(snap: &Snapshot, change: &Change) -> Value {
    let payload = match &change.object {
        Some(Payload::Service(reg)) => json!({"Service": service_registry::registration_json(reg)}),
        Some(Payload::Job(job)) => json!({"Job": caravan_jobspec::render_json(job)}),
        Some(Payload::Evaluation(eval)) => json!({"Evaluation": render::evaluation(eval)}),
        Some(Payload::Allocation(alloc)) => json!({"Allocation": render::allocation(snap, alloc)}),
        Some(Payload::Deployment(d)) => json!({"Deployment": render::deployment(d)}),
        Some(Payload::Node(node)) => json!({"Node": render::node(node)}),
        // Only jobs and nodes are published without their object.
        None if change.topic == "Node" => json!({"Node": {"ID": change.key}}),
        None => json!({"Job": {"ID": change.key, "Namespace": change.namespace}}),
    };
    json!({
        "Type": change.kind,
        "Payload": payload,
        "Topic": change.topic,
        "Key": change.key,
        "Namespace": change.namespace.clone().unwrap_or_default(),
        "FilterKeys": (!change.filter_keys.is_empty()).then_some(&change.filter_keys),
        "Index": render::index(change.revision),
    })
}

/// The NDJSON lines of one watch batch: one line per revision with events
/// the subscriber wants.
fn lines(snap: &Snapshot, revisions: &[RevisionEvents]) -> Vec<u8> {
    let mut out = Vec::new();
    for rev in revisions {
        let events: Vec<Value> = rev.changes.iter().map(|c| to_event(snap, c)).collect();
        out.extend_from_slice(
            json!({"Index": rev.index, "Events": events})
                .to_string()
                .as_bytes(),
        );
        out.push(b'\n');
    }
    out
}

/// Streams events until the client leaves or the gateway stops.
pub(crate) async fn stream(
    State(http): State<Http>,
    RawQuery(raw): RawQuery,
    caller: Option<axum::Extension<caravan_gateway_core::acl::Caller>>,
) -> ApiResult {
    let mut filter = parse_filter(raw.as_deref())?;
    filter.acl = caller.map(|axum::Extension(c)| c.acl);
    let gw = http.gw.clone();
    let ticks = events::subscribe(&gw, filter).await?;
    let body = ticks.map(move |tick| {
        tick.map(|tick| match tick {
            Tick::Events(revisions) => Bytes::from(lines(&gw.cache().snapshot(), &revisions)),
            Tick::Heartbeat => Bytes::from_static(b"{}\n"),
        })
    });
    let mut response = Body::from_stream(body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_filter_by_key_and_namespace() {
        let f = parse_filter(Some("topic=Job:web&topic=Evaluation&index=7")).unwrap();
        assert_eq!(f.index, 7);
        assert!(f.wants("Job", "web", Some("default")));
        assert!(!f.wants("Job", "api", Some("default")));
        assert!(f.wants("Evaluation", "e1", Some("default")));
        assert!(!f.wants("Evaluation", "e1", Some("other")));
        assert!(!f.wants("Node", "n1", None));
        let all = parse_filter(Some("namespace=%2A")).unwrap();
        assert!(all.wants("Node", "n1", None));
        assert!(all.wants("Job", "x", Some("other")));
        assert!(parse_filter(Some("topic=Nope")).is_err());
        assert!(parse_filter(Some("index=-1")).is_err());
    }
}

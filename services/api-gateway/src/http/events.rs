//! `GET /v1/event/stream`: Nomad's event stream as NDJSON, fed by a watch of
//! the store from `?index=` on, filtered by `?topic=Topic:Key` and
//! `?namespace=`, with a `{}` heartbeat every 30 seconds.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, header};
use axum::response::IntoResponse;
use caravan_proto::{Allocation, Deployment, Evaluation, Job, Node};
use caravan_state::{Keyspace, Snapshot, StateKey, StateObject, decode};
use caravan_store::{Event, EventKind, WatchBatch};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::error::GatewayError;
use crate::gateway::Gateway;
use crate::http::render;
use crate::http::{ApiError, ApiResult, Http};
use crate::query::{ALL_NAMESPACES, DEFAULT_NAMESPACE};

/// How often an idle stream says it is alive.
const HEARTBEAT: Duration = Duration::from_secs(30);

/// The topics Caravan publishes.
const TOPICS: [&str; 5] = ["Job", "Evaluation", "Allocation", "Deployment", "Node"];

/// What a subscriber asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Filter {
    /// (topic, key) pairs; `*` matches anything.
    topics: Vec<(String, String)>,
    namespace: String,
    index: i64,
}

impl Filter {
    fn parse(raw: Option<&str>) -> Result<Filter, ApiError> {
        let mut filter = Filter {
            topics: Vec::new(),
            namespace: DEFAULT_NAMESPACE.into(),
            index: 0,
        };
        for pair in raw.unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = percent_decode(v);
            match k {
                "topic" => {
                    let (topic, key) = v.split_once(':').unwrap_or((v.as_str(), "*"));
                    if topic != "*" && !TOPICS.contains(&topic) {
                        return Err(ApiError::field(
                            "topic",
                            format!("unknown topic {topic:?}; one of {}", TOPICS.join(", ")),
                        ));
                    }
                    filter.topics.push((topic.to_string(), key.to_string()));
                }
                "namespace" if !v.is_empty() => filter.namespace = v,
                "index" => {
                    filter.index =
                        v.parse::<i64>().ok().filter(|i| *i >= 0).ok_or_else(|| {
                            ApiError::field("index", format!("invalid index {v:?}"))
                        })?;
                }
                _ => {}
            }
        }
        if filter.topics.is_empty() {
            filter.topics.push(("*".into(), "*".into()));
        }
        Ok(filter)
    }

    fn wants(&self, topic: &str, key: &str, namespace: Option<&str>) -> bool {
        if let Some(ns) = namespace
            && self.namespace != ALL_NAMESPACES
            && self.namespace != ns
        {
            return false;
        }
        self.topics
            .iter()
            .any(|(t, k)| (t == "*" || t == topic) && (k == "*" || k == key))
    }
}

fn percent_decode(s: &str) -> String {
    fn hex(b: u8) -> Option<u8> {
        (b as char).to_digit(16).and_then(|d| u8::try_from(d).ok())
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let decoded = match bytes[i] {
            b'%' if i + 2 < bytes.len() => hex(bytes[i + 1]).zip(hex(bytes[i + 2])),
            _ => None,
        };
        match (decoded, bytes[i]) {
            (Some((hi, lo)), _) => {
                out.push(hi * 16 + lo);
                i += 3;
            }
            (None, b'+') => {
                out.push(b' ');
                i += 1;
            }
            (None, b) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One store event as a Nomad event, if it is on a published topic.
fn to_event(
    keys: &Keyspace,
    snap: &Snapshot,
    event: &Event,
) -> Option<(String, String, Option<String>, Value)> {
    let key = keys.parse(&event.kv.key).ok()?;
    let put = event.kind == EventKind::Put;
    fn obj<T: StateObject>(event: &Event) -> Option<T> {
        decode::<T>(&event.kv).ok()
    }
    match key {
        StateKey::Job { namespace, id } => {
            let payload = match put.then(|| obj::<Job>(event)).flatten() {
                Some(job) => caravan_jobspec::render_json(&job),
                None => json!({"ID": id, "Namespace": namespace}),
            };
            let kind = if put {
                "JobRegistered"
            } else {
                "JobDeregistered"
            };
            Some((
                "Job".into(),
                id,
                Some(namespace),
                json!({"Type": kind, "Payload": {"Job": payload}}),
            ))
        }
        StateKey::Eval(id) => {
            let eval = put.then(|| obj::<Evaluation>(event)).flatten()?;
            let ns = eval.namespace.clone();
            Some((
                "Evaluation".into(),
                id,
                Some(ns),
                json!({"Type": "EvaluationUpdated", "Payload": {"Evaluation": render::evaluation(&eval)}}),
            ))
        }
        StateKey::Alloc(id) => {
            let alloc = put.then(|| obj::<Allocation>(event)).flatten()?;
            let ns = alloc.namespace.clone();
            Some((
                "Allocation".into(),
                id,
                Some(ns),
                json!({"Type": "AllocationUpdated", "Payload": {"Allocation": render::allocation(snap, &alloc)}}),
            ))
        }
        StateKey::Deployment(id) => {
            let d = put.then(|| obj::<Deployment>(event)).flatten()?;
            let ns = d.namespace.clone();
            Some((
                "Deployment".into(),
                id,
                Some(ns),
                json!({"Type": "DeploymentStatusUpdate", "Payload": {"Deployment": render::deployment(&d)}}),
            ))
        }
        StateKey::Node(id) => {
            let payload = match put.then(|| obj::<Node>(event)).flatten() {
                Some(node) => render::node(&node),
                None => json!({"ID": id}),
            };
            let kind = if put {
                "NodeRegistration"
            } else {
                "NodeDeregistration"
            };
            Some((
                "Node".into(),
                id,
                None,
                json!({"Type": kind, "Payload": {"Node": payload}}),
            ))
        }
        _ => None,
    }
}

/// The NDJSON lines of one watch batch: one line per revision with events
/// the subscriber wants.
fn lines(gw: &Gateway, filter: &Filter, batch: &WatchBatch) -> Vec<u8> {
    let snap = gw.cache().snapshot();
    let mut out = Vec::new();
    let mut current: Option<(i64, Vec<Value>)> = None;
    let flush = |entry: Option<(i64, Vec<Value>)>, out: &mut Vec<u8>| {
        if let Some((index, events)) = entry
            && !events.is_empty()
        {
            out.extend_from_slice(
                json!({"Index": index, "Events": events})
                    .to_string()
                    .as_bytes(),
            );
            out.push(b'\n');
        }
    };
    for event in &batch.events {
        let revision = event.kv.mod_revision;
        if current.as_ref().is_some_and(|(r, _)| *r != revision) {
            flush(current.take(), &mut out);
        }
        let Some((topic, key, namespace, mut body)) = to_event(gw.keys(), &snap, event) else {
            continue;
        };
        if !filter.wants(&topic, &key, namespace.as_deref()) {
            continue;
        }
        if let Value::Object(map) = &mut body {
            map.insert("Topic".into(), Value::String(topic));
            map.insert("Key".into(), Value::String(key));
            map.insert(
                "Namespace".into(),
                Value::String(namespace.unwrap_or_default()),
            );
            map.insert("FilterKeys".into(), Value::Null);
            map.insert("Index".into(), json!(render::index(revision)));
        }
        current
            .get_or_insert_with(|| (revision, Vec::new()))
            .1
            .push(body);
    }
    flush(current.take(), &mut out);
    out
}

/// Streams events until the client leaves or the gateway stops.
pub(crate) async fn stream(State(http): State<Http>, RawQuery(raw): RawQuery) -> ApiResult {
    let filter = Filter::parse(raw.as_deref())?;
    let gw = http.gw.clone();
    let start = if filter.index > 0 {
        filter.index + 1
    } else {
        0
    };
    let watch = gw
        .store
        .watch(gw.keys().root(), start)
        .await
        .map_err(GatewayError::from)?;
    let events = {
        let gw = gw.clone();
        watch.stream.map(move |batch| match batch {
            Ok(batch) => Ok::<Bytes, GatewayError>(Bytes::from(lines(&gw, &filter, &batch))),
            Err(err) => Err(GatewayError::from(err)),
        })
    };
    let heartbeats = futures::stream::unfold((), |()| async {
        tokio::time::sleep(HEARTBEAT).await;
        Some((Ok(Bytes::from_static(b"{}\n")), ()))
    });
    let body = futures::stream::select(events, heartbeats)
        .filter(|chunk| futures::future::ready(!matches!(chunk, Ok(b) if b.is_empty())))
        .take_until(gw.shutdown.clone().cancelled_owned());
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
        let f = Filter::parse(Some("topic=Job:web&topic=Evaluation&index=7")).unwrap();
        assert_eq!(f.index, 7);
        assert!(f.wants("Job", "web", Some("default")));
        assert!(!f.wants("Job", "api", Some("default")));
        assert!(f.wants("Evaluation", "e1", Some("default")));
        assert!(!f.wants("Evaluation", "e1", Some("other")));
        assert!(!f.wants("Node", "n1", None));
        let all = Filter::parse(Some("namespace=%2A")).unwrap();
        assert!(all.wants("Node", "n1", None));
        assert!(all.wants("Job", "x", Some("other")));
        assert!(Filter::parse(Some("topic=Nope")).is_err());
        assert!(Filter::parse(Some("index=-1")).is_err());
    }
}

//! A task's `Artifacts`, both ways.
//!
//! Every field of Nomad's artifact block has a place in Caravan's model except
//! `GetterInsecure`, which is refused by name: Caravan's clients always verify TLS.
//! Which sources and options a client can fetch is checked by validation, so a job
//! built over gRPC gets the same answer.

use super::fields::{take_bool, take_str, take_str_map};
use super::to_proto::{Conversion, is_meaningful as meaningful};
use crate::error::join_path as join;
use crate::task_defaults;
use caravan_proto::Artifact;
use serde_json::{Value, json};

/// A task's `Artifacts` list as Caravan's artifacts, with Nomad's defaults.
pub(super) fn artifacts_to_proto(
    value: Option<Value>,
    base: &str,
    conv: &mut Conversion,
) -> Vec<Artifact> {
    let items = match value {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Array(items)) => items,
        Some(other) => {
            conv.err(
                join(base, "Artifacts"),
                format!("must be a list (got {other})"),
            );
            return Vec::new();
        }
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let path = join(base, &format!("artifact[{i}]"));
        let Value::Object(mut f) = item else {
            conv.err(path, "must be an object");
            continue;
        };
        if f.remove("GetterInsecure").as_ref().is_some_and(meaningful) {
            conv.err(
                join(&path, "insecure"),
                "is not supported by Caravan: its clients always verify the TLS certificate of an artifact's server",
            );
        }
        let mut artifact = Artifact {
            source: take_str(&mut f, "GetterSource", &path, conv),
            options: take_str_map(&mut f, "GetterOptions", &path, conv),
            headers: take_str_map(&mut f, "GetterHeaders", &path, conv),
            mode: take_str(&mut f, "GetterMode", &path, conv),
            destination: take_str(&mut f, "RelativeDest", &path, conv),
            chown: take_bool(&mut f, "Chown", &path, conv),
        };
        for (unknown, v) in f {
            if meaningful(&v) {
                conv.err(join(&path, &unknown), "is not a field of an artifact");
            }
        }
        task_defaults::artifact(&mut artifact);
        out.push(artifact);
    }
    out
}

/// A task's artifacts in Nomad's JSON (`null` when it has none).
pub(super) fn artifacts_to_api(artifacts: &[Artifact]) -> Option<Value> {
    if artifacts.is_empty() {
        return None;
    }
    Some(Value::Array(
        artifacts
            .iter()
            .map(|a| {
                json!({
                    "GetterSource": a.source,
                    "GetterOptions": (!a.options.is_empty()).then_some(&a.options),
                    "GetterHeaders": (!a.headers.is_empty()).then_some(&a.headers),
                    "GetterMode": a.mode,
                    "GetterInsecure": false,
                    "RelativeDest": a.destination,
                    "Chown": a.chown,
                })
            })
            .collect(),
    ))
}

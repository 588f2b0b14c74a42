//! A task's `Identity` (its default workload identity) and `Identities`, both ways.
//!
//! Caravan keeps them in one list, the default identity first. The default identity
//! Nomad's servers give every task, exposed neither in the env nor in a file, is left
//! out: it carries nothing to the task. `Filepath`, `ServiceName` and `ExtraClaims` are
//! refused by name (see [`IDENTITY_REFUSED`]).

use super::fields::{take_bool, take_int, take_str, take_str_list};
use super::to_proto::{Conversion, is_meaningful as meaningful};
use crate::error::join_path as join;
use crate::task_defaults;
use caravan_proto::WorkloadIdentity;
use serde_json::{Value, json};

/// Identity fields Caravan does not honour, refused by name with why.
const IDENTITY_REFUSED: &[(&str, &str, &str)] = &[
    (
        "Filepath",
        "filepath",
        "Caravan's clients write a token only to the task's secrets directory",
    ),
    (
        "ServiceName",
        "service_name",
        "Caravan issues identities to tasks, not to services",
    ),
    (
        "ExtraClaims",
        "extra_claims",
        "Caravan's identity tokens carry only its own claims",
    ),
];

/// A task's `Identity` and `Identities` as Caravan's identities, the default first.
pub(super) fn identities_to_proto(
    identity: Option<Value>,
    identities: Option<Value>,
    base: &str,
    conv: &mut Conversion,
) -> Vec<WorkloadIdentity> {
    let mut out = Vec::new();
    if let Some(v) = identity.filter(|v| !v.is_null())
        && let Some(id) = one(v, base, "Identity", conv)
        && !task_defaults::is_implicit_identity(&id)
    {
        out.push(id);
    }
    match identities {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for (i, v) in items.into_iter().enumerate() {
                if let Some(id) = one(v, base, &format!("Identities[{i}]"), conv) {
                    out.push(id);
                }
            }
        }
        Some(other) => conv.err(
            join(base, "Identities"),
            format!("must be a list (got {other})"),
        ),
    }
    out
}

/// One identity, its errors under `identity "<name>"` (as validation names it), or under
/// `fallback` (`Identities[1]`) when it is not an object.
fn one(v: Value, base: &str, fallback: &str, conv: &mut Conversion) -> Option<WorkloadIdentity> {
    let Value::Object(mut f) = v else {
        conv.err(join(base, fallback), "must be an object");
        return None;
    };
    let name = match f.get("Name").and_then(Value::as_str) {
        None | Some("") => task_defaults::DEFAULT_IDENTITY_NAME,
        Some(name) => name,
    };
    let path = join(base, &format!("identity {name:?}"));
    for (json_name, hcl, why) in IDENTITY_REFUSED {
        if f.remove(*json_name).as_ref().is_some_and(meaningful) {
            conv.err(
                join(&path, hcl),
                format!("{hcl} ({json_name}) is not supported by Caravan: {why}"),
            );
        }
    }
    let mut id = WorkloadIdentity {
        name: take_str(&mut f, "Name", &path, conv),
        audience: take_str_list(&mut f, "Audience", &path, conv),
        env: take_bool(&mut f, "Env", &path, conv),
        file: take_bool(&mut f, "File", &path, conv),
        ttl_ns: take_int(&mut f, "TTL", &path, conv),
        change_mode: take_str(&mut f, "ChangeMode", &path, conv),
        change_signal: take_str(&mut f, "ChangeSignal", &path, conv),
    };
    for (unknown, v) in f {
        if meaningful(&v) {
            conv.err(join(&path, &unknown), "is not a field of an identity");
        }
    }
    task_defaults::identity(&mut id);
    Some(id)
}

/// A task's identities in Nomad's JSON: the default one as `Identity`, the others as
/// `Identities`.
pub(super) fn identities_to_api(ids: &[WorkloadIdentity]) -> (Option<Value>, Option<Value>) {
    let render = |id: &WorkloadIdentity| {
        json!({
            "Name": id.name,
            "Audience": id.audience,
            "Env": id.env,
            "File": id.file,
            "Filepath": "",
            "ServiceName": "",
            "TTL": id.ttl_ns,
            "ChangeMode": id.change_mode,
            "ChangeSignal": id.change_signal,
            "ExtraClaims": null,
        })
    };
    let default = ids
        .iter()
        .find(|id| task_defaults::is_default_identity_name(&id.name));
    let others: Vec<Value> = ids
        .iter()
        .filter(|id| !task_defaults::is_default_identity_name(&id.name))
        .map(render)
        .collect();
    (
        default.map(render),
        (!others.is_empty()).then_some(Value::Array(others)),
    )
}

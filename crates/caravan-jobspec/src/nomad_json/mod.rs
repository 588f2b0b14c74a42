//! Nomad's JSON job format, both ways: `{"Job": {...}}` bodies in, `GET /v1/job/:id` out.

mod artifacts;
mod dns;
mod fields;
mod from_proto;
mod identities;
pub(crate) mod model;
mod policies;
mod services;
mod templates;
mod to_proto;
mod volumes;

use crate::error::{FieldError, FieldErrors, JobspecError};
use caravan_proto::Job;
use model::{ApiJob, ApiJobRequest};
use serde_json::Value;

pub(crate) use from_proto::{job_to_api, scaling_to_api as render_scaling};
pub(crate) use to_proto::{Conversion, job_to_proto};

/// Parses JSON text, reporting syntax errors with their position.
pub(crate) fn parse_value(body: &[u8]) -> Result<Value, JobspecError> {
    serde_json::from_slice(body).map_err(|e| JobspecError::JsonSyntax {
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })
}

/// Reads a Nomad job from JSON: a register body `{"Job": {...}}` or a bare job object.
/// Fields Nomad does not have are ignored with a warning each.
pub(crate) fn api_job_from_value(
    value: Value,
    warnings: &mut Vec<String>,
) -> Result<ApiJob, JobspecError> {
    let Value::Object(map) = &value else {
        return Err(invalid("", "a job must be a JSON object"));
    };
    let wrapped = map.get("Job").is_some_and(Value::is_object);
    let mut unknown = Vec::new();
    let job = if wrapped {
        let request: ApiJobRequest = deserialize(value, &mut unknown)?;
        request.job.unwrap_or_default()
    } else {
        if map.contains_key("Job") {
            return Err(invalid("Job", "must be a JSON object"));
        }
        deserialize(value, &mut unknown)?
    };
    warnings.extend(
        unknown
            .into_iter()
            .map(|path| format!("unknown field {path} was ignored")),
    );
    Ok(job)
}

fn deserialize<T: serde::de::DeserializeOwned>(
    value: Value,
    unknown: &mut Vec<String>,
) -> Result<T, JobspecError> {
    let mut record = |path: serde_ignored::Path<'_>| unknown.push(ignored_path(&path));
    let de = serde_ignored::Deserializer::new(value, &mut record);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        invalid(&path, &e.into_inner().to_string())
    })
}

fn invalid(path: &str, message: &str) -> JobspecError {
    JobspecError::Invalid(FieldErrors(vec![FieldError::new(path, message)]))
}

/// `Job.TaskGroups[0].Tasks[1].Foo`, without serde_ignored's `?` markers for `Option`.
fn ignored_path(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => String::new(),
        Path::Seq { parent, index } => format!("{}[{index}]", ignored_path(parent)),
        Path::Map { parent, key } => {
            let parent = ignored_path(parent);
            if parent.is_empty() {
                key.clone()
            } else {
                format!("{parent}.{key}")
            }
        }
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => ignored_path(parent),
    }
}

/// Converts the mirror into a canonical `Job`, or every field error found.
pub(crate) fn api_job_to_job(api: ApiJob, warnings: &mut Vec<String>) -> Result<Job, JobspecError> {
    let mut conv = Conversion::default();
    let job = job_to_proto(api, &mut conv);
    warnings.append(&mut conv.warnings);
    if conv.errors.is_empty() {
        Ok(job)
    } else {
        Err(JobspecError::Invalid(FieldErrors(conv.errors)))
    }
}

/// Renders a job as Nomad's JSON (`api.Job`), every modelled field included.
pub fn render(job: &Job) -> Value {
    // Serializing plain structs of strings, numbers, maps and lists cannot fail; a null
    // would only mean a bug here, never bad input.
    serde_json::to_value(job_to_api(job)).unwrap_or(Value::Null)
}

//! `/v1/jobs`, `/v1/job/:id/...`, `/v1/jobs/parse` and `/v1/validate/job`.

use axum::body::Bytes;
use axum::extract::{Path, Query as QueryString, State};
use caravan_jobspec::{ParseOptions, parse_json};
use caravan_proto::{Job, JobSubmission};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::paging::{self, Key, PageOptions, Tokens};
use crate::render::{self, index};
use crate::{
    ApiError, ApiResult, Http, Params, body_field, decode, flag, query, read_answer, with_index,
};
use caravan_gateway_core::acl::Caller;
use caravan_gateway_core::deployments;
use caravan_gateway_core::error::GatewayError;
use caravan_gateway_core::jobs::{plan as planning, reads, register as writes};
use caravan_gateway_core::query::DEFAULT_NAMESPACE;

/// `GET /v1/jobs`: job stubs.
pub(crate) async fn list(
    State(http): State<Http>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let q = query(&http, &p)?;
    let options = PageOptions::read(&p)?;
    // One snapshot for the jobs, their stubs' summaries and the index, so
    // the answer is the state at the index it reports.
    let snap = caravan_gateway_core::query::block(&http.gw, &q).await;
    let (jobs, meta) = reads::list_in(&http.gw, &snap, &q);
    let page = paging::page(
        jobs,
        &options,
        Tokens::NamespaceId,
        |j| Key {
            namespace: &j.namespace,
            id: &j.id,
            create_index: render::index(j.create_revision),
        },
        |j| render::job_stub(&snap, j),
    );
    Ok(paging::answer(&meta, page))
}

/// A job from a register/plan body, with the register options around it.
struct Submitted {
    job: Job,
    warnings: Vec<String>,
    raw: Value,
}

/// Decodes a register/plan/validate body. Decoding is CPU-bound and a job may be megabytes
/// of JSON, so it runs off the async workers and the rest of the API keeps answering.
async fn parse_submitted(http: &Http, p: &Params, body: &Bytes) -> Result<Submitted, ApiError> {
    let max_bytes = http.gw.config.max_body_bytes;
    let namespace = p.get("namespace").filter(|ns| !ns.is_empty()).cloned();
    let body = body.clone();
    tokio::task::spawn_blocking(move || decode_submitted(max_bytes, namespace, &body))
        .await
        .map_err(|err| {
            GatewayError::Unavailable(format!("decoding the job was interrupted: {err}"))
        })?
}

fn decode_submitted(
    max_bytes: usize,
    namespace: Option<String>,
    body: &[u8],
) -> Result<Submitted, ApiError> {
    let options = ParseOptions { max_bytes };
    let raw: Value = decode(body)?;
    if !body_field(&raw, "Job").is_some_and(Value::is_object) {
        return Err(ApiError::field("Job", "Job must be specified"));
    }
    let parsed = parse_json(body, &options).map_err(GatewayError::from)?;
    let mut job = parsed.job;
    let explicit_ns = raw
        .pointer("/Job/Namespace")
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty());
    if !explicit_ns && let Some(ns) = namespace {
        job.namespace = ns;
    }
    Ok(Submitted {
        job,
        warnings: parsed.warnings,
        raw,
    })
}

async fn do_register(
    http: &Http,
    caller: Option<&Caller>,
    p: &Params,
    body: &Bytes,
    path_id: Option<&str>,
) -> ApiResult {
    let s = parse_submitted(http, p, body).await?;
    caravan_gateway_core::acl::volumes::check_job_volumes(caller, &s.job)?;
    if let Some(id) = path_id
        && s.job.id != id
    {
        return Err(ApiError::field("Job.ID", "Job ID does not match name"));
    }
    let enforce = body_field(&s.raw, "EnforceIndex")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let wanted = body_field(&s.raw, "JobModifyIndex")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let submission = submission_field(&s.raw)?;
    let r = writes::register_submitted(
        &http.gw,
        s.job,
        enforce.then_some(wanted),
        caravan_model::trigger::JOB_REGISTER,
        submission,
    )
    .await?;
    let mut warnings = s.warnings;
    warnings.extend(r.warnings);
    let contact = http.gw.leader_contact();
    Ok(with_index(
        index(r.revision),
        json!({
            "EvalID": r.eval_id,
            "EvalCreateIndex": index(r.eval_create_revision),
            "JobModifyIndex": index(r.job_modify_revision),
            "Warnings": warnings.join("\n"),
            "Index": index(r.revision),
            "LastContact": contact.last_contact_ms,
            "KnownLeader": contact.known,
        }),
    ))
}

/// The register body's `Submission` (the job's source and variables), if
/// any; its fields are Nomad's `api.JobSubmission`.
fn submission_field(raw: &Value) -> Result<Option<JobSubmission>, ApiError> {
    let sub = match body_field(raw, "Submission") {
        None | Some(Value::Null) => return Ok(None),
        Some(sub @ Value::Object(_)) => sub,
        Some(_) => return Err(ApiError::field("Submission", "must be an object")),
    };
    let text = |name: &str| -> Result<String, ApiError> {
        match body_field(sub, name) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(ApiError::field(
                format!("Submission.{name}"),
                "must be a string",
            )),
        }
    };
    let mut variable_flags = std::collections::BTreeMap::new();
    match body_field(sub, "VariableFlags") {
        None | Some(Value::Null) => {}
        Some(Value::Object(flags)) => {
            for (k, v) in flags {
                let Value::String(v) = v else {
                    return Err(ApiError::field(
                        format!("Submission.VariableFlags.{k}"),
                        "must be a string",
                    ));
                };
                variable_flags.insert(k.clone(), v.clone());
            }
        }
        Some(_) => {
            return Err(ApiError::field(
                "Submission.VariableFlags",
                "must be an object of strings",
            ));
        }
    }
    if let Value::Object(fields) = sub {
        for key in fields.keys() {
            let known = [
                "Source",
                "Format",
                "VariableFlags",
                "Variables",
                "Namespace",
                "JobID",
                "Version",
                "JobModifyIndex",
            ];
            if !known.iter().any(|k| k.eq_ignore_ascii_case(key)) {
                return Err(ApiError::field(
                    format!("Submission.{key}"),
                    "unknown job submission field",
                ));
            }
        }
    }
    let format = text("Format")?;
    if !matches!(format.as_str(), "" | "hcl2" | "json") {
        return Err(ApiError::field(
            "Submission.Format",
            format!("{format:?} is not a job format Caravan reads (hcl2, json)"),
        ));
    }
    Ok(Some(JobSubmission {
        source: text("Source")?,
        format,
        variable_flags,
        variables: text("Variables")?,
        ..Default::default()
    }))
}

/// `GET /v1/job/:id/submission?version=`: the source a version was
/// submitted with; 404 when none was.
pub(crate) async fn submission(
    State(http): State<Http>,
    Path(id): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let q = query(&http, &p)?;
    let version = p
        .get("version")
        .and_then(|v| v.parse::<u64>().ok())
        .ok_or_else(|| {
            ApiError::field(
                "version",
                "Unable to parse job submission version parameter",
            )
        })?;
    let Some(sub) = reads::submission(&http.gw, &q.namespace, &id, version).await? else {
        return Err(GatewayError::NotFound("job source not found".into()).into());
    };
    Ok(with_index(
        index(sub.modify_revision),
        json!({
            "Source": sub.source,
            "Format": sub.format,
            "VariableFlags": sub.variable_flags,
            "Variables": sub.variables,
            "Namespace": sub.namespace,
            "JobID": sub.job_id,
            "Version": sub.version,
            "JobModifyIndex": index(sub.modify_revision),
        }),
    ))
}

/// `PUT|POST /v1/jobs`: register `{"Job": {...}}`.
pub(crate) async fn register(
    State(http): State<Http>,
    caller: Option<axum::Extension<Caller>>,
    QueryString(p): QueryString<Params>,
    body: Bytes,
) -> ApiResult {
    do_register(&http, caller.as_deref(), &p, &body, None).await
}

/// `PUT|POST /v1/job/:id`: register, the path naming the job.
pub(crate) async fn register_at(
    State(http): State<Http>,
    caller: Option<axum::Extension<Caller>>,
    Path(id): Path<String>,
    QueryString(p): QueryString<Params>,
    body: Bytes,
) -> ApiResult {
    do_register(&http, caller.as_deref(), &p, &body, Some(&id)).await
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ParseRequest {
    #[serde(rename = "JobHCL")]
    job_hcl: Option<String>,
    #[serde(default)]
    canonicalize: bool,
    /// An HCL (or JSON) variables file whose values the job's variables take.
    variables: Option<String>,
    /// Nomad's deprecated HCL1 parser, which Caravan does not have.
    #[serde(rename = "HCLv1", default)]
    hcl_v1: bool,
}

/// `POST /v1/jobs/parse`: an HCL job file to Nomad's JSON job, answered as
/// the job object itself; with `Canonicalize` every default is filled in,
/// without it the job is as written (named after its id when unnamed). Its
/// variables take their values from `Variables` (a variables file's text).
pub(crate) async fn parse(State(http): State<Http>, body: Bytes) -> ApiResult {
    let req: ParseRequest = decode(&body)?;
    let Some(hcl) = req.job_hcl.filter(|h| !h.trim().is_empty()) else {
        return Err(ApiError::field("JobHCL", "Job spec is empty"));
    };
    if req.hcl_v1 {
        return Err(ApiError::field(
            "HCLv1",
            "not supported: Caravan parses HCL2 only (HCL1 was removed from Nomad too)",
        ));
    }
    let options = ParseOptions {
        max_bytes: http.gw.config.max_body_bytes,
    };
    let inputs = caravan_jobspec::VariableInputs::from_api(req.variables.as_deref());
    // Parsing is CPU-bound (about 2 µs per object key): off the async
    // workers, so the rest of the API keeps answering meanwhile.
    let canonicalize = req.canonicalize;
    let parsed = tokio::task::spawn_blocking(move || {
        caravan_jobspec::hcl_to_nomad_json_with(&hcl, canonicalize, &inputs, &options)
    })
    .await
    .map_err(|err| GatewayError::Unavailable(format!("parsing the job was interrupted: {err}")))?;
    let (job, _warnings) = parsed.map_err(GatewayError::from)?;
    Ok(axum::response::IntoResponse::into_response(axum::Json(job)))
}

/// `POST /v1/validate/job`: validation errors in the answer, not as a failure.
pub(crate) async fn validate(
    State(http): State<Http>,
    QueryString(p): QueryString<Params>,
    body: Bytes,
) -> ApiResult {
    let s = match parse_submitted(&http, &p, &body).await {
        Ok(s) => s,
        Err(ApiError(GatewayError::InvalidJob(errors))) => {
            return Ok(validation(errors.messages(), Vec::new()));
        }
        Err(err) => return Err(err),
    };
    let mut warnings = s.warnings;
    Ok(
        match writes::prepare(s.job, http.gw.config.max_job_allocs) {
            Ok((_, more)) => {
                warnings.extend(more);
                validation(Vec::new(), warnings)
            }
            Err(GatewayError::InvalidJob(errors)) => validation(errors.messages(), warnings),
            Err(err) if err.is_bad_input() => validation(vec![err.to_string()], warnings),
            Err(err) => return Err(err.into()),
        },
    )
}

fn validation(errors: Vec<String>, warnings: Vec<String>) -> axum::response::Response {
    let error = match errors.len() {
        0 => String::new(),
        n => format!(
            "{n} error{} occurred:\n{}",
            if n == 1 { "" } else { "s" },
            errors
                .iter()
                .map(|e| format!("\t* {e}"))
                .collect::<Vec<_>>()
                .join("\n")
        ),
    };
    axum::response::IntoResponse::into_response(axum::Json(json!({
        "DriverConfigValidated": errors.is_empty(),
        "ValidationErrors": errors,
        "Error": error,
        "Warnings": warnings.join("\n"),
    })))
}

/// `GET /v1/job/:id`: the job in Nomad's JSON.
pub(crate) async fn get(
    State(http): State<Http>,
    Path(id): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let q = query(&http, &p)?;
    let (job, meta) = reads::get(&http.gw, &id, &q).await?;
    Ok(read_answer(&meta, caravan_jobspec::render_json(&job)))
}

/// `DELETE /v1/job/:id?purge=`: stop (or purge) a job; a job that does not
/// exist answers with no evaluation, as Nomad's does.
pub(crate) async fn deregister(
    State(http): State<Http>,
    Path(id): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let purge = flag(&p, "purge")?;
    // A multiregion job would be stopped in every region; Caravan has one
    // region, so `global` changes nothing once it reads as a boolean.
    flag(&p, "global")?;
    let ns = p.get("namespace").map_or(DEFAULT_NAMESPACE, String::as_str);
    // Nomad answers a stop of a job it does not know with an empty reply:
    // nothing to stop, no evaluation (its `Job.Deregister`).
    let r = match writes::deregister(&http.gw, ns, &id, purge).await {
        Err(GatewayError::NotFound(_)) => writes::Deregistered::default(),
        other => other?,
    };
    let rev = http.gw.cache().revision();
    let contact = http.gw.leader_contact();
    Ok(with_index(
        index(rev),
        json!({
            "EvalID": r.eval_id,
            "EvalCreateIndex": index(r.eval_create_revision),
            "JobModifyIndex": index(r.job_modify_revision),
            "Index": index(rev),
            "LastContact": contact.last_contact_ms,
            "KnownLeader": contact.known,
        }),
    ))
}

/// `POST /v1/job/:id/plan`: a dry run with annotations and a diff.
pub(crate) async fn plan(
    State(http): State<Http>,
    Path(id): Path<String>,
    QueryString(p): QueryString<Params>,
    body: Bytes,
) -> ApiResult {
    let s = parse_submitted(&http, &p, &body).await?;
    if s.job.id != id {
        return Err(ApiError::field("Job.ID", "Job ID does not match"));
    }
    let want_diff = body_field(&s.raw, "Diff")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let planned = planning::plan(&http.gw, s.job, want_diff).await?;
    let snap = http.gw.cache().snapshot();
    let annotations = planned.annotations.as_ref().map_or(Value::Null, |a| {
        let updates: serde_json::Map<String, Value> = a
            .desired_tg_updates
            .iter()
            .map(|(tg, u)| {
                (
                    tg.clone(),
                    json!({
                        "Ignore": u.ignore,
                        "Place": u.place,
                        "Migrate": u.migrate,
                        "Stop": u.stop,
                        "InPlaceUpdate": u.in_place_update,
                        "DestructiveUpdate": u.destructive_update,
                        "Canary": u.canary,
                        "Preemptions": u.preemptions,
                        "RescheduleNow": u.reschedule_now,
                        "RescheduleLater": u.reschedule_later,
                        "Disconnect": u.disconnect,
                        "Reconnect": u.reconnect,
                    }),
                )
            })
            .collect();
        json!({
            "DesiredTGUpdates": updates,
            "PreemptedAllocs": a.preempted_allocs.iter()
                .map(|al| render::alloc_stub(&snap, al)).collect::<Vec<_>>(),
        })
    });
    let failed: serde_json::Map<String, Value> = planned
        .failed_tg_allocs
        .iter()
        .map(|(k, v)| (k.clone(), render::alloc_metric(v)))
        .collect();
    let mut warnings = s.warnings;
    warnings.extend(planned.warnings);
    let rev = snap.revision();
    Ok(with_index(
        index(rev),
        json!({
            "Annotations": annotations,
            "FailedTGAllocs": if failed.is_empty() { Value::Null } else { Value::Object(failed) },
            "JobModifyIndex": index(planned.job_modify_revision),
            "CreatedEvals": planned.created_evals.iter().map(render::evaluation).collect::<Vec<_>>(),
            "Diff": planned.diff.as_ref().map_or(Ok(Value::Null), serde_json::to_value)
                .unwrap_or(Value::Null),
            "NextPeriodicLaunch": render::time(0),
            "Warnings": warnings.join("\n"),
            "Index": index(rev),
        }),
    ))
}

/// `POST /v1/job/:id/evaluate`: force a new evaluation.
pub(crate) async fn evaluate(
    State(http): State<Http>,
    Path(id): Path<String>,
    QueryString(p): QueryString<Params>,
    body: Bytes,
) -> ApiResult {
    let force = if body.iter().all(u8::is_ascii_whitespace) {
        false
    } else {
        let v: Value = decode(&body)?;
        v.pointer("/EvalOptions/ForceReschedule")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    let ns = p.get("namespace").map_or(DEFAULT_NAMESPACE, String::as_str);
    let (eval_id, revision) = writes::evaluate(&http.gw, ns, &id, force).await?;
    Ok(with_index(
        index(revision),
        json!({
            "EvalID": eval_id,
            "EvalCreateIndex": index(revision),
            "JobModifyIndex": 0,
            "Index": index(revision),
        }),
    ))
}

/// `GET /v1/job/:id/versions`.
pub(crate) async fn versions(
    State(http): State<Http>,
    Path(id): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let q = query(&http, &p)?;
    let (versions, meta) = reads::versions(&http.gw, &id, &q).await?;
    let rendered: Vec<Value> = versions.iter().map(caravan_jobspec::render_json).collect();
    let contact = http.gw.leader_contact();
    Ok(read_answer(
        &meta,
        json!({
            "Versions": rendered,
            "Diffs": Value::Null,
            "Index": index(meta.revision),
            "LastContact": contact.last_contact_ms,
            "KnownLeader": contact.known,
        }),
    ))
}

/// `GET /v1/job/:id/allocations`: allocation stubs.
pub(crate) async fn allocations(
    State(http): State<Http>,
    Path(id): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let q = query(&http, &p)?;
    // One snapshot for the allocations, what their stubs look up and the
    // index.
    let snap = caravan_gateway_core::query::block(&http.gw, &q).await;
    let (allocs, meta) = reads::allocations_in(&http.gw, &snap, &id, &q);
    let stubs: Vec<Value> = allocs
        .iter()
        .map(|a| render::alloc_stub(&snap, a))
        .collect();
    Ok(read_answer(&meta, Value::Array(stubs)))
}

/// `GET /v1/job/:id/evaluations`.
pub(crate) async fn evaluations(
    State(http): State<Http>,
    Path(id): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let q = query(&http, &p)?;
    let (evals, meta) = reads::evaluations(&http.gw, &id, &q).await?;
    Ok(read_answer(
        &meta,
        Value::Array(evals.iter().map(render::evaluation).collect()),
    ))
}

/// `GET /v1/job/:id/summary`.
pub(crate) async fn summary(
    State(http): State<Http>,
    Path(id): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let q = query(&http, &p)?;
    let (s, meta) = reads::summary(&http.gw, &id, &q).await?;
    Ok(read_answer(&meta, render::job_summary(&s.job, &s.groups)))
}

/// `GET /v1/job/:id/deployments`.
pub(crate) async fn deployments(
    State(http): State<Http>,
    Path(id): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let q = query(&http, &p)?;
    let (list, meta) = deployments::of_job(&http.gw, &id, &q).await;
    Ok(read_answer(
        &meta,
        Value::Array(list.iter().map(render::deployment).collect()),
    ))
}

/// `GET /v1/job/:id/deployment`: the newest deployment, or null.
pub(crate) async fn latest_deployment(
    State(http): State<Http>,
    Path(id): Path<String>,
    QueryString(p): QueryString<Params>,
) -> ApiResult {
    let q = query(&http, &p)?;
    let (list, meta) = deployments::of_job(&http.gw, &id, &q).await;
    Ok(read_answer(
        &meta,
        list.first().map_or(Value::Null, render::deployment),
    ))
}

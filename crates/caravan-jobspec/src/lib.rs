//! Job files (HCL and Nomad JSON) to Caravan's job model, with defaults, validation and diffs.
//!
//! The api-gateway and the `caravan` CLI turn what operators send into a [`Job`] here:
//!
//! - [`parse_hcl`], [`parse_json`] (or [`parse_job`], which tells them apart) give a
//!   canonical job, with Nomad's defaults applied, plus warnings for what was ignored;
//!   [`parse_hcl_with`] and [`parse_job_with`] evaluate a file's HCL2 variables from
//!   [`VariableInputs`] (`-var`, `-var-file`, `NOMAD_VAR_`, the API's `Variables`), and
//!   [`submission`] records the source and variables as Nomad's job submission;
//! - [`validate`] checks its shape as Nomad's `Job.Validate` does (placement rules are
//!   `caravan_scheduler::validate`'s business);
//! - [`render_json`] and [`hcl_to_nomad_json`] speak Nomad's JSON back;
//! - [`diff`] and [`render_plan`] serve `job plan`, annotating destructive changes by
//!   `caravan_model::tasks_updated`, the rule the scheduler decides updates by.

mod canonicalize;
mod defaults;
mod diff;
mod duration;
mod error;
mod hcl;
mod inputs;
mod nomad_json;
mod refused;
mod service_defaults;
pub mod task_defaults;
mod validate;

pub use canonicalize::canonicalize;
pub use caravan_proto::Job;
pub use defaults::{
    DEFAULT_CPU_MHZ, DEFAULT_DISK_MB, DEFAULT_KILL_TIMEOUT_NS, DEFAULT_MEMORY_MB,
    DEFAULT_NAMESPACE, DEFAULT_NODE_POOL, DEFAULT_PRIORITY, MAX_COUNT, SCALING_HORIZONTAL,
    scaling_policy_id,
};
pub use diff::{
    DiffType, FORCES_CREATE, FORCES_DESTROY, FORCES_DESTRUCTIVE_UPDATE, FORCES_IN_PLACE_UPDATE,
    FieldDiff, JobDiff, ObjectDiff, TaskDiff, TaskGroupDiff, diff, render_plan,
};
pub use duration::{format_duration, parse_duration};
pub use error::{FieldError, FieldErrors, JobspecError};
/// The HCL2 functions job files may call (besides `try`, `can` and `convert`), and those
/// Nomad offers that Caravan refuses, with the reason.
pub use hcl::eval::funcs::{REFUSED as REFUSED_HCL_FUNCTIONS, SUPPORTED as HCL_FUNCTIONS};
pub use inputs::{JobSubmission, VAR_ENV_PREFIX, VarFile, VariableInputs, submission};
pub use refused::{REFUSED, Refused};
pub use validate::{LINUX_CAPABILITIES, VOLUME_TYPE_HOST, check_hostname, validate, warnings};

/// Default cap on a job body: far above any real job, well below Nomad's ~10 MB HTTP limit,
/// and small enough that a job, its version and its eval fit one etcd transaction.
pub const DEFAULT_MAX_JOB_BYTES: usize = 4 * 1024 * 1024;

/// Limits applied before a body is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseOptions {
    /// Bodies larger than this many bytes are rejected unread.
    pub max_bytes: usize,
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            max_bytes: DEFAULT_MAX_JOB_BYTES,
        }
    }
}

/// A parsed, canonical job and the warnings about what it contained that Caravan ignored.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// The job, with Nomad's defaults applied; not yet validated.
    pub job: Job,
    /// Human-readable warnings (unsupported blocks, unknown JSON fields, …).
    pub warnings: Vec<String>,
    /// For each variable the file declares, whether it takes a plain value (string,
    /// number, bool, or untyped) rather than an HCL expression: what [`submission`]
    /// needs to file `-var` values as Nomad does.
    pub simple_variables: std::collections::BTreeMap<String, bool>,
}

/// Rejects a body larger than `limit` bytes before any parsing work is spent on it.
pub fn check_size(size: usize, limit: usize) -> Result<(), JobspecError> {
    if size > limit {
        Err(JobspecError::TooLarge { size, limit })
    } else {
        Ok(())
    }
}

/// Parses a Nomad HCL2 job file into a canonical job; its variables take their defaults.
pub fn parse_hcl(text: &str, options: &ParseOptions) -> Result<Parsed, JobspecError> {
    parse_hcl_with(text, &VariableInputs::default(), options)
}

/// Parses a Nomad HCL2 job file into a canonical job, its variables given by `inputs`.
pub fn parse_hcl_with(
    text: &str,
    inputs: &VariableInputs,
    options: &ParseOptions,
) -> Result<Parsed, JobspecError> {
    check_size(text.len(), options.max_bytes)?;
    let decoded = hcl::decode(text, inputs)?;
    let mut warnings = decoded.warnings;
    let job = nomad_json::api_job_to_job(decoded.job, &mut warnings)?;
    Ok(Parsed {
        job,
        warnings,
        simple_variables: decoded.simple_variables,
    })
}

/// Parses a Nomad JSON job (`{"Job": {...}}` or a bare job object) into a canonical job.
pub fn parse_json(body: &[u8], options: &ParseOptions) -> Result<Parsed, JobspecError> {
    check_size(body.len(), options.max_bytes)?;
    let value = nomad_json::parse_value(body)?;
    let mut warnings = Vec::new();
    let api = nomad_json::api_job_from_value(value, &mut warnings)?;
    let job = nomad_json::api_job_to_job(api, &mut warnings)?;
    Ok(Parsed {
        job,
        warnings,
        simple_variables: Default::default(),
    })
}

/// Parses a job file in either format: JSON when it starts with `{`, HCL otherwise.
pub fn parse_job(body: &[u8], options: &ParseOptions) -> Result<Parsed, JobspecError> {
    parse_job_with(body, &VariableInputs::default(), options)
}

/// [`parse_job`], with HCL2 variables given by `inputs` (a JSON job has none).
pub fn parse_job_with(
    body: &[u8],
    inputs: &VariableInputs,
    options: &ParseOptions,
) -> Result<Parsed, JobspecError> {
    check_size(body.len(), options.max_bytes)?;
    if body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
        return parse_json(body, options);
    }
    let text = std::str::from_utf8(body).map_err(|e| {
        JobspecError::Invalid(FieldErrors(vec![FieldError::new(
            "",
            format!("job file is not UTF-8: {e}"),
        )]))
    })?;
    parse_hcl_with(text, inputs, options)
}

/// Renders a job as Nomad's API returns it from `GET /v1/job/:id` (the bare job object;
/// `job inspect` wraps it as `{"Job": ...}`).
pub fn render_json(job: &Job) -> serde_json::Value {
    nomad_json::render(job)
}

/// The scaling policy of `job`'s group `group` in Nomad's JSON
/// (`ScalingPolicy`: `ID`, `Type`, `Target`, `Policy`, `Min`, `Max`,
/// `Enabled`, indexes), or `None` when the group has none.
pub fn render_scaling_policy(
    job: &Job,
    group: &caravan_proto::TaskGroup,
) -> Option<serde_json::Value> {
    nomad_json::render_scaling(job, group)
}

/// `POST /v1/jobs/parse`: HCL in, Nomad JSON job out, canonicalized or as written.
pub fn hcl_to_nomad_json(
    text: &str,
    canonicalize: bool,
    options: &ParseOptions,
) -> Result<(serde_json::Value, Vec<String>), JobspecError> {
    hcl_to_nomad_json_with(text, canonicalize, &VariableInputs::default(), options)
}

/// [`hcl_to_nomad_json`] with the request's variables: `/v1/jobs/parse` passes its
/// `Variables` field as [`VariableInputs::from_api`]. A job Caravan would refuse to run
/// (a block it does not implement, a value out of range) is refused here too, as written
/// or canonical: the answer is never a job that registering would turn down.
pub fn hcl_to_nomad_json_with(
    text: &str,
    canonicalize: bool,
    inputs: &VariableInputs,
    options: &ParseOptions,
) -> Result<(serde_json::Value, Vec<String>), JobspecError> {
    check_size(text.len(), options.max_bytes)?;
    let decoded = hcl::decode(text, inputs)?;
    let mut warnings = decoded.warnings;
    // Plain structs of strings, numbers, maps and lists always serialize.
    let as_written = serde_json::to_value(&decoded.job).unwrap_or(serde_json::Value::Null);
    let job = nomad_json::api_job_to_job(decoded.job, &mut warnings)?;
    if canonicalize {
        return Ok((render_json(&job), warnings));
    }
    Ok((as_written, warnings))
}

/// An HCL job file decoded into Nomad's JSON job exactly as written, as Nomad's own
/// parser decodes it, refusing nothing Caravan does not implement: what the file says,
/// for tools that inspect it (which namespace it names, parity with Nomad's parser).
/// Whatever runs or answers the API goes through [`hcl_to_nomad_json_with`] instead.
pub fn hcl_as_written(
    text: &str,
    inputs: &VariableInputs,
    options: &ParseOptions,
) -> Result<(serde_json::Value, Vec<String>), JobspecError> {
    check_size(text.len(), options.max_bytes)?;
    let decoded = hcl::decode(text, inputs)?;
    // Plain structs of strings, numbers, maps and lists always serialize.
    let value = serde_json::to_value(decoded.job).unwrap_or(serde_json::Value::Null);
    Ok((value, decoded.warnings))
}

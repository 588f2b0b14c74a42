//! What a job file's HCL2 variables are given (the CLI's `-var`, `-var-file` and
//! `NOMAD_VAR_` environment, or the HTTP API's `Variables` text), and the job submission
//! Nomad keeps beside a job so that `job inspect` and the UI can show its source.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use crate::hcl::variables::VAR_ENV_PREFIX;

/// A `-var-file`: its name (for messages) and its text, HCL or JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VarFile {
    /// The path as the user gave it.
    pub name: String,
    /// The file's contents.
    pub text: String,
}

/// Values for a job file's variables and what its file functions may read.
///
/// Nomad's precedence applies, lowest first: a variable's `default`, `NOMAD_VAR_<name>`
/// from `env`, each of `files` in order, `content`, then `args` (`name=value`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VariableInputs {
    /// `-var name=value` flags, in order. An entry without `=` is ignored, as in Nomad.
    pub args: Vec<String>,
    /// `-var-file` files, in order.
    pub files: Vec<VarFile>,
    /// Variable definitions sent with the job (the HTTP API's `Variables`), HCL or JSON.
    pub content: Option<String>,
    /// Environment entries; those named `NOMAD_VAR_<name>` set `<name>`.
    pub env: Vec<(String, String)>,
    /// A value for an undeclared variable is an error (the CLI's `-hcl2-strict`, on by
    /// default there) rather than a warning (the HTTP API).
    pub strict: bool,
    /// The directory `file()` and the other filesystem functions resolve relative paths
    /// from; `None` where the job did not come from this machine's disk (the HTTP API),
    /// where they fail with Nomad's "filesystem function disabled".
    pub file_base: Option<PathBuf>,
}

impl VariableInputs {
    /// Inputs as the HTTP API gives them: the request's `Variables` text, no filesystem,
    /// undeclared variables a warning (Nomad's `/v1/jobs/parse`).
    pub fn from_api(variables: Option<&str>) -> Self {
        VariableInputs {
            content: variables
                .filter(|v| !v.trim().is_empty())
                .map(str::to_string),
            ..Default::default()
        }
    }

    /// The `NOMAD_VAR_` entries of this process's environment.
    pub fn process_env() -> Vec<(String, String)> {
        std::env::vars()
            .filter(|(k, _)| k.starts_with(VAR_ENV_PREFIX))
            .collect()
    }
}

/// A job's source and the variables it was run with, as Nomad stores and returns it
/// (`api.JobSubmission`, `GET /v1/job/<id>/submission`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct JobSubmission {
    /// The job file as written.
    pub source: String,
    /// `"hcl2"` or `"json"`.
    pub format: String,
    /// `-var` and `NOMAD_VAR_` values of simple variables (strings, numbers, bools) and of
    /// undeclared names, as text; flags win over the environment.
    pub variable_flags: BTreeMap<String, String>,
    /// The `-var-file` contents, the API's variable text, and `name = value` lines for
    /// `-var` values of list, map and object variables, in that order.
    pub variables: String,
}

/// Builds the submission of a parsed job file as Nomad's CLI does.
pub fn submission(source: &str, inputs: &VariableInputs, parsed: &crate::Parsed) -> JobSubmission {
    let format = if source.trim_start_matches(' ').starts_with('{') {
        "json"
    } else {
        "hcl2"
    };
    let mut files = String::new();
    for f in &inputs.files {
        files.push_str(&f.text);
        files.push('\n');
    }
    let mut variables = files;
    if let Some(content) = inputs.content.as_deref().filter(|c| !c.is_empty()) {
        variables = if variables.is_empty() {
            content.to_string()
        } else {
            format!("{}\n\n{content}", variables.trim_end_matches('\n'))
        };
    }
    let mut flags: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in &inputs.env {
        if let Some(name) = k.strip_prefix(VAR_ENV_PREFIX).filter(|n| !n.is_empty()) {
            flags.insert(name.to_string(), v.clone());
        }
    }
    for arg in &inputs.args {
        match arg.split_once('=') {
            Some((k, v)) => flags.insert(k.to_string(), v.to_string()),
            None => flags.insert(arg.clone(), String::new()),
        };
    }
    let mut simple = BTreeMap::new();
    let mut complex = Vec::new();
    for (name, value) in flags {
        match parsed.simple_variables.get(&name) {
            Some(false) => complex.push(format!("{name} = {value}")),
            _ => {
                simple.insert(name, value);
            }
        }
    }
    if !complex.is_empty() {
        let complex = complex.join("\n");
        variables = if variables.is_empty() {
            complex
        } else {
            format!("{}\n\n{complex}", variables.trim_end_matches('\n'))
        };
    }
    JobSubmission {
        source: source.to_string(),
        format: format.to_string(),
        variable_flags: simple,
        variables,
    }
}

//! Nomad HCL2 job files → Nomad's `api.Job` mirror (then, via `nomad_json`, a `Job`).
//!
//! A file is read as Nomad's `jobspec2` reads it: its `variable`/`variables` blocks are
//! declared and given values, its `locals` evaluated, and then the `job` block is decoded
//! with every expression evaluated and every `dynamic` block expanded. Decoding into the same
//! mirror structs the JSON API uses keeps one canonicalization for both formats and makes
//! `jobs/parse` (HCL in, Nomad JSON out) a plain serialization.

mod body;
pub(crate) mod eval;
mod job;
mod schema;
mod task;
mod value;
pub(crate) mod variables;

use std::collections::BTreeMap;

use crate::VariableInputs;
use crate::error::{FieldErrors, JobspecError};
use crate::nomad_json::model::ApiJob;
use body::{BlockRef, Body, Ctx, Diag, Source};
use eval::{Env, FileAccess};

/// Top-level blocks of a job file besides `job`.
const TOP_BLOCKS: &[&str] = &["variable", "variables", "locals"];

/// A decoded job file: the job, warnings, and whether each declared variable takes a plain
/// value (string, number, bool) or an HCL expression.
pub(crate) struct Decoded {
    pub job: ApiJob,
    pub warnings: Vec<String>,
    pub simple_variables: BTreeMap<String, bool>,
}

/// Decodes a job file into Nomad's API shape, with warnings for what was ignored.
pub(crate) fn decode(text: &str, inputs: &VariableInputs) -> Result<Decoded, JobspecError> {
    let parsed = hcl_edit::parser::parse_body(text).map_err(|e| JobspecError::HclSyntax {
        line: e.location().line(),
        column: e.location().column(),
        message: e.message().to_string(),
    })?;
    let src = Source::new(text);
    let mut diag = Diag::default();

    let mut declarations = Vec::new();
    let mut local_blocks = Vec::new();
    let mut jobs = Vec::new();
    for structure in parsed.iter() {
        match structure {
            hcl_edit::structure::Structure::Block(b) => match b.ident.as_str() {
                "variable" | "variables" => declarations.push(b),
                "locals" => local_blocks.push(b),
                "job" => jobs.push(b),
                other => diag.errors.push(crate::error::FieldError::new(
                    other,
                    format!(
                        "unsupported block type: a job file holds a job block and its {} blocks{}",
                        TOP_BLOCKS.join("/"),
                        src.at(hcl_edit::Span::span(b))
                    ),
                )),
            },
            hcl_edit::structure::Structure::Attribute(a) => {
                diag.errors.push(crate::error::FieldError::new(
                    a.key.as_str(),
                    format!(
                        "unsupported argument: no argument of this name is expected at the top of a job file{}",
                        src.at(hcl_edit::Span::span(a))
                    ),
                ));
            }
        }
    }

    let mut decls = variables::declare(&declarations, &src, &mut diag);
    variables::assign(&mut decls, inputs, &mut diag);
    let simple_variables = decls
        .iter()
        .map(|(name, d)| (name.clone(), d.ty.as_ref().is_none_or(|t| t.is_primitive())))
        .collect();
    let vars = variables::values(&decls, &src, &mut diag);
    let mut env = Env {
        vars: Some(vars),
        locals: None,
        files: Some(FileAccess {
            allowed: inputs.file_base.is_some(),
            base_dir: inputs.file_base.clone().unwrap_or_default(),
        }),
        passthrough: true,
    };
    variables::locals(&local_blocks, &mut env, &src, &mut diag);
    // As Nomad, a file whose variables or locals fail is not decoded further: the job
    // would only repeat the same errors.
    if !diag.errors.is_empty() {
        return Err(JobspecError::Invalid(FieldErrors(diag.errors)));
    }

    let ctx = Ctx {
        src: &src,
        env: &env,
    };
    let job = match jobs.as_slice() {
        [one] => {
            let block = BlockRef {
                ident: "job",
                labels: one.labels.iter().map(|l| l.as_str().to_string()).collect(),
                body: &one.body,
                span: hcl_edit::Span::span(*one),
                bindings: None,
            };
            let top = Body::new(&parsed, ctx, String::new(), None);
            Some(job::decode_job(&block, &top, &mut diag))
        }
        [] => {
            diag.errors.push(crate::error::FieldError::new(
                "job",
                "no job block found: a job file holds exactly one `job \"<id>\" { ... }`",
            ));
            None
        }
        [_, second, ..] => {
            diag.errors.push(crate::error::FieldError::new(
                "job",
                format!(
                    "only one job block is allowed per file{}",
                    src.at(hcl_edit::Span::span(*second))
                ),
            ));
            None
        }
    };
    match job {
        Some(job) if diag.errors.is_empty() => Ok(Decoded {
            job,
            warnings: diag.warnings,
            simple_variables,
        }),
        _ => Err(JobspecError::Invalid(FieldErrors(diag.errors))),
    }
}

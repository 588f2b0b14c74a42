//! Nomad HCL2 job files → Nomad's `api.Job` mirror (then, via `nomad_json`, a `Job`).
//!
//! Decoding into the same mirror structs the JSON API uses keeps one canonicalization for
//! both formats and makes `jobs/parse` (HCL in, Nomad JSON out) a plain serialization.

mod body;
mod job;
mod task;
mod value;

use crate::error::{FieldErrors, JobspecError};
use crate::nomad_json::model::ApiJob;
use body::{Body, Diag, Source};

/// Top-level blocks of Nomad job files that Caravan does not evaluate.
const TOP_UNSUPPORTED_BLOCKS: &[&str] = &["variable", "variables", "locals"];

/// Decodes a job file into Nomad's API shape, with warnings for what was ignored.
pub(crate) fn decode(text: &str) -> Result<(ApiJob, Vec<String>), JobspecError> {
    let parsed = hcl_edit::parser::parse_body(text).map_err(|e| JobspecError::HclSyntax {
        line: e.location().line(),
        column: e.location().column(),
        message: e.message().to_string(),
    })?;
    let src = Source::new(text);
    let mut diag = Diag::default();
    let mut top = Body::new(&parsed, &src, String::new());
    let jobs = top.blocks("job");
    let job = match jobs.as_slice() {
        [one] => Some(job::decode_job(one, &mut top, &mut diag)),
        [] => {
            top.error_at(
                "job",
                "no job block found: a job file holds exactly one `job \"<id>\" { ... }`",
                None,
                &mut diag,
            );
            None
        }
        [_, second, ..] => {
            top.error_at(
                "job",
                "only one job block is allowed per file",
                hcl_span(second),
                &mut diag,
            );
            None
        }
    };
    top.finish(&[], TOP_UNSUPPORTED_BLOCKS, &mut diag);
    match job {
        Some(job) if diag.errors.is_empty() => Ok((job, diag.warnings)),
        _ => Err(JobspecError::Invalid(FieldErrors(diag.errors))),
    }
}

fn hcl_span(block: &hcl_edit::structure::Block) -> Option<std::ops::Range<usize>> {
    use hcl_edit::Span;
    block.span()
}

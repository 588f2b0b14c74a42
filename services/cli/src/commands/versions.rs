//! `job history` and `job revert`: a job's kept versions and going back to
//! one of them.

use serde_json::Value;

use crate::api::Api;
use crate::backend::{NomadCall, segment};
use crate::error::CliError;
use crate::format::{FormatArgs, SHORT_ID, limit};
use crate::lookup;
use crate::monitor::monitor;
use crate::ui::Ui;
use crate::views::{self, HistoryOptions};

type Result<T> = std::result::Result<T, CliError>;

/// `job history [-p] [-full] [-version N] <job>`.
pub(super) async fn history(
    api: &Api,
    ui: &mut Ui,
    id: &str,
    version: Option<u64>,
    options: HistoryOptions,
    format: &FormatArgs,
) -> Result<u8> {
    if format.wanted() && (options.diffs || options.full) {
        return Err(CliError::Usage(
            "-json and -t are exclusive with -p and -full".into(),
        ));
    }
    let job = lookup::job(api, id).await?;
    if format.wanted() {
        let call = NomadCall::get(format!("/v1/job/{}/versions", segment(&job.id)))
            .param("namespace", job.namespace.clone());
        let answer = api.nomad_get("Error retrieving job versions", call).await?;
        let versions = answer.get("Versions").cloned().unwrap_or(Value::Null);
        let data = match version {
            None => versions,
            Some(v) => versions
                .as_array()
                .and_then(|list| {
                    list.iter()
                        .find(|j| j.get("Version").and_then(Value::as_u64) == Some(v))
                })
                .cloned()
                .ok_or_else(|| {
                    CliError::NotFound(format!("Job {:?} has no kept version {v}", job.id))
                })?,
        };
        ui.output(format.render(&data)?);
        return Ok(0);
    }
    let versions = api.job_versions(&job.id).await?;
    let rendered = match version {
        Some(v) => views::one_version(&versions, v, options).ok_or_else(|| {
            CliError::NotFound(format!("Job {:?} has no kept version {v}", job.id))
        })?,
        None => views::job_history(&versions, options),
    };
    let text = rendered.map_err(|e| CliError::Other(format!("Error computing job diffs: {e}")))?;
    ui.output(text);
    Ok(0)
}

/// Parses the version argument of `job revert`.
pub(crate) fn parse_version(text: &str) -> Result<u64> {
    text.trim().parse().map_err(|_| {
        CliError::Usage(format!(
            "The job version to revert to must be an integer, not {text:?}"
        ))
    })
}

/// `job revert [-detach] <job> <version>`.
pub(super) async fn revert(
    api: &Api,
    ui: &mut Ui,
    id: &str,
    version: &str,
    detach: bool,
    verbose: bool,
) -> Result<u8> {
    let version = parse_version(version)?;
    let job = lookup::job(api, id).await?;
    let resp = api.revert_job(&job.id, version).await?;
    // Periodic and parameterized jobs get no evaluation: nothing to follow.
    if resp.eval_id.is_empty() {
        return Ok(0);
    }
    if detach {
        let n = if verbose { usize::MAX } else { SHORT_ID };
        ui.output(format!("Evaluation ID: {}", limit(&resp.eval_id, n)));
        return Ok(0);
    }
    monitor(api, ui, &resp.eval_id).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_must_be_integers() {
        assert_eq!(parse_version("3").unwrap(), 3);
        let err = parse_version("v3").unwrap_err();
        assert!(matches!(err, CliError::Usage(_)));
        assert!(err.to_string().contains("must be an integer"), "{err}");
        assert!(parse_version("-1").is_err());
    }
}

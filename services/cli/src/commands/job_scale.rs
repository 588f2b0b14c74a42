//! `job scale` (a group's count) and `job promote` (the canaries of a job's
//! newest deployment), printed and monitored as Nomad's are.

use caravan_model::JobExt;
use caravan_proto::Job;

use crate::api::Api;
use crate::error::CliError;
use crate::format::{SHORT_ID, limit};
use crate::lookup;
use crate::monitor::monitor;
use crate::ui::Ui;

type Result<T> = std::result::Result<T, CliError>;

/// The group and count of `<job> [<group>] <count>`.
fn scale_args(args: &[String]) -> Result<(&str, Option<&str>, i64)> {
    let (job, group, count) = match args {
        [job, count] => (job, None, count),
        [job, group, count] => (job, Some(group.as_str()), count),
        _ => {
            return Err(CliError::Usage(
                "Command requires at least two arguments and no more than three".into(),
            ));
        }
    };
    let count = count
        .trim()
        .parse::<i64>()
        .map_err(|e| CliError::Usage(format!("Failed to convert count string to int: {e}")))?;
    Ok((job.as_str(), group, count))
}

/// The group to scale: the one named, or the job's only one.
fn pick_group(job: &Job, group: Option<&str>) -> Result<String> {
    match group {
        Some(g) if job.task_groups.iter().any(|tg| tg.name == g) => Ok(g.to_string()),
        Some(g) => Err(CliError::Usage(format!("Group {g} not found within job"))),
        None => match job.task_groups.as_slice() {
            [only] => Ok(only.name.clone()),
            _ => Err(CliError::Usage("Group name required".into())),
        },
    }
}

/// `job scale [-check-index n] [-detach] <job> [<group>] <count>`: with a
/// nonzero `-check-index`, only while the job's modify index is that one
/// (Nomad's `-verbose` only
/// lengthens the monitor's ids, which Caravan's monitor keeps short).
pub async fn scale(
    api: &Api,
    ui: &mut Ui,
    args: &[String],
    check_index: Option<u64>,
    detach: bool,
) -> Result<u8> {
    let (id, group, count) = scale_args(args)?;
    // Nomad ignores zero: any job modify index will do.
    let check_index = i64::try_from(check_index.unwrap_or(0)).map_err(|_| {
        CliError::Usage(format!(
            "-check-index {}: larger than any job modify index",
            check_index.unwrap_or(0)
        ))
    })?;
    let job = lookup::job(api, id).await?;
    let group = pick_group(&job, group)?;
    let resp = api.scale_job(&job.id, &group, count, check_index).await?;
    if !resp.warnings.is_empty() {
        ui.output(format!("Job Warnings:\n{}\n", resp.warnings.join("\n")));
    }
    if detach || job.is_periodic() || job.is_parameterized() || resp.eval_id.is_empty() {
        ui.output("Job scale successful");
        if !job.is_periodic() && !job.is_parameterized() && !resp.eval_id.is_empty() {
            ui.output(format!("Evaluation ID: {}", resp.eval_id));
        }
        return Ok(0);
    }
    monitor(api, ui, &resp.eval_id).await
}

/// `job promote [-group g]... [-detach] <job>`.
pub async fn promote(
    api: &Api,
    ui: &mut Ui,
    id: &str,
    groups: Vec<String>,
    detach: bool,
    verbose: bool,
) -> Result<u8> {
    let job = lookup::job(api, id).await?;
    let latest = api
        .list_deployments()
        .await?
        .into_iter()
        .filter(|d| d.job_id == job.id && d.namespace == job.namespace)
        .max_by_key(|d| d.create_revision);
    let Some(deployment) = latest else {
        return Err(CliError::NotFound(format!(
            "Job {:?} has no deployment to promote",
            job.id
        )));
    };
    let resp = api
        .promote_deployment(&deployment.id, groups)
        .await
        .map_err(|e| {
            CliError::Other(format!(
                "Error promoting deployment {:?} for job {:?}: {}",
                deployment.id,
                job.id,
                e.to_string()
                    .strip_prefix("Error promoting deployment: ")
                    .unwrap_or(&e.to_string())
            ))
        })?;
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
    use caravan_proto::TaskGroup;

    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn scale_takes_two_or_three_arguments() {
        assert_eq!(
            scale_args(&strings(&["web", "3"])).unwrap(),
            ("web", None, 3)
        );
        assert_eq!(
            scale_args(&strings(&["web", "api", "0"])).unwrap(),
            ("web", Some("api"), 0)
        );
        let err = scale_args(&strings(&["web", "x"])).unwrap_err().to_string();
        assert!(
            err.starts_with("Failed to convert count string to int"),
            "{err}"
        );
        assert!(scale_args(&strings(&["web"])).is_err());
    }

    #[test]
    fn the_only_group_is_scaled_unless_named() {
        let group = |name: &str| TaskGroup {
            name: name.into(),
            ..Default::default()
        };
        let mut job = Job {
            task_groups: vec![group("web")],
            ..Default::default()
        };
        assert_eq!(pick_group(&job, None).unwrap(), "web");
        assert_eq!(
            pick_group(&job, Some("api")).unwrap_err().to_string(),
            "Group api not found within job"
        );
        job.task_groups.push(group("api"));
        assert_eq!(
            pick_group(&job, None).unwrap_err().to_string(),
            "Group name required"
        );
        assert_eq!(pick_group(&job, Some("api")).unwrap(), "api");
    }
}

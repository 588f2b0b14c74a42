//! `job run`, `job plan`, `job validate`, `job status`, `job stop`, `job
//! inspect`; the version, dispatch and periodic verbs live in `versions`,
//! `dispatch` and `periodic`. Job files are parsed here, on the operator's
//! machine, with their HCL2 variables from `-var`, `-var-file` and
//! `NOMAD_VAR_`, as Nomad's CLI parses them.

use std::path::Path;

use caravan_jobspec::{ParseOptions, VarFile, VariableInputs};
use caravan_model::{JobExt, now_unix_ns, trigger};
use caravan_proto::{DesiredUpdates, Job, PlanJobResponse};

use crate::api::Api;
use crate::args::{JobCommand, JobVarArgs};
use crate::error::CliError;
use crate::format::table;
use crate::lookup;
use crate::monitor::monitor;
use crate::placement::{alloc_metrics, group_header};
use crate::ui::Ui;
use crate::views::{self, JobPage};

type Result<T> = std::result::Result<T, CliError>;

/// Exit code of `job plan` when it fails (Nomad's).
const PLAN_ERROR: u8 = 255;

pub(super) async fn dispatch(api: &Api, ui: &mut Ui, cmd: JobCommand) -> Result<u8> {
    match cmd {
        JobCommand::Run {
            file,
            vars,
            detach,
            check_index,
        } => run(api, ui, &file, &vars, detach, check_index).await,
        JobCommand::Validate { file, vars } => validate(ui, &file, &vars),
        JobCommand::Plan {
            file,
            vars,
            verbose,
        } => match plan(api, ui, &file, &vars, verbose).await {
            Ok(code) => Ok(code),
            Err(e) => {
                ui.error(e.to_string());
                Ok(PLAN_ERROR)
            }
        },
        JobCommand::Status { id: None } => list(api, ui).await,
        JobCommand::Status { id: Some(id) } => {
            let job = lookup::job(api, &id).await?;
            status_page(api, ui, job).await
        }
        JobCommand::Stop { id, purge, detach } => stop(api, ui, &id, purge, detach).await,
        JobCommand::Inspect { id } => inspect(api, ui, &id).await,
        JobCommand::History {
            diffs,
            job_version,
            full,
            id,
        } => {
            let options = views::HistoryOptions { diffs, full };
            super::versions::history(api, ui, &id, job_version, options).await
        }
        JobCommand::Revert {
            detach,
            verbose,
            id,
            version,
        } => super::versions::revert(api, ui, &id, &version, detach, verbose).await,
        JobCommand::Dispatch {
            meta,
            detach,
            verbose,
            id,
            input,
        } => {
            super::dispatch::dispatch(api, ui, &id, &meta, input.as_deref(), detach, verbose).await
        }
        JobCommand::Periodic(cmd) => super::periodic::dispatch(api, ui, cmd).await,
    }
}

/// What a job file's variables are given on this command line: the flags, the
/// `-var-file` contents, this process's `NOMAD_VAR_` environment, and file
/// functions reading beside the job file.
pub fn variable_inputs(path: &Path, vars: &JobVarArgs) -> Result<VariableInputs> {
    let files = vars
        .var_files
        .iter()
        .map(|f| {
            let name = f.display().to_string();
            std::fs::read_to_string(f)
                .map(|text| VarFile {
                    name: name.clone(),
                    text,
                })
                .map_err(|e| CliError::ReadFile {
                    path: name,
                    message: format!("Failed to read var file: {e}"),
                })
        })
        .collect::<Result<Vec<_>>>()?;
    let base = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    Ok(VariableInputs {
        args: vars.vars.clone(),
        files,
        content: None,
        env: VariableInputs::process_env(),
        strict: vars.strict,
        file_base: Some(base),
    })
}

/// Reads, parses (HCL or JSON) and validates a job file.
pub fn load_job(path: &Path, vars: &JobVarArgs) -> Result<(Job, Vec<String>)> {
    let shown = path.display().to_string();
    let body = std::fs::read(path).map_err(|e| CliError::ReadFile {
        path: shown.clone(),
        message: e.to_string(),
    })?;
    let inputs = variable_inputs(path, vars)?;
    let parsed = caravan_jobspec::parse_job_with(&body, &inputs, &ParseOptions::default())
        .map_err(|e| CliError::JobFile {
            path: shown.clone(),
            message: e.to_string(),
        })?;
    caravan_jobspec::validate(&parsed.job).map_err(|e| CliError::JobFile {
        path: shown,
        message: format!("Job validation errors:\n{e}"),
    })?;
    Ok((parsed.job, parsed.warnings))
}

/// `Job Warnings:` and the list, as Nomad prints a multi-error.
fn warnings_block(warnings: &[String]) -> Option<String> {
    let mut unique: Vec<&String> = Vec::new();
    for w in warnings {
        if !unique.contains(&w) {
            unique.push(w);
        }
    }
    if unique.is_empty() {
        return None;
    }
    let n = unique.len();
    let mut out = format!(
        "Job Warnings:\n{n} warning{}:\n",
        if n == 1 { "" } else { "s" }
    );
    for w in unique {
        out.push_str(&format!("\n* {w}"));
    }
    out.push('\n');
    Some(out)
}

/// `job validate`: parses and checks a job file here, as Nomad does when it
/// cannot reach an agent; exit 1 with the errors, 0 with "Job validation successful".
fn validate(ui: &mut Ui, file: &Path, vars: &JobVarArgs) -> Result<u8> {
    match load_job(file, vars) {
        Ok((_, warnings)) => {
            if let Some(block) = warnings_block(&warnings) {
                ui.output(block);
            }
            ui.output("Job validation successful");
            Ok(0)
        }
        Err(CliError::JobFile { message, .. }) => {
            let message = message
                .strip_prefix("Job validation errors:\n")
                .unwrap_or(&message)
                .to_string();
            ui.error("Job validation errors:");
            ui.error(message);
            Ok(1)
        }
        Err(e) => Err(e),
    }
}

async fn run(
    api: &Api,
    ui: &mut Ui,
    file: &Path,
    vars: &JobVarArgs,
    detach: bool,
    check_index: Option<i64>,
) -> Result<u8> {
    let (job, mut warnings) = load_job(file, vars)?;
    let periodic = job.is_periodic();
    let parameterized = job.parameterized.is_some();
    let resp = api.register_job(job, check_index).await?;
    warnings.extend(resp.warnings);
    if let Some(block) = warnings_block(&warnings) {
        ui.output(block);
    }
    if resp.eval_id.is_empty() || periodic || parameterized {
        ui.output("Job registration successful");
        if periodic {
            ui.output("The job is periodic: its runs are launched on its schedule.");
        } else if parameterized {
            ui.output("The job is parameterized: dispatch it to run it.");
        }
        return Ok(0);
    }
    if detach {
        ui.output("Job registration successful");
        ui.output(format!("Evaluation ID: {}", resp.eval_id));
        return Ok(0);
    }
    monitor(api, ui, &resp.eval_id).await
}

/// Nomad's names of a plan's desired-update counts.
fn update_counts(u: &DesiredUpdates) -> std::collections::BTreeMap<String, u64> {
    [
        ("ignore", u.ignore),
        ("create", u.place),
        ("migrate", u.migrate),
        ("destroy", u.stop),
        ("in-place update", u.in_place_update),
        ("create/destroy update", u.destructive_update),
        ("canary", u.canary),
        ("preemptions", u.preemptions),
    ]
    .into_iter()
    .filter(|(_, n)| *n > 0)
    .map(|(k, n)| (k.to_string(), n))
    .collect()
}

/// The `Scheduler dry-run:` lines.
pub(crate) fn dry_run(resp: &PlanJobResponse, system: bool) -> String {
    let mut out = String::from("Scheduler dry-run:\n");
    if resp.failed_tg_allocs.is_empty() {
        out.push_str("- All tasks successfully allocated.");
    } else {
        out.push_str(if system {
            "- WARNING: Failed to place allocations on all nodes."
        } else {
            "- WARNING: Failed to place all allocations."
        });
        for (group, m) in &resp.failed_tg_allocs {
            out.push_str(&format!("\n  {}", group_header(group, m)));
            let metrics = alloc_metrics(m, "    ");
            if !metrics.is_empty() {
                out.push('\n');
                out.push_str(&metrics);
            }
            out.push('\n');
        }
        let trimmed = out.trim_end().len();
        out.truncate(trimmed);
    }
    for e in &resp.created_evals {
        if e.triggered_by == trigger::ROLLING_UPDATE && e.wait_until_unix_ns > 0 {
            out.push_str("\n- Rolling update, next evaluation will be in a moment.");
        }
    }
    out
}

/// The `Job Modify Index:` trailer with the `job run -check-index` hint.
pub(crate) fn modify_index_hint(index: i64, file: &str) -> String {
    format!(
        "Job Modify Index: {index}\n\
         To submit the job with version verification run:\n\
         \n\
         caravan job run -check-index {index} {file}\n\
         \n\
         When running the job with the check-index flag, the job will only be run if the\n\
         job modify index given matches the server-side version. If the index has\n\
         changed, another user has modified the job and the plan's results are\n\
         potentially invalid."
    )
}

async fn plan(api: &Api, ui: &mut Ui, file: &Path, vars: &JobVarArgs, verbose: bool) -> Result<u8> {
    let (job, mut warnings) = load_job(file, vars)?;
    let existing = match api.job(&job.id).await {
        Ok(j) => Some(j),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(e),
    };
    let system = job.r#type() == caravan_proto::JobType::System;
    let resp = api.plan_job(job.clone()).await?;
    let mut diff = caravan_jobspec::diff(existing.as_ref(), &job, true)
        .map_err(|e| CliError::Other(format!("Error computing the diff: {e}")))?;
    let updates = resp
        .annotations
        .as_ref()
        .map(|a| a.desired_tg_updates.clone())
        .unwrap_or_default();
    for tg in &mut diff.task_groups {
        if let Some(u) = updates.get(&tg.name) {
            tg.updates = update_counts(u);
        }
    }
    ui.output(format!(
        "{}\n",
        caravan_jobspec::render_plan(&diff, verbose).trim()
    ));
    ui.output(dry_run(&resp, system));
    ui.output("");
    warnings.extend(resp.warnings.iter().cloned());
    if let Some(block) = warnings_block(&warnings) {
        ui.output(block);
    }
    if let Some(a) = &resp.annotations
        && !a.preempted_allocs.is_empty()
    {
        let mut rows = vec![vec![
            "Alloc ID".to_string(),
            "Job ID".to_string(),
            "Task Group".to_string(),
        ]];
        for p in &a.preempted_allocs {
            rows.push(vec![p.id.clone(), p.job_id.clone(), p.task_group.clone()]);
        }
        ui.output(format!("Preemptions:\n\n{}\n", table(rows)));
    }
    ui.output(modify_index_hint(
        resp.job_modify_revision,
        &file.display().to_string(),
    ));
    let changes = updates
        .values()
        .any(|u| u.stop + u.place + u.migrate + u.destructive_update + u.canary > 0);
    Ok(u8::from(changes))
}

/// `job status` without an id: the jobs table.
pub(super) async fn list(api: &Api, ui: &mut Ui) -> Result<u8> {
    let jobs = api.list_jobs("").await?;
    if jobs.is_empty() {
        ui.output("No running jobs");
    } else {
        ui.output(views::job_list(&jobs));
    }
    Ok(0)
}

/// One job's status page.
pub(super) async fn status_page(api: &Api, ui: &mut Ui, job: Job) -> Result<u8> {
    let summary = api.job_summary(&job.id).await?.summary;
    let allocs = api.job_allocations(&job.id).await?;
    let evals = api.job_evaluations(&job.id).await?;
    let deployment = api
        .list_deployments()
        .await?
        .into_iter()
        .filter(|d| d.job_id == job.id && d.namespace == job.namespace)
        .max_by_key(|d| d.create_revision);
    let page = JobPage {
        job,
        summary: summary.into_iter().collect(),
        allocs,
        evals,
        deployment,
    };
    ui.output(views::job_page(&page, now_unix_ns()));
    Ok(0)
}

async fn stop(api: &Api, ui: &mut Ui, id: &str, purge: bool, detach: bool) -> Result<u8> {
    let job = lookup::job(api, id).await?;
    let resp = api.deregister_job(&job.id, purge).await?;
    if resp.eval_id.is_empty() {
        return Ok(0);
    }
    if detach {
        ui.output(resp.eval_id);
        return Ok(0);
    }
    monitor(api, ui, &resp.eval_id).await
}

async fn inspect(api: &Api, ui: &mut Ui, id: &str) -> Result<u8> {
    let job = lookup::job(api, id).await?;
    let wrapped = serde_json::json!({ "Job": caravan_jobspec::render_json(&job) });
    let mut buf = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, formatter);
    serde::Serialize::serialize(&wrapped, &mut ser)
        .map_err(|e| CliError::Other(format!("Error formatting the job: {e}")))?;
    ui.output(String::from_utf8_lossy(&buf));
    Ok(0)
}

#[cfg(test)]
mod tests {
    use caravan_proto::AllocMetric;

    use super::*;

    #[test]
    fn a_clean_dry_run_says_so() {
        assert_eq!(
            dry_run(&PlanJobResponse::default(), false),
            "Scheduler dry-run:\n- All tasks successfully allocated."
        );
    }

    #[test]
    fn a_failed_dry_run_lists_the_groups() {
        let resp = PlanJobResponse {
            failed_tg_allocs: [(
                "cache".to_string(),
                AllocMetric {
                    nodes_evaluated: 1,
                    nodes_exhausted: 1,
                    dimension_exhausted: [("memory".to_string(), 1)].into(),
                    ..Default::default()
                },
            )]
            .into(),
            ..Default::default()
        };
        assert_eq!(
            dry_run(&resp, false),
            "Scheduler dry-run:\n\
             - WARNING: Failed to place all allocations.\n  \
             Task Group \"cache\" (failed to place 1 allocation):\n    \
             * Resources exhausted on 1 nodes\n    \
             * Dimension \"memory\" exhausted on 1 nodes"
        );
    }

    #[test]
    fn the_hint_names_the_index_and_file() {
        let hint = modify_index_hint(42, "web.hcl");
        assert!(hint.starts_with("Job Modify Index: 42\n"));
        assert!(hint.contains("\ncaravan job run -check-index 42 web.hcl\n"));
    }

    #[test]
    fn warnings_are_deduplicated_and_counted() {
        assert_eq!(warnings_block(&[]), None);
        let w = vec!["a".to_string(), "b".to_string(), "a".to_string()];
        assert_eq!(
            warnings_block(&w).unwrap(),
            "Job Warnings:\n2 warnings:\n\n* a\n* b\n"
        );
    }

    #[test]
    fn update_counts_use_nomads_names() {
        let u = DesiredUpdates {
            place: 1,
            in_place_update: 2,
            ..Default::default()
        };
        let counts = update_counts(&u);
        assert_eq!(counts.get("create"), Some(&1));
        assert_eq!(counts.get("in-place update"), Some(&2));
        assert_eq!(counts.len(), 2);
    }

    #[test]
    fn job_files_are_parsed_and_validated_locally() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad.hcl");
        std::fs::write(
            &bad,
            "job \"x\" {\n  group \"g\" {\n    count = -1\n    task \"t\" {\n      driver = \"raw_exec\"\n    }\n  }\n}\n",
        )
        .unwrap();
        let none = JobVarArgs::default();
        let err = load_job(&bad, &none).unwrap_err().to_string();
        assert!(err.contains("count"), "{err}");
        let missing = dir.path().join("missing.hcl");
        let err = load_job(&missing, &none).unwrap_err().to_string();
        assert!(err.starts_with("Error reading job file"), "{err}");
        let hello = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hello.hcl");
        let (job, _) = load_job(&hello, &none).unwrap();
        assert_eq!(job.id, "hello");
        let json = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hello.json");
        let (from_json, _) = load_job(&json, &none).unwrap();
        assert_eq!(from_json.id, "hello");
        assert_eq!(from_json.task_groups.len(), job.task_groups.len());
    }

    #[test]
    fn job_files_take_var_and_var_file_values() {
        let dir = tempfile::tempdir().unwrap();
        let job = dir.path().join("job.nomad.hcl");
        std::fs::write(
            &job,
            "variable \"count\" {\n  type = number\n  validation {\n    condition     = var.count < 10\n    error_message = \"at most 9\"\n  }\n}\nvariable \"cmd\" {\n  default = \"/bin/true\"\n}\njob \"web\" {\n  group \"g\" {\n    count = var.count\n    task \"t\" {\n      driver = \"raw_exec\"\n      config {\n        command = var.cmd\n      }\n    }\n  }\n}\n",
        )
        .unwrap();
        let prod = dir.path().join("prod.hcl");
        std::fs::write(&prod, "count = 2\ncmd = \"/bin/sleep\"\n").unwrap();
        let vars = JobVarArgs {
            vars: vec!["count=3".into()],
            var_files: vec![prod.clone()],
            strict: true,
        };
        let (job, _) = load_job(&job, &vars).unwrap();
        assert_eq!(job.task_groups[0].count, 3, "-var wins over -var-file");
        let rendered = caravan_jobspec::render_json(&job);
        assert_eq!(
            rendered["TaskGroups"][0]["Tasks"][0]["Config"]["command"], "/bin/sleep",
            "-var-file wins over the default"
        );
        let err = load_job(
            &dir.path().join("job.nomad.hcl"),
            &JobVarArgs {
                vars: vec!["count=30".into()],
                ..vars.clone()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("variable \"count\": Invalid value for cmd variable: at most 9"),
            "{err}"
        );
        let err = load_job(
            &dir.path().join("job.nomad.hcl"),
            &JobVarArgs {
                var_files: vec![dir.path().join("missing.hcl")],
                ..vars
            },
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("Failed to read var file"), "{err}");
    }
}

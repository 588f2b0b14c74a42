//! `job run`, `job plan` and `job validate`: a job file parsed here, on the
//! operator's machine, with its HCL2 variables from `-var`, `-var-file` and
//! `NOMAD_VAR_`, as Nomad's CLI parses it, then sent to the gateway.

use std::path::Path;

use caravan_jobspec::{DiffType, ParseOptions, VarFile, VariableInputs};
use caravan_model::{JobExt, trigger};
use caravan_proto::{DesiredUpdates, Job, PlanJobResponse};

use crate::api::Api;
use crate::args::JobVarArgs;
use crate::error::CliError;
use crate::format::output::pretty;
use crate::format::table;
use crate::monitor::monitor;
use crate::placement::{alloc_metrics, group_header};
use crate::ui::Ui;

type Result<T> = std::result::Result<T, CliError>;

/// Exit code of `job plan` when it fails (Nomad's).
pub const PLAN_ERROR: u8 = 255;

/// What `job run` was asked.
#[derive(Debug, Clone)]
pub struct RunArgs<'a> {
    /// The job file.
    pub file: &'a Path,
    /// Its variables.
    pub vars: &'a JobVarArgs,
    /// Whether to return instead of monitoring.
    pub detach: bool,
    /// The job modify index to register at.
    pub check_index: Option<i64>,
    /// Whether the file must be JSON.
    pub json: bool,
    /// Whether to print the job's JSON instead of submitting it.
    pub output: bool,
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

/// A parsed job file.
#[derive(Debug, Clone)]
pub struct JobFile {
    /// The job, with Nomad's defaults.
    pub job: Job,
    /// What the parser warned about.
    pub warnings: Vec<String>,
    /// Whether the file names the job's namespace (else the command line's applies).
    pub namespace_written: bool,
    /// The file's text and the variables it was given, sent with a run so the
    /// cluster keeps them with the job's version (Nomad's job submission).
    pub submission: caravan_jobspec::JobSubmission,
}

/// Whether a job file names its namespace: the defaults fill in `default`,
/// which must not override `-namespace` (Nomad sends a job without one in
/// the namespace of the request).
fn namespace_written(body: &[u8], inputs: &VariableInputs) -> bool {
    let written = |v: &serde_json::Value| {
        v.get("Namespace")
            .and_then(serde_json::Value::as_str)
            .is_some_and(|ns| !ns.is_empty())
    };
    if body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
        return serde_json::from_slice::<serde_json::Value>(body)
            .ok()
            .is_some_and(|v| written(v.get("Job").unwrap_or(&v)));
    }
    let Ok(text) = std::str::from_utf8(body) else {
        return false;
    };
    caravan_jobspec::hcl_as_written(text, inputs, &ParseOptions::default())
        .is_ok_and(|(v, _)| written(&v))
}

/// Reads and parses a job file (HCL, or JSON; with `json`, JSON only).
pub fn parse_job_file(path: &Path, vars: &JobVarArgs, json: bool) -> Result<JobFile> {
    let shown = path.display().to_string();
    let body = std::fs::read(path).map_err(|e| CliError::ReadFile {
        path: shown.clone(),
        message: e.to_string(),
    })?;
    if json && body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(CliError::JobFile {
            path: shown,
            message: "-json was given but the file is not a JSON object".into(),
        });
    }
    let inputs = variable_inputs(path, vars)?;
    let parsed = caravan_jobspec::parse_job_with(&body, &inputs, &ParseOptions::default())
        .map_err(|e| CliError::JobFile {
            path: shown.clone(),
            message: e.to_string(),
        })?;
    let submission = caravan_jobspec::submission(&String::from_utf8_lossy(&body), &inputs, &parsed);
    Ok(JobFile {
        job: parsed.job,
        warnings: parsed.warnings,
        namespace_written: namespace_written(&body, &inputs),
        submission,
    })
}

/// Reads, parses (HCL or JSON) and validates a job file.
#[cfg(test)]
pub fn load_job(path: &Path, vars: &JobVarArgs) -> Result<(Job, Vec<String>)> {
    let file = load_job_file(path, vars, false)?;
    Ok((file.job, file.warnings))
}

/// [`parse_job_file`], then the job checked as Nomad's `Job.Validate` does.
fn load_job_file(path: &Path, vars: &JobVarArgs, json: bool) -> Result<JobFile> {
    let file = parse_job_file(path, vars, json)?;
    caravan_jobspec::validate(&file.job).map_err(|e| CliError::JobFile {
        path: path.display().to_string(),
        message: format!("Job validation errors:\n{e}"),
    })?;
    Ok(file)
}

/// The job of a file, in the command line's namespace unless the file names one.
fn in_namespace(file: JobFile, api: &Api) -> (Job, Vec<String>) {
    let mut job = file.job;
    if !file.namespace_written {
        job.namespace = api.namespace().to_string();
    }
    (job, file.warnings)
}

/// A submission as the API carries it.
fn submission_proto(s: &caravan_jobspec::JobSubmission) -> caravan_proto::JobSubmission {
    caravan_proto::JobSubmission {
        source: s.source.clone(),
        format: s.format.clone(),
        variable_flags: s.variable_flags.clone(),
        variables: s.variables.clone(),
        ..Default::default()
    }
}

/// `Job Warnings:` and the list, as Nomad prints a multi-error.
pub fn warnings_block(warnings: &[String]) -> Option<String> {
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

/// Errors as Nomad's multi-error prints them.
fn errors_block(errors: &[String]) -> String {
    let n = errors.len();
    let mut out = format!("{n} error{} occurred:", if n == 1 { "" } else { "s" });
    for e in errors {
        out.push_str(&format!("\n\t* {e}"));
    }
    out.push('\n');
    out
}

/// `job validate`, as Nomad's: the file parsed here, then checked by the
/// gateway; when the gateway cannot be asked, checked here and said so.
/// Exit 1 with the errors, 0 with "Job validation successful".
pub async fn validate(
    api: &Api,
    ui: &mut Ui,
    file: &Path,
    vars: &JobVarArgs,
    json: bool,
) -> Result<u8> {
    let parsed = match parse_job_file(file, vars, json) {
        Ok(parsed) => parsed,
        Err(e) => {
            ui.error(format!("Error getting job struct: {e}"));
            return Ok(1);
        }
    };
    let (job, mut warnings) = in_namespace(parsed, api);
    let errors = match api.validate_job(job.clone()).await {
        Ok(resp) => {
            warnings.extend(resp.warnings);
            resp.errors
        }
        Err(_) => {
            ui.output(
                "Driver configuration not validated since connection to Nomad agent couldn't be \
                 established.\n",
            );
            match caravan_jobspec::validate(&job) {
                Ok(()) => {
                    warnings.extend(caravan_jobspec::warnings(&job));
                    Vec::new()
                }
                Err(e) => e.0.iter().map(ToString::to_string).collect(),
            }
        }
    };
    if !errors.is_empty() {
        ui.error("Job validation errors:");
        ui.error(errors_block(&errors));
        return Ok(1);
    }
    if let Some(block) = warnings_block(&warnings) {
        ui.output(block);
    }
    ui.output("Job validation successful");
    Ok(0)
}

/// `job run`: register the job and monitor its evaluation (or with
/// `-output`, print the job's JSON).
pub async fn run(api: &Api, ui: &mut Ui, args: RunArgs<'_>) -> Result<u8> {
    let file = load_job_file(args.file, args.vars, args.json)?;
    let submission = submission_proto(&file.submission);
    let (job, mut warnings) = in_namespace(file, api);
    if args.output {
        ui.output(pretty(
            &serde_json::json!({ "Job": caravan_jobspec::render_json(&job) }),
        ));
        return Ok(0);
    }
    let periodic = job.is_periodic();
    let parameterized = job.parameterized.is_some();
    let resp = api
        .register_job(job, args.check_index, Some(submission))
        .await?;
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
    if args.detach {
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

/// `job plan`'s exit code, as Nomad's: 0 when the job is unchanged, else 1
/// when a group would place, stop, migrate, replace or canary allocations.
pub fn plan_exit_code(
    diff: DiffType,
    updates: &std::collections::BTreeMap<String, DesiredUpdates>,
) -> u8 {
    if diff == DiffType::None {
        return 0;
    }
    let changes = updates
        .values()
        .any(|u| u.stop + u.place + u.migrate + u.destructive_update + u.canary > 0);
    u8::from(changes)
}

/// `job plan`: the diff against the registered job, the scheduler's dry
/// run, and the check-index hint.
pub async fn plan(
    api: &Api,
    ui: &mut Ui,
    file: &Path,
    vars: &JobVarArgs,
    verbose: bool,
    json: bool,
) -> Result<u8> {
    let parsed = load_job_file(file, vars, json)?;
    let (job, mut warnings) = in_namespace(parsed, api);
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
    Ok(plan_exit_code(diff.diff_type, &updates))
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
    fn plan_exits_1_only_when_allocations_change() {
        let updates = |u: DesiredUpdates| [("web".to_string(), u)].into();
        let place = DesiredUpdates {
            place: 1,
            ..Default::default()
        };
        assert_eq!(plan_exit_code(DiffType::Edited, &updates(place)), 1);
        // An unchanged job exits 0 whatever the scheduler would do.
        assert_eq!(plan_exit_code(DiffType::None, &updates(place)), 0);
        let in_place = DesiredUpdates {
            in_place_update: 2,
            ignore: 1,
            ..Default::default()
        };
        assert_eq!(plan_exit_code(DiffType::Edited, &updates(in_place)), 0);
        let canary = DesiredUpdates {
            canary: 1,
            ..Default::default()
        };
        assert_eq!(plan_exit_code(DiffType::Added, &updates(canary)), 1);
    }

    #[test]
    fn namespaces_count_only_when_written() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain.hcl");
        std::fs::write(&plain, "job \"x\" {\n  group \"g\" {\n    task \"t\" {\n      driver = \"raw_exec\"\n    }\n  }\n}\n").unwrap();
        let named = dir.path().join("named.hcl");
        std::fs::write(&named, "job \"x\" {\n  namespace = \"prod\"\n  group \"g\" {\n    task \"t\" {\n      driver = \"raw_exec\"\n    }\n  }\n}\n").unwrap();
        let json = dir.path().join("named.json");
        std::fs::write(&json, r#"{"Job": {"ID": "x", "Namespace": "prod", "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "raw_exec"}]}]}}"#).unwrap();
        let none = JobVarArgs::default();
        assert!(
            !parse_job_file(&plain, &none, false)
                .unwrap()
                .namespace_written
        );
        assert!(
            parse_job_file(&named, &none, false)
                .unwrap()
                .namespace_written
        );
        assert!(
            parse_job_file(&json, &none, true)
                .unwrap()
                .namespace_written
        );
        let err = parse_job_file(&plain, &none, true).unwrap_err().to_string();
        assert!(err.contains("-json"), "{err}");
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

//! `job status` (the jobs table, one job's page, or with `-json`/`-t`
//! Nomad's `[{Summary, Allocations, LatestDeployment, Evaluations}]`) and
//! `job allocs`.

use caravan_model::now_unix_ns;
use caravan_proto::Job;
use serde_json::{Value, json};

use crate::api::Api;
use crate::backend::{NomadCall, segment};
use crate::error::CliError;
use crate::format::FormatArgs;
use crate::format::limit;
use crate::lookup;
use crate::ui::Ui;
use crate::views::{self, JobPage};

type Result<T> = std::result::Result<T, CliError>;

/// What `job status` was asked.
#[derive(Debug, Clone, Default)]
pub struct StatusArgs {
    /// Only the job's head lines.
    pub short: bool,
    /// With JSON, the allocations of earlier instances too.
    pub all_allocs: bool,
    /// `-json` / `-t`.
    pub format: FormatArgs,
}

/// `job status [<id>]`.
pub async fn status(api: &Api, ui: &mut Ui, id: Option<&str>, args: &StatusArgs) -> Result<u8> {
    match id {
        None => {
            let jobs = api.list_jobs("").await?;
            if jobs.is_empty() {
                ui.output("No running jobs");
            } else if args.format.wanted() {
                let mut all = Vec::new();
                for job in &jobs {
                    all.push(job_json(api, &job.namespace, &job.id, args.all_allocs).await?);
                }
                ui.output(args.format.render(&Value::Array(all))?);
            } else {
                ui.output(views::job_list(&jobs));
            }
            Ok(0)
        }
        Some(id) => {
            let job = lookup::job(api, id).await?;
            if args.format.wanted() {
                let one = job_json(api, &job.namespace, &job.id, args.all_allocs).await?;
                ui.output(args.format.render(&Value::Array(vec![one]))?);
                return Ok(0);
            }
            if args.short {
                ui.output(views::job_header(&job));
                return Ok(0);
            }
            status_page(api, ui, job).await
        }
    }
}

/// The jobs table (`job status` and `status` without an id).
pub async fn list(api: &Api, ui: &mut Ui) -> Result<u8> {
    status(api, ui, None, &StatusArgs::default()).await
}

/// Nomad's `JobJson` of one job: its summary, allocations, newest
/// deployment and evaluations, each as the HTTP API answers it.
async fn job_json(api: &Api, namespace: &str, id: &str, all_allocs: bool) -> Result<Value> {
    let get = |rest: &str| {
        NomadCall::get(format!("/v1/job/{}{rest}", segment(id))).param("namespace", namespace)
    };
    let summary = api
        .nomad_get("Error querying job summary", get("/summary"))
        .await?;
    let allocations = api
        .nomad_get(
            "Error querying job allocations",
            get("/allocations").param("all", all_allocs.to_string()),
        )
        .await?;
    let deployment = api
        .nomad_get("Error querying latest job deployment", get("/deployment"))
        .await?;
    let evaluations = api
        .nomad_get("Error querying job evaluations", get("/evaluations"))
        .await?;
    Ok(json!({
        "Summary": summary,
        "Allocations": allocations,
        "LatestDeployment": deployment,
        "Evaluations": evaluations,
    }))
}

/// One job's status page.
pub async fn status_page(api: &Api, ui: &mut Ui, job: Job) -> Result<u8> {
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

/// `job allocs`: the job's allocations as a table, or Nomad's stubs.
pub async fn allocs(
    api: &Api,
    ui: &mut Ui,
    id: &str,
    all: bool,
    verbose: bool,
    format: &FormatArgs,
) -> Result<u8> {
    let job = lookup::job(api, id).await?;
    if format.wanted() {
        let call = NomadCall::get(format!("/v1/job/{}/allocations", segment(&job.id)))
            .param("namespace", job.namespace.clone())
            .param("all", all.to_string());
        return super::print_json(api, ui, format, "Error retrieving allocations", call).await;
    }
    let allocs = api.job_allocations(&job.id).await?;
    if allocs.is_empty() {
        ui.output("No allocations placed");
    } else if verbose {
        ui.output(verbose_alloc_list(&allocs));
    } else {
        ui.output(views::alloc_list(&allocs, now_unix_ns()));
    }
    Ok(0)
}

/// Nomad's `-verbose` allocations table: full ids, node names, eval ids and times.
fn verbose_alloc_list(allocs: &[caravan_proto::Allocation]) -> String {
    use caravan_model::NomadName;
    let mut sorted: Vec<_> = allocs.iter().collect();
    sorted.sort_by(|a, b| {
        b.create_revision
            .cmp(&a.create_revision)
            .then_with(|| a.id.cmp(&b.id))
    });
    let mut rows = vec![
        [
            "ID",
            "Eval ID",
            "Node ID",
            "Node Name",
            "Task Group",
            "Version",
            "Desired",
            "Status",
            "Created",
            "Modified",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for a in sorted {
        rows.push(vec![
            limit(&a.id, 36).to_string(),
            limit(&a.eval_id, 36).to_string(),
            limit(&a.node_id, 36).to_string(),
            a.node_name.clone(),
            a.task_group.clone(),
            a.job_version.to_string(),
            a.desired_status().nomad_name().to_string(),
            a.client_status().nomad_name().to_string(),
            crate::format::rfc3339(a.create_time_unix_ns),
            crate::format::rfc3339(a.modify_time_unix_ns),
        ]);
    }
    crate::format::table(rows)
}

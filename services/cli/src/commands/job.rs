//! `caravan job …`: the dispatch of the job verbs, and `job stop` and `job
//! inspect`. Job files are read in `job_submit`, statuses in `job_status`,
//! counts and canaries in `job_scale`, restarts in `job_restart`, examples
//! in `job_init`, versions, dispatch and periodic launches in `versions`,
//! `dispatch` and `periodic`.

use serde_json::json;

use super::job_status::StatusArgs;
use super::job_submit::{PLAN_ERROR, RunArgs};
use crate::api::Api;
use crate::args::JobCommand;
use crate::backend::{NomadCall, segment};
use crate::error::CliError;
use crate::format::FormatArgs;
use crate::format::output::pretty;
use crate::lookup;
use crate::monitor::monitor;
use crate::ui::Ui;
use crate::views;

type Result<T> = std::result::Result<T, CliError>;

pub(super) async fn dispatch(api: &Api, ui: &mut Ui, cmd: JobCommand) -> Result<u8> {
    match cmd {
        JobCommand::Run {
            file,
            vars,
            detach,
            check_index,
            json,
            output,
        } => {
            let args = RunArgs {
                file: &file,
                vars: &vars,
                detach,
                check_index,
                json,
                output,
            };
            super::job_submit::run(api, ui, args).await
        }
        JobCommand::Validate { file, vars, json } => {
            super::job_submit::validate(api, ui, &file, &vars, json).await
        }
        JobCommand::Plan {
            file,
            vars,
            verbose,
            json,
        } => match super::job_submit::plan(api, ui, &file, &vars, verbose, json).await {
            Ok(code) => Ok(code),
            Err(e) => {
                ui.error(e.to_string());
                Ok(PLAN_ERROR)
            }
        },
        JobCommand::Init {
            short,
            connect,
            template,
            list_templates,
            filename,
        } => {
            let args = super::job_init::InitArgs {
                short,
                connect,
                template,
                list_templates,
                filename,
            };
            super::job_init::init(api, ui, args).await
        }
        JobCommand::Status {
            short,
            all_allocs,
            format,
            id,
        } => {
            let args = StatusArgs {
                short,
                all_allocs,
                format,
            };
            super::job_status::status(api, ui, id.as_deref(), &args).await
        }
        JobCommand::Allocs {
            all,
            verbose,
            format,
            id,
        } => super::job_status::allocs(api, ui, &id, all, verbose, &format).await,
        JobCommand::Stop { id, purge, detach } => stop(api, ui, &id, purge, detach).await,
        JobCommand::Inspect {
            job_version,
            format,
            id,
        } => inspect(api, ui, id.as_deref(), job_version, &format).await,
        JobCommand::History {
            diffs,
            job_version,
            full,
            format,
            id,
        } => {
            let options = views::HistoryOptions { diffs, full };
            super::versions::history(api, ui, &id, job_version, options, &format).await
        }
        JobCommand::Revert {
            detach,
            verbose,
            id,
            version,
        } => super::versions::revert(api, ui, &id, &version, detach, verbose).await,
        JobCommand::Scale {
            check_index,
            detach,
            args,
            ..
        } => super::job_scale::scale(api, ui, &args, check_index, detach).await,
        JobCommand::Restart(args) => super::job_restart::restart(api, ui, args).await,
        JobCommand::Promote {
            groups,
            detach,
            verbose,
            id,
        } => super::job_scale::promote(api, ui, &id, groups, detach, verbose).await,
        JobCommand::Dispatch {
            meta,
            detach,
            verbose,
            idempotency_token,
            id_prefix_template,
            id,
            input,
        } => {
            let flags = super::dispatch::DispatchFlags {
                meta: &meta,
                idempotency_token,
                id_prefix_template,
                detach,
                verbose,
            };
            super::dispatch::dispatch(api, ui, &id, input.as_deref(), flags).await
        }
        JobCommand::Periodic(cmd) => super::periodic::dispatch(api, ui, cmd).await,
    }
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

/// `job inspect`: the job (or one version of it) as Nomad's JSON, wrapped as
/// `{"Job": …}`, or bare through `-json`/`-t`; with neither an id nor a job,
/// `-json`/`-t` print every job's stub.
async fn inspect(
    api: &Api,
    ui: &mut Ui,
    id: Option<&str>,
    version: Option<u64>,
    format: &FormatArgs,
) -> Result<u8> {
    let Some(id) = id else {
        if format.wanted() {
            let call = NomadCall::get("/v1/jobs");
            return super::print_json(api, ui, format, "Error querying jobs", call).await;
        }
        return Err(CliError::Usage(
            "This command takes one argument: <job>".into(),
        ));
    };
    let job = lookup::job(api, id).await?;
    let data = if api.speaks_http() {
        let path = format!("/v1/job/{}", segment(&job.id));
        match version {
            None => {
                let call = NomadCall::get(path).param("namespace", job.namespace.clone());
                api.nomad_get("Error inspecting job", call).await?
            }
            Some(v) => {
                let call = NomadCall::get(format!("{path}/versions"))
                    .param("namespace", job.namespace.clone());
                let versions = api.nomad_get("Error inspecting job", call).await?;
                versions
                    .get("Versions")
                    .and_then(|list| list.as_array())
                    .and_then(|list| {
                        list.iter()
                            .find(|j| j.get("Version").and_then(|n| n.as_u64()) == Some(v))
                    })
                    .cloned()
                    .ok_or_else(|| {
                        CliError::NotFound(format!(
                            "Error inspecting job: job {:?} has no version {v}",
                            job.id
                        ))
                    })?
            }
        }
    } else {
        let job = match version {
            None => job,
            Some(v) => api
                .job_versions(&job.id)
                .await?
                .into_iter()
                .find(|j| j.version == v)
                .ok_or_else(|| {
                    CliError::NotFound(format!(
                        "Error inspecting job: job {:?} has no version {v}",
                        job.id
                    ))
                })?,
        };
        caravan_jobspec::render_json(&job)
    };
    if format.wanted() {
        ui.output(format.render(&data)?);
    } else {
        ui.output(pretty(&json!({ "Job": data })));
    }
    Ok(0)
}

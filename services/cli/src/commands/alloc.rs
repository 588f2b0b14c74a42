//! `alloc status`, `alloc logs`, `alloc stop`; `alloc fs`, `alloc signal`
//! and `alloc restart` are in [`super::alloc_fs`], `alloc exec` in
//! [`super::alloc_exec`].

use caravan_model::now_unix_ns;
use caravan_proto::ReadLogsRequest;

use super::alloc_fs::{self, FsArgs, Tail, print_stream};
use super::text;
use crate::api::Api;
use crate::args::{AllocCommand, TailArgs};
use crate::backend::{NomadCall, segment};
use crate::error::CliError;
use crate::lookup;
use crate::monitor::monitor;
use crate::ui::Ui;
use crate::views;

type Result<T> = std::result::Result<T, CliError>;

/// The window `-tail`, `-n` and `-c` ask for, if any.
fn tail(window: TailArgs) -> Option<Tail> {
    window.tail.then_some(Tail {
        lines: window.lines,
        bytes: window.bytes,
    })
}

pub(super) async fn dispatch(api: &Api, ui: &mut Ui, cmd: AllocCommand) -> Result<u8> {
    match cmd {
        AllocCommand::Status { format, id } if format.wanted() => {
            let call = match id {
                None => NomadCall::get("/v1/allocations"),
                Some(id) => {
                    let alloc = lookup::alloc(api, &id).await?;
                    NomadCall::get(format!("/v1/allocation/{}", segment(&alloc.id)))
                }
            };
            super::print_json(api, ui, &format, "Error querying allocation", call).await
        }
        AllocCommand::Status { id: Some(id), .. } => status(api, ui, &id).await,
        AllocCommand::Status { id: None, .. } => Err(CliError::Usage(
            "This command takes one of the following argument conditions:\n \
             * A single <allocation>\n \
             * No arguments, with output format specified"
                .into(),
        )),
        AllocCommand::Logs {
            stderr,
            window,
            alloc,
            task,
        } => logs(api, ui, &alloc, task, stderr, window.follow, tail(window)).await,
        AllocCommand::Stop { id, detach } => stop(api, ui, &id, detach).await,
        AllocCommand::Exec(args) => super::alloc_exec::exec(api, args).await,
        AllocCommand::Fs {
            stat,
            window,
            machine,
            alloc,
            path,
        } => {
            let args = FsArgs {
                alloc,
                path,
                stat,
                follow: window.follow,
                tail: tail(window),
                machine,
            };
            alloc_fs::fs(api, ui, args).await
        }
        AllocCommand::Signal {
            signal,
            task_flag,
            alloc,
            task,
        } => {
            let task = alloc_fs::one_task(task_flag, task)?;
            alloc_fs::signal(api, &alloc, signal, task).await
        }
        AllocCommand::Restart {
            all_tasks,
            task_flag,
            alloc,
            task,
        } => {
            let task = alloc_fs::one_task(task_flag, task)?;
            alloc_fs::restart(api, &alloc, task, all_tasks).await
        }
    }
}

/// One allocation's status page.
pub(super) async fn status(api: &Api, ui: &mut Ui, id: &str) -> Result<u8> {
    let alloc = lookup::alloc(api, id).await?;
    // The job gives the task order and the reschedule limit; the page is
    // still worth printing without it.
    let job = api.job(&alloc.job_id).await.ok();
    // When the replacement is due is not worth failing the page over either.
    let reschedule_at = if alloc.followup_eval_id.is_empty() || !alloc.next_allocation.is_empty() {
        None
    } else {
        api.evaluation(&alloc.followup_eval_id)
            .await
            .ok()
            .map(|e| e.wait_until_unix_ns)
            .filter(|t| *t > 0)
    };
    let checks = service_checks(api, &alloc.id).await;
    ui.output(views::alloc_page(
        &alloc,
        job.as_ref(),
        reschedule_at,
        &checks,
        now_unix_ns(),
    ));
    Ok(0)
}

/// The latest results of the allocation's service checks; none when they
/// cannot be read (over gRPC, or from a gateway without the endpoint),
/// which the page is not failed over, as in Nomad.
async fn service_checks(api: &Api, alloc_id: &str) -> Vec<views::ServiceCheck> {
    let call = NomadCall::get(format!(
        "/v1/client/allocation/{}/checks",
        segment(alloc_id)
    ));
    match api.nomad_get("Error reading service checks", call).await {
        Ok(answer) => checks_of(&answer),
        Err(_) => Vec::new(),
    }
}

/// The checks of a `/v1/client/allocation/<id>/checks` answer (a map of
/// check ID to Nomad's `CheckQueryResult`).
fn checks_of(answer: &serde_json::Value) -> Vec<views::ServiceCheck> {
    answer
        .as_object()
        .map(|checks| {
            checks
                .values()
                .map(|c| views::ServiceCheck {
                    service: text(c, "Service"),
                    task: text(c, "Task"),
                    name: text(c, "Check"),
                    mode: text(c, "Mode"),
                    status: text(c, "Status"),
                })
                .collect()
        })
        .unwrap_or_default()
}

async fn logs(
    api: &Api,
    ui: &mut Ui,
    id: &str,
    task: Option<String>,
    stderr: bool,
    follow: bool,
    tail: Option<Tail>,
) -> Result<u8> {
    let window = tail.map(Tail::window).transpose()?;
    let alloc = lookup::alloc(api, id).await?;
    let task = match task {
        Some(t) => t,
        None => {
            let job = api.job(&alloc.job_id).await.ok();
            let tasks = views::task_names(&alloc, job.as_ref());
            match tasks.as_slice() {
                [one] => one.clone(),
                [] => {
                    return Err(CliError::Usage(format!(
                        "Allocation {:?} has no tasks yet; please specify the task.",
                        crate::format::short_id(&alloc.id)
                    )));
                }
                many => {
                    let list: String = many.iter().map(|t| format!("\n  * {t}")).collect();
                    return Err(CliError::Usage(format!(
                        "Allocation {:?} is running the following tasks:{list}\n\nPlease specify the task.",
                        crate::format::short_id(&alloc.id)
                    )));
                }
            }
        }
    };
    let request = ReadLogsRequest {
        alloc_id: alloc.id.clone(),
        task,
        stream: if stderr { "stderr" } else { "stdout" }.into(),
        follow,
        offset: window.map_or(0, |(back, _)| back),
        from_end: window.is_some(),
    };
    let stream = api.read_logs(request).await?;
    let keep_lines = window.and_then(|(_, lines)| lines);
    print_stream(ui, stream, keep_lines).await?;
    Ok(0)
}

async fn stop(api: &Api, ui: &mut Ui, id: &str, detach: bool) -> Result<u8> {
    let alloc = lookup::alloc(api, id).await?;
    let resp = api.stop_allocation(&alloc.id).await?;
    if detach || resp.eval_id.is_empty() {
        ui.output(resp.eval_id);
        return Ok(0);
    }
    monitor(api, ui, &resp.eval_id).await
}

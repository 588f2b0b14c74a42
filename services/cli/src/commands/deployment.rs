//! `deployment list`, `status` (with `-monitor`), `promote`, `fail`,
//! `pause`, `resume`.

use std::time::Duration;

use caravan_model::{DeploymentStatusExt, now_unix_ns};
use caravan_proto::{Deployment, DeploymentStatus, DeploymentUpdateResponse};

use crate::api::Api;
use crate::args::DeploymentCommand;
use crate::backend::{NomadCall, segment};
use crate::error::CliError;
use crate::format::{SHORT_ID, limit, rfc3339};
use crate::lookup;
use crate::monitor::monitor;
use crate::ui::Ui;
use crate::views;

type Result<T> = std::result::Result<T, CliError>;

pub(super) async fn dispatch(api: &Api, ui: &mut Ui, cmd: DeploymentCommand) -> Result<u8> {
    match cmd {
        DeploymentCommand::List { format, .. } if format.wanted() => {
            let call = NomadCall::get("/v1/deployments");
            super::print_json(api, ui, &format, "Error retrieving deployments", call).await
        }
        DeploymentCommand::List { verbose, .. } => {
            let deployments = api.list_deployments().await?;
            ui.output(views::deployment_list(&deployments, verbose));
            Ok(0)
        }
        DeploymentCommand::Status {
            monitor: true,
            format,
            ..
        } if format.wanted() => Err(CliError::Usage(
            "The monitor flag cannot be used with the '-json' or '-t' flags".into(),
        )),
        DeploymentCommand::Status { format, id, .. } if format.wanted() => {
            let d = lookup::deployment(api, &id).await?;
            let call = NomadCall::get(format!("/v1/deployment/{}", segment(&d.id)));
            super::print_json(api, ui, &format, "Error retrieving deployment", call).await
        }
        DeploymentCommand::Status {
            verbose,
            monitor: false,
            id,
            ..
        } => {
            let d = lookup::deployment(api, &id).await?;
            ui.output(views::deployment_page(&d, verbose));
            Ok(0)
        }
        DeploymentCommand::Status {
            verbose,
            monitor: true,
            id,
            ..
        } => {
            let d = lookup::deployment(api, &id).await?;
            follow_deployment(api, ui, d, verbose).await
        }
        DeploymentCommand::Promote {
            groups,
            detach,
            verbose,
            id,
        } => {
            let d = lookup::deployment(api, &id).await?;
            let resp = api.promote_deployment(&d.id, groups).await?;
            follow(api, ui, resp, detach, verbose).await
        }
        DeploymentCommand::Fail {
            detach,
            verbose,
            id,
        } => {
            let d = lookup::deployment(api, &id).await?;
            let resp = api.fail_deployment(&d.id).await?;
            ui.output(format!(
                "Deployment {:?} failed.\n",
                limit(&d.id, id_length(verbose))
            ));
            follow(api, ui, resp, detach, verbose).await
        }
        DeploymentCommand::Pause { verbose, id } => {
            let d = lookup::deployment(api, &id).await?;
            api.pause_deployment(&d.id, true).await?;
            ui.output(format!(
                "Deployment {:?} paused",
                limit(&d.id, id_length(verbose))
            ));
            Ok(0)
        }
        DeploymentCommand::Resume {
            detach,
            verbose,
            id,
        } => {
            let d = lookup::deployment(api, &id).await?;
            let resp = api.pause_deployment(&d.id, false).await?;
            ui.output(format!(
                "Deployment {:?} resumed",
                limit(&d.id, id_length(verbose))
            ));
            follow(api, ui, resp, detach, verbose).await
        }
    }
}

fn id_length(verbose: bool) -> usize {
    if verbose { usize::MAX } else { SHORT_ID }
}

/// After a steering write: nothing when it created no evaluation, the
/// evaluation id with `-detach`, else the monitor, as Nomad does.
async fn follow(
    api: &Api,
    ui: &mut Ui,
    resp: DeploymentUpdateResponse,
    detach: bool,
    verbose: bool,
) -> Result<u8> {
    if resp.eval_id.is_empty() {
        return Ok(0);
    }
    if detach {
        ui.output(format!(
            "Evaluation ID: {}",
            limit(&resp.eval_id, id_length(verbose))
        ));
        return Ok(0);
    }
    monitor(api, ui, &resp.eval_id).await
}

/// How long one blocking read of a followed deployment waits for a change.
const POLL: Duration = Duration::from_secs(2);

/// How long a failed deployment with auto-revert is given to start the
/// deployment of the reverted version.
const REVERT_GRACE: Duration = Duration::from_secs(1);

/// Whether a deployment will change no more: it ended, or it is blocked.
fn finished(status: DeploymentStatus) -> bool {
    status.is_terminal() || status == DeploymentStatus::Blocked
}

/// One monitor frame: the time, then the deployment's page.
pub(crate) fn frame(d: &Deployment, verbose: bool, now: i64) -> String {
    format!("{}\n{}\n", rfc3339(now), views::deployment_page(d, verbose))
}

/// `deployment status -monitor`: prints the deployment each time it
/// changes until it ends; a failed one whose groups auto-revert is
/// followed by the deployment of the reverted version, as Nomad does.
async fn follow_deployment(
    api: &Api,
    ui: &mut Ui,
    deployment: Deployment,
    verbose: bool,
) -> Result<u8> {
    let mut current = deployment;
    loop {
        ui.output(format!(
            "{}: Monitoring deployment {:?}",
            rfc3339(now_unix_ns()),
            limit(&current.id, id_length(verbose))
        ));
        let mut revision = 0;
        let mut shown = -1;
        let d = loop {
            let read = api.deployment_after(&current.id, revision, POLL).await?;
            revision = read.revision;
            let d = read.value;
            if d.modify_revision != shown {
                shown = d.modify_revision;
                ui.output(frame(&d, verbose, now_unix_ns()));
            }
            if finished(d.status()) {
                break d;
            }
        };
        let reverts = d.task_groups.values().any(|g| g.auto_revert);
        if d.status() != DeploymentStatus::Failed || !reverts {
            return Ok(0);
        }
        tokio::time::sleep(REVERT_GRACE).await;
        let rollback = api
            .list_deployments()
            .await?
            .into_iter()
            .filter(|r| r.job_id == d.job_id && r.create_revision > d.create_revision)
            .max_by_key(|r| r.create_revision);
        match rollback {
            Some(r) => current = r,
            None => return Ok(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_is_the_time_and_the_page() {
        let mut d = Deployment {
            id: "5ca611b5-0000".into(),
            job_id: "web".into(),
            status_description: "Deployment completed successfully".into(),
            ..Default::default()
        };
        d.set_status(DeploymentStatus::Successful);
        assert_eq!(
            frame(&d, false, 1_700_000_000_000_000_000),
            "2023-11-14T22:13:20Z\n\
             ID          = 5ca611b5\n\
             Job ID      = web\n\
             Job Version = 0\n\
             Status      = successful\n\
             Description = Deployment completed successfully\n"
        );
        assert!(finished(DeploymentStatus::Failed));
        assert!(!finished(DeploymentStatus::Running));
        assert!(!finished(DeploymentStatus::Paused));
    }
}

//! `deployment list`, `status`, `promote`, `fail`, `pause`, `resume`.

use caravan_proto::DeploymentUpdateResponse;

use crate::api::Api;
use crate::args::DeploymentCommand;
use crate::error::CliError;
use crate::format::{SHORT_ID, limit};
use crate::lookup;
use crate::monitor::monitor;
use crate::ui::Ui;
use crate::views;

type Result<T> = std::result::Result<T, CliError>;

pub(super) async fn dispatch(api: &Api, ui: &mut Ui, cmd: DeploymentCommand) -> Result<u8> {
    match cmd {
        DeploymentCommand::List { verbose } => {
            let deployments = api.list_deployments().await?;
            ui.output(views::deployment_list(&deployments, verbose));
            Ok(0)
        }
        DeploymentCommand::Status { verbose, id } => {
            let d = lookup::deployment(api, &id).await?;
            ui.output(views::deployment_page(&d, verbose));
            Ok(0)
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

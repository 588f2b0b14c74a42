//! `job periodic force`: a periodic job's child launched now.

use crate::api::Api;
use crate::args::PeriodicCommand;
use crate::error::CliError;
use crate::format::{SHORT_ID, limit};
use crate::lookup;
use crate::monitor::monitor;
use crate::ui::Ui;
use caravan_model::JobExt;

type Result<T> = std::result::Result<T, CliError>;

pub(super) async fn dispatch(api: &Api, ui: &mut Ui, cmd: PeriodicCommand) -> Result<u8> {
    match cmd {
        PeriodicCommand::Force {
            detach,
            verbose,
            id,
        } => force(api, ui, &id, detach, verbose).await,
    }
}

async fn force(api: &Api, ui: &mut Ui, id: &str, detach: bool, verbose: bool) -> Result<u8> {
    let job = match lookup::job(api, id).await {
        Ok(job) if job.is_periodic() => job,
        Ok(_) => {
            return Err(CliError::NotFound(format!(
                "No periodic job(s) with prefix or ID {id:?} found"
            )));
        }
        Err(e) if e.is_not_found() => {
            return Err(CliError::NotFound(format!(
                "No periodic job(s) with prefix or ID {id:?} found"
            )));
        }
        Err(e) => return Err(e),
    };
    let resp = api.force_periodic(&job.id).await?;
    if detach || resp.eval_id.is_empty() {
        ui.output("Force periodic successful");
        if !resp.eval_id.is_empty() {
            let n = if verbose { usize::MAX } else { SHORT_ID };
            ui.output(format!("Evaluation ID: {}", limit(&resp.eval_id, n)));
        }
        return Ok(0);
    }
    monitor(api, ui, &resp.eval_id).await
}

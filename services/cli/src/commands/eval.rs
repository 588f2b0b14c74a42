//! `eval status`, `eval list`.

use crate::api::Api;
use crate::args::EvalCommand;
use crate::error::CliError;
use crate::lookup;
use crate::ui::Ui;
use crate::views;
use caravan_model::now_unix_ns;

type Result<T> = std::result::Result<T, CliError>;

pub(super) async fn dispatch(api: &Api, ui: &mut Ui, cmd: EvalCommand) -> Result<u8> {
    match cmd {
        EvalCommand::Status { id } => status(api, ui, &id).await,
        EvalCommand::List => {
            let evals = api.list_evaluations("").await?;
            if evals.is_empty() {
                ui.output("No evals found");
            } else {
                ui.output(views::eval_list(&evals));
            }
            Ok(0)
        }
    }
}

/// One evaluation's page.
pub(super) async fn status(api: &Api, ui: &mut Ui, id: &str) -> Result<u8> {
    let eval = lookup::eval(api, id).await?;
    let allocs = api.evaluation_allocations(&eval.id).await?;
    ui.output(views::eval_page(&eval, &allocs, now_unix_ns()));
    Ok(0)
}

//! `eval status`, `eval list`.

use crate::api::Api;
use crate::args::EvalCommand;
use crate::backend::{NomadCall, segment};
use crate::error::CliError;
use crate::lookup;
use crate::ui::Ui;
use crate::views;
use caravan_model::now_unix_ns;

type Result<T> = std::result::Result<T, CliError>;

pub(super) async fn dispatch(api: &Api, ui: &mut Ui, cmd: EvalCommand) -> Result<u8> {
    match cmd {
        EvalCommand::Status { format, id } if format.wanted() => {
            let eval = lookup::eval(api, &id).await?;
            let call = NomadCall::get(format!("/v1/evaluation/{}", segment(&eval.id)));
            super::print_json(api, ui, &format, "Error querying evaluation", call).await
        }
        EvalCommand::Status { id, .. } => status(api, ui, &id).await,
        EvalCommand::List { format } if format.wanted() => {
            let call = NomadCall::get("/v1/evaluations");
            super::print_json(api, ui, &format, "Error querying evaluations", call).await
        }
        EvalCommand::List { .. } => {
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

//! The verbs: each parses nothing itself (see [`crate::args`]), calls the
//! api-gateway through [`Api`], and prints through [`Ui`].

pub mod acl;
mod alloc;
mod alloc_fs;
mod deployment;
mod dispatch;
mod eval;
mod job;
mod node;
mod periodic;
pub mod tls;
mod var;
mod versions;

use crate::api::Api;
use crate::args::{Cli, Command, SystemCommand};
use crate::error::CliError;
use crate::ui::Ui;

/// Runs a parsed command line; returns the exit code.
pub async fn dispatch(cli: Cli, ui: &mut Ui) -> Result<u8, CliError> {
    if let Command::Dev(args) = cli.command {
        return crate::dev::run(args, ui).await;
    }
    if let Command::Tls(cmd) = cli.command {
        let dir = std::env::current_dir()
            .map_err(|e| CliError::Usage(format!("Error: the current directory: {e}")))?;
        return tls::dispatch(&dir, ui, cmd);
    }
    let connection = crate::connection::resolve(&cli.connection, &crate::connection::process_env)?;
    let api = Api::connect(&connection)?;
    match cli.command {
        Command::Job(cmd) => job::dispatch(&api, ui, cmd).await,
        Command::Alloc(cmd) => alloc::dispatch(&api, ui, cmd).await,
        Command::Node(cmd) => node::dispatch(&api, ui, cmd).await,
        Command::Eval(cmd) => eval::dispatch(&api, ui, cmd).await,
        Command::Deployment(cmd) => deployment::dispatch(&api, ui, cmd).await,
        Command::Var(cmd) => var::dispatch(&api, ui, cmd).await,
        Command::Acl(cmd) => acl::dispatch(&api, ui, cmd).await,
        Command::System(SystemCommand::Gc) => {
            // Nomad prints nothing when the collection succeeds.
            api.garbage_collect().await?;
            Ok(0)
        }
        Command::Status { id: None } => job::list(&api, ui).await,
        Command::Status { id: Some(id) } => status(&api, ui, &id).await,
        Command::Dev(_) | Command::Tls(_) => Ok(0),
    }
}

/// `caravan status <id>`: the job with that id, else the allocation,
/// evaluation, node or deployment with that prefix.
async fn status(api: &Api, ui: &mut Ui, id: &str) -> Result<u8, CliError> {
    match crate::lookup::job(api, id).await {
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(e),
        Ok(found) => return job::status_page(api, ui, found).await,
    }
    if id.chars().count() >= 2 {
        if !api.list_allocations(id).await?.is_empty() {
            return alloc::status(api, ui, id).await;
        }
        if !api.list_evaluations(id).await?.is_empty() {
            return eval::status(api, ui, id).await;
        }
        if !api.list_nodes(id).await?.is_empty() {
            return node::status(api, ui, Some(id)).await;
        }
        if !api.list_deployments_prefix(id).await?.is_empty() {
            let d = crate::lookup::deployment(api, id).await?;
            ui.output(crate::views::deployment_page(&d, false));
            return Ok(0);
        }
    }
    Err(CliError::NotFound(format!(
        "No job(s), allocation(s), evaluation(s), node(s) or deployment(s) with prefix or id {id:?} found"
    )))
}

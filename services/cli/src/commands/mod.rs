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
    // Nomad's NOMAD_TOKEN is honoured when neither -token nor
    // CARAVAN_TOKEN is set.
    let token = cli
        .token
        .clone()
        .or_else(|| std::env::var("NOMAD_TOKEN").ok());
    let tls = tls_files(&cli)?;
    let api = Api::with_tls(&cli.address, &cli.namespace, token.as_deref(), tls.as_ref())?;
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

/// The TLS files from the flags, else `CARAVAN_*`, else Nomad's `NOMAD_*`
/// variables; none when no file is named; all three when one is.
fn tls_files(cli: &Cli) -> Result<Option<crate::api::TlsFiles>, CliError> {
    let pick = |flag: &Option<std::path::PathBuf>, nomad: &str| {
        flag.clone()
            .or_else(|| std::env::var_os(nomad).map(std::path::PathBuf::from))
    };
    let ca = pick(&cli.ca_cert, "NOMAD_CACERT");
    let cert = pick(&cli.client_cert, "NOMAD_CLIENT_CERT");
    let key = pick(&cli.client_key, "NOMAD_CLIENT_KEY");
    match (ca, cert, key) {
        (None, None, None) => Ok(None),
        (Some(ca_cert), Some(client_cert), Some(client_key)) => Ok(Some(crate::api::TlsFiles {
            ca_cert,
            client_cert,
            client_key,
        })),
        _ => Err(CliError::Usage(
            "TLS needs all of -ca-cert, -client-cert and -client-key (or CARAVAN_CACERT, \
             CARAVAN_CLIENT_CERT and CARAVAN_CLIENT_KEY)"
                .into(),
        )),
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

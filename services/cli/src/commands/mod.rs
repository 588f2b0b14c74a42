//! The verbs: each parses nothing itself (see [`crate::args`]), calls the
//! api-gateway through [`Api`], and prints through [`Ui`].

pub mod acl;
mod alloc;
mod alloc_exec;
mod alloc_fs;
mod completion;
mod deployment;
mod dispatch;
mod eval;
mod job;
mod job_init;
mod job_restart;
mod job_scale;
mod job_status;
mod job_submit;
mod namespace;
mod node;
mod node_pool;
mod operator;
mod periodic;
pub mod service;
mod status;
pub mod tls;
mod var;
mod var_lock;
mod versions;

pub use completion::autocomplete;

use crate::api::Api;
use crate::args::{Cli, Command, SystemCommand};
use crate::backend::NomadCall;
use crate::error::CliError;
use crate::format::FormatArgs;
use crate::ui::Ui;

/// Prints Nomad's JSON of `call` (a read of the HTTP API), made to do
/// `context`, as `format` asks: `-json` or `-t`.
pub(crate) async fn print_json(
    api: &Api,
    ui: &mut Ui,
    format: &FormatArgs,
    context: &str,
    call: NomadCall,
) -> Result<u8, CliError> {
    let data = api.nomad_get(context, call).await?;
    ui.output(format.render(&data)?);
    Ok(0)
}

/// Runs a parsed command line; returns the exit code.
pub async fn dispatch(cli: Cli, ui: &mut Ui) -> Result<u8, CliError> {
    if let Command::Dev(args) = cli.command {
        return crate::dev::run(args, ui).await;
    }
    if let Command::Server(args) = cli.command {
        // Boxed: its configurations and services would otherwise make every
        // verb's future (and the stack of a test that awaits one) larger.
        return Box::pin(crate::server::run(args, ui)).await;
    }
    if let Command::Completions { shell } = cli.command {
        ui.output(completion::script(shell));
        return Ok(0);
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
        Command::Namespace(cmd) => namespace::dispatch(&api, ui, cmd).await,
        Command::Operator(cmd) => operator::dispatch(&api, ui, cmd).await,
        Command::Service(cmd) => service::dispatch(&api, ui, cmd).await,
        Command::System(SystemCommand::Gc) => {
            // Nomad prints nothing when the collection succeeds.
            api.garbage_collect().await?;
            Ok(0)
        }
        Command::Status { id: None, .. } => job_status::list(&api, ui).await,
        Command::Status {
            id: Some(id),
            verbose,
        } => status::status(&api, ui, &id, verbose).await,
        Command::Dev(_) | Command::Server(_) | Command::Tls(_) | Command::Completions { .. } => {
            Ok(0)
        }
    }
}

/// Field `key` of a JSON object as text: a string as it is, a number
/// written out, anything else (or nothing) empty.
pub(crate) fn text(v: &serde_json::Value, key: &str) -> String {
    match v.get(key) {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

/// A list endpoint's 404: the gateway does not serve it (a list is never
/// "not found"), said so rather than as Nomad's bare status.
pub(crate) fn missing_endpoint(err: CliError, endpoint: &str, what: &str) -> CliError {
    if err.is_not_found() {
        CliError::Other(format!(
            "{err}\nThis api-gateway does not serve {endpoint}: {what} as objects are not \
             available on this Caravan cluster yet"
        ))
    } else {
        err
    }
}

/// A specification's text: the file's, or standard input's for `-`.
pub(crate) fn read_input(input: &str) -> Result<String, CliError> {
    let read = if input == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(input)
    };
    read.map_err(|e| {
        let source = if input == "-" { "stdin" } else { input };
        CliError::Usage(format!("Failed to read {source}: {e}"))
    })
}

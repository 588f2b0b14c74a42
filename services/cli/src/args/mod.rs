//! The command line: Nomad's verbs and flags. Nomad spells long flags with
//! one dash (`-address`, `-detach`); both spellings are accepted.

mod admin;
mod cluster;
mod job;
#[cfg(test)]
mod tests;

use clap::{Parser, Subcommand};

pub use admin::{
    DevArgs, NamespaceCommand, OperatorCommand, SchedulerCommand, ServerArgs, SetConfigArgs,
    SnapshotCommand, SystemCommand, VarCommand, VarLockArgs,
};
pub use cluster::{
    AllocCommand, DeploymentCommand, DrainArgs, EvalCommand, ExecArgs, NodeCommand,
    NodePoolCommand, TailArgs,
};
pub use job::{JobCommand, JobVarArgs, PeriodicCommand, RestartArgs};

use crate::connection::ConnectionArgs;

/// `caravan`: run and inspect jobs on a Caravan cluster.
#[derive(Debug, Parser)]
#[command(
    name = "caravan",
    version,
    about = "Run and inspect jobs on a Caravan cluster"
)]
pub struct Cli {
    /// Where to connect and as whom.
    #[command(flatten)]
    pub connection: ConnectionArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The top-level verbs.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run, plan, inspect and stop jobs.
    #[command(subcommand)]
    Job(JobCommand),
    /// Inspect allocations, read their logs, stop them.
    #[command(subcommand)]
    Alloc(AllocCommand),
    /// Inspect nodes, drain them, set their eligibility.
    #[command(subcommand)]
    Node(NodeCommand),
    /// Inspect evaluations.
    #[command(subcommand)]
    Eval(EvalCommand),
    /// Inspect and steer deployments: promote, fail, pause, resume.
    #[command(subcommand)]
    Deployment(DeploymentCommand),
    /// Cluster-wide maintenance.
    #[command(subcommand)]
    System(SystemCommand),
    /// Read, write, list and purge variables (Nomad Variables).
    #[command(subcommand)]
    Var(VarCommand),
    /// ACLs: bootstrap, policies and tokens.
    #[command(subcommand)]
    Acl(crate::commands::acl::AclCommand),
    /// Namespaces: list, show, write and delete them.
    #[command(subcommand)]
    Namespace(NamespaceCommand),
    /// The scheduler's configuration, and snapshots.
    #[command(subcommand)]
    Operator(OperatorCommand),
    /// Services of Nomad's native service discovery: list, show, delete.
    #[command(subcommand)]
    Service(crate::commands::service::ServiceCommand),
    /// List jobs, or show the job, allocation, evaluation, node or
    /// deployment whose id (or id prefix) is given.
    Status {
        /// Show full ids.
        #[arg(long)]
        verbose: bool,
        /// An id, or a prefix of one.
        id: Option<String>,
    },
    /// Print the shell completion script for bash, zsh or fish
    /// (`source <(caravan completions bash)`); `caravan -autocomplete-install`
    /// adds it to ~/.bashrc and ~/.zshrc.
    Completions {
        /// `bash`, `zsh` or `fish`.
        shell: clap_complete::Shell,
    },
    /// Run every service and one client node in this process (development).
    Dev(DevArgs),
    /// Run the eval-broker, plan-applier, deployment-watcher and
    /// scheduler-worker in this process, sharing one watch of the store.
    Server(ServerArgs),
    /// Make the agent CA and the certificates of servers, clients and the CLI.
    #[command(subcommand)]
    Tls(crate::commands::tls::TlsCommand),
}

/// Flags that take a value as the next argument (when not written `-flag=value`),
/// so normalizing can tell a flag's value from a positional argument.
const VALUE_FLAGS: &[&str] = &[
    "address",
    "grpc-address",
    "region",
    "namespace",
    "token",
    "ca-cert",
    "ca-path",
    "client-cert",
    "client-key",
    "tls-server-name",
    "ttl",
    "delay",
    "max-retry",
    "backoff",
    "task",
    "e",
];

/// Stack given to clap's derived builders, which in a debug build take
/// several megabytes for this many subcommands (a frame per struct holding
/// every one of its arguments).
const CLAP_STACK: usize = 32 * 1024 * 1024;

/// Runs `f`, which builds clap's command, on a thread with room for it,
/// whatever stack its caller has left (an async task's, a test thread's 2
/// MiB); inline if no thread can be made.
pub fn with_room<T: Send>(f: impl Fn() -> T + Sync) -> T {
    std::thread::scope(|scope| {
        match std::thread::Builder::new()
            .name("caravan-args".into())
            .stack_size(CLAP_STACK)
            .spawn_scoped(scope, &f)
        {
            Ok(handle) => match handle.join() {
                Ok(value) => value,
                Err(panic) => std::panic::resume_unwind(panic),
            },
            Err(_) => f(),
        }
    })
}

/// Rewrites Nomad's one-dash long flags (`-detach`, `-address=x`) to the
/// two-dash form; single letters (`-f`), numbers (`-1`) and everything after
/// `--` are left alone, and so is the child command line of `var lock`
/// (everything after its variable path), and so is the command of `alloc exec`.
pub fn normalize<I: IntoIterator<Item = String>>(args: I) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = false;
    let mut positionals: Vec<String> = Vec::new();
    let mut value_next = false;
    for (i, arg) in args.into_iter().enumerate() {
        if i == 0 || rest {
            out.push(arg);
            continue;
        }
        if arg == "--" {
            rest = true;
            out.push(arg);
            continue;
        }
        if value_next {
            value_next = false;
            out.push(arg);
            continue;
        }
        let name = arg.strip_prefix('-').filter(|n| !n.starts_with('-'));
        let key = arg.trim_start_matches('-').split('=').next().unwrap_or("");
        let long = name.is_some_and(|_| {
            key.chars().count() > 1 && key.starts_with(|c: char| c.is_ascii_alphabetic())
        });
        if arg.starts_with('-') && arg.len() > 1 {
            value_next = VALUE_FLAGS.contains(&key) && !arg.contains('=');
        } else {
            positionals.push(arg.clone());
            // `var lock <path> child…` and `alloc exec <alloc> command…`:
            // the child's flags are its own.
            if positionals.len() == 3
                && matches!(
                    (positionals[0].as_str(), positionals[1].as_str()),
                    ("var", "lock") | ("alloc", "exec")
                )
            {
                rest = true;
            }
        }
        if long {
            out.push(format!("-{arg}"));
        } else {
            out.push(arg);
        }
    }
    out
}

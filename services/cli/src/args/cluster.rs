//! `caravan alloc|node|eval|deployment …`: Nomad's verbs over what runs and
//! where, and their flags.

use clap::{Args, Subcommand};

use crate::format::FormatArgs;

/// `caravan deployment …`.
#[derive(Debug, Subcommand)]
pub enum DeploymentCommand {
    /// List deployments.
    List {
        /// Show full ids.
        #[arg(long)]
        verbose: bool,
        #[command(flatten)]
        format: FormatArgs,
    },
    /// Show a deployment's progress per task group.
    Status {
        /// Show full ids.
        #[arg(long)]
        verbose: bool,
        /// Follow the deployment until it ends, printing each change.
        #[arg(long)]
        monitor: bool,
        #[command(flatten)]
        format: FormatArgs,
        /// The deployment id or an id prefix.
        id: String,
    },
    /// Promote a deployment's canaries, of every group or of some.
    Promote {
        /// Promote only this group's canaries; may be repeated.
        #[arg(long = "group", value_name = "GROUP")]
        groups: Vec<String>,
        /// Print the evaluation id and return instead of monitoring.
        #[arg(long)]
        detach: bool,
        /// Show full ids.
        #[arg(long)]
        verbose: bool,
        /// The deployment id or an id prefix.
        id: String,
    },
    /// Mark a deployment failed (a job with auto_revert goes back to its
    /// latest stable version).
    Fail {
        /// Print the evaluation id and return instead of monitoring.
        #[arg(long)]
        detach: bool,
        /// Show full ids.
        #[arg(long)]
        verbose: bool,
        /// The deployment id or an id prefix.
        id: String,
    },
    /// Pause a deployment: no new batch is placed until it is resumed.
    Pause {
        /// Show full ids.
        #[arg(long)]
        verbose: bool,
        /// The deployment id or an id prefix.
        id: String,
    },
    /// Resume a paused deployment.
    Resume {
        /// Print the evaluation id and return instead of monitoring.
        #[arg(long)]
        detach: bool,
        /// Show full ids.
        #[arg(long)]
        verbose: bool,
        /// The deployment id or an id prefix.
        id: String,
    },
}

/// `caravan alloc …`.
#[derive(Debug, Subcommand)]
pub enum AllocCommand {
    /// Show an allocation's status, tasks and events.
    Status {
        #[command(flatten)]
        format: FormatArgs,
        /// The allocation id or an id prefix (with -json or -t and none, every allocation).
        id: Option<String>,
    },
    /// Print a task's log.
    Logs {
        /// Print the standard error log instead of standard output.
        #[arg(long)]
        stderr: bool,
        #[command(flatten)]
        window: TailArgs,
        /// The allocation id or an id prefix.
        alloc: String,
        /// The task; needed when the allocation has more than one.
        task: Option<String>,
    },
    /// List a directory of an allocation's file system, or print a file.
    Fs {
        /// Show the file's or directory's details instead of its contents.
        #[arg(long)]
        stat: bool,
        #[command(flatten)]
        window: TailArgs,
        /// Sizes in bytes rather than KiB, MiB….
        #[arg(short = 'H')]
        machine: bool,
        /// The allocation id or an id prefix.
        alloc: String,
        /// The path inside the allocation's directory (`alloc/logs`,
        /// `<task>/local`); the directory itself by default.
        path: Option<String>,
    },
    /// Send a signal to an allocation's tasks (or one of them).
    Signal {
        /// The signal; SIGKILL by default.
        #[arg(short = 's', value_name = "SIGNAL")]
        signal: Option<String>,
        /// Only this task (as the second argument does).
        #[arg(long = "task", value_name = "TASK")]
        task_flag: Option<String>,
        /// The allocation id or an id prefix.
        alloc: String,
        /// Only this task.
        task: Option<String>,
    },
    /// Restart an allocation's running tasks (or one of them) in place.
    Restart {
        /// Restart every task, not only the running ones.
        #[arg(long = "all-tasks")]
        all_tasks: bool,
        /// Only this task (as the second argument does).
        #[arg(long = "task", value_name = "TASK")]
        task_flag: Option<String>,
        /// The allocation id or an id prefix.
        alloc: String,
        /// Only this task.
        task: Option<String>,
    },
    /// Run a command in a running task of an allocation; exits with the
    /// command's exit code.
    Exec(ExecArgs),
    /// Stop an allocation; the scheduler places a replacement.
    Stop {
        /// The allocation id or an id prefix.
        id: String,
        /// Print the evaluation id and return instead of monitoring.
        #[arg(long)]
        detach: bool,
    },
}

/// `caravan alloc exec …`.
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The task; needed when the allocation has more than one.
    #[arg(long = "task", value_name = "TASK")]
    pub task: Option<String>,
    /// Pass stdin to the command (default true; `-i=false` to give it none).
    #[arg(short = 'i', num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = go_bool)]
    pub stdin: Option<bool>,
    /// Give the command a terminal (default: when stdin is one; `-t=false`
    /// to refuse one).
    #[arg(short = 't', num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = go_bool)]
    pub tty: Option<bool>,
    /// The escape character of a session with a terminal, recognized at
    /// the start of a line (`~.` disconnects); `none` for none.
    #[arg(short = 'e', value_name = "ESCAPE_CHAR", default_value = "~")]
    pub escape: String,
    /// The allocation id or an id prefix.
    pub alloc: String,
    /// The command and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<String>,
}

/// A boolean as Go's `strconv.ParseBool` reads it (`-i=false`, `-t=0`).
fn go_bool(text: &str) -> Result<bool, String> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        other => Err(format!("invalid boolean value {other:?}")),
    }
}

/// `caravan node …`.
#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// List nodes, or show one node's status.
    Status {
        #[command(flatten)]
        format: FormatArgs,
        /// The node id or an id prefix.
        id: Option<String>,
    },
    /// Node pools: list, show, write, delete, and list their nodes.
    #[command(subcommand)]
    Pool(NodePoolCommand),
    /// Allow or forbid new placements on a node.
    Eligibility {
        /// Make the node eligible.
        #[arg(long, conflicts_with = "disable", required_unless_present = "disable")]
        enable: bool,
        /// Make the node ineligible.
        #[arg(long)]
        disable: bool,
        /// The node id or an id prefix.
        id: String,
    },
    /// Start or stop draining a node.
    Drain(DrainArgs),
}

/// `caravan node drain …`.
#[derive(Debug, Args)]
pub struct DrainArgs {
    /// Start draining.
    #[arg(long, conflicts_with = "disable", required_unless_present = "disable")]
    pub enable: bool,
    /// Stop draining (and make the node eligible again unless -keep-ineligible).
    #[arg(long)]
    pub disable: bool,
    /// Stop what remains after this long (`1h`, `30m`).
    #[arg(long, default_value = "1h")]
    pub deadline: String,
    /// Drain without a deadline.
    #[arg(long = "no-deadline")]
    pub no_deadline: bool,
    /// Stop every allocation at once.
    #[arg(long)]
    pub force: bool,
    /// Leave system jobs' allocations running.
    #[arg(long = "ignore-system")]
    pub ignore_system: bool,
    /// On -disable, leave the node ineligible.
    #[arg(long = "keep-ineligible")]
    pub keep_ineligible: bool,
    /// Return once the drain is set instead of monitoring it.
    #[arg(long)]
    pub detach: bool,
    /// The node id or an id prefix.
    pub id: String,
}

/// `caravan eval …`.
#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// Show an evaluation, the allocations it placed and its failures.
    Status {
        #[command(flatten)]
        format: FormatArgs,
        /// The evaluation id or an id prefix.
        id: String,
    },
    /// List evaluations.
    List {
        #[command(flatten)]
        format: FormatArgs,
    },
}

/// `caravan node pool …`.
#[derive(Debug, Subcommand)]
pub enum NodePoolCommand {
    /// List node pools.
    List {
        #[command(flatten)]
        format: FormatArgs,
    },
    /// Show a node pool: its description, metadata and scheduler configuration.
    Info {
        #[command(flatten)]
        format: FormatArgs,
        /// The node pool's name or a prefix of it.
        name: String,
    },
    /// Create or update a node pool from a specification (HCL `node_pool
    /// "name" { … }`, or JSON with -json; `-` reads standard input).
    Apply {
        /// Read the specification as JSON.
        #[arg(long)]
        json: bool,
        /// The specification file.
        file: String,
    },
    /// Delete a node pool (it must have no nodes and no live jobs).
    Delete {
        /// The node pool's name.
        name: String,
    },
    /// List the nodes of a node pool.
    Nodes {
        #[command(flatten)]
        format: FormatArgs,
        /// The node pool's name or a prefix of it.
        name: String,
    },
}

/// How much of a log or file to print, and whether to follow it (`alloc
/// logs` and `alloc fs`).
#[derive(Debug, Clone, Copy, Args)]
pub struct TailArgs {
    /// Keep printing as it grows.
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// Print the end (the last 10 lines unless `-n` or `-c`).
    #[arg(long)]
    pub tail: bool,
    /// With `-tail`, the number of lines to print.
    #[arg(short = 'n', value_name = "LINES")]
    pub lines: Option<i64>,
    /// With `-tail`, the number of bytes to print.
    #[arg(short = 'c', value_name = "BYTES")]
    pub bytes: Option<i64>,
}

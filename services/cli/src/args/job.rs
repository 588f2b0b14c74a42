//! `caravan job …`: Nomad's job verbs and their flags.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::format::FormatArgs;

/// `caravan job …`.
#[derive(Debug, Subcommand)]
pub enum JobCommand {
    /// Register a job from a file (HCL or JSON) and monitor its evaluation.
    Run {
        /// The job file.
        file: PathBuf,
        #[command(flatten)]
        vars: JobVarArgs,
        /// Print the evaluation id and return instead of monitoring.
        #[arg(long)]
        detach: bool,
        /// Register only if the job's modify index is this (0: only if new).
        #[arg(long = "check-index", value_name = "INDEX")]
        check_index: Option<i64>,
        /// Read the file as JSON (`{"Job": …}` or a bare job).
        #[arg(long)]
        json: bool,
        /// Print the job as Nomad's JSON (`{"Job": …}`) instead of submitting it.
        #[arg(long)]
        output: bool,
    },
    /// Show what registering a job would change, and whether it would fit.
    /// Exits 0 when no allocation would change, 1 when some would, 255 on error.
    Plan {
        /// The job file.
        file: PathBuf,
        #[command(flatten)]
        vars: JobVarArgs,
        /// Also show the fields of added and removed objects.
        #[arg(long)]
        verbose: bool,
        /// Read the file as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Check a job file (HCL or JSON) without submitting it.
    Validate {
        /// The job file.
        file: PathBuf,
        #[command(flatten)]
        vars: JobVarArgs,
        /// Read the file as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Write an example job file (`example.nomad.hcl`) to start from.
    Init {
        /// Write the short form, without comments.
        #[arg(long)]
        short: bool,
        /// Nomad's Consul Connect example (refused: Caravan has no Consul).
        #[arg(long)]
        connect: bool,
        /// Start from the job template kept in the variable
        /// `nomad/job-templates/<TEMPLATE>`.
        #[arg(long, value_name = "TEMPLATE")]
        template: Option<String>,
        /// List the job templates kept under `nomad/job-templates/`.
        #[arg(long = "list-templates")]
        list_templates: bool,
        /// The file to write.
        filename: Option<PathBuf>,
    },
    /// List jobs, or show one job's status.
    Status {
        /// Print only the job's summary lines, without its allocations.
        #[arg(long)]
        short: bool,
        /// With -json or -t, the job's allocations of earlier instances too.
        #[arg(long = "all-allocs")]
        all_allocs: bool,
        #[command(flatten)]
        format: FormatArgs,
        /// The job id or an id prefix.
        id: Option<String>,
    },
    /// List a job's allocations.
    Allocs {
        /// Allocations of earlier instances of the job too.
        #[arg(long)]
        all: bool,
        /// Show full ids.
        #[arg(long)]
        verbose: bool,
        #[command(flatten)]
        format: FormatArgs,
        /// The job id or an id prefix.
        id: String,
    },
    /// Stop a job; with -purge, also remove it.
    Stop {
        /// The job id or an id prefix.
        id: String,
        /// Remove the job and its history.
        #[arg(long)]
        purge: bool,
        /// Print the evaluation id and return instead of monitoring.
        #[arg(long)]
        detach: bool,
    },
    /// Print a job as Nomad's JSON (`{"Job": …}`).
    Inspect {
        /// This version of the job instead of the newest.
        #[arg(long = "version", value_name = "N")]
        job_version: Option<u64>,
        #[command(flatten)]
        format: FormatArgs,
        /// The job id or an id prefix (with -json or -t and none, every job).
        id: Option<String>,
    },
    /// List a job's kept versions, optionally with the changes between them.
    History {
        /// Show the changes between each version and the one before it.
        #[arg(short = 'p')]
        diffs: bool,
        /// Show only this version.
        #[arg(long = "version", value_name = "N")]
        job_version: Option<u64>,
        /// Show each version's whole specification as JSON.
        #[arg(long)]
        full: bool,
        #[command(flatten)]
        format: FormatArgs,
        /// The job id or an id prefix.
        id: String,
    },
    /// Register an older version of a job again as its newest version.
    Revert {
        /// Print the evaluation id and return instead of monitoring.
        #[arg(long)]
        detach: bool,
        /// Show full ids.
        #[arg(long)]
        verbose: bool,
        /// The job id or an id prefix.
        id: String,
        /// The version to revert to.
        version: String,
    },
    /// Change the count of a job's group and monitor the evaluation.
    Scale {
        /// Scale only if the job's modify index is this (0: whatever it is).
        #[arg(long = "check-index", value_name = "INDEX")]
        check_index: Option<u64>,
        /// Print the evaluation id and return instead of monitoring.
        #[arg(long)]
        detach: bool,
        /// Show full ids.
        #[arg(long)]
        verbose: bool,
        /// `<job> [<group>] <count>`.
        #[arg(num_args = 2..=3, required = true, value_name = "ARGS")]
        args: Vec<String>,
    },
    /// Restart (or with -reschedule, replace) a job's running allocations in batches.
    Restart(RestartArgs),
    /// Promote the canaries of a job's newest deployment.
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
        /// The job id or an id prefix.
        id: String,
    },
    /// Launch a child of a parameterized job with a payload and metadata.
    Dispatch {
        /// Metadata of the child, `key=value`; may be repeated.
        #[arg(long = "meta", value_name = "KEY=VALUE")]
        meta: Vec<String>,
        /// Print the ids and return instead of monitoring.
        #[arg(long)]
        detach: bool,
        /// Show full ids.
        #[arg(long)]
        verbose: bool,
        /// Dispatch at most once per token: while a child dispatched with it
        /// exists, that child is answered instead of a new one.
        #[arg(long = "idempotency-token", value_name = "TOKEN")]
        idempotency_token: Option<String>,
        /// Put into the child's id: `<job>/dispatch-<prefix>-<time>-<rand>`.
        #[arg(long = "id-prefix-template", value_name = "PREFIX")]
        id_prefix_template: Option<String>,
        /// The parameterized job's id or an id prefix.
        id: String,
        /// A file with the payload, or `-` to read it from standard input.
        input: Option<String>,
    },
    /// Act on periodic jobs.
    #[command(subcommand)]
    Periodic(PeriodicCommand),
}

/// `caravan job restart …`.
#[derive(Debug, Clone, Args)]
pub struct RestartArgs {
    /// Restart every task, not only the running ones.
    #[arg(long = "all-tasks")]
    pub all_tasks: bool,
    /// Allocations per batch: a number, or a percentage of the allocations (`25%`).
    #[arg(long = "batch-size", default_value = "1", value_name = "N|N%")]
    pub batch_size: String,
    /// Time to wait between batches (`10s`), or `ask` to ask each time.
    #[arg(long = "batch-wait", default_value = "0s", value_name = "DURATION|ask")]
    pub batch_wait: String,
    /// Only this group's allocations; may be repeated.
    #[arg(long = "group", value_name = "GROUP")]
    pub groups: Vec<String>,
    /// Skip the tasks' shutdown delay (not supported by Caravan: refused).
    #[arg(long = "no-shutdown-delay")]
    pub no_shutdown_delay: bool,
    /// What to do when a batch fails: `ask` (the default) or `fail`.
    #[arg(long = "on-error", default_value = "ask", value_name = "ask|fail")]
    pub on_error: String,
    /// Stop each allocation and wait for its replacement instead of
    /// restarting it in place.
    #[arg(long)]
    pub reschedule: bool,
    /// Only this task; may be repeated.
    #[arg(long = "task", value_name = "TASK")]
    pub tasks: Vec<String>,
    /// Answer yes to every question: go on after errors, no pause between batches.
    #[arg(long)]
    pub yes: bool,
    /// Show full ids and the allocations skipped.
    #[arg(long)]
    pub verbose: bool,
    /// The job id or an id prefix.
    pub id: String,
}

/// `caravan job periodic …`.
#[derive(Debug, Subcommand)]
pub enum PeriodicCommand {
    /// Launch a periodic job's child now, whatever its schedule says.
    Force {
        /// Print the evaluation id and return instead of monitoring.
        #[arg(long)]
        detach: bool,
        /// Show full ids.
        #[arg(long)]
        verbose: bool,
        /// The periodic job's id or an id prefix.
        id: String,
    },
}

/// The HCL2 variable flags of `job run`, `job plan` and `job validate`, as Nomad's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct JobVarArgs {
    /// Sets a variable of the job file (`-var name=value`); may be repeated. Values from
    /// `NOMAD_VAR_<name>` and `-var-file` are overridden by these.
    #[arg(long = "var", value_name = "KEY=VALUE")]
    pub vars: Vec<String>,
    /// A file of variable values (`name = value` lines, HCL or JSON); may be repeated.
    #[arg(long = "var-file", value_name = "PATH")]
    pub var_files: Vec<PathBuf>,
    /// Whether a value for a variable the job file does not declare is an error
    /// (`-hcl2-strict=false` makes it a warning).
    #[arg(
        long = "hcl2-strict",
        value_name = "BOOL",
        default_value_t = true,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub strict: bool,
}

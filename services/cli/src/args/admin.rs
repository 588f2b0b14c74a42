//! `caravan system|var|namespace|operator|dev|completions …`: the cluster's
//! administration, and their flags.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::format::FormatArgs;

/// `caravan system …`.
#[derive(Debug, Subcommand)]
pub enum SystemCommand {
    /// Collect garbage now: terminal evaluations and allocations, dead jobs,
    /// down nodes and finished deployments.
    Gc,
}

/// `caravan var …`.
#[derive(Debug, Subcommand)]
pub enum VarCommand {
    /// Print a variable: its metadata and items, as a table or JSON.
    Get {
        /// Print only this item's value.
        #[arg(long)]
        item: Option<String>,
        /// `table` (the default), `json` or `go-template`.
        #[arg(long, default_value = "table")]
        out: String,
        /// With `-out go-template`, the template.
        #[arg(long)]
        template: Option<String>,
        /// The variable's path.
        path: String,
    },
    /// Create or update a variable from `key=value` pairs and/or a JSON
    /// specification (`@file.json`, or `-` for standard input). A value of
    /// `@file` is read from the file; an empty value removes the item. Without
    /// -force or -check-index the variable must not exist yet.
    Put {
        /// Write whatever the variable's current index.
        #[arg(long, conflicts_with = "check_index")]
        force: bool,
        /// Write only if the variable's modify index is this (0: only if new).
        #[arg(long = "check-index", value_name = "INDEX")]
        check_index: Option<u64>,
        /// The format of a specification on standard input (only `json`).
        #[arg(long = "in", default_value = "json")]
        input: String,
        /// The variable's path, or `@file.json` / `-` for a specification
        /// naming it; then an optional specification, then `key=value` pairs.
        #[arg(required = true, num_args = 1..)]
        args: Vec<String>,
    },
    /// List variables (their metadata) whose path starts with a prefix.
    List {
        /// `table` (the default), `json` or `go-template`.
        #[arg(long, default_value = "table")]
        out: String,
        /// With `-out go-template`, the template.
        #[arg(long)]
        template: Option<String>,
        /// The path prefix.
        prefix: Option<String>,
    },
    /// Delete a variable.
    Purge {
        /// Delete only if the variable's modify index is this.
        #[arg(long = "check-index", value_name = "INDEX")]
        check_index: Option<u64>,
        /// The variable's path.
        path: String,
    },
    /// Hold a lock in a variable while a child process runs.
    Lock(VarLockArgs),
}

/// `caravan var lock …`.
#[derive(Debug, Clone, Args)]
pub struct VarLockArgs {
    /// Say on standard error what the lock is doing.
    #[arg(long)]
    pub verbose: bool,
    /// How long the lock holds without a renewal (`15s`).
    #[arg(long, value_name = "DURATION")]
    pub ttl: Option<String>,
    /// How long the lock stays blocked after a holder lost it (`15s`).
    #[arg(long, value_name = "DURATION")]
    pub delay: Option<String>,
    /// Run the child through `$SHELL -c` (the default) or directly (`-shell=false`).
    #[arg(
        long,
        value_name = "BOOL",
        default_value_t = true,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub shell: bool,
    /// Return at once when the lock is held by someone else.
    #[arg(long = "early-return")]
    pub early_return: bool,
    /// How often a failed renewal is retried before the lock is given up.
    #[arg(long = "max-retry", default_value_t = 5)]
    pub max_retry: u32,
    /// How long to wait between attempts to take the lock (1.1 × the TTL by default).
    #[arg(long, value_name = "DURATION")]
    pub backoff: Option<String>,
    /// The variable's path, or `@spec.json` for a specification naming it;
    /// then an optional `@spec` file, then the child's command line.
    #[arg(required = true, num_args = 2.., trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// `caravan namespace …`.
#[derive(Debug, Subcommand)]
pub enum NamespaceCommand {
    /// List namespaces.
    List {
        #[command(flatten)]
        format: FormatArgs,
    },
    /// Show a namespace.
    Status {
        #[command(flatten)]
        format: FormatArgs,
        /// The namespace's name or a prefix of it.
        name: String,
    },
    /// Create or update a namespace, by name with -description, or from a
    /// specification file (HCL, or JSON with -json; `-` reads standard input).
    Apply {
        /// The namespace's description.
        #[arg(long)]
        description: Option<String>,
        /// The quota to attach (not supported by Caravan: refused).
        #[arg(long)]
        quota: Option<String>,
        /// Read the specification as JSON.
        #[arg(long)]
        json: bool,
        /// A specification file, `-`, or the namespace's name.
        input: String,
    },
    /// Delete a namespace (it must hold no jobs, variables or volumes).
    Delete {
        /// The namespace's name.
        name: String,
    },
}

/// `caravan operator …`.
#[derive(Debug, Subcommand)]
pub enum OperatorCommand {
    /// The scheduler's configuration.
    #[command(subcommand)]
    Scheduler(SchedulerCommand),
    /// Snapshots of the cluster's state (not supported by Caravan: refused).
    #[command(subcommand)]
    Snapshot(SnapshotCommand),
}

/// `caravan operator scheduler …`.
#[derive(Debug, Subcommand)]
pub enum SchedulerCommand {
    /// Show the scheduler's configuration.
    #[command(name = "get-config")]
    GetConfig {
        #[command(flatten)]
        format: FormatArgs,
    },
    /// Change the scheduler's configuration; what is not given is kept.
    #[command(name = "set-config")]
    SetConfig(SetConfigArgs),
}

/// `caravan operator scheduler set-config …`: Nomad's flags, each a
/// `true|false` (or a name) replacing that field only.
#[derive(Debug, Clone, Default, Args)]
pub struct SetConfigArgs {
    /// Change only if the configuration's modify index is this.
    #[arg(long = "check-index", value_name = "INDEX")]
    pub check_index: Option<u64>,
    /// `binpack` or `spread`.
    #[arg(long = "scheduler-algorithm", value_name = "NAME")]
    pub scheduler_algorithm: Option<String>,
    /// Allow tasks to use memory beyond their reservation up to `memory_max`.
    #[arg(long = "memory-oversubscription", value_name = "BOOL")]
    pub memory_oversubscription: Option<String>,
    /// Refuse job registrations that do not come with a management token.
    #[arg(long = "reject-job-registration", value_name = "BOOL")]
    pub reject_job_registration: Option<String>,
    /// Stop handing evaluations to the scheduler workers.
    #[arg(long = "pause-eval-broker", value_name = "BOOL")]
    pub pause_eval_broker: Option<String>,
    /// Let batch jobs preempt others.
    #[arg(long = "preempt-batch-scheduler", value_name = "BOOL")]
    pub preempt_batch_scheduler: Option<String>,
    /// Let service jobs preempt others.
    #[arg(long = "preempt-service-scheduler", value_name = "BOOL")]
    pub preempt_service_scheduler: Option<String>,
    /// Let sysbatch jobs preempt others.
    #[arg(long = "preempt-sysbatch-scheduler", value_name = "BOOL")]
    pub preempt_sysbatch_scheduler: Option<String>,
    /// Let system jobs preempt others.
    #[arg(long = "preempt-system-scheduler", value_name = "BOOL")]
    pub preempt_system_scheduler: Option<String>,
    /// Nodes scored for spread and affinity (not supported by Caravan: refused).
    #[arg(long = "node-limit-for-feasibility-checks", value_name = "COUNT")]
    pub node_limit_for_feasibility_checks: Option<String>,
}

/// `caravan operator snapshot …`.
#[derive(Debug, Subcommand)]
pub enum SnapshotCommand {
    /// Save the cluster's state to a file.
    Save {
        /// The file to write.
        file: PathBuf,
    },
    /// Restore the cluster's state from a file.
    Restore {
        /// The file to read.
        file: PathBuf,
    },
}

/// `caravan server`.
#[derive(Debug, Clone, Args)]
pub struct ServerArgs {
    /// TOML file: `[store]` (every service's default), `[telemetry]`,
    /// `[tls]` and `[shutdown]` for the process, and a table per service
    /// (`[eval-broker]`, `[plan-applier]`, `[deployment-watcher]`,
    /// `[scheduler-worker]`) with the keys its own binary reads.
    #[arg(long, short = 'c')]
    pub config: Option<PathBuf>,
    /// Override a key: `store.prefix=/x` for every service,
    /// `eval-broker.grpc_addr=0.0.0.0:4650` for one (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// The services to run, comma-separated; all four when unset.
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub services: Vec<String>,
    /// Read and check the configuration, then exit: 0 when it is good, 2
    /// naming what is wrong.
    #[arg(long = "check-config")]
    pub check_config: bool,
    /// Ask each configured service of a running `caravan server` (at its
    /// `grpc_addr`, 127.0.0.1 for an unspecified host) whether it serves:
    /// 0 only when every one answers SERVING, 1 otherwise; for container
    /// healthchecks and Kubernetes probes.
    #[arg(long, conflicts_with = "check_config")]
    pub health: bool,
    /// Nomad's `server members`, `join` and `force-leave`: refused with the
    /// reason (Caravan's servers keep no gossip pool), never taken for a
    /// request to start one.
    #[arg(hide = true)]
    pub verb: Option<String>,
}

/// `caravan dev`.
#[derive(Debug, Clone, Args)]
pub struct DevArgs {
    /// Keep state in this etcd (`http://127.0.0.1:2379`) instead of in memory.
    #[arg(long)]
    pub etcd: Option<String>,
    /// With an `https://` `-etcd`: the CA (PEM) that signs etcd's certificate.
    #[arg(long = "etcd-ca-file", value_name = "PEM")]
    pub etcd_ca_file: Option<PathBuf>,
    /// The client certificate (PEM) to present to etcd.
    #[arg(long = "etcd-cert-file", value_name = "PEM")]
    pub etcd_cert_file: Option<PathBuf>,
    /// Its key (PEM).
    #[arg(long = "etcd-key-file", value_name = "PEM")]
    pub etcd_key_file: Option<PathBuf>,
    /// Where the client node keeps its allocations; a fresh temporary
    /// directory when unset.
    #[arg(long = "data-dir")]
    pub data_dir: Option<PathBuf>,
    /// The address every service listens on.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: String,
    /// The api-gateway's gRPC port.
    #[arg(long = "grpc-port", default_value_t = 4647)]
    pub grpc_port: u16,
    /// The api-gateway's HTTP port (Nomad's API).
    #[arg(long = "http-port", default_value_t = 4646)]
    pub http_port: u16,
    /// Log filter (`info`, `warn`, `caravan_api_gateway=debug`).
    #[arg(long = "log-level", default_value = "info")]
    pub log_level: String,
    /// The client node's name (Nomad's `-node`); the host name when unset.
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
    /// Enforce ACLs (Nomad's `acl { enabled = true }`); bootstrap with
    /// `caravan acl bootstrap`.
    #[arg(long = "acl-enabled")]
    pub acl_enabled: bool,
}

//! The command line: Nomad's verbs and flags. Nomad spells long flags with
//! one dash (`-address`, `-detach`); both spellings are accepted.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

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
    /// List jobs, or show the job, allocation, evaluation, node or
    /// deployment with an id.
    Status {
        /// A job id, or an id prefix of an allocation, evaluation, node or
        /// deployment.
        id: Option<String>,
    },
    /// Run every service and one client node in this process (development).
    Dev(DevArgs),
    /// Make the agent CA and the certificates of servers, clients and the CLI.
    #[command(subcommand)]
    Tls(crate::commands::tls::TlsCommand),
}

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
    },
    /// Show what registering a job would change, and whether it would fit.
    Plan {
        /// The job file.
        file: PathBuf,
        #[command(flatten)]
        vars: JobVarArgs,
        /// Also show the fields of added and removed objects.
        #[arg(long)]
        verbose: bool,
    },
    /// Check a job file (HCL or JSON) without submitting it.
    Validate {
        /// The job file.
        file: PathBuf,
        #[command(flatten)]
        vars: JobVarArgs,
    },
    /// List jobs, or show one job's status.
    Status {
        /// The job id or an id prefix.
        id: Option<String>,
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
        /// The job id or an id prefix.
        id: String,
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
        /// The parameterized job's id or an id prefix.
        id: String,
        /// A file with the payload, or `-` to read it from standard input.
        input: Option<String>,
    },
    /// Act on periodic jobs.
    #[command(subcommand)]
    Periodic(PeriodicCommand),
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

/// `caravan system …`.
#[derive(Debug, Subcommand)]
pub enum SystemCommand {
    /// Collect garbage now: terminal evaluations and allocations, dead jobs,
    /// down nodes and finished deployments.
    Gc,
}

/// `caravan deployment …`.
#[derive(Debug, Subcommand)]
pub enum DeploymentCommand {
    /// List deployments.
    List {
        /// Show full ids.
        #[arg(long)]
        verbose: bool,
    },
    /// Show a deployment's progress per task group.
    Status {
        /// Show full ids.
        #[arg(long)]
        verbose: bool,
        /// Follow the deployment until it ends, printing each change.
        #[arg(long)]
        monitor: bool,
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

/// `caravan var …`.
#[derive(Debug, Subcommand)]
pub enum VarCommand {
    /// Print a variable: its metadata and items, as a table or JSON.
    Get {
        /// Print only this item's value.
        #[arg(long)]
        item: Option<String>,
        /// `table` (the default) or `json`.
        #[arg(long, default_value = "table")]
        out: String,
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
        /// `table` (the default) or `json`.
        #[arg(long, default_value = "table")]
        out: String,
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
}

/// `caravan alloc …`.
#[derive(Debug, Subcommand)]
pub enum AllocCommand {
    /// Show an allocation's status, tasks and events.
    Status {
        /// The allocation id or an id prefix.
        id: String,
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
    /// Stop an allocation; the scheduler places a replacement.
    Stop {
        /// The allocation id or an id prefix.
        id: String,
        /// Print the evaluation id and return instead of monitoring.
        #[arg(long)]
        detach: bool,
    },
}

/// `caravan node …`.
#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// List nodes, or show one node's status.
    Status {
        /// The node id or an id prefix.
        id: Option<String>,
    },
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
        /// The evaluation id or an id prefix.
        id: String,
    },
    /// List evaluations.
    List,
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

/// Rewrites Nomad's one-dash long flags (`-detach`, `-address=x`) to the
/// two-dash form; single letters (`-f`), numbers (`-1`) and everything after
/// `--` are left alone.
pub fn normalize<I: IntoIterator<Item = String>>(args: I) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = false;
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
        let name = arg.strip_prefix('-').filter(|n| !n.starts_with('-'));
        let long = name.is_some_and(|n| {
            let key = n.split('=').next().unwrap_or("");
            key.chars().count() > 1 && key.starts_with(|c: char| c.is_ascii_alphabetic())
        });
        if long {
            out.push(format!("-{arg}"));
        } else {
            out.push(arg);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Cli {
        let args = normalize(
            std::iter::once("caravan".to_string()).chain(line.split_whitespace().map(String::from)),
        );
        Cli::try_parse_from(args).unwrap()
    }

    #[test]
    fn nomads_single_dash_flags_are_accepted() {
        assert_eq!(
            normalize(
                [
                    "caravan",
                    "-address=http://x:1",
                    "job",
                    "run",
                    "-detach",
                    "-check-index",
                    "5",
                    "f.hcl"
                ]
                .map(String::from)
            ),
            [
                "caravan",
                "--address=http://x:1",
                "job",
                "run",
                "--detach",
                "--check-index",
                "5",
                "f.hcl"
            ]
        );
        assert_eq!(
            normalize(["caravan", "alloc", "logs", "-f", "ab", "--", "-weird"].map(String::from)),
            ["caravan", "alloc", "logs", "-f", "ab", "--", "-weird"]
        );
        assert_eq!(normalize(["c", "-1"].map(String::from)), ["c", "-1"]);
    }

    #[test]
    fn job_run_takes_detach_and_check_index() {
        let cli = parse(
            "-address http://10.0.0.1:4647 job run -detach -check-index 7 examples/hello.hcl",
        );
        assert_eq!(
            cli.connection.address.as_deref(),
            Some("http://10.0.0.1:4647")
        );
        match cli.command {
            Command::Job(JobCommand::Run {
                file,
                detach,
                check_index,
                vars,
            }) => {
                assert_eq!(
                    vars,
                    JobVarArgs {
                        strict: true,
                        ..Default::default()
                    }
                );
                assert_eq!(file, PathBuf::from("examples/hello.hcl"));
                assert!(detach);
                assert_eq!(check_index, Some(7));
            }
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn job_files_take_nomads_variable_flags() {
        let cli = parse(
            "job run -var count=3 -var-file prod.hcl -var image=redis:7 -var-file=b.json -hcl2-strict=false job.nomad.hcl",
        );
        match cli.command {
            Command::Job(JobCommand::Run { file, vars, .. }) => {
                assert_eq!(file, PathBuf::from("job.nomad.hcl"));
                assert_eq!(vars.vars, ["count=3", "image=redis:7"]);
                assert_eq!(
                    vars.var_files,
                    [PathBuf::from("prod.hcl"), PathBuf::from("b.json")]
                );
                assert!(!vars.strict);
            }
            other => panic!("parsed as {other:?}"),
        }
        for verb in ["plan", "validate"] {
            let cli = parse(&format!("job {verb} -var x=1 -hcl2-strict j.hcl"));
            match cli.command {
                Command::Job(JobCommand::Plan { vars, .. } | JobCommand::Validate { vars, .. }) => {
                    assert_eq!(vars.vars, ["x=1"]);
                    assert!(vars.strict);
                }
                other => panic!("parsed as {other:?}"),
            }
        }
    }

    #[test]
    fn global_flags_may_follow_the_verb() {
        let cli = parse("job status -address http://127.0.0.1:9 web");
        assert_eq!(
            cli.connection.address.as_deref(),
            Some("http://127.0.0.1:9")
        );
        assert!(
            matches!(cli.command, Command::Job(JobCommand::Status { id: Some(ref id) }) if id == "web")
        );
    }

    #[test]
    fn alloc_fs_signal_restart_and_log_tail_flags() {
        let cli = parse("alloc fs -stat -H 0af9 alloc/logs");
        assert!(matches!(
            cli.command,
            Command::Alloc(AllocCommand::Fs { stat: true, machine: true, ref path, .. })
                if path.as_deref() == Some("alloc/logs")
        ));
        let cli = parse("alloc fs -tail -f -n 5 0af9 web/local/x");
        assert!(matches!(
            cli.command,
            Command::Alloc(AllocCommand::Fs {
                window: TailArgs {
                    tail: true,
                    follow: true,
                    lines: Some(5),
                    bytes: None,
                },
                ..
            })
        ));
        let cli = parse("alloc signal -s SIGUSR1 0af9 web");
        assert!(matches!(
            cli.command,
            Command::Alloc(AllocCommand::Signal { ref signal, ref task, .. })
                if signal.as_deref() == Some("SIGUSR1") && task.as_deref() == Some("web")
        ));
        let cli = parse("alloc signal -task web 0af9");
        assert!(matches!(
            cli.command,
            Command::Alloc(AllocCommand::Signal { ref task_flag, task: None, .. })
                if task_flag.as_deref() == Some("web")
        ));
        let cli = parse("alloc restart -all-tasks 0af9");
        assert!(matches!(
            cli.command,
            Command::Alloc(AllocCommand::Restart {
                all_tasks: true,
                task: None,
                ..
            })
        ));
        let cli = parse("alloc logs -tail -c 100 0af9");
        assert!(matches!(
            cli.command,
            Command::Alloc(AllocCommand::Logs {
                window: TailArgs {
                    tail: true,
                    bytes: Some(100),
                    lines: None,
                    ..
                },
                ..
            })
        ));
    }

    #[test]
    fn logs_stop_drain_and_dev_flags() {
        let cli = parse("alloc logs -stderr -f 0af9 web");
        assert!(matches!(
            cli.command,
            Command::Alloc(AllocCommand::Logs { stderr: true, window: TailArgs { follow: true, .. }, ref alloc, task: Some(ref t), .. })
                if alloc == "0af9" && t == "web"
        ));
        let cli = parse("job stop -purge -detach web");
        assert!(matches!(
            cli.command,
            Command::Job(JobCommand::Stop {
                purge: true,
                detach: true,
                ..
            })
        ));
        let cli = parse("node drain -enable -deadline 30m -ignore-system -detach f747");
        match cli.command {
            Command::Node(NodeCommand::Drain(d)) => {
                assert!(d.enable && d.ignore_system && d.detach && !d.disable);
                assert_eq!(d.deadline, "30m");
                assert_eq!(d.id, "f747");
            }
            other => panic!("parsed as {other:?}"),
        }
        let cli = parse("dev -etcd http://127.0.0.1:2379 -data-dir /tmp/d -bind 0.0.0.0");
        match cli.command {
            Command::Dev(d) => {
                assert_eq!(d.etcd.as_deref(), Some("http://127.0.0.1:2379"));
                assert_eq!(d.data_dir, Some(PathBuf::from("/tmp/d")));
                assert_eq!(d.bind, "0.0.0.0");
                assert_eq!((d.grpc_port, d.http_port), (4647, 4646));
            }
            other => panic!("parsed as {other:?}"),
        }
        let cli = parse(
            "dev -etcd https://127.0.0.1:2379 -etcd-ca-file ca.pem -etcd-cert-file c.pem -etcd-key-file k.pem",
        );
        match cli.command {
            Command::Dev(d) => {
                assert_eq!(d.etcd_ca_file, Some(PathBuf::from("ca.pem")));
                assert_eq!(d.etcd_cert_file, Some(PathBuf::from("c.pem")));
                assert_eq!(d.etcd_key_file, Some(PathBuf::from("k.pem")));
            }
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn acl_flags_parse_like_nomad() {
        use crate::commands::acl::{AclCommand, TokenCommand};
        let cli = parse("-token s3cret acl token create -name ci -type client -policy a -policy b");
        assert_eq!(cli.connection.token.as_deref(), Some("s3cret"));
        match cli.command {
            Command::Acl(AclCommand::Token(TokenCommand::Create {
                name,
                token_type,
                policies,
                global,
            })) => {
                assert_eq!((name.as_str(), token_type.as_str()), ("ci", "client"));
                assert_eq!(policies, vec!["a", "b"]);
                assert!(!global);
            }
            other => panic!("parsed as {other:?}"),
        }
        assert!(matches!(
            parse("acl token self").command,
            Command::Acl(AclCommand::Token(TokenCommand::Own))
        ));
        match parse("dev -acl-enabled").command {
            Command::Dev(d) => assert!(d.acl_enabled),
            other => panic!("parsed as {other:?}"),
        }
        match parse("dev --acl-enabled").command {
            Command::Dev(d) => assert!(d.acl_enabled),
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn deployment_verbs_take_nomads_flags() {
        let cli = parse("deployment promote -group web -group api -detach 5ca6");
        match cli.command {
            Command::Deployment(DeploymentCommand::Promote {
                groups,
                detach,
                verbose,
                id,
            }) => {
                assert_eq!(groups, ["web", "api"]);
                assert!(detach && !verbose);
                assert_eq!(id, "5ca6");
            }
            other => panic!("parsed as {other:?}"),
        }
        let cli = parse("deployment promote 5ca6");
        assert!(matches!(
            cli.command,
            Command::Deployment(DeploymentCommand::Promote { ref groups, .. }) if groups.is_empty()
        ));
        let cli = parse("deployment status -verbose -monitor 5ca6");
        assert!(matches!(
            cli.command,
            Command::Deployment(DeploymentCommand::Status { verbose: true, monitor: true, ref id })
                if id == "5ca6"
        ));
        assert!(matches!(
            parse("deployment list").command,
            Command::Deployment(DeploymentCommand::List { verbose: false })
        ));
        assert!(matches!(
            parse("deployment fail -detach 5ca6").command,
            Command::Deployment(DeploymentCommand::Fail { detach: true, .. })
        ));
        assert!(matches!(
            parse("deployment pause 5ca6").command,
            Command::Deployment(DeploymentCommand::Pause { .. })
        ));
        assert!(matches!(
            parse("deployment resume 5ca6").command,
            Command::Deployment(DeploymentCommand::Resume { detach: false, .. })
        ));
    }

    #[test]
    fn history_revert_and_dispatch_flags() {
        let cli = parse("job history -p -version 3 web");
        assert!(matches!(
            cli.command,
            Command::Job(JobCommand::History { diffs: true, job_version: Some(3), full: false, ref id })
                if id == "web"
        ));
        let cli = parse("job revert -detach web 2");
        assert!(matches!(
            cli.command,
            Command::Job(JobCommand::Revert { detach: true, ref id, ref version, .. })
                if id == "web" && version == "2"
        ));
        let cli = parse("job dispatch -meta a=1 -meta b=x=y render -");
        match cli.command {
            Command::Job(JobCommand::Dispatch {
                meta, id, input, ..
            }) => {
                assert_eq!(meta, ["a=1", "b=x=y"]);
                assert_eq!(id, "render");
                assert_eq!(input.as_deref(), Some("-"));
            }
            other => panic!("parsed as {other:?}"),
        }
        assert!(matches!(
            parse("job dispatch render").command,
            Command::Job(JobCommand::Dispatch { input: None, .. })
        ));
    }

    #[test]
    fn periodic_force_and_system_gc() {
        assert!(matches!(
            parse("job periodic force -detach cron").command,
            Command::Job(JobCommand::Periodic(PeriodicCommand::Force { detach: true, verbose: false, ref id }))
                if id == "cron"
        ));
        assert!(matches!(
            parse("system gc").command,
            Command::System(SystemCommand::Gc)
        ));
    }

    #[test]
    fn eligibility_needs_exactly_one_of_enable_and_disable() {
        let bad = |line: &str| {
            let args = normalize(
                std::iter::once("caravan".to_string())
                    .chain(line.split_whitespace().map(String::from)),
            );
            Cli::try_parse_from(args).is_err()
        };
        assert!(bad("node eligibility f747"));
        assert!(bad("node eligibility -enable -disable f747"));
        assert!(!bad("node eligibility -disable f747"));
        assert!(bad("job run"));
    }
}

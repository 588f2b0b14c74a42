//! The command line parsed as Nomad's CLI parses it.

use std::path::PathBuf;

use clap::Parser;

use super::*;
use crate::args::admin::*;
use crate::args::cluster::*;
use crate::args::job::*;

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
    let cli =
        parse("-address http://10.0.0.1:4647 job run -detach -check-index 7 examples/hello.hcl");
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
            ..
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
        matches!(cli.command, Command::Job(JobCommand::Status { id: Some(ref id), .. }) if id == "web")
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
        Command::Deployment(DeploymentCommand::Status { verbose: true, monitor: true, ref id, .. })
            if id == "5ca6"
    ));
    assert!(matches!(
        parse("deployment list").command,
        Command::Deployment(DeploymentCommand::List { verbose: false, .. })
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
        Command::Job(JobCommand::History { diffs: true, job_version: Some(3), full: false, ref id, .. })
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
            std::iter::once("caravan".to_string()).chain(line.split_whitespace().map(String::from)),
        );
        Cli::try_parse_from(args).is_err()
    };
    assert!(bad("node eligibility f747"));
    assert!(bad("node eligibility -enable -disable f747"));
    assert!(!bad("node eligibility -disable f747"));
    assert!(bad("job run"));
}

#[test]
fn read_verbs_take_json_and_go_templates() {
    match parse("job status -json web").command {
        Command::Job(JobCommand::Status { format, id, .. }) => {
            assert!(format.json && format.template.is_none());
            assert_eq!(id.as_deref(), Some("web"));
        }
        other => panic!("parsed as {other:?}"),
    }
    let args = normalize(
        [
            "caravan",
            "job",
            "status",
            "-t",
            "{{ range . }}{{ .ID }}{{ end }}",
        ]
        .map(String::from),
    );
    match Cli::try_parse_from(args).unwrap().command {
        Command::Job(JobCommand::Status { format, .. }) => {
            assert_eq!(
                format.template.as_deref(),
                Some("{{ range . }}{{ .ID }}{{ end }}")
            );
        }
        other => panic!("parsed as {other:?}"),
    }
    for line in [
        "alloc status -json",
        "eval list -json",
        "eval status -json ab",
        "node status -json",
        "deployment list -json",
        "deployment status -json ab",
        "job inspect -json",
        "job history -json web",
        "job allocs -json web",
        "namespace list -json",
        "namespace status -json default",
        "node pool list -json",
        "node pool info -json all",
        "node pool nodes -json all",
        "operator scheduler get-config -json",
        "acl policy list -json",
        "acl token list -json",
    ] {
        let args = normalize(
            std::iter::once("caravan".to_string()).chain(line.split_whitespace().map(String::from)),
        );
        assert!(Cli::try_parse_from(args).is_ok(), "{line}");
    }
}

#[test]
fn new_job_verbs_take_nomads_flags() {
    assert!(matches!(
        parse("job scale -detach web api 3").command,
        Command::Job(JobCommand::Scale { detach: true, ref args, .. }) if args == &["web", "api", "3"]
    ));
    assert!(matches!(
        parse("job promote -group web -detach web").command,
        Command::Job(JobCommand::Promote { detach: true, ref groups, .. }) if groups == &["web"]
    ));
    assert!(matches!(
        parse("job init -short my.hcl").command,
        Command::Job(JobCommand::Init { short: true, ref filename, .. })
            if filename.as_deref() == Some(std::path::Path::new("my.hcl"))
    ));
    match parse(
        "job restart -batch-size 50% -batch-wait 10s -on-error fail -reschedule -group g -yes web",
    )
    .command
    {
        Command::Job(JobCommand::Restart(r)) => {
            assert_eq!(
                (r.batch_size.as_str(), r.batch_wait.as_str()),
                ("50%", "10s")
            );
            assert_eq!(r.on_error, "fail");
            assert!(r.reschedule && r.yes);
            assert_eq!(r.groups, ["g"]);
        }
        other => panic!("parsed as {other:?}"),
    }
    assert!(matches!(
        parse("job run -output -json job.json").command,
        Command::Job(JobCommand::Run {
            output: true,
            json: true,
            ..
        })
    ));
    assert!(matches!(
        parse("operator scheduler set-config -scheduler-algorithm spread -pause-eval-broker true").command,
        Command::Operator(OperatorCommand::Scheduler(SchedulerCommand::SetConfig(ref a)))
            if a.scheduler_algorithm.as_deref() == Some("spread")
                && a.pause_eval_broker.as_deref() == Some("true")
    ));
    assert!(matches!(
        parse("namespace apply -description prod-jobs prod").command,
        Command::Namespace(NamespaceCommand::Apply { ref description, ref input, .. })
            if description.as_deref() == Some("prod-jobs") && input == "prod"
    ));
    assert!(matches!(
        parse("status -verbose ab12").command,
        Command::Status { verbose: true, id: Some(ref id) } if id == "ab12"
    ));
    assert!(matches!(
        parse("completions zsh").command,
        Command::Completions {
            shell: clap_complete::Shell::Zsh
        }
    ));
}

#[test]
fn var_lock_leaves_the_childs_flags_alone() {
    let args = normalize(
        [
            "caravan", "var", "lock", "-ttl", "30s", "-verbose", "locks/db", "ls", "-la",
            "--color", "-x",
        ]
        .map(String::from),
    );
    match Cli::try_parse_from(args).unwrap().command {
        Command::Var(VarCommand::Lock(l)) => {
            assert_eq!(l.ttl.as_deref(), Some("30s"));
            assert!(l.verbose);
            assert_eq!(l.args, ["locks/db", "ls", "-la", "--color", "-x"]);
        }
        other => panic!("parsed as {other:?}"),
    }
}

#[test]
fn alloc_exec_leaves_the_commands_flags_to_it() {
    let cli = parse("alloc exec -task web -i=false -t -e none 0af9 ls -la -task x");
    match cli.command {
        Command::Alloc(AllocCommand::Exec(ExecArgs {
            ref task,
            stdin,
            tty,
            ref escape,
            ref alloc,
            ref command,
        })) => {
            assert_eq!(task.as_deref(), Some("web"));
            assert_eq!((stdin, tty), (Some(false), Some(true)));
            assert_eq!(escape, "none");
            assert_eq!(alloc, "0af9");
            assert_eq!(command, &["ls", "-la", "-task", "x"]);
        }
        ref other => panic!("{other:?}"),
    }
    let cli = parse("alloc exec 0af9 sh -c true");
    match cli.command {
        Command::Alloc(AllocCommand::Exec(ExecArgs {
            stdin: None,
            tty: None,
            ref escape,
            ref command,
            ..
        })) => {
            assert_eq!(escape, "~");
            assert_eq!(command, &["sh", "-c", "true"]);
        }
        ref other => panic!("{other:?}"),
    }
    let without_command = normalize(["caravan", "alloc", "exec", "0af9"].map(String::from));
    assert!(Cli::try_parse_from(without_command).is_err());
}

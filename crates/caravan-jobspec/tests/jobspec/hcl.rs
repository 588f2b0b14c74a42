//! HCL job files: realistic Nomad jobs, the examples, shorthands, warnings and errors.

use caravan_jobspec::{JobspecError, ParseOptions, Parsed, parse_hcl, validate};
use caravan_proto::JobType;

fn parse(text: &str) -> Parsed {
    match parse_hcl(text, &ParseOptions::default()) {
        Ok(p) => p,
        Err(e) => panic!("parse failed: {e}"),
    }
}

fn parse_err(text: &str) -> Vec<String> {
    match parse_hcl(text, &ParseOptions::default()) {
        Ok(p) => panic!("expected an error, parsed {:?}", p.job.id),
        Err(JobspecError::Invalid(errs)) => errs.messages(),
        Err(other) => vec![other.to_string()],
    }
}

/// A job `x` with group `g` and task `t` (driver `mock`) plus `extra` lines in the task.
fn one_task(extra: &str) -> String {
    format!(
        "job \"x\" {{\n  group \"g\" {{\n    task \"t\" {{\n      driver = \"mock\"\n{extra}\n    }}\n  }}\n}}\n"
    )
}

fn example(name: &str) -> String {
    let path = format!("{}/../../examples/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn config_str(
    p: &Parsed,
    group: usize,
    task: usize,
    key: &str,
) -> Option<prost_types::value::Kind> {
    p.job.task_groups[group].tasks[task]
        .config
        .as_ref()
        .and_then(|c| c.fields.get(key))
        .and_then(|v| v.kind.clone())
}

/// `nomad job init`-style file, without the blocks Caravan refuses (`service`, `identity`).
const REDIS: &str = r#"
job "example" {
  datacenters = ["dc1"]
  type = "service"

  update {
    max_parallel      = 1
    min_healthy_time  = "10s"
    healthy_deadline  = "3m"
    progress_deadline = "10m"
    auto_revert       = false
    canary            = 0
  }

  migrate {
    max_parallel     = 1
    health_check     = "checks"
    min_healthy_time = "10s"
    healthy_deadline = "5m"
  }

  group "cache" {
    count = 1

    network {
      port "db" {
        to = 6379
      }
    }

    restart {
      attempts = 2
      interval = "30m"
      delay    = "15s"
      mode     = "fail"
    }

    ephemeral_disk {
      size = 300
    }

    task "redis" {
      driver = "docker"

      config {
        image          = "redis:7"
        ports          = ["db"]
        auth_soft_fail = true
      }

      resources {
        cpu    = 500 # 500 MHz
        memory = 256 # 256MB
      }
    }
  }
}
"#;

#[test]
fn parses_a_realistic_nomad_job() {
    let p = parse(REDIS);
    let job = &p.job;
    assert_eq!(job.id, "example");
    assert_eq!(job.name, "example");
    assert_eq!(job.r#type(), JobType::Service);
    assert_eq!(job.datacenters, vec!["dc1"]);
    let g = &job.task_groups[0];
    assert_eq!(g.name, "cache");
    assert_eq!(g.count, 1);
    let update = g.update.as_ref().expect("inherits the job update");
    assert_eq!(update.healthy_deadline_ns, 180_000_000_000);
    assert_eq!(
        update.stagger_ns, 30_000_000_000,
        "unset fields take Nomad's defaults"
    );
    assert_eq!(g.networks[0].dynamic_ports[0].label, "db");
    assert_eq!(g.networks[0].dynamic_ports[0].to, 6379);
    assert!(g.networks[0].reserved_ports.is_empty());
    let t = &g.tasks[0];
    assert_eq!(t.driver, "docker");
    assert_eq!(
        t.resources.as_ref().map(|r| (r.cpu_mhz, r.memory_mb)),
        Some((500, 256))
    );
    assert!(matches!(
        config_str(&p, 0, 0, "auth_soft_fail"),
        Some(prost_types::value::Kind::BoolValue(true))
    ));
    assert!(validate(job).is_ok());
}

#[test]
fn unknown_keys_are_errors_naming_the_path() {
    let errs = parse_err(
        r#"job "x" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      resources {
        cpu  = 100
        ram  = 300
      }
      bogus_block {}
    }
  }
}"#,
    );
    assert!(
        errs.iter().any(|e| e
            .starts_with(r#"job "x": group "g": task "t": resources: ram: unsupported argument"#)
            && e.ends_with("(line 7)")),
        "{errs:?}"
    );
    assert!(
        errs.iter().any(|e| e
            .starts_with(r#"job "x": group "g": task "t": bogus_block: unsupported block type"#)),
        "{errs:?}"
    );
}

#[test]
fn nomad_interpolations_survive_verbatim() {
    let p = parse(
        r#"job "web" {
  group "g" {
    network {
      port "http" {}
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "/usr/bin/web"
        args    = ["-listen", ":${NOMAD_PORT_http}", "-node", "${node.unique.name}", "-rack=${meta.rack}"]
        script  = <<-EOT
          echo "${NOMAD_ALLOC_ID}" > $${HOME}/x
        EOT
      }
      env {
        ADDR    = "${NOMAD_ADDR_http}"
        KERNEL  = "${attr.kernel.name}"
      }
    }
  }
}"#,
    );
    let t = &p.job.task_groups[0].tasks[0];
    assert_eq!(t.env["ADDR"], "${NOMAD_ADDR_http}");
    assert_eq!(t.env["KERNEL"], "${attr.kernel.name}");
    let Some(prost_types::value::Kind::ListValue(args)) = config_str(&p, 0, 0, "args") else {
        panic!("args")
    };
    let args: Vec<_> = args
        .values
        .iter()
        .filter_map(|v| match &v.kind {
            Some(prost_types::value::Kind::StringValue(s)) => Some(s.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        args,
        vec![
            "-listen",
            ":${NOMAD_PORT_http}",
            "-node",
            "${node.unique.name}",
            "-rack=${meta.rack}"
        ]
    );
    let Some(prost_types::value::Kind::StringValue(script)) = config_str(&p, 0, 0, "script") else {
        panic!("script")
    };
    assert_eq!(script, "echo \"${NOMAD_ALLOC_ID}\" > ${HOME}/x\n");
}

#[test]
fn constraint_shorthands() {
    let p = parse(
        r#"job "x" {
  constraint {
    distinct_hosts = true
  }
  constraint {
    distinct_property = "${meta.rack}"
    value             = "2"
  }
  constraint {
    attribute = "${attr.kernel.version}"
    version   = ">= 5.4"
  }
  constraint {
    attribute = "${attr.os.name}"
    regexp    = "^(ubuntu|debian)$"
  }
  constraint {
    distinct_hosts = false
  }
  constraint {
    attribute = "${node.class}"
    value     = "large"
  }
  affinity {
    attribute = "${meta.zone}"
    set_contains_any = "a,b"
    weight    = -40
  }
  group "g" {
    spread {
      attribute = "${node.datacenter}"
      weight    = 80
      target "dc1" {
        percent = 70
      }
      target "dc2" {
        percent = 30
      }
    }
    task "t" {
      driver = "mock"
    }
  }
}"#,
    );
    let c: Vec<_> = p
        .job
        .constraints
        .iter()
        .map(|c| (c.l_target.as_str(), c.operand.as_str(), c.r_target.as_str()))
        .collect();
    assert_eq!(
        c,
        vec![
            ("", "distinct_hosts", ""),
            ("${meta.rack}", "distinct_property", "2"),
            ("${attr.kernel.version}", "version", ">= 5.4"),
            ("${attr.os.name}", "regexp", "^(ubuntu|debian)$"),
            ("${node.class}", "=", "large"),
        ],
        "distinct_hosts = false is dropped, as in Nomad"
    );
    let a = &p.job.affinities[0];
    assert_eq!(
        (a.operand.as_str(), a.r_target.as_str(), a.weight),
        ("set_contains_any", "a,b", -40)
    );
    let s = &p.job.task_groups[0].spreads[0];
    assert_eq!(s.weight, 80);
    let targets: Vec<_> = s
        .targets
        .iter()
        .map(|t| (t.value.as_str(), t.percent))
        .collect();
    assert_eq!(targets, vec![("dc1", 70), ("dc2", 30)]);
}

#[test]
fn conflicting_operators_are_an_error() {
    let errs = parse_err(
        r#"job "x" {
  constraint {
    attribute = "${attr.a}"
    operator  = "="
    regexp    = "b"
  }
  group "g" {
    task "t" {
      driver = "mock"
    }
  }
}"#,
    );
    assert!(
        errs.iter()
            .any(|e| e.contains("constraint[0]: regexp: conflicts with operator \"=\"")),
        "{errs:?}"
    );
}

#[test]
fn the_examples_parse_and_validate() {
    for name in ["hello.hcl", "batch.hcl", "system.hcl"] {
        let p = parse(&example(name));
        assert!(p.warnings.is_empty(), "{name}: {:?}", p.warnings);
        if let Err(e) = validate(&p.job) {
            panic!("{name}: {e}");
        }
    }
}

#[test]
fn hello_example_is_a_small_raw_exec_loop() {
    let p = parse(&example("hello.hcl"));
    let g = &p.job.task_groups[0];
    assert_eq!((p.job.r#type(), g.count), (JobType::Service, 1));
    let t = &g.tasks[0];
    assert_eq!(t.driver, "raw_exec");
    let r = t.resources.as_ref().expect("resources");
    assert!(r.cpu_mhz <= 100 && r.memory_mb <= 64);
    let Some(prost_types::value::Kind::ListValue(args)) = config_str(&p, 0, 0, "args") else {
        panic!("args")
    };
    let script = format!("{:?}", args.values.last());
    assert!(
        script.contains("sleep 1") && script.contains("echo"),
        "{script}"
    );
}

#[test]
fn batch_example_fields() {
    let p = parse(&example("batch.hcl"));
    let job = &p.job;
    assert_eq!(job.r#type(), JobType::Batch);
    assert_eq!(job.priority, 40);
    let periodic = job.periodic.as_ref().expect("periodic");
    assert_eq!(periodic.specs, vec!["*/15 * * * *"]);
    assert!(periodic.prohibit_overlap);
    assert_eq!(periodic.time_zone, "Europe/Paris");
    assert_eq!(job.meta["owner"], "data-team");
    let g = &job.task_groups[0];
    assert_eq!(g.count, 3);
    assert!(g.update.is_none(), "batch jobs get no update strategy");
    assert!(g.migrate.is_none());
    let restart = g.restart_policy.as_ref().expect("restart");
    assert_eq!(
        (restart.attempts, restart.delay_ns, restart.interval_ns),
        (1, 10_000_000_000, 300_000_000_000)
    );
    let reschedule = g.reschedule_policy.as_ref().expect("reschedule");
    assert_eq!(
        (reschedule.attempts, reschedule.delay_function.as_str()),
        (2, "constant")
    );
    assert_eq!(g.ephemeral_disk.as_ref().map(|d| d.size_mb), Some(500));
    let t = &g.tasks[0];
    assert_eq!(t.kill_timeout_ns, 20_000_000_000);
    assert_eq!(t.env["SHARD_COUNT"], "3");
    assert_eq!(
        t.restart_policy, g.restart_policy,
        "tasks inherit the group's restart policy"
    );
}

#[test]
fn system_example_fields() {
    let p = parse(&example("system.hcl"));
    let job = &p.job;
    assert_eq!(job.r#type(), JobType::System);
    assert_eq!(job.constraints[0].l_target, "${attr.kernel.name}");
    let g = &job.task_groups[0];
    assert_eq!(g.count, 1);
    assert!(g.reschedule_policy.is_none());
    let u = g
        .update
        .as_ref()
        .expect("system jobs keep their update block");
    assert_eq!((u.max_parallel, u.stagger_ns), (2, 10_000_000_000));
    assert_eq!(g.networks[0].reserved_ports[0].value, 9100);
}

#[test]
fn group_count_defaults_to_one_but_zero_is_kept() {
    let p = parse(
        r#"job "x" {
  group "a" {
    task "t" {
      driver = "mock"
    }
  }
  group "b" {
    count = 0
    task "t" {
      driver = "mock"
    }
  }
}"#,
    );
    assert_eq!(p.job.task_groups[0].count, 1);
    assert_eq!(p.job.task_groups[1].count, 0);
}

#[test]
fn meta_and_env_accept_block_and_map_forms() {
    let p = parse(
        r#"job "x" {
  meta = { "team.name" = "core", port = 8080, enabled = true }
  group "g" {
    meta { tier = "web" }
    task "t" {
      driver = "mock"
      env = { "DOTTED.KEY" = "v" }
      meta { a = "1" }
    }
  }
}"#,
    );
    assert_eq!(p.job.meta["team.name"], "core");
    assert_eq!(p.job.meta["port"], "8080");
    assert_eq!(p.job.meta["enabled"], "true");
    assert_eq!(p.job.task_groups[0].meta["tier"], "web");
    assert_eq!(p.job.task_groups[0].tasks[0].env["DOTTED.KEY"], "v");
}

#[test]
fn durations_in_nomad_syntax() {
    let p = parse(
        r#"job "x" {
  group "g" {
    shutdown_delay = "1h30m"
    task "t" {
      driver = "mock"
      kill_timeout = "1.5s"
    }
  }
}"#,
    );
    assert_eq!(p.job.task_groups[0].shutdown_delay_ns, 5_400_000_000_000);
    assert_eq!(p.job.task_groups[0].tasks[0].kill_timeout_ns, 1_500_000_000);
    let errs = parse_err(&one_task("kill_timeout = \"soon\""));
    assert!(
        errs.iter()
            .any(|e| e.contains(r#"task "t": kill_timeout: invalid duration "soon""#)),
        "{errs:?}"
    );
}

#[test]
fn config_blocks_become_lists_of_objects() {
    let p = parse(
        r#"job "x" {
  group "g" {
    task "t" {
      driver = "docker"
      config {
        image = "nginx"
        port_map {
          http = 80
        }
        mount {
          type   = "bind"
          source = "a"
        }
        mount {
          type   = "bind"
          source = "b"
        }
        labels = { app = "web" }
      }
    }
  }
}"#,
    );
    let json = caravan_jobspec::render_json(&p.job);
    let config = &json["TaskGroups"][0]["Tasks"][0]["Config"];
    assert_eq!(config["port_map"], serde_json::json!([{ "http": 80 }]));
    assert_eq!(config["mount"][1]["source"], "b");
    // An object written as an argument is a list of that object, as Nomad's parser gives
    // it to drivers (`labels` is a `list(map(string))` in the docker driver's schema).
    assert_eq!(config["labels"], serde_json::json!([{ "app": "web" }]));
}

#[test]
fn an_undeclared_variable_is_an_error_naming_the_path() {
    let errs = parse_err(&one_task("      kill_signal = var.signal"));
    assert!(
        errs.iter().any(|e| e.starts_with(
            r#"job "x": group "g": task "t": kill_signal: Unsupported attribute: This object does not have an attribute named "signal"."#
        ) && e.ends_with("(line 5)")),
        "{errs:?}"
    );
}

#[test]
fn structural_errors() {
    assert!(
        parse_err("")
            .iter()
            .any(|e| e.contains("no job block found"))
    );
    assert!(
        parse_err("job \"a\" {}\njob \"b\" {}\n")
            .iter()
            .any(|e| e.contains("only one job block"))
    );
    assert!(
        parse_err(r#"job { }"#)
            .iter()
            .any(|e| e.contains("exactly one label"))
    );
    assert!(
        parse_err("job \"x\" {\n  priority = 1\n  priority = 2\n}\n")
            .iter()
            .any(|e| e.contains("line 3") && e.contains("redefined attribute"))
    );
    assert!(
        parse_err(&one_task("resources {}\nresources {}"))
            .iter()
            .any(|e| e.contains("resources: only one block of this type"))
    );
}

#[test]
fn syntax_errors_carry_a_position() {
    match parse_hcl("job \"x\" {\n  group \"g\" {\n", &ParseOptions::default()) {
        Err(JobspecError::HclSyntax { line, .. }) => assert!(line >= 2, "line {line}"),
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

#[test]
fn bodies_over_the_limit_are_rejected_unparsed() {
    let options = ParseOptions { max_bytes: 16 };
    match parse_hcl(r#"job "this is longer than sixteen bytes" {}"#, &options) {
        Err(JobspecError::TooLarge { limit: 16, .. }) => {}
        other => panic!("expected TooLarge, got {other:?}"),
    }
}

#[test]
fn hcl_to_nomad_json_as_written_and_canonical() {
    let text = example("hello.hcl");
    let (raw, warnings) =
        caravan_jobspec::hcl_to_nomad_json(&text, false, &ParseOptions::default()).expect("parses");
    assert!(warnings.is_empty());
    assert_eq!(raw["ID"], "hello");
    assert!(
        raw.get("Priority").is_none(),
        "not canonicalized: only what was written"
    );
    assert_eq!(raw["TaskGroups"][0]["Tasks"][0]["Resources"]["CPU"], 50);
    let (canonical, _) =
        caravan_jobspec::hcl_to_nomad_json(&text, true, &ParseOptions::default()).expect("parses");
    assert_eq!(canonical["Priority"], 50);
    assert_eq!(canonical["TaskGroups"][0]["RestartPolicy"]["Attempts"], 2);
    // Either form registers the same job.
    let from_raw =
        caravan_jobspec::parse_json(raw.to_string().as_bytes(), &ParseOptions::default())
            .expect("json");
    let from_hcl = parse(&text);
    assert_eq!(from_raw.job, from_hcl.job);
}

#[test]
fn the_logs_block_sets_rotation() {
    let p = parse(&one_task(
        "      logs {\n        max_files     = 3\n        max_file_size = 5\n      }",
    ));
    let lc = p.job.task_groups[0].tasks[0].log_config.unwrap();
    assert_eq!(
        (lc.max_files, lc.max_file_size_mb, lc.disabled),
        (3, 5, false)
    );
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    assert!(validate(&p.job).is_ok());

    // Left out: Nomad's 10 files of 10 MB.
    let p = parse(&one_task(""));
    let lc = p.job.task_groups[0].tasks[0].log_config.unwrap();
    assert_eq!(
        (lc.max_files, lc.max_file_size_mb, lc.disabled),
        (10, 10, false)
    );
    let p = parse(&one_task("      logs {\n        disabled = true\n      }"));
    let lc = p.job.task_groups[0].tasks[0].log_config.unwrap();
    assert_eq!(
        (lc.max_files, lc.max_file_size_mb, lc.disabled),
        (10, 10, true)
    );

    let p = parse(&one_task("      logs {\n        max_files = 0\n      }"));
    let errs = validate(&p.job).unwrap_err().messages();
    assert!(
        errs.iter()
            .any(|e| e.starts_with(r#"group "g": task "t": logs.max_files: must be at least 1"#)),
        "{errs:?}"
    );
    let errs = parse_err(&one_task("      logs {\n        max_size = 5\n      }"));
    assert!(
        errs.iter()
            .any(|e| e.contains("logs: max_size: unsupported argument")),
        "{errs:?}"
    );
}

#[test]
fn a_tasks_shutdown_delay_is_kept() {
    let p = parse(&one_task("      shutdown_delay = \"10s\""));
    assert_eq!(
        p.job.task_groups[0].tasks[0].shutdown_delay_ns,
        10_000_000_000
    );
    assert!(
        !p.warnings.iter().any(|w| w.contains("ShutdownDelay")),
        "{:?}",
        p.warnings
    );
    let json = caravan_jobspec::render_json(&p.job);
    let rendered = json
        .pointer("/TaskGroups/0/Tasks/0/ShutdownDelay")
        .or_else(|| json.pointer("/Job/TaskGroups/0/Tasks/0/ShutdownDelay"));
    assert_eq!(
        rendered,
        Some(&serde_json::json!(10_000_000_000i64)),
        "{json}"
    );
}

#[test]
fn the_job_nomad_job_init_writes_parses_and_validates() {
    let p = parse(&example("redis.nomad.hcl"));
    assert!(validate(&p.job).is_ok(), "{:?}", validate(&p.job));
    let t = &p.job.task_groups[0].tasks[0];
    assert_eq!(t.driver, "docker");
    assert_eq!(t.shutdown_delay_ns, 10_000_000_000);
    let ui = p.job.ui.as_ref().expect("the ui block is kept");
    assert_eq!(ui.description, "Nomad **Example** Job");
    assert_eq!(ui.links[0].url, "https://developer.hashicorp.com/nomad");
    let json = caravan_jobspec::render_json(&p.job);
    let job = json.get("Job").unwrap_or(&json);
    assert_eq!(
        job["UI"]["Links"][0]["Label"], "Learn more about Nomad",
        "{json}"
    );
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
}

//! Nomad JSON jobs: parsing, canonical defaults, warnings, errors and round trips.

use caravan_jobspec::{
    JobspecError, ParseOptions, Parsed, parse_hcl, parse_job, parse_json, render_json, validate,
};
use caravan_proto::{JobStatus, JobType};
use serde_json::{Value, json};

fn parse(v: &Value) -> Parsed {
    match parse_json(v.to_string().as_bytes(), &ParseOptions::default()) {
        Ok(p) => p,
        Err(e) => panic!("parse failed: {e}"),
    }
}

fn parse_err(v: &Value) -> Vec<String> {
    match parse_json(v.to_string().as_bytes(), &ParseOptions::default()) {
        Ok(p) => panic!("expected an error, parsed {:?}", p.job.id),
        Err(JobspecError::Invalid(errs)) => errs.messages(),
        Err(other) => vec![other.to_string()],
    }
}

fn example(name: &str) -> String {
    let path = format!("{}/../../examples/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn minimal(group: Value) -> Value {
    json!({ "Job": { "ID": "web", "TaskGroups": [group] } })
}

fn task() -> Value {
    json!({ "Name": "t", "Driver": "mock" })
}

/// What `nomad job inspect` prints for the `job init` example on a Nomad 1.x server.
fn nomad_inspect_output() -> Value {
    let text = r#"{"Job": {
        "Affinities": null, "AllAtOnce": false, "Constraints": null, "ConsulNamespace": "",
        "ConsulToken": "", "CreateIndex": 10, "Datacenters": ["dc1"], "DispatchIdempotencyToken": "",
        "Dispatched": false, "ID": "example", "JobModifyIndex": 10, "Meta": null, "ModifyIndex": 12,
        "Multiregion": null, "Name": "example", "Namespace": "default", "NodePool": "default",
        "NomadTokenID": "", "ParameterizedJob": null, "ParentID": "", "Payload": null, "Periodic": null,
        "Priority": 50, "Region": "global", "Spreads": null, "Stable": false, "Status": "running",
        "StatusDescription": "", "Stop": false, "SubmitTime": 1700000000000000000,
        "TaskGroups": [{
            "Affinities": null, "Constraints": null,
            "Consul": {"Cluster": "default", "Namespace": "", "Partition": ""},
            "Count": 1, "Disconnect": null,
            "EphemeralDisk": {"Migrate": false, "SizeMB": 300, "Sticky": false},
            "MaxClientDisconnect": null, "Meta": null,
            "Migrate": {"HealthCheck": "checks", "HealthyDeadline": 300000000000, "MaxParallel": 1, "MinHealthyTime": 10000000000},
            "Name": "cache",
            "Networks": [{"CIDR": "", "DNS": null, "Device": "", "DynamicPorts": [{"HostNetwork": "default", "Label": "db", "To": 6379, "Value": 0}], "Hostname": "", "IP": "", "MBits": 0, "Mode": "", "ReservedPorts": null}],
            "PreventRescheduleOnLost": false,
            "ReschedulePolicy": {"Attempts": 0, "Delay": 30000000000, "DelayFunction": "exponential", "Interval": 0, "MaxDelay": 3600000000000, "Unlimited": true},
            "RestartPolicy": {"Attempts": 2, "Delay": 15000000000, "Interval": 1800000000000, "Mode": "fail", "RenderTemplates": false},
            "Scaling": null, "Services": null, "ShutdownDelay": null, "Spreads": null, "StopAfterClientDisconnect": null,
            "Tasks": [{
                "Actions": null, "Affinities": null, "Artifacts": null, "CSIPluginConfig": null,
                "Config": {"image": "redis:7", "ports": ["db"]}, "Constraints": null, "Consul": null,
                "DispatchPayload": null, "Driver": "docker", "Env": null, "Identities": null,
                "Identity": {"Audience": ["nomadproject.io"], "ChangeMode": "", "Env": false, "File": false, "Name": "default", "TTL": 0},
                "KillSignal": "", "KillTimeout": 5000000000, "Kind": "", "Leader": false, "Lifecycle": null,
                "LogConfig": {"Disabled": false, "Enabled": null, "MaxFileSizeMB": 10, "MaxFiles": 10},
                "Meta": null, "Name": "redis",
                "Resources": {"CPU": 500, "Cores": 0, "Devices": null, "DiskMB": 0, "IOPS": 0, "MemoryMB": 256, "MemoryMaxMB": 0, "NUMA": null, "Networks": null, "SecretsMB": 0},
                "RestartPolicy": {"Attempts": 2, "Delay": 15000000000, "Interval": 1800000000000, "Mode": "fail", "RenderTemplates": false},
                "ScalingPolicies": null, "Schedule": null, "Services": null, "ShutdownDelay": 0, "Templates": null,
                "User": "", "Vault": null, "VolumeMounts": null
            }],
            "Update": {"AutoPromote": false, "AutoRevert": false, "Canary": 0, "HealthCheck": "checks", "HealthyDeadline": 300000000000, "MaxParallel": 1, "MinHealthyTime": 10000000000, "ProgressDeadline": 600000000000, "Stagger": 30000000000},
            "Volumes": null
        }],
        "Type": "service", "UI": null,
        "Update": {"AutoPromote": false, "AutoRevert": false, "Canary": 0, "HealthCheck": "", "HealthyDeadline": 0, "MaxParallel": 1, "MinHealthyTime": 0, "ProgressDeadline": 0, "Stagger": 30000000000},
        "VaultNamespace": "", "VaultToken": "", "Version": 0, "VersionTag": null
    }}"#;
    serde_json::from_str(text).expect("valid JSON")
}

#[test]
fn nomad_inspect_output_parses_without_warnings() {
    let p = parse(&nomad_inspect_output());
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    let job = &p.job;
    assert_eq!(
        (job.id.as_str(), job.create_revision, job.modify_revision),
        ("example", 10, 12)
    );
    let g = &job.task_groups[0];
    assert_eq!(g.networks[0].dynamic_ports[0].to, 6379);
    assert_eq!(g.tasks[0].resources.as_ref().map(|r| r.cpu_mhz), Some(500));
    assert!(validate(job).is_ok());
}

#[test]
fn hello_json_is_the_hello_hcl_job() {
    let from_json =
        parse_json(example("hello.json").as_bytes(), &ParseOptions::default()).expect("json");
    let from_hcl = parse_hcl(&example("hello.hcl"), &ParseOptions::default()).expect("hcl");
    assert!(from_json.warnings.is_empty(), "{:?}", from_json.warnings);
    assert_eq!(from_json.job, from_hcl.job);
    let auto = parse_job(example("hello.json").as_bytes(), &ParseOptions::default()).expect("auto");
    assert_eq!(auto.job, from_hcl.job);
    let auto = parse_job(example("hello.hcl").as_bytes(), &ParseOptions::default()).expect("auto");
    assert_eq!(auto.job, from_hcl.job);
}

#[test]
fn round_trips_keep_every_field() {
    for name in ["hello.hcl", "batch.hcl", "system.hcl"] {
        let job = parse_hcl(&example(name), &ParseOptions::default())
            .expect("parses")
            .job;
        let rendered = render_json(&job);
        let again = parse(&rendered);
        assert!(again.warnings.is_empty(), "{name}: {:?}", again.warnings);
        assert_eq!(again.job, job, "{name}");
        let wrapped = parse(&json!({ "Job": rendered }));
        assert_eq!(wrapped.job, job, "{name} wrapped");
    }
    let inspect = parse(&nomad_inspect_output()).job;
    assert_eq!(parse(&render_json(&inspect)).job, inspect);
}

#[test]
fn round_trip_of_a_job_using_every_modelled_field() {
    let text = r#"
job "everything" {
  type        = "batch"
  priority    = 70
  all_at_once = true
  datacenters = ["dc1", "dc-*"]
  node_pool   = "gpu"
  namespace   = "team-a"
  meta { owner = "me" }
  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }
  affinity {
    attribute = "${node.class}"
    value     = "big"
    weight    = 25
  }
  spread {
    attribute = "${node.datacenter}"
    target "dc1" { percent = 100 }
  }
  parameterized {
    payload       = "required"
    meta_required = ["input"]
    meta_optional = ["mode"]
  }
  group "g" {
    count = 2
    shutdown_delay = "5s"
    max_client_disconnect = "1h"
    meta { tier = "x" }
    constraint { distinct_hosts = true }
    restart {
      attempts = 5
      interval = "10m"
      delay    = "20s"
      mode     = "delay"
    }
    reschedule {
      attempts       = 3
      interval       = "2h"
      delay          = "10s"
      delay_function = "fibonacci"
      max_delay      = "5m"
    }
    ephemeral_disk {
      size = 1024
    }
    network {
      mode  = "bridge"
      mbits = 10
      port "http" {
        static       = 8080
        to           = 80
        host_network = "default"
      }
      port "grpc" {}
    }
    task "main" {
      # A driver Caravan has no config schema for: its config goes through as written.
      driver      = "podman"
      user        = "nobody"
      leader      = true
      kill_signal = "SIGINT"
      logs {
        max_files     = 2
        max_file_size = 7
      }
      kill_timeout = "30s"
      config {
        command = "/bin/true"
        nested  = { a = [1, 2.5, "x", true, null] }
      }
      env { A = "1" }
      meta { m = "v" }
      constraint {
        attribute = "${attr.cpu.arch}"
        value     = "amd64"
      }
      affinity {
        attribute = "${meta.ssd}"
        value     = "true"
      }
      dispatch_payload { file = "input.json" }
      restart { attempts = 1 }
      resources {
        cores      = 2
        memory     = 512
        memory_max = 1024
        device "nvidia/gpu" {
          count = 2
        }
      }
    }
    task "sidecar" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
      lifecycle {
        hook    = "prestart"
        sidecar = true
      }
    }
  }
}"#;
    let job = parse_hcl(text, &ParseOptions::default())
        .expect("parses")
        .job;
    assert!(validate(&job).is_ok(), "{:?}", validate(&job));
    let t = &job.task_groups[0].tasks[0];
    let r = t.resources.as_ref().expect("resources");
    assert_eq!(
        (r.cpu_mhz, r.cores),
        (0, 2),
        "cores without cpu leaves cpu at 0, as in Nomad"
    );
    assert_eq!(
        t.restart_policy
            .as_ref()
            .map(|r| (r.attempts, r.mode.as_str())),
        Some((1, "delay"))
    );
    let again = parse(&render_json(&job));
    assert_eq!(again.job, job);
    // And through text, as a client would send it.
    let text =
        serde_json::to_string_pretty(&json!({ "Job": render_json(&job) })).expect("serializes");
    let again = parse_json(text.as_bytes(), &ParseOptions::default()).expect("parses");
    assert_eq!(again.job, job);
}

#[test]
fn rendering_uses_nomad_field_names_and_nanoseconds() {
    let job = parse_hcl(&example("batch.hcl"), &ParseOptions::default())
        .expect("parses")
        .job;
    let v = render_json(&job);
    assert_eq!(v["ID"], "crunch");
    assert_eq!(v["Type"], "batch");
    assert_eq!(v["Region"], "global");
    assert_eq!(v["Periodic"]["Spec"], "*/15 * * * *");
    assert_eq!(v["Periodic"]["SpecType"], "cron");
    let g = &v["TaskGroups"][0];
    assert_eq!(g["Count"], 3);
    assert_eq!(g["EphemeralDisk"]["SizeMB"], 500);
    assert_eq!(g["RestartPolicy"]["Delay"], 10_000_000_000_i64);
    let t = &g["Tasks"][0];
    assert_eq!(t["KillTimeout"], 20_000_000_000_i64);
    assert_eq!(t["Resources"]["CPU"], 200);
    assert_eq!(t["Resources"]["MemoryMB"], 128);
    assert_eq!(t["Env"]["SHARD_COUNT"], "3");
}

#[test]
fn count_defaults_to_one_only_when_missing() {
    let p = parse(&minimal(json!({ "Name": "g", "Tasks": [task()] })));
    assert_eq!(p.job.task_groups[0].count, 1);
    let p = parse(&minimal(
        json!({ "Name": "g", "Count": null, "Tasks": [task()] }),
    ));
    assert_eq!(p.job.task_groups[0].count, 1);
    let p = parse(&minimal(
        json!({ "Name": "g", "Count": 0, "Tasks": [task()] }),
    ));
    assert_eq!(p.job.task_groups[0].count, 0);
    let p = parse(&minimal(
        json!({ "Name": "g", "Count": -1, "Tasks": [task()] }),
    ));
    assert_eq!(
        p.job.task_groups[0].count, -1,
        "kept for validation to report"
    );
}

#[test]
fn canonical_defaults_by_type() {
    let job = |t: &str| {
        parse(&json!({"Job": {"ID": "j", "Type": t, "TaskGroups": [{"Name": "g", "Tasks": [task()]}]}})).job
    };
    let service = job("service");
    let g = &service.task_groups[0];
    assert_eq!(service.priority, 50);
    assert_eq!(service.namespace, "default");
    assert_eq!(service.node_pool, "default");
    assert_eq!(service.datacenters, vec!["*"]);
    assert_eq!(
        g.restart_policy
            .as_ref()
            .map(|r| (r.attempts, r.interval_ns, r.delay_ns, r.mode.as_str())),
        Some((2, 1_800_000_000_000, 15_000_000_000, "fail"))
    );
    assert_eq!(
        g.reschedule_policy
            .as_ref()
            .map(|r| (r.unlimited, r.delay_function.as_str())),
        Some((true, "exponential"))
    );
    assert!(g.migrate.is_some() && g.update.is_some());
    assert_eq!(
        g.tasks[0]
            .resources
            .as_ref()
            .map(|r| (r.cpu_mhz, r.memory_mb)),
        Some((100, 300))
    );
    assert_eq!(g.tasks[0].kill_timeout_ns, 5_000_000_000);
    assert_eq!(g.ephemeral_disk.as_ref().map(|d| d.size_mb), Some(300));

    let batch = job("batch");
    let g = &batch.task_groups[0];
    assert_eq!(
        g.restart_policy
            .as_ref()
            .map(|r| (r.attempts, r.interval_ns)),
        Some((3, 86_400_000_000_000))
    );
    assert_eq!(
        g.reschedule_policy
            .as_ref()
            .map(|r| (r.attempts, r.delay_ns)),
        Some((1, 5_000_000_000))
    );
    assert!(g.update.is_none() && g.migrate.is_none());

    for t in ["system", "sysbatch"] {
        let j = job(t);
        let g = &j.task_groups[0];
        assert!(g.reschedule_policy.is_none(), "{t}");
        assert!(g.update.is_none() && g.migrate.is_none(), "{t}");
    }
    assert_eq!(
        job("system").task_groups[0]
            .restart_policy
            .as_ref()
            .map(|r| r.attempts),
        Some(2)
    );
    assert_eq!(
        job("sysbatch").task_groups[0]
            .restart_policy
            .as_ref()
            .map(|r| r.attempts),
        Some(3)
    );
    assert_eq!(job("sysbatch").r#type(), JobType::Sysbatch);
}

#[test]
fn partial_policies_merge_over_defaults_and_job_level_blocks() {
    let p = parse(&json!({"Job": {
        "ID": "j",
        "Update": {"MaxParallel": 3, "Canary": 1},
        "Reschedule": {"Attempts": 4, "Interval": 3_600_000_000_000_i64, "DelayFunction": "constant", "Unlimited": false},
        "TaskGroups": [{
            "Name": "g",
            "Update": {"Canary": 2},
            "RestartPolicy": {"Attempts": 7},
            "ReschedulePolicy": {"Delay": 60_000_000_000_i64},
            "Tasks": [task()]
        }]
    }}));
    let g = &p.job.task_groups[0];
    let u = g.update.as_ref().expect("update");
    assert_eq!(
        (u.max_parallel, u.canary, u.stagger_ns),
        (3, 2, 30_000_000_000)
    );
    let r = g.restart_policy.as_ref().expect("restart");
    assert_eq!((r.attempts, r.interval_ns), (7, 1_800_000_000_000));
    let rs = g.reschedule_policy.as_ref().expect("reschedule");
    assert_eq!(
        (
            rs.attempts,
            rs.delay_ns,
            rs.delay_function.as_str(),
            rs.unlimited
        ),
        (4, 60_000_000_000, "constant", false)
    );
}

#[test]
fn unknown_fields_warn_with_their_path() {
    let p = parse(&json!({"Job": {
        "ID": "web", "Frobnicate": 1,
        "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "mock", "Sparkles": true}]}]
    }, "EnforceIndex": true}));
    assert!(
        p.warnings
            .contains(&"unknown field Job.Frobnicate was ignored".to_string()),
        "{:?}",
        p.warnings
    );
    assert!(
        p.warnings
            .contains(&"unknown field Job.TaskGroups[0].Tasks[0].Sparkles was ignored".to_string()),
        "{:?}",
        p.warnings
    );
    assert_eq!(
        p.warnings.len(),
        2,
        "register fields such as EnforceIndex are known: {:?}",
        p.warnings
    );
}

#[test]
fn a_jobs_status_reads_by_its_nomad_name() {
    let p = parse(&json!({"Job": {"ID": "web", "Status": "dead", "TaskGroups": []}}));
    assert_eq!(p.job.status(), JobStatus::Dead);
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    let p = parse(&json!({"Job": {"ID": "web", "Status": "Dead", "TaskGroups": []}}));
    assert_eq!(p.job.status(), JobStatus::Unspecified);
    assert_eq!(
        p.warnings,
        ["job: unknown status \"Dead\" was ignored".to_string()]
    );
}

#[test]
fn unsupported_nomad_fields_are_refused_unless_empty() {
    let errs = parse_err(&minimal(json!({
        "Name": "g",
        "MaxRunDuration": 60_000_000_000_i64,
        "Tasks": [{"Name": "t", "Driver": "mock", "Vault": {"Policies": ["p"]}, "Artifacts": []}]
    })));
    let joined = errs.join("\n");
    assert!(
        joined.contains(
            r#"group "g": max_run_duration (MaxRunDuration) is not supported by Caravan"#
        ),
        "{joined}"
    );
    assert!(
        joined.contains(r#"group "g": task "t": vault is not supported by Caravan"#),
        "{joined}"
    );
    assert!(
        !joined.contains("Artifacts"),
        "an empty list is not something the user wrote: {joined}"
    );
}

#[test]
fn wrong_types_are_errors_naming_the_json_path() {
    let errs = parse_err(&minimal(
        json!({ "Name": "g", "Count": "three", "Tasks": [task()] }),
    ));
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].starts_with("Job.TaskGroups[0].Count: invalid type: string \"three\""),
        "{errs:?}"
    );
    let errs = parse_err(&minimal(
        json!({ "Name": "g", "Tasks": [{"Name": "t", "Resources": {"CPU": 1.5}}] }),
    ));
    assert!(
        errs[0]
            .starts_with("Job.TaskGroups[0].Tasks[0].Resources.CPU: invalid type: floating point"),
        "{errs:?}"
    );
    let errs = parse_err(&json!({"Job": {"ID": "x", "TaskGroups": {"Name": "g"}}}));
    assert!(
        errs[0].starts_with("Job.TaskGroups: invalid type: map"),
        "{errs:?}"
    );
    let errs = parse_err(&json!([1, 2]));
    assert!(errs[0].contains("a job must be a JSON object"), "{errs:?}");
    let errs = parse_err(&json!({"Job": "web"}));
    assert!(
        errs[0].starts_with("Job: must be a JSON object"),
        "{errs:?}"
    );
}

#[test]
fn out_of_range_numbers_are_errors_naming_the_field() {
    let errs = parse_err(&minimal(json!({
        "Name": "g", "Count": 9_999_999_999_i64,
        "Tasks": [{"Name": "t", "Driver": "mock", "Resources": {"CPU": -5, "MemoryMB": 1_i64 << 40}}]
    })));
    assert!(
        errs.contains(&r#"group "g": count: value 9999999999 is out of range"#.to_string()),
        "{errs:?}"
    );
    assert!(
        errs.contains(&r#"group "g": task "t": resources.cpu: must be >= 0 (got -5)"#.to_string()),
        "{errs:?}"
    );
    assert!(
        errs.iter()
            .any(|e| e.starts_with(r#"group "g": task "t": resources.memory: value"#)),
        "{errs:?}"
    );
    let errs = parse_err(&json!({"Job": {"ID": "x", "Type": "daemon", "TaskGroups": []}}));
    assert!(
        errs[0].starts_with("type: invalid job type \"daemon\""),
        "{errs:?}"
    );
}

#[test]
fn syntax_errors_carry_a_position() {
    match parse_json(
        b"{\"Job\": {\"ID\": \"x\",\n \"Count\": }}",
        &ParseOptions::default(),
    ) {
        Err(JobspecError::JsonSyntax { line: 2, .. }) => {}
        other => panic!("expected a syntax error on line 2, got {other:?}"),
    }
}

#[test]
fn payload_and_periodic_specs() {
    let p = parse(&json!({"Job": {
        "ID": "j", "Type": "batch", "Payload": "aGVsbG8=",
        "Periodic": {"Spec": ["0 * * * *", "30 * * * *"], "ProhibitOverlap": true},
        "TaskGroups": [{"Name": "g", "Tasks": [task()]}]
    }}));
    assert_eq!(p.job.payload, b"hello");
    let periodic = p.job.periodic.as_ref().expect("periodic");
    assert_eq!(periodic.specs, vec!["0 * * * *", "30 * * * *"]);
    assert_eq!(
        (periodic.enabled, periodic.time_zone.as_str()),
        (true, "UTC")
    );
    assert_eq!(render_json(&p.job)["Payload"], "aGVsbG8=");
    let errs = parse_err(&json!({"Job": {"ID": "j", "Payload": "not base64!", "TaskGroups": []}}));
    assert!(errs[0].starts_with("payload: not valid base64"), "{errs:?}");
}

//! HCL2 features, one case each, against the JSON Nomad's parser produces for the same file
//! (`nomad job run -output`, `POST /v1/jobs/parse` without canonicalization): variables and
//! their inputs, locals, expressions, functions, dynamic blocks, shorthands, and the errors.

use caravan_jobspec::{
    JobspecError, ParseOptions, VarFile, VariableInputs, hcl_to_nomad_json_with, parse_hcl_with,
    submission,
};
use serde_json::{Value, json};

fn inputs() -> VariableInputs {
    VariableInputs {
        strict: true,
        ..Default::default()
    }
}

fn nomad_json(text: &str, inputs: &VariableInputs) -> Value {
    match hcl_to_nomad_json_with(text, false, inputs, &ParseOptions::default()) {
        Ok((v, _)) => v,
        Err(e) => panic!("parse failed: {e}\n{text}"),
    }
}

fn errors(text: &str, inputs: &VariableInputs) -> Vec<String> {
    match parse_hcl_with(text, inputs, &ParseOptions::default()) {
        Ok(p) => panic!("expected an error, parsed {:?}", p.job.id),
        Err(JobspecError::Invalid(errs)) => errs.messages(),
        Err(other) => vec![other.to_string()],
    }
}

/// One feature: a job file, its inputs, and what Nomad's JSON holds at each pointer.
struct Case {
    name: &'static str,
    hcl: &'static str,
    inputs: VariableInputs,
    expect: Vec<(&'static str, Value)>,
}

fn case(name: &'static str, hcl: &'static str, expect: Vec<(&'static str, Value)>) -> Case {
    Case {
        name,
        hcl,
        inputs: inputs(),
        expect,
    }
}

fn with(mut c: Case, f: impl FnOnce(&mut VariableInputs)) -> Case {
    f(&mut c.inputs);
    c
}

const VARS: &str = r#"
variables {
  region_var = "default_region"
}
variable "dc_var" {
  default = "default_dc"
}
job "example" {
  datacenters = [var.dc_var]
  region      = var.region_var
}
"#;

#[test]
fn each_feature_gives_nomads_json() {
    let cases = vec![
        case(
            "variables take their defaults",
            VARS,
            vec![
                ("/Datacenters", json!(["default_dc"])),
                ("/Region", json!("default_region")),
                ("/ID", json!("example")),
                ("/Name", json!("example")),
            ],
        ),
        with(
            case(
                "-var sets a variable",
                VARS,
                vec![
                    ("/Datacenters", json!(["set_dc"])),
                    ("/Region", json!("set_region")),
                ],
            ),
            |i| i.args = vec!["dc_var=set_dc".into(), "region_var=set_region".into()],
        ),
        with(
            case(
                "NOMAD_VAR_ sets a variable",
                VARS,
                vec![("/Datacenters", json!(["env_dc"]))],
            ),
            |i| {
                i.env = vec![
                    ("NOMAD_VAR_dc_var".into(), "env_dc".into()),
                    ("HOME".into(), "/root".into()),
                ]
            },
        ),
        with(
            case(
                "a -var-file sets variables, HCL or JSON",
                VARS,
                vec![
                    ("/Datacenters", json!(["file_dc"])),
                    ("/Region", json!("json_region")),
                ],
            ),
            |i| {
                i.files = vec![
                    VarFile {
                        name: "a.hcl".into(),
                        text: "dc_var = \"file_dc\"\nregion_var = \"hcl_region\"\n".into(),
                    },
                    VarFile {
                        name: "b.json".into(),
                        text: "{\"region_var\": \"json_region\"}".into(),
                    },
                ]
            },
        ),
        with(
            case(
                "precedence: env < files < API variables < -var",
                VARS,
                vec![
                    ("/Datacenters", json!(["from_content"])),
                    ("/Region", json!("from_args")),
                ],
            ),
            |i| {
                i.env = vec![
                    ("NOMAD_VAR_dc_var".into(), "from_env".into()),
                    ("NOMAD_VAR_region_var".into(), "from_env".into()),
                ];
                i.files = vec![VarFile {
                    name: "v.hcl".into(),
                    text: "dc_var = \"from_file\"\nregion_var = \"from_file\"".into(),
                }];
                i.content = Some("dc_var = \"from_content\"".into());
                i.args = vec!["region_var=from_args".into()];
            },
        ),
        with(
            case(
                "typed variables convert their text",
                r#"
variable "count" {
  type = number
}
variable "ports" {
  type = list(number)
}
variable "labels" {
  type    = map(string)
  default = { tier = "web" }
}
job "x" {
  group "g" {
    count = var.count
    meta  = merge(var.labels, { first_port = var.ports[0] })
  }
}
"#,
                vec![
                    ("/TaskGroups/0/Count", json!(3)),
                    (
                        "/TaskGroups/0/Meta",
                        json!({"tier": "web", "first_port": "8080"}),
                    ),
                ],
            ),
            |i| i.args = vec!["count=3".into(), "ports=[8080, 8081]".into()],
        ),
        case(
            "objects, lists and optional attributes in types",
            r#"
variable "services" {
  type = list(object({
    name = string
    port = optional(number, 80)
  }))
  default = [{ name = "web" }, { name = "api", port = 9090 }]
}
job "x" {
  meta = { for s in var.services : s.name => s.port }
}
"#,
            vec![("/Meta", json!({"web": "80", "api": "9090"}))],
        ),
        case(
            "locals use variables and other locals, in any order",
            r#"
variables {
  region_var = "us"
}
locals {
  region = "${local.prefix}.${var.region_var}"
  prefix = "example"
  dcs    = [for n in range(2) : "dc${n + 1}"]
}
job "x" {
  region      = local.region
  datacenters = local.dcs
}
"#,
            vec![
                ("/Region", json!("example.us")),
                ("/Datacenters", json!(["dc1", "dc2"])),
            ],
        ),
        with(
            case(
                "lookups and functions pick an environment",
                r#"
variable "env" {
  description = "target environment for the job"
}
locals {
  environments = {
    prod    = { count = 20, dcs = ["prod-dc1", "prod-dc2"] },
    staging = { count = 3, dcs = ["dc1"] },
  }
  env = lookup(local.environments, var.env, { count = 0, dcs = [] })
}
job "web" {
  datacenters = local.env.dcs
  group "web" {
    count = local.env.count
    task "server" {
      driver = "docker"
      config {
        image = "hashicorp/http-echo"
        args  = ["-text", "Hello from ${var.env}"]
      }
    }
  }
}
"#,
                vec![
                    ("/Datacenters", json!(["dc1"])),
                    ("/TaskGroups/0/Count", json!(3)),
                    (
                        "/TaskGroups/0/Tasks/0/Config",
                        json!({"image": "hashicorp/http-echo", "args": ["-text", "Hello from staging"]}),
                    ),
                ],
            ),
            |i| i.args = vec!["env=staging".into()],
        ),
        case(
            "conditionals, arithmetic and string templates with directives",
            r#"
variable "replicas" {
  default = 4
}
job "x" {
  priority = var.replicas > 3 ? 80 : 50
  group "g" {
    count = var.replicas * 2 - 1
    task "t" {
      driver = "raw_exec"
      env {
        MODE  = "%{ if var.replicas > 1 }cluster%{ else }single%{ endif }"
        PEERS = "%{ for i in range(var.replicas) }peer${i} %{ endfor ~}"
      }
    }
  }
}
"#,
            vec![
                ("/Priority", json!(80)),
                ("/TaskGroups/0/Count", json!(7)),
                (
                    "/TaskGroups/0/Tasks/0/Env",
                    json!({"MODE": "cluster", "PEERS": "peer0 peer1 peer2 peer3 "}),
                ),
            ],
        ),
        case(
            "run-time references pass through untouched",
            r#"
job "x" {
  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }
  constraint {
    attribute = meta.rack
    value     = "${node.unique.name}"
  }
  group "g" {
    task "t" {
      driver = "raw_exec"
      env {
        ADDR = "http://${NOMAD_ADDR_http}/${env["HOME"]}"
      }
    }
  }
}
"#,
            vec![
                (
                    "/Constraints",
                    json!([
                        {"LTarget": "${attr.kernel.name}", "RTarget": "linux", "Operand": "="},
                        {"LTarget": "${meta.rack}", "RTarget": "${node.unique.name}", "Operand": "="},
                    ]),
                ),
                (
                    "/TaskGroups/0/Tasks/0/Env/ADDR",
                    json!("http://${NOMAD_ADDR_http}/${env[\"HOME\"]}"),
                ),
            ],
        ),
        case(
            "dynamic blocks generate groups, with labels and the iterator",
            r#"
job "example" {
  dynamic "group" {
    for_each = [
      { name = "groupA", idx = 1 },
      { name = "groupB", idx = 2 },
    ]
    labels = [group.value.name]
    content {
      count = group.value.idx
      task "simple" {
        driver = "raw_exec"
        config {
          command = group.value.name
        }
        meta {
          VERSION = group.value.idx
        }
        env {
          ID = format("id:%s", group.value.idx)
        }
        resources {
          cpu = group.value.idx * 100
        }
      }
    }
  }
}
"#,
            vec![
                ("/TaskGroups/0/Name", json!("groupA")),
                ("/TaskGroups/1/Name", json!("groupB")),
                ("/TaskGroups/1/Count", json!(2)),
                ("/TaskGroups/0/Tasks/0/Config/command", json!("groupA")),
                ("/TaskGroups/0/Tasks/0/Meta/VERSION", json!("1")),
                ("/TaskGroups/1/Tasks/0/Env/ID", json!("id:2")),
                ("/TaskGroups/1/Tasks/0/Resources/CPU", json!(200)),
            ],
        ),
        case(
            "nested dynamic blocks with a named iterator",
            r#"
locals {
  ports = { http = 8080, admin = 9090 }
}
job "x" {
  group "g" {
    network {
      dynamic "port" {
        for_each = local.ports
        iterator = p
        labels   = [p.key]
        content {
          to = p.value
        }
      }
    }
  }
}
"#,
            vec![(
                "/TaskGroups/0/Networks/0/DynamicPorts",
                json!([
                    {"Label": "admin", "To": 9090},
                    {"Label": "http", "To": 8080},
                ]),
            )],
        ),
        case(
            "dynamic blocks inside a driver config are expanded",
            r#"
locals {
  mounts = [{ target = "/a" }, { target = "/b" }]
}
job "x" {
  group "g" {
    task "t" {
      driver = "docker"
      config {
        image  = "alpine:3"
        labels = { app = "web" }
        dynamic "mount" {
          for_each = local.mounts
          content {
            type   = "bind"
            target = mount.value.target
          }
        }
      }
    }
  }
}
"#,
            vec![(
                "/TaskGroups/0/Tasks/0/Config",
                json!({
                    "image": "alpine:3",
                    "labels": [{"app": "web"}],
                    "mount": [{"type": "bind", "target": "/a"}, {"type": "bind", "target": "/b"}],
                }),
            )],
        ),
        case(
            "an expression in network.mode and config.image",
            r#"
variable "image" {
  default = "redis:7"
}
locals {
  bridged = true
}
job "x" {
  group "g" {
    network {
      mode = local.bridged ? "bridge" : "host"
    }
    task "t" {
      driver = "docker"
      config {
        image = var.image
        ports = split(",", "db,metrics")
      }
    }
  }
}
"#,
            vec![
                ("/TaskGroups/0/Networks/0/Mode", json!("bridge")),
                (
                    "/TaskGroups/0/Tasks/0/Config",
                    json!({"image": "redis:7", "ports": ["db", "metrics"]}),
                ),
            ],
        ),
        case(
            "the job-level task shorthand is a group of one task",
            r#"
job "x" {
  task "alone" {
    driver = "raw_exec"
  }
  group "g" {
    task "t" {
      driver = "raw_exec"
    }
  }
}
"#,
            vec![
                ("/TaskGroups/0/Name", json!("alone")),
                ("/TaskGroups/0/Tasks/0/Name", json!("alone")),
                ("/TaskGroups/1/Name", json!("g")),
            ],
        ),
        case(
            "env as an attribute takes any expression",
            r#"
job "x" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      env = {for k in ["a", "b"] : k => "val-${k}"}
    }
  }
}
"#,
            vec![(
                "/TaskGroups/0/Tasks/0/Env",
                json!({"a": "val-a", "b": "val-b"}),
            )],
        ),
        case(
            "splats over lists of objects",
            r#"
locals {
  nodes = [{ dc = "dc1" }, { dc = "dc2" }]
}
job "x" {
  datacenters = local.nodes[*].dc
}
"#,
            vec![("/Datacenters", json!(["dc1", "dc2"]))],
        ),
    ];
    let mut failures = Vec::new();
    for c in &cases {
        let got = nomad_json(c.hcl, &c.inputs);
        for (pointer, want) in &c.expect {
            match got.pointer(pointer) {
                Some(v) if v == want => {}
                other => {
                    failures.push(format!("{}: {pointer}: got {other:?}, want {want}", c.name))
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn file_functions_read_relative_to_the_job_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("start.sh"), "#!/bin/sh\nexec web\n").expect("write");
    let text = r#"
job "x" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", file("start.sh")]
      }
    }
  }
}
"#;
    let local = VariableInputs {
        file_base: Some(dir.path().to_path_buf()),
        ..inputs()
    };
    let got = nomad_json(text, &local);
    assert_eq!(
        got.pointer("/TaskGroups/0/Tasks/0/Config/args/1"),
        Some(&json!("#!/bin/sh\nexec web\n"))
    );
    // Over the API the server's disk is out of reach, as in Nomad.
    let errs = errors(text, &VariableInputs::from_api(None));
    assert!(
        errs.iter()
            .any(|e| e.contains("filesystem function disabled")),
        "{errs:?}"
    );
}

#[test]
fn a_failing_validation_names_the_variable_and_its_rule() {
    let text = r#"
variable "count" {
  type = number
  validation {
    condition     = var.count >= 1 && var.count <= 10
    error_message = "count must be between 1 and 10."
  }
}
job "x" {
  group "g" {
    count = var.count
  }
}
"#;
    let mut i = inputs();
    i.args = vec!["count=30".into()];
    let errs = errors(text, &i);
    assert_eq!(
        errs,
        vec![
            "variable \"count\": Invalid value for cmd variable: count must be between 1 and 10. (value 30; checked by the validation rule at line 4)"
                .to_string()
        ]
    );
    i.args = vec!["count=3".into()];
    assert_eq!(
        nomad_json(text, &i).pointer("/TaskGroups/0/Count"),
        Some(&json!(3))
    );
}

#[test]
fn variable_errors_name_the_variable_and_the_line() {
    let cases: Vec<(&str, VariableInputs, &str)> = vec![
        (
            "variable \"region\" {}\njob \"x\" {}\n",
            inputs(),
            "variable \"region\": Unset variable \"region\": A used variable must be set or have a default value",
        ),
        (
            "variable \"n\" {\n  type = number\n}\njob \"x\" {}\n",
            VariableInputs {
                args: vec!["n=lots".into()],
                ..inputs()
            },
            "variable \"n\": Invalid argument value for -var variable: The received arg value for n is not compatible with the variable's type constraint: a number is required.",
        ),
        (
            "job \"x\" {}\n",
            VariableInputs {
                args: vec!["nope=1".into()],
                ..inputs()
            },
            "variable \"nope\": Undefined -var variable: A \"nope\" variable was passed in the command line but was not found in known variables.",
        ),
        (
            "variable \"n\" {\n  type    = number\n  default = \"x\"\n}\njob \"x\" {}\n",
            inputs(),
            "variable \"n\": default: Invalid default value for variable: This default value is not compatible with the variable's type constraint: a number is required. (line 3)",
        ),
        (
            "variable \"n\" {\n  default = 1\n  validation {\n    condition     = var.other > 0\n    error_message = \"x\"\n  }\n}\njob \"x\" {}\n",
            inputs(),
            "The condition for variable \"n\" can only refer to the variable itself, using var.n. (line 4)",
        ),
        (
            "variable \"n\" {\n  default  = 1\n  nullable = true\n}\njob \"x\" {}\n",
            inputs(),
            "variable \"n\": nullable: Unsupported argument: An argument named \"nullable\" is not expected here. (line 3)",
        ),
        (
            "variable \"n\" {\n  type = list\n}\njob \"x\" {}\n",
            inputs(),
            "The list type constructor requires one argument specifying the element type. (line 2)",
        ),
        (
            "job \"x\" {}\n",
            VariableInputs {
                files: vec![VarFile {
                    name: "prod.hcl".into(),
                    text: "variable \"n\" {}\n".into(),
                }],
                ..inputs()
            },
            "prod.hcl: Variable declaration in a .var file",
        ),
        (
            "locals {\n  a = local.b\n  b = local.a\n}\njob \"x\" {}\n",
            inputs(),
            "local.a: Unsupported attribute: This object does not have an attribute named \"b\". (line 2)",
        ),
        (
            "job \"x\" {\n  group \"g\" {\n    count = upper(3, 4)\n  }\n}\n",
            inputs(),
            "job \"x\": group \"g\": count: Invalid function argument count: function \"upper\" expects only 1 argument(s), got 2. (line 3)",
        ),
        (
            "job \"x\" {\n  group \"g\" {\n    max_run_duration = \"1h\"\n  }\n}\n",
            inputs(),
            "group \"g\": max_run_duration (MaxRunDuration) is not supported by Caravan",
        ),
        (
            "job \"x\" {\n  dynamic \"group\" {\n    for_each = 3\n    content {}\n  }\n}\n",
            inputs(),
            "job \"x\": dynamic: Invalid dynamic for_each value: Cannot use a number value in for_each. An iterable collection is required. (line 2)",
        ),
    ];
    for (text, i, want) in cases {
        let errs = errors(text, &i);
        assert!(
            errs.iter().any(|e| e.contains(want)),
            "want {want:?} in {errs:?}"
        );
    }
}

#[test]
fn undeclared_values_warn_where_the_api_sends_them() {
    let i = VariableInputs::from_api(Some("nope = 1\ndc_var = \"api_dc\""));
    let (json, warnings) =
        hcl_to_nomad_json_with(VARS, false, &i, &ParseOptions::default()).expect("parses");
    assert_eq!(json["Datacenters"], json!(["api_dc"]));
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("Undefined variable: A \"nope\" variable was set")),
        "{warnings:?}"
    );
}

#[test]
fn sensitive_values_stay_out_of_messages() {
    let text = r#"
variable "token" {
  type      = string
  sensitive = true
  validation {
    condition     = length(var.token) > 8
    error_message = "token too short."
  }
}
job "x" {}
"#;
    let errs = errors(
        text,
        &VariableInputs {
            args: vec!["token=s3cret".into()],
            ..inputs()
        },
    );
    assert!(errs.iter().all(|e| !e.contains("s3cret")), "{errs:?}");
    assert!(
        errs.iter().any(|e| e.contains("(sensitive value)")),
        "{errs:?}"
    );
}

#[test]
fn the_submission_keeps_source_and_variables_as_nomad_does() {
    let text = r#"
variable "region" {
  type = string
}
variable "pool" {
  type = string
}
variable "datacenters" {
  type = list(string)
}
variable "ns" {
  type = string
}
job "example" {
  datacenters = var.datacenters
  region      = var.region
  node_pool   = var.pool
  namespace   = var.ns
}
"#;
    let i = VariableInputs {
        args: vec!["region=philly".into(), "pool=prod".into()],
        content: Some("datacenters = [\"dc1\", \"dc2\"]".into()),
        files: vec![VarFile {
            name: "vars.hcl".into(),
            text: "ns = \"infra\"".into(),
        }],
        env: vec![("NOMAD_VAR_region".into(), "seattle".into())],
        strict: false,
        file_base: None,
    };
    let parsed = parse_hcl_with(text, &i, &ParseOptions::default()).expect("parses");
    assert_eq!(parsed.job.namespace, "infra");
    assert_eq!(parsed.job.node_pool, "prod");
    assert_eq!(parsed.job.datacenters, vec!["dc1", "dc2"]);
    let sub = submission(text, &i, &parsed);
    assert_eq!(sub.format, "hcl2");
    assert_eq!(
        sub.variables,
        "ns = \"infra\"\n\ndatacenters = [\"dc1\", \"dc2\"]"
    );
    assert_eq!(
        sub.variable_flags,
        [
            ("pool".to_string(), "prod".to_string()),
            ("region".to_string(), "philly".to_string())
        ]
        .into_iter()
        .collect()
    );
    assert_eq!(
        serde_json::to_value(&sub).expect("json")["VariableFlags"]["region"],
        "philly"
    );
}

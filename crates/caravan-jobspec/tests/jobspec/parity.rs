//! Parity with Nomad's parser on the kinds of file its own `jobspec2` tests parse (Connect
//! upstreams, workload identities, template options, restart `render_templates`) and on
//! the job `nomad job init` writes: Caravan's files of the same shape, compared field by
//! field with the JSON Nomad produces for them.
//!
//! The expected JSON is Nomad's `api.Job` as `ParseWithConfig` returns it (what `nomad job
//! run -output` prints and `/v1/jobs/parse` answers without `Canonicalize`), including what
//! its `normalizeJob` fills in (name and ID from the label, static ports moved to
//! `ReservedPorts`, template and vault defaults, the default identity moved to
//! `Identity`). Go marshals every struct field; here nulls and the zero values of fields
//! Nomad does not hold as pointers are left out on both sides, which loses nothing a file
//! can set.

use caravan_jobspec::{ParseOptions, VariableInputs, hcl_as_written, parse_hcl};
use serde_json::{Value, json};

fn raw(text: &str) -> Value {
    match hcl_as_written(text, &VariableInputs::default(), &ParseOptions::default()) {
        Ok((v, _)) => v,
        Err(e) => panic!("parse failed: {e}"),
    }
}

/// Drops nulls, and the empty containers they leave.
fn strip(v: &Value) -> Option<Value> {
    match v {
        Value::Null => None,
        Value::Array(items) => Some(Value::Array(items.iter().filter_map(strip).collect())),
        Value::Object(fields) => Some(Value::Object(
            fields
                .iter()
                .filter_map(|(k, v)| strip(v).map(|v| (k.clone(), v)))
                .collect(),
        )),
        other => Some(other.clone()),
    }
}

/// Every difference between two JSON values, as `path: got X, want Y` lines.
fn diff(path: &str, got: &Value, want: &Value, out: &mut Vec<String>) {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => {
            for (k, wv) in w {
                match g.get(k) {
                    Some(gv) => diff(&format!("{path}.{k}"), gv, wv, out),
                    None => out.push(format!("{path}.{k}: missing, want {wv}")),
                }
            }
            for k in g.keys().filter(|k| !w.contains_key(*k)) {
                out.push(format!("{path}.{k}: unexpected {}", g[k]));
            }
        }
        (Value::Array(g), Value::Array(w)) if g.len() == w.len() => {
            for (i, (gv, wv)) in g.iter().zip(w).enumerate() {
                diff(&format!("{path}[{i}]"), gv, wv, out);
            }
        }
        _ if got != want => out.push(format!("{path}: got {got}, want {want}")),
        _ => {}
    }
}

const S: i64 = 1_000_000_000;

/// Like Nomad's `connect-example.hcl`: a bridge network, a Connect sidecar with an
/// upstream carrying proxy config, and an upstream address read at run time.
const CONNECT: &str = r#"
job "shop" {
  datacenters = ["dc1"]

  group "shop" {
    network {
      mode = "bridge"

      port "http" {
        static = 8000
        to     = 8080
      }
    }

    service {
      name = "storefront"
      port = "8080"

      connect {
        sidecar_service {
          proxy {
            upstreams {
              destination_name = "inventory"
              local_bind_port  = 6000
              config {
                connect_timeout_ms = 2500
              }
            }
          }
        }
      }
    }

    task "frontend" {
      driver = "docker"

      env {
        INVENTORY_URL = "http://${NOMAD_UPSTREAM_ADDR_inventory}"
      }

      config {
        image          = "example/storefront:v2"
        auth_soft_fail = true
      }
    }
  }
}
"#;

/// Like Nomad's `identity-compat.nomad.hcl`: a default identity and a named one.
const IDENTITY: &str = r#"
job "ids" {
  group "store" {
    count = 1

    network {
      port "db" {
        to = 5432
      }
    }

    task "pg" {
      driver = "docker"

      config {
        image = "postgres:16"
        ports = ["db"]
      }

      identity {
        env  = true
        file = true
      }

      identity {
        name          = "vault_default"
        aud           = ["vault.io"]
        file          = true
        ttl           = "1h"
        change_mode   = "signal"
        change_signal = "SIGHUP"
      }

      resources {
        cpu    = 300
        memory = 512
      }
    }
  }
}
"#;

/// Like Nomad's `restart-render-templates.hcl`.
const RESTART: &str = r#"
job "restarts" {
  group "g" {
    restart {
      render_templates = true
    }
    task "inherits" {
    }
    task "overrides" {
      restart {
        render_templates = false
      }
    }
  }
}
"#;

/// Like Nomad's `template-err-missing-key.hcl` and `template-wait-config.hcl`.
const TEMPLATES: &str = r#"
job "tmpl" {
  group "g" {
    task "t" {
      template {
        error_on_missing_key = true
      }
      template {
        destination = "local/app.env"
        wait {
          min = "2s"
          max = "30s"
        }
        change_script {
          command = "/local/reload.sh"
        }
      }
    }
  }
}
"#;

/// The shape of the job `nomad job init` writes.
const INIT: &str = r#"
job "example" {
  datacenters = ["*"]
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

  ui {
    description = "An **example** job"
    link {
      label = "Docs"
      url   = "https://example.com/docs"
    }
  }

  group "cache" {
    count = 1

    network {
      port "db" {
        to = 6379
      }
    }

    service {
      name     = "redis-cache"
      tags     = ["global", "cache"]
      port     = "db"
      provider = "nomad"
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

      shutdown_delay = "10s"

      identity {
        env  = true
        file = true
      }

      resources {
        cpu    = 500 # 500 MHz
        memory = 256 # 256MB
      }
    }
  }
}
"#;

fn cases() -> Vec<(&'static str, &'static str, Value)> {
    let template_defaults = |extra: Value| {
        let mut t = json!({"ChangeMode": "restart", "Perms": "0644", "Splay": 5 * S, "ErrMissingKey": false});
        if let (Some(t), Value::Object(extra)) = (t.as_object_mut(), extra) {
            t.extend(extra);
        }
        t
    };
    vec![
        (
            "connect",
            CONNECT,
            json!({
                "ID": "shop", "Name": "shop", "Datacenters": ["dc1"],
                "TaskGroups": [{
                    "Name": "shop",
                    "Networks": [{"Mode": "bridge", "ReservedPorts": [{"Label": "http", "Value": 8000, "To": 8080}]}],
                    "Services": [{
                        "Name": "storefront", "PortLabel": "8080",
                        "Connect": {"SidecarService": {"Proxy": {"Upstreams": [{
                            "DestinationName": "inventory", "LocalBindPort": 6000,
                            "Config": {"connect_timeout_ms": 2500}
                        }]}}}
                    }],
                    "Tasks": [{
                        "Name": "frontend", "Driver": "docker",
                        "Env": {"INVENTORY_URL": "http://${NOMAD_UPSTREAM_ADDR_inventory}"},
                        "Config": {"image": "example/storefront:v2", "auth_soft_fail": true}
                    }]
                }]
            }),
        ),
        (
            "identity",
            IDENTITY,
            json!({
                "ID": "ids", "Name": "ids",
                "TaskGroups": [{
                    "Name": "store", "Count": 1,
                    "Networks": [{"DynamicPorts": [{"Label": "db", "To": 5432}]}],
                    "Tasks": [{
                        "Name": "pg", "Driver": "docker",
                        "Config": {"image": "postgres:16", "ports": ["db"]},
                        "Identity": {"Env": true, "File": true},
                        "Identities": [{
                            "Name": "vault_default", "Audience": ["vault.io"], "File": true,
                            "TTL": 3600 * S, "ChangeMode": "signal", "ChangeSignal": "SIGHUP"
                        }],
                        "Resources": {"CPU": 300, "MemoryMB": 512}
                    }]
                }]
            }),
        ),
        (
            "restart render_templates",
            RESTART,
            json!({
                "ID": "restarts", "Name": "restarts",
                "TaskGroups": [{
                    "Name": "g",
                    "RestartPolicy": {"RenderTemplates": true},
                    "Tasks": [
                        {"Name": "inherits"},
                        {"Name": "overrides", "RestartPolicy": {"RenderTemplates": false}}
                    ]
                }]
            }),
        ),
        (
            "templates",
            TEMPLATES,
            json!({
                "ID": "tmpl", "Name": "tmpl",
                "TaskGroups": [{
                    "Name": "g",
                    "Tasks": [{
                        "Name": "t",
                        "Templates": [
                            template_defaults(json!({"ErrMissingKey": true})),
                            template_defaults(json!({
                                "DestPath": "local/app.env",
                                "Wait": {"Min": 2 * S, "Max": 30 * S},
                                "ChangeScript": {"Command": "/local/reload.sh", "Args": [], "Timeout": 5 * S, "FailOnError": false, "RunOnFirstRender": false}
                            })),
                        ]
                    }]
                }]
            }),
        ),
        (
            "job init",
            INIT,
            json!({
                "ID": "example", "Name": "example", "Datacenters": ["*"], "Type": "service",
                "Update": {"MaxParallel": 1, "MinHealthyTime": 10 * S, "HealthyDeadline": 180 * S, "ProgressDeadline": 600 * S, "AutoRevert": false, "Canary": 0},
                "Migrate": {"MaxParallel": 1, "HealthCheck": "checks", "MinHealthyTime": 10 * S, "HealthyDeadline": 300 * S},
                "UI": {"Description": "An **example** job", "Links": [{"Label": "Docs", "URL": "https://example.com/docs"}]},
                "TaskGroups": [{
                    "Name": "cache", "Count": 1,
                    "Networks": [{"DynamicPorts": [{"Label": "db", "To": 6379}]}],
                    "Services": [{"Name": "redis-cache", "Tags": ["global", "cache"], "PortLabel": "db", "Provider": "nomad"}],
                    "RestartPolicy": {"Attempts": 2, "Interval": 1800 * S, "Delay": 15 * S, "Mode": "fail"},
                    "EphemeralDisk": {"SizeMB": 300},
                    "Tasks": [{
                        "Name": "redis", "Driver": "docker",
                        "Config": {"image": "redis:7", "ports": ["db"], "auth_soft_fail": true},
                        "ShutdownDelay": 10 * S,
                        "Identity": {"Env": true, "File": true},
                        "Resources": {"CPU": 500, "MemoryMB": 256}
                    }]
                }]
            }),
        ),
    ]
}

#[test]
fn each_file_parses_to_the_json_nomad_produces() {
    let mut failures = Vec::new();
    for (name, text, want) in cases() {
        let got = strip(&raw(text)).unwrap_or(Value::Null);
        let mut out = Vec::new();
        diff(name, &got, &want, &mut out);
        failures.extend(out);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The init job, canonicalized: the fields Caravan models against the values Nomad's
/// `Job.Canonicalize` gives them (service-job defaults for what the file leaves out).
#[test]
fn the_init_job_canonicalizes_as_nomad() {
    let parsed = parse_hcl(INIT, &ParseOptions::default()).expect("the init job parses");
    let got = caravan_jobspec::render_json(&parsed.job);
    let want = json!({
        "ID": "example", "Name": "example", "Namespace": "default", "Region": "global",
        "Type": "service", "Priority": 50, "AllAtOnce": false, "Datacenters": ["*"],
        "NodePool": "default",
        "TaskGroups": [{
            "Name": "cache", "Count": 1,
            "Update": {
                "Stagger": 30 * S, "MaxParallel": 1, "HealthCheck": "checks",
                "MinHealthyTime": 10 * S, "HealthyDeadline": 180 * S,
                "ProgressDeadline": 600 * S, "AutoRevert": false, "AutoPromote": false,
                "Canary": 0
            },
            "Migrate": {"MaxParallel": 1, "HealthCheck": "checks", "MinHealthyTime": 10 * S, "HealthyDeadline": 300 * S},
            "RestartPolicy": {"Attempts": 2, "Interval": 1800 * S, "Delay": 15 * S, "Mode": "fail", "RenderTemplates": false},
            "ReschedulePolicy": {
                "Attempts": 0, "Interval": 0, "Delay": 30 * S, "DelayFunction": "exponential",
                "MaxDelay": 3600 * S, "Unlimited": true
            },
            "EphemeralDisk": {"Sticky": false, "Migrate": false, "SizeMB": 300},
            "Services": [{
                "Name": "redis-cache", "Tags": ["global", "cache"], "PortLabel": "db",
                "Provider": "nomad", "AddressMode": "auto", "OnUpdate": "require_healthy",
                "TaskName": "", "Checks": null
            }],
            "Tasks": [{
                "Name": "redis", "Driver": "docker", "KillTimeout": 5 * S,
                "LogConfig": {"MaxFiles": 10, "MaxFileSizeMB": 10, "Disabled": false},
                "Resources": {"CPU": 500, "MemoryMB": 256},
                "Identity": {"Name": "default", "Audience": ["nomadproject.io"], "Env": true, "File": true}
            }]
        }]
    });
    let mut out = Vec::new();
    subset("job", &got, &want, &mut out);
    assert!(out.is_empty(), "{}", out.join("\n"));
    // The task's shutdown delay and the job's UI block are kept as Nomad keeps them.
    assert_eq!(
        got["TaskGroups"][0]["Tasks"][0]["ShutdownDelay"],
        10 * S,
        "{got}"
    );
    assert_eq!(got["UI"]["Links"][0]["Label"], "Docs", "{got}");
}

/// Every field of `want` is in `got` with the same value (for the canonical form, where
/// Caravan renders more fields than this test names).
fn subset(path: &str, got: &Value, want: &Value, out: &mut Vec<String>) {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => {
            for (k, wv) in w {
                match g.get(k) {
                    Some(gv) => subset(&format!("{path}.{k}"), gv, wv, out),
                    None => out.push(format!("{path}.{k}: missing, want {wv}")),
                }
            }
        }
        (Value::Array(g), Value::Array(w)) if g.len() == w.len() => {
            for (i, (gv, wv)) in g.iter().zip(w).enumerate() {
                subset(&format!("{path}[{i}]"), gv, wv, out);
            }
        }
        _ if got != want => out.push(format!("{path}: got {got}, want {want}")),
        _ => {}
    }
}

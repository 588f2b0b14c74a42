//! Every part of Nomad's job specification Caravan refuses is refused by name, from HCL
//! and from JSON, and what Nomad's API sends empty for every job is not.

use caravan_jobspec::{JobspecError, ParseOptions, REFUSED, parse_hcl, parse_json};
use serde_json::{Value, json};

fn hcl_errors(text: &str) -> Vec<String> {
    match parse_hcl(text, &ParseOptions::default()) {
        Ok(_) => Vec::new(),
        Err(JobspecError::Invalid(errs)) => errs.messages(),
        Err(other) => vec![other.to_string()],
    }
}

fn json_errors(v: &Value) -> Vec<String> {
    match parse_json(v.to_string().as_bytes(), &ParseOptions::default()) {
        Ok(_) => Vec::new(),
        Err(JobspecError::Invalid(errs)) => errs.messages(),
        Err(other) => vec![other.to_string()],
    }
}

/// A job whose one group `g` has a task `t`, with `job`, `group`, `task`, `resources`,
/// `network`, `port`, `restart` and `ephemeral_disk` lines inserted where each belongs.
fn hcl_job(within: &str, line: &str) -> String {
    let at = |w: &str| if w == within { line } else { "" };
    format!(
        r#"job "x" {{
  {job}
  group "g" {{
    {group}
    network {{
      {network}
      port "http" {{
        {port}
      }}
    }}
    restart {{
      {restart}
    }}
    ephemeral_disk {{
      {ephemeral_disk}
    }}
    task "t" {{
      driver = "mock"
      {task}
      resources {{
        cpu = 100
        {resources}
      }}
    }}
  }}
}}
"#,
        job = at("job"),
        group = at("group"),
        network = at("network"),
        port = at("port"),
        restart = at("restart"),
        ephemeral_disk = at("ephemeral_disk"),
        task = at("task"),
        resources = at("resources"),
    )
}

/// What an operator would write for each refused part, in HCL.
fn hcl_snippet(within: &str, hcl: &str) -> String {
    match (within, hcl) {
        (_, "consul_token" | "vault_token" | "consul_namespace" | "vault_namespace") => {
            format!("{hcl} = \"abc\"")
        }
        ("group", "max_run_duration") => "max_run_duration = \"1h\"".into(),
        (
            _,
            "prevent_reschedule_on_lost"
            | "render_templates"
            | "ignore_collision"
            | "sticky"
            | "migrate",
        ) => {
            format!("{hcl} = true")
        }
        ("resources", "secrets") => "secrets = 100".into(),
        ("task", "kind") => "kind = \"connect-proxy:web\"".into(),
        ("network", "device" | "cidr" | "ip" | "hostname") => format!("{hcl} = \"x\""),
        ("network", "dns") => "dns {\n servers = [\"1.1.1.1\"]\n }".into(),
        ("network", "cni") => "cni {\n args = { a = \"b\" }\n }".into(),
        ("resources", "numa") => "numa {\n affinity = \"require\"\n }".into(),
        ("group", "volume") => "volume \"v\" {\n type = \"csi\"\n source = \"s\"\n }".into(),
        ("task", "volume_mount") => {
            "volume_mount {\n volume = \"v\"\n destination = \"/v\"\n }".into()
        }
        ("task", "scaling") => "scaling \"cpu\" {\n max = 1000\n }".into(),
        ("task", "action") => "action \"a\" {\n command = \"x\"\n }".into(),
        ("task", "secret") => "secret \"a\" {\n provider = \"vault\"\n path = \"p\"\n }".into(),
        ("task", "template") => "template {\n data = \"x\"\n destination = \"local/x\"\n }".into(),
        ("task", "artifact") => "artifact {\n source = \"https://example.com/x\"\n }".into(),
        ("task", "schedule") => "schedule {\n cron {\n start = \"0 0 * * *\"\n }\n }".into(),
        (_, "identity") => "identity {\n env = true\n }".into(),
        (_, "service") => "service {\n name = \"web\"\n }".into(),
        (_, "multiregion") => "multiregion {\n strategy {\n max_parallel = 1\n }\n }".into(),
        (_, "vault") => "vault {\n role = \"r\"\n }".into(),
        (_, "consul") => "consul {\n namespace = \"ns\"\n }".into(),
        (_, "csi_plugin") => "csi_plugin {\n id = \"p\"\n type = \"node\"\n }".into(),
        (within, hcl) => panic!("no HCL snippet for {within} {hcl}"),
    }
}

/// Parts with no HCL spelling in Nomad's job specification (only its JSON has them).
const JSON_ONLY: &[(&str, &str)] = &[
    ("job", "ConsulNamespace"),
    ("job", "VaultNamespace"),
    ("task", "Identities"),
];

#[test]
fn every_refused_block_and_argument_of_an_hcl_job_is_named() {
    let mut failures = Vec::new();
    for r in REFUSED {
        if JSON_ONLY.contains(&(r.within, r.json)) {
            continue;
        }
        let text = hcl_job(r.within, &hcl_snippet(r.within, r.hcl));
        let errors = hcl_errors(&text);
        let named = errors.iter().any(|e| {
            e.contains(&format!("{} ", r.hcl)) && e.contains("is not supported by Caravan")
        });
        if !named {
            failures.push(format!("{} {}: {errors:?}", r.within, r.hcl));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// What a client would send for each refused part, in JSON.
fn json_value(within: &str, json_name: &str) -> Value {
    match json_name {
        "ConsulToken" | "VaultToken" | "ConsulNamespace" | "VaultNamespace" | "Kind" | "Device"
        | "CIDR" | "IP" | "Hostname" => json!("x"),
        "PreventRescheduleOnLost"
        | "RenderTemplates"
        | "IgnoreCollision"
        | "Sticky"
        | "Migrate" => json!(true),
        "SecretsMB" => json!(100),
        "MaxRunDuration" => json!(3_600_000_000_000i64),
        "Identity" if within == "task" => json!({"Name": "default", "Env": true}),
        "Volumes" => json!({"v": {"Type": "csi", "Source": "s"}}),
        _ => json!([{"Name": "x"}]),
    }
}

#[test]
fn every_refused_field_of_a_json_job_is_named() {
    let mut failures = Vec::new();
    for r in REFUSED {
        // Blocks only HCL has at these levels (Nomad's JSON job has no such field).
        if matches!(
            (r.within, r.json),
            ("job", "Consul" | "Identity") | ("group", "CSIPlugin")
        ) {
            continue;
        }
        let value = json_value(r.within, r.json);
        let mut port = json!({"Label": "http"});
        let mut network = json!({"DynamicPorts": [port.clone()]});
        let mut resources = json!({"CPU": 100});
        let mut restart = json!({});
        let mut disk = json!({});
        let mut task = json!({"Name": "t", "Driver": "mock"});
        let mut group = json!({"Name": "g"});
        let mut job = json!({"ID": "x"});
        let target = match r.within {
            "port" => &mut port,
            "network" => &mut network,
            "resources" => &mut resources,
            "restart" => &mut restart,
            "ephemeral_disk" => &mut disk,
            "task" => &mut task,
            "group" => &mut group,
            _ => &mut job,
        };
        target[r.json] = value;
        network["DynamicPorts"] = json!([port]);
        group["Networks"] = json!([network]);
        group["RestartPolicy"] = restart;
        group["EphemeralDisk"] = disk;
        task["Resources"] = resources;
        group["Tasks"] = json!([task]);
        job["TaskGroups"] = json!([group]);
        let errors = json_errors(&json!({ "Job": job }));
        let named = errors.iter().any(|e| {
            e.to_lowercase().contains(&r.json.to_lowercase())
                && e.contains("is not supported by Caravan")
        });
        if !named {
            failures.push(format!("{} {}: {errors:?}", r.within, r.json));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn what_nomads_api_sends_empty_is_not_refused() {
    let errors = json_errors(&json!({"Job": {
        "ID": "x", "Multiregion": null, "ConsulToken": "", "VaultToken": "",
        "TaskGroups": [{
            "Name": "g", "Services": null, "Volumes": {}, "PreventRescheduleOnLost": false,
            "EphemeralDisk": {"Sticky": false, "Migrate": false, "SizeMB": 300},
            "Networks": [{"DynamicPorts": [{"Label": "db", "HostNetwork": "default"}]}],
            "Consul": {"Cluster": "default", "Namespace": "", "Partition": ""},
            "Tasks": [{
                "Name": "t", "Driver": "mock", "Templates": [], "Artifacts": null,
                "Identity": {"Name": "default", "Audience": ["nomadproject.io"], "Env": false, "File": false},
                "Kind": "", "Resources": {"CPU": 100, "SecretsMB": 0, "NUMA": null, "IOPS": 0}
            }]
        }]
    }}));
    assert!(errors.is_empty(), "{errors:?}");
}

//! The `task` block of a Nomad job file: driver config, env, resources and networks.

use super::body::{BlockRef, Body, Diag};
use super::eval::Value;
use super::job::{affinities_of, constraints_of, decode_restart, to_map};
use super::schema;
use crate::nomad_json::model::*;
use serde_json::{Value as Json, json};

/// Decodes a `task "name" { ... }` block.
pub(crate) fn decode_task<'a>(
    block: &BlockRef<'a>,
    group: &Body<'a, '_>,
    diag: &mut Diag,
) -> ApiTask {
    let name = group.label(block, diag).unwrap_or_default();
    let mut b = group.child(block, format!("{}: task {name:?}", group.path()));
    let config = match (b.single_block("config", diag), b.value("config", diag)) {
        (Some(blk), None) => Some(b.child(&blk, b.field_path("config")).free_form(diag)),
        (None, Some(Value::Object(fields))) => Some(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), v.to_json()))
                .collect(),
        ),
        (None, Some(other)) => {
            b.error_at(
                "config",
                &format!("expected a block or an object, found {}", other.type_name()),
                None,
                diag,
            );
            None
        }
        (Some(blk), Some(_)) => {
            b.error_at(
                "config",
                "set either a config block or a config argument, not both",
                blk.span(),
                diag,
            );
            None
        }
        (None, None) => None,
    };
    let env = b.string_map("env", diag).map(to_map);
    let meta = b.string_map("meta", diag).map(to_map);
    let (identity, identities) = identities(&mut b, diag);
    let task = ApiTask {
        services: schema::list(&mut b, "service", schema::SERVICE, diag),
        artifacts: schema::list(&mut b, "artifact", schema::ARTIFACT, diag),
        templates: schema::list(&mut b, "template", schema::TEMPLATE, diag)
            .map(normalize_templates),
        vault: schema::single(&mut b, "vault", schema::VAULT, diag).map(normalize_vault),
        consul: schema::single(&mut b, "consul", schema::CONSUL, diag),
        volume_mounts: schema::list(&mut b, "volume_mount", schema::VOLUME_MOUNT, diag),
        csi_plugin_config: schema::single(&mut b, "csi_plugin", schema::CSI_PLUGIN, diag),
        scaling_policies: scaling_policies(&mut b, diag),
        identity,
        identities,
        actions: labeled_list(&mut b, "action", schema::ACTION, diag),
        schedule: schema::single(&mut b, "schedule", schema::SCHEDULE, diag),
        secrets: labeled_list(&mut b, "secret", schema::SECRET, diag),
        name: Some(name),
        driver: b.string("driver", diag),
        user: b.string("user", diag),
        lifecycle: b.single_block("lifecycle", diag).map(|blk| {
            let mut l = b.child(&blk, b.field_path("lifecycle"));
            let lifecycle = ApiLifecycle {
                hook: l.string("hook", diag),
                sidecar: l.bool("sidecar", diag),
            };
            l.finish(&[], &[], diag);
            lifecycle
        }),
        config,
        constraints: constraints_of(&mut b, diag),
        affinities: affinities_of(&mut b, diag),
        env,
        resources: b
            .single_block("resources", diag)
            .map(|blk| decode_resources(&blk, &b, diag)),
        restart_policy: b
            .single_block("restart", diag)
            .map(|blk| decode_restart(&blk, &b, diag)),
        meta,
        kill_timeout: b.duration("kill_timeout", diag),
        dispatch_payload: b.single_block("dispatch_payload", diag).map(|blk| {
            let mut d = b.child(&blk, b.field_path("dispatch_payload"));
            let payload = ApiDispatchPayload {
                file: d.string("file", diag),
            };
            d.finish(&[], &[], diag);
            payload
        }),
        leader: b.bool("leader", diag),
        shutdown_delay: b.duration("shutdown_delay", diag),
        kill_signal: b.string("kill_signal", diag),
        kind: b.string("kind", diag),
        log_config: b.single_block("logs", diag).map(|blk| {
            let mut l = b.child(&blk, b.field_path("logs"));
            let logs = ApiLogConfig {
                max_files: l.int("max_files", diag),
                max_file_size_mb: l.int("max_file_size", diag),
                disabled: l.bool("disabled", diag),
                enabled: l.bool("enabled", diag),
            };
            l.finish(&[], &[], diag);
            logs
        }),
    };
    // Every task block Nomad knows is decoded into Nomad's JSON (`schema`); the ones Caravan
    // does not run are refused at conversion, as a JSON job's are.
    b.finish(&[], &[], diag);
    task
}

fn decode_resources<'a>(
    block: &BlockRef<'a>,
    task: &Body<'a, '_>,
    diag: &mut Diag,
) -> ApiResources {
    let mut b = task.child(block, task.field_path("resources"));
    let networks: Vec<ApiNetwork> = b
        .blocks("network")
        .into_iter()
        .map(|n| decode_network(&n, &b, &b.field_path("network"), diag))
        .collect();
    let mut devices = Vec::new();
    for d in b.blocks("device") {
        let Some(name) = b.label(&d, diag) else {
            continue;
        };
        let mut db = b.child(&d, b.field_path(&format!("device {name:?}")));
        devices.push(ApiRequestedDevice {
            name: Some(name),
            count: db.int("count", diag),
            constraints: constraints_of(&mut db, diag),
            affinities: affinities_of(&mut db, diag),
        });
        db.finish(&[], &[], diag);
    }
    let resources = ApiResources {
        cpu: b.int("cpu", diag),
        cores: b.int("cores", diag),
        memory_mb: b.int("memory", diag),
        memory_max_mb: b.int("memory_max", diag),
        disk_mb: b.int("disk", diag),
        networks: (!networks.is_empty()).then_some(networks),
        devices: (!devices.is_empty()).then_some(devices),
        iops: b.int("iops", diag),
        secrets_mb: b.int("secrets", diag),
        numa: None,
    };
    b.finish(&[], &["numa"], diag);
    resources
}

/// Decodes a `network` block (group level, or the legacy task `resources` level).
pub(crate) fn decode_network<'a>(
    block: &BlockRef<'a>,
    parent: &Body<'a, '_>,
    path: &str,
    diag: &mut Diag,
) -> ApiNetwork {
    let mut b = parent.child(block, path.to_string());
    if !block.labels.is_empty() {
        b.error_at("", "network blocks take no labels", block.span(), diag);
    }
    let mut reserved = Vec::new();
    let mut dynamic = Vec::new();
    // `reserved_ports` is the older spelling of a port with a static value.
    let mut all_ports = b.blocks("port");
    all_ports.extend(b.blocks("reserved_ports"));
    for p in all_ports {
        let Some(label) = b.label(&p, diag) else {
            continue;
        };
        let mut pb = b.child(&p, b.field_path(&format!("{} {label:?}", p.ident)));
        let static_value = pb.int("static", diag);
        let port = ApiPort {
            label: Some(label),
            value: static_value,
            to: pb.int("to", diag),
            host_network: pb.string("host_network", diag),
            ignore_collision: pb.bool("ignore_collision", diag),
        };
        pb.finish(&[], &[], diag);
        // As in Nomad, a port with a static value is reserved; any other is dynamic.
        match static_value {
            Some(v) if v > 0 => reserved.push(port),
            Some(v) if v < 0 => b.error_at(
                &format!(
                    "port {:?}: static",
                    port.label.as_deref().unwrap_or_default()
                ),
                &format!("must be between 1 and 65535 (got {v})"),
                p.span(),
                diag,
            ),
            _ => dynamic.push(port),
        }
    }
    let network = ApiNetwork {
        mode: b.string("mode", diag),
        mbits: b.int("mbits", diag),
        device: b.string("device", diag),
        cidr: b.string("cidr", diag),
        ip: b.string("ip", diag),
        hostname: b.string("hostname", diag),
        dns: schema::single(&mut b, "dns", schema::DNS, diag),
        reserved_ports: (!reserved.is_empty()).then_some(reserved),
        dynamic_ports: (!dynamic.is_empty()).then_some(dynamic),
        ..Default::default()
    };
    b.finish(&[], &["cni"], diag);
    network
}

/// Labeled blocks as a list, each with its label as `Name`.
pub(crate) fn labeled_list(
    b: &mut Body<'_, '_>,
    ident: &str,
    fields: &[schema::Field],
    diag: &mut Diag,
) -> Option<Json> {
    let items: Vec<Json> = schema::labeled(b, ident, fields, "Name", diag)
        .into_iter()
        .map(|(_, obj)| Json::Object(obj))
        .collect();
    (!items.is_empty()).then_some(Json::Array(items))
}

/// The task's identities; the default one (unnamed or `default`) goes to `Identity`, as
/// Nomad's parser moves it for older agents.
fn identities(b: &mut Body<'_, '_>, diag: &mut Diag) -> (Option<Json>, Option<Json>) {
    let Some(Json::Array(mut all)) = schema::list(b, "identity", schema::IDENTITY, diag) else {
        return (None, None);
    };
    let default = all.iter().position(|i| {
        matches!(
            i.get("Name").and_then(Json::as_str),
            None | Some("") | Some("default")
        )
    });
    let identity = default.map(|i| all.remove(i));
    (identity, (!all.is_empty()).then_some(Json::Array(all)))
}

/// Nomad's defaults for a template that the parser fills in.
fn normalize_templates(templates: Json) -> Json {
    let Json::Array(mut items) = templates else {
        return templates;
    };
    for t in &mut items {
        let Some(obj) = t.as_object_mut() else {
            continue;
        };
        obj.entry("ChangeMode").or_insert(json!("restart"));
        obj.entry("Perms").or_insert(json!("0644"));
        obj.entry("Splay").or_insert(json!(5_000_000_000i64));
        obj.entry("ErrMissingKey").or_insert(json!(false));
        if let Some(script) = obj.get_mut("ChangeScript").and_then(Json::as_object_mut) {
            script.entry("Args").or_insert(json!([]));
            script.entry("Timeout").or_insert(json!(5_000_000_000i64));
            script.entry("FailOnError").or_insert(json!(false));
            script.entry("RunOnFirstRender").or_insert(json!(false));
        }
    }
    Json::Array(items)
}

/// Nomad's defaults for a `vault` block that the parser fills in.
pub(crate) fn normalize_vault(mut vault: Json) -> Json {
    if let Some(obj) = vault.as_object_mut() {
        obj.entry("Env").or_insert(json!(true));
        obj.entry("DisableFile").or_insert(json!(false));
        obj.entry("ChangeMode").or_insert(json!("restart"));
    }
    vault
}

/// `scaling "cpu"` and `scaling "mem"` blocks of a task (the vertical autoscaler's).
fn scaling_policies(b: &mut Body<'_, '_>, diag: &mut Diag) -> Option<Json> {
    let mut out = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for (label, mut obj) in schema::labeled(b, "scaling", schema::TASK_SCALING, "__label", diag) {
        obj.remove("__label");
        let label = label.to_lowercase();
        let kind = match label.as_str() {
            "cpu" => "vertical_cpu",
            "mem" => "vertical_mem",
            _ => {
                b.error_at(
                    "scaling",
                    "Invalid scaling policy name: scaling policy name must be \"cpu\" or \"mem\"",
                    None,
                    diag,
                );
                continue;
            }
        };
        if seen.contains(&label) {
            b.error_at(
                "scaling",
                &format!(
                    "Duplicate scaling {label:?} block: Only one scaling {label} block is allowed."
                ),
                None,
                diag,
            );
            continue;
        }
        seen.push(label);
        match obj.get("Type").and_then(Json::as_str) {
            None | Some("") => {
                obj.insert("Type".into(), json!(kind));
            }
            Some(t) if t == kind => {}
            Some(t) => {
                b.error_at(
                    "scaling",
                    &format!("Invalid scaling policy type: Invalid policy type, expected {t:?} but found {kind:?}"),
                    None,
                    diag,
                );
                continue;
            }
        }
        out.push(Json::Object(obj));
    }
    (!out.is_empty()).then_some(Json::Array(out))
}

//! The `task` block of a Nomad job file: driver config, env, resources and networks.

use super::body::{BlockRef, Body, Diag};
use super::eval::Value;
use super::job::{affinities_of, constraints_of, decode_restart, to_map};
use crate::nomad_json::model::*;

/// Nomad task arguments Caravan does not support yet.
const TASK_UNSUPPORTED_ATTRS: &[&str] = &[];
/// Nomad task blocks Caravan does not support yet.
const TASK_UNSUPPORTED_BLOCKS: &[&str] = &[
    "service",
    "artifact",
    "template",
    "vault",
    "consul",
    "volume_mount",
    "csi_plugin",
    "scaling",
    "identity",
    "action",
    "schedule",
    "secret",
];

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
    let task = ApiTask {
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
        ..Default::default()
    };
    b.finish(TASK_UNSUPPORTED_ATTRS, TASK_UNSUPPORTED_BLOCKS, diag);
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
        ..Default::default()
    };
    b.finish(&["iops", "secrets"], &["numa"], diag);
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
            ignore_collision: None,
        };
        pb.finish(&["ignore_collision"], &[], diag);
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
        reserved_ports: (!reserved.is_empty()).then_some(reserved),
        dynamic_ports: (!dynamic.is_empty()).then_some(dynamic),
        ..Default::default()
    };
    b.finish(&[], &["dns", "cni"], diag);
    network
}

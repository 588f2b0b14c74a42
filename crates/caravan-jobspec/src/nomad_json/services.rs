//! The `Services` of a group or task and their `Checks`, both ways.
//!
//! A service block is registered in Caravan's own registry whatever its provider: a
//! `consul` service (Nomad's default provider) is served there too, with a warning at
//! submit. What needs Consul itself (Connect, tagged addresses, DNS weights, a Consul
//! cluster or service kind, a workload identity for Consul) is refused by name.

use super::fields::{take_bool, take_int, take_str, take_str_list, take_str_map};
use super::to_proto::{Conversion, is_meaningful as meaningful};
use crate::error::join_path as join;
use caravan_proto::{CheckHeaderValues, CheckRestart, Service, ServiceCheck};
use serde_json::{Map, Value, json};

/// Service fields that only mean something to Consul, refused by name with why.
const SERVICE_REFUSED: &[(&str, &str, &str)] = &[
    (
        "Connect",
        "connect",
        "Caravan has no Consul Connect service mesh",
    ),
    (
        "TaggedAddresses",
        "tagged_addresses",
        "Caravan's registry keeps one address per service instance",
    ),
    (
        "Weights",
        "weights",
        "Caravan's registry serves no DNS, which is what Consul's weights are for",
    ),
    (
        "Identity",
        "identity",
        "Caravan does not issue workload identities for services",
    ),
    (
        "Cluster",
        "cluster",
        "Caravan registers services in its own registry, not a Consul cluster",
    ),
    ("Kind", "kind", "Caravan has no Consul Connect gateways"),
];

/// Check fields Caravan does not honour, refused by name with why.
const CHECK_REFUSED: &[(&str, &str, &str)] = &[
    (
        "Expose",
        "expose",
        "Caravan has no Consul Connect proxy to expose a check through",
    ),
    (
        "Notes",
        "notes",
        "Caravan's registry keeps no notes, which are for Consul's UI",
    ),
    (
        "Advertise",
        "advertise",
        "Caravan's checks dial the service's own address",
    ),
];

/// A `Services` list (of a group when `task` is `None`) as Caravan's services.
pub(super) fn services_to_proto(
    value: Option<Value>,
    base: &str,
    conv: &mut Conversion,
) -> Vec<Service> {
    let items = match value {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Array(items)) => items,
        Some(other) => {
            conv.err(
                join(base, "Services"),
                format!("must be a list (got {other})"),
            );
            return Vec::new();
        }
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let path = join(base, &format!("service[{i}]"));
        let Value::Object(mut f) = item else {
            conv.err(path, "must be an object");
            continue;
        };
        for (json_name, hcl, why) in SERVICE_REFUSED {
            if f.remove(*json_name).as_ref().is_some_and(meaningful) {
                conv.err(
                    path.clone(),
                    format!("{hcl} ({json_name}) is not supported by Caravan: {why}"),
                );
            }
        }
        // Nomad's API fills these in itself; they carry nothing a user wrote.
        for filled in ["Namespace", "ID", "CheckIDs"] {
            f.remove(filled);
        }
        let service_restart = take_restart(&mut f, &path, conv);
        let checks = take_checks(&mut f, &path, service_restart.as_ref(), conv);
        let mut service = Service {
            name: take_str(&mut f, "Name", &path, conv),
            task_name: take_str(&mut f, "TaskName", &path, conv),
            port_label: take_port(&mut f, &path, conv),
            address_mode: take_str(&mut f, "AddressMode", &path, conv),
            address: take_str(&mut f, "Address", &path, conv),
            enable_tag_override: take_bool(&mut f, "EnableTagOverride", &path, conv),
            tags: take_str_list(&mut f, "Tags", &path, conv),
            canary_tags: take_str_list(&mut f, "CanaryTags", &path, conv),
            meta: take_str_map(&mut f, "Meta", &path, conv),
            canary_meta: take_str_map(&mut f, "CanaryMeta", &path, conv),
            checks,
            provider: take_str(&mut f, "Provider", &path, conv),
            on_update: take_str(&mut f, "OnUpdate", &path, conv),
        };
        // Checks inherit the service's on_update, as Nomad's API canonicalizes them.
        for check in &mut service.checks {
            if check.on_update.is_empty() {
                check.on_update.clone_from(&service.on_update);
            }
        }
        for (unknown, v) in f {
            if meaningful(&v) {
                conv.err(join(&path, &unknown), "is not a field of a service");
            }
        }
        out.push(service);
    }
    out
}

/// A port given as a label or a number (`port = 8080` in HCL arrives as a string).
fn take_port(f: &mut Map<String, Value>, path: &str, conv: &mut Conversion) -> String {
    match f.remove("PortLabel") {
        Some(Value::Number(n)) => n.to_string(),
        Some(other) => {
            f.insert("PortLabel".into(), other);
            take_str(f, "PortLabel", path, conv)
        }
        None => String::new(),
    }
}

fn take_restart(
    f: &mut Map<String, Value>,
    path: &str,
    conv: &mut Conversion,
) -> Option<CheckRestart> {
    let path = join(path, "check_restart");
    match f.remove("CheckRestart") {
        None | Some(Value::Null) => None,
        Some(Value::Object(mut r)) => {
            let restart = CheckRestart {
                limit: take_int(&mut r, "Limit", &path, conv),
                grace_ns: take_int(&mut r, "Grace", &path, conv),
                ignore_warnings: take_bool(&mut r, "IgnoreWarnings", &path, conv),
            };
            for (unknown, v) in r {
                if meaningful(&v) {
                    conv.err(join(&path, &unknown), "is not a field of check_restart");
                }
            }
            Some(restart)
        }
        Some(other) => {
            conv.err(path, format!("must be an object (got {other})"));
            None
        }
    }
}

/// Merges a service's `check_restart` under a check's own, as Nomad's API does: the
/// check's non-zero fields win.
fn merged_restart(
    service: Option<&CheckRestart>,
    check: Option<CheckRestart>,
) -> Option<CheckRestart> {
    match (service, check) {
        (None, c) => c,
        (Some(s), None) => Some(*s),
        (Some(s), Some(c)) => Some(CheckRestart {
            limit: if c.limit > 0 { c.limit } else { s.limit },
            grace_ns: if c.grace_ns > 0 {
                c.grace_ns
            } else {
                s.grace_ns
            },
            ignore_warnings: c.ignore_warnings || s.ignore_warnings,
        }),
    }
}

fn take_checks(
    f: &mut Map<String, Value>,
    path: &str,
    service_restart: Option<&CheckRestart>,
    conv: &mut Conversion,
) -> Vec<ServiceCheck> {
    let items = match f.remove("Checks") {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Array(items)) => items,
        Some(other) => {
            conv.err(
                join(path, "Checks"),
                format!("must be a list (got {other})"),
            );
            return Vec::new();
        }
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let path = join(path, &format!("check[{i}]"));
        let Value::Object(mut c) = item else {
            conv.err(path, "must be an object");
            continue;
        };
        for (json_name, hcl, why) in CHECK_REFUSED {
            if c.remove(*json_name).as_ref().is_some_and(meaningful) {
                conv.err(
                    path.clone(),
                    format!("{hcl} ({json_name}) is not supported by Caravan: {why}"),
                );
            }
        }
        c.remove("ID");
        let own_restart = take_restart(&mut c, &path, conv);
        let check = ServiceCheck {
            name: take_str(&mut c, "Name", &path, conv),
            r#type: take_str(&mut c, "Type", &path, conv).to_lowercase(),
            command: take_str(&mut c, "Command", &path, conv),
            args: take_str_list(&mut c, "Args", &path, conv),
            path: take_str(&mut c, "Path", &path, conv),
            protocol: take_str(&mut c, "Protocol", &path, conv),
            method: take_str(&mut c, "Method", &path, conv),
            body: take_str(&mut c, "Body", &path, conv),
            headers: take_headers(&mut c, &path, conv),
            tls_skip_verify: take_bool(&mut c, "TLSSkipVerify", &path, conv),
            port_label: take_str(&mut c, "PortLabel", &path, conv),
            address_mode: take_str(&mut c, "AddressMode", &path, conv),
            interval_ns: take_int(&mut c, "Interval", &path, conv),
            timeout_ns: take_int(&mut c, "Timeout", &path, conv),
            initial_status: take_str(&mut c, "InitialStatus", &path, conv),
            success_before_passing: take_int(&mut c, "SuccessBeforePassing", &path, conv),
            failures_before_critical: take_int(&mut c, "FailuresBeforeCritical", &path, conv),
            failures_before_warning: take_int(&mut c, "FailuresBeforeWarning", &path, conv),
            on_update: take_str(&mut c, "OnUpdate", &path, conv),
            task_name: take_str(&mut c, "TaskName", &path, conv),
            grpc_service: take_str(&mut c, "GRPCService", &path, conv),
            grpc_use_tls: take_bool(&mut c, "GRPCUseTLS", &path, conv),
            check_restart: merged_restart(service_restart, own_restart),
            expose: false,
            tls_server_name: take_str(&mut c, "TLSServerName", &path, conv),
        };
        for (unknown, v) in c {
            if meaningful(&v) {
                conv.err(join(&path, &unknown), "is not a field of a check");
            }
        }
        out.push(check);
    }
    out
}

/// `Header`: `{"Name": ["value", …]}`.
fn take_headers(
    c: &mut Map<String, Value>,
    path: &str,
    conv: &mut Conversion,
) -> std::collections::BTreeMap<String, CheckHeaderValues> {
    let mut out = std::collections::BTreeMap::new();
    match c.remove("Header") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (name, values) in map {
                let hpath = join(&join(path, "header"), &name);
                let values = match values {
                    Value::Null => Vec::new(),
                    Value::String(s) => vec![s],
                    Value::Array(items) => items
                        .into_iter()
                        .filter_map(|v| match v {
                            Value::String(s) => Some(s),
                            other => {
                                conv.err(hpath.clone(), format!("must be strings (got {other})"));
                                None
                            }
                        })
                        .collect(),
                    other => {
                        conv.err(hpath, format!("must be a list of strings (got {other})"));
                        continue;
                    }
                };
                out.insert(name, CheckHeaderValues { values });
            }
        }
        Some(other) => conv.err(
            join(path, "header"),
            format!("must be an object of header lists (got {other})"),
        ),
    }
    out
}

/// Services in Nomad's JSON (`null` when there are none, as Nomad renders them).
pub(super) fn services_to_api(services: &[Service]) -> Option<Value> {
    if services.is_empty() {
        return None;
    }
    Some(Value::Array(services.iter().map(service_to_api).collect()))
}

fn service_to_api(s: &Service) -> Value {
    json!({
        "Name": s.name,
        "TaskName": s.task_name,
        "PortLabel": s.port_label,
        "AddressMode": s.address_mode,
        "Address": s.address,
        "EnableTagOverride": s.enable_tag_override,
        "Tags": list_or_null(&s.tags),
        "CanaryTags": list_or_null(&s.canary_tags),
        "Meta": map_or_null(&s.meta),
        "CanaryMeta": map_or_null(&s.canary_meta),
        "Checks": if s.checks.is_empty() { Value::Null } else {
            Value::Array(s.checks.iter().map(check_to_api).collect())
        },
        "Provider": s.provider,
        "OnUpdate": s.on_update,
        "Connect": null,
        "TaggedAddresses": null,
        "Identity": null,
        "Weights": null,
        "Cluster": "",
        "Kind": "",
    })
}

fn check_to_api(c: &ServiceCheck) -> Value {
    let header: Map<String, Value> = c
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), json!(v.values)))
        .collect();
    json!({
        "Name": c.name,
        "Type": c.r#type,
        "Command": c.command,
        "Args": list_or_null(&c.args),
        "Path": c.path,
        "Protocol": c.protocol,
        "Method": c.method,
        "Body": c.body,
        "Header": if header.is_empty() { Value::Null } else { Value::Object(header) },
        "TLSSkipVerify": c.tls_skip_verify,
        "TLSServerName": c.tls_server_name,
        "PortLabel": c.port_label,
        "AddressMode": c.address_mode,
        "Interval": c.interval_ns,
        "Timeout": c.timeout_ns,
        "InitialStatus": c.initial_status,
        "SuccessBeforePassing": c.success_before_passing,
        "FailuresBeforeCritical": c.failures_before_critical,
        "FailuresBeforeWarning": c.failures_before_warning,
        "OnUpdate": c.on_update,
        "TaskName": c.task_name,
        "GRPCService": c.grpc_service,
        "GRPCUseTLS": c.grpc_use_tls,
        "Expose": false,
        "CheckRestart": c.check_restart.map(|r| json!({
            "Limit": r.limit,
            "Grace": r.grace_ns,
            "IgnoreWarnings": r.ignore_warnings,
        })),
    })
}

fn list_or_null(items: &[String]) -> Value {
    if items.is_empty() {
        Value::Null
    } else {
        json!(items)
    }
}

fn map_or_null(map: &std::collections::BTreeMap<String, String>) -> Value {
    if map.is_empty() {
        Value::Null
    } else {
        json!(map)
    }
}

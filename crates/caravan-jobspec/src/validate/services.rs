//! A group's and its tasks' `service` blocks and their checks, with Nomad's validation
//! texts (`nomad/structs/services.go`, `TaskGroup.validateServices`, `validateServices`).
//!
//! Caravan serves every provider from its own registry and runs every check type itself,
//! so Consul's wider rules apply to both providers (grpc and script checks, check
//! thresholds); what needs Consul (Connect, `expose`) is refused.

use super::{Errors, task_base};
use crate::error::join_path as join;
use caravan_proto::{Service, ServiceCheck, TaskGroup};
use regex::Regex;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

/// The providers a service may name.
const PROVIDER_NOMAD: &str = "nomad";
pub const PROVIDER_CONSUL: &str = "consul";

const CHECK_TYPES: &[&str] = &["http", "tcp", "grpc", "script"];
/// Why a check's TLS settings are refused.
const NO_TLS: &str =
    "is not supported by Caravan: its http and grpc checks dial in plain text, without TLS";
const MIN_CHECK_NS: i64 = 1_000_000_000;
const ON_UPDATE: &[&str] = &["require_healthy", "ignore_warnings", "ignore"];
const HTTP_METHODS: &[&str] = &[
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE",
];

/// RFC 1123 labels, as Nomad checks a service name once `${…}` is set aside.
static NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?i:[a-z0-9]|[a-z0-9][a-z0-9\-]{0,61}[a-z0-9])$").expect("static regex")
});
static INTERPOLATION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\$\{[^}]*\}").expect("static regex"));

/// Where a service is written.
#[derive(Clone, Copy, PartialEq)]
enum Level<'a> {
    Group,
    Task(&'a str),
}

/// Checks every service of the group and of its tasks.
pub(super) fn check(tg: &TaskGroup, base: &str, e: &mut Errors) {
    let ports = port_labels(tg);
    let tasks: BTreeSet<&str> = tg.tasks.iter().map(|t| t.name.as_str()).collect();
    let mut unique: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    let mut providers = BTreeSet::new();
    for (i, s) in tg.services.iter().enumerate() {
        let path = join(base, &format!("service[{i}]"));
        service(s, &path, Level::Group, &ports, &tasks, e);
        *unique
            .entry(("group".into(), s.name.clone(), s.port_label.clone()))
            .or_default() += 1;
        providers.insert(s.provider.as_str());
    }
    for (ti, task) in tg.tasks.iter().enumerate() {
        let tbase = task_base(base, task, ti);
        for (i, s) in task.services.iter().enumerate() {
            let path = join(&tbase, &format!("service[{i}]"));
            service(s, &path, Level::Task(&task.name), &ports, &tasks, e);
            *unique
                .entry((task.name.clone(), s.name.clone(), s.port_label.clone()))
                .or_default() += 1;
            providers.insert(s.provider.as_str());
        }
    }
    let duplicates: Vec<String> = unique
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|((task, name, port), _)| {
            if port.is_empty() {
                format!("{task}->{name}")
            } else {
                format!("{task}->{name}:{port}")
            }
        })
        .collect();
    if !duplicates.is_empty() {
        e.on(
            base,
            "service",
            format!("Services are not unique: {}", duplicates.join(", ")),
        );
    }
    if providers.len() > 1 {
        e.on(
            base,
            "service",
            "Multiple service providers used: task group services must use the same provider",
        );
    }
}

/// The group's port labels (of its networks and of its tasks' legacy networks).
fn port_labels(tg: &TaskGroup) -> BTreeSet<&str> {
    tg.networks
        .iter()
        .chain(
            tg.tasks
                .iter()
                .filter_map(|t| t.resources.as_ref())
                .flat_map(|r| r.networks.iter()),
        )
        .flat_map(|n| n.reserved_ports.iter().chain(n.dynamic_ports.iter()))
        .map(|p| p.label.as_str())
        .collect()
}

fn service(
    s: &Service,
    path: &str,
    level: Level<'_>,
    ports: &BTreeSet<&str>,
    tasks: &BTreeSet<&str>,
    e: &mut Errors,
) {
    let stripped = INTERPOLATION.replace_all(&s.name, "ENV-VAR");
    if !NAME.is_match(&stripped) {
        e.on(
            path,
            "name",
            format!(
                "Service name must be valid per RFC 1123 and can contain only alphanumeric \
                 characters or dashes and must be no longer than 63 characters: {:?}",
                s.name
            ),
        );
    }
    match s.address_mode.as_str() {
        "" | "auto" => {}
        "host" | "driver" if !s.address.is_empty() => e.on(
            path,
            "address_mode",
            "Service address_mode must be \"auto\" if address is set",
        ),
        "host" => {}
        "driver" if level == Level::Group => e.on(
            path,
            "address_mode",
            format!(
                "service {:?} cannot use address_mode=\"driver\", only services defined in a \
                 \"task\" block can use this mode",
                s.name
            ),
        ),
        "driver" => {}
        "alloc" | "alloc_ipv6" => e.on(path, "address_mode", no_alloc_address(&s.address_mode)),
        other => e.on(
            path,
            "address_mode",
            format!(
                "Service address_mode must be \"auto\", \"host\", or \"driver\"; not {other:?}"
            ),
        ),
    }
    if !s.on_update.is_empty() && !ON_UPDATE.contains(&s.on_update.as_str()) {
        e.on(
            path,
            "on_update",
            format!(
                "Service on_update must be \"require_healthy\", \"ignore_warnings\", or \"ignore\"; not {:?}",
                s.on_update
            ),
        );
    }
    if ![PROVIDER_CONSUL, PROVIDER_NOMAD].contains(&s.provider.as_str()) {
        e.on(
            path,
            "provider",
            format!(
                "Service provider must be \"consul\", or \"nomad\"; not {:?}",
                s.provider
            ),
        );
    }
    if let Level::Task(task) = level
        && !s.task_name.is_empty()
        && s.task_name != task
    {
        e.on(
            path,
            "task",
            format!(
                "Service {} is invalid: may only specify task the service belongs to, got {:?}",
                s.name, s.task_name
            ),
        );
    }
    if level == Level::Group && !s.task_name.is_empty() && !tasks.contains(s.task_name.as_str()) {
        e.on(
            path,
            "task",
            format!(
                "Service {} refers to non-existent task {}",
                s.name, s.task_name
            ),
        );
    }
    port(
        &s.port_label,
        &s.name,
        &s.address_mode,
        path,
        "port",
        ports,
        e,
    );
    let mut names = BTreeSet::new();
    for (i, c) in s.checks.iter().enumerate() {
        let cpath = join(path, &format!("check[{i}]"));
        if !names.insert(c.name.as_str()) {
            e.on(&cpath, "name", format!("check {:?} is duplicate", c.name));
        }
        service_check(c, s, &cpath, level, ports, tasks, e);
    }
}

fn no_alloc_address(mode: &str) -> String {
    format!(
        "address_mode {mode:?} is not supported by Caravan: its groups share the host's \
         network, so an allocation has no address of its own"
    )
}

/// A port label must name a port of the group; a number is only for `driver` addresses.
fn port(
    label: &str,
    service: &str,
    mode: &str,
    path: &str,
    field: &str,
    ports: &BTreeSet<&str>,
    e: &mut Errors,
) {
    if label.is_empty() || ports.contains(label) {
        return;
    }
    if let Ok(n) = label.parse::<i64>() {
        if mode != "driver" {
            e.on(
                path,
                field,
                format!("port {n} is a number, which needs address_mode=\"driver\""),
            );
        } else if !(1..=65535).contains(&n) {
            e.on(path, field, format!("invalid numeric port {n}"));
        }
        return;
    }
    e.on(
        path,
        field,
        format!("port label {label:?} referenced by services {service} does not exist"),
    );
}

fn service_check(
    c: &ServiceCheck,
    s: &Service,
    path: &str,
    level: Level<'_>,
    ports: &BTreeSet<&str>,
    tasks: &BTreeSet<&str>,
    e: &mut Errors,
) {
    let kind = c.r#type.to_lowercase();
    if !CHECK_TYPES.contains(&kind.as_str()) {
        e.on(
            path,
            "type",
            format!(
                "invalid check type ({kind:?}), must be one of {}",
                CHECK_TYPES.join(", ")
            ),
        );
    }
    match kind.as_str() {
        "http" => {
            if c.path.is_empty() {
                e.on(path, "path", "http type must have http path");
            } else if c.path.contains("://") || !c.path.starts_with('/') {
                e.on(path, "path", "http type must have relative http path");
            }
            if !c.method.is_empty() && !HTTP_METHODS.contains(&c.method.as_str()) {
                e.on(
                    path,
                    "method",
                    format!("method type {:?} not supported in http check", c.method),
                );
            }
            match c.protocol.as_str() {
                "" | "http" => {}
                "https" => e.on(path, "protocol", format!("\"https\" {NO_TLS}")),
                other => e.on(
                    path,
                    "protocol",
                    format!("protocol must be \"http\" or \"https\"; not {other:?}"),
                ),
            }
        }
        "script" => {
            if c.command.is_empty() {
                e.on(path, "command", "script type must have a valid script path");
            }
            if level == Level::Group && s.task_name.is_empty() && c.task_name.is_empty() {
                e.on(
                    path,
                    "task",
                    format!(
                        "Service {} or Check {} must specify task parameter",
                        s.name, c.name
                    ),
                );
            }
        }
        _ => {}
    }
    if c.interval_ns == 0 {
        e.on(
            path,
            "interval",
            "missing required value interval. Interval cannot be less than 1s",
        );
    } else if c.interval_ns < MIN_CHECK_NS {
        e.on(
            path,
            "interval",
            format!(
                "interval ({}) cannot be lower than 1s",
                crate::duration::format_duration(c.interval_ns)
            ),
        );
    }
    if c.timeout_ns == 0 {
        e.on(
            path,
            "timeout",
            "missing required value timeout. Timeout cannot be less than 1s",
        );
    } else if c.timeout_ns < MIN_CHECK_NS {
        e.on(
            path,
            "timeout",
            format!(
                "timeout ({}) is lower than required minimum timeout 1s",
                crate::duration::format_duration(c.timeout_ns)
            ),
        );
    }
    if !["", "passing", "warning", "critical"].contains(&c.initial_status.as_str()) {
        e.on(
            path,
            "initial_status",
            format!(
                "invalid initial check state ({}), must be one of \"passing\", \"warning\", \"critical\" or empty",
                c.initial_status
            ),
        );
    }
    match c.address_mode.as_str() {
        "" | "host" => {}
        "driver" if level == Level::Group => e.on(
            path,
            "address_mode",
            format!(
                "Check {:?} invalid: cannot use address_mode=\"driver\", only checks defined in a \
                 \"task\" service block can use this mode",
                c.name
            ),
        ),
        "driver" => {}
        "auto" => e.on(
            path,
            "address_mode",
            "invalid address_mode \"auto\" - auto only valid for services",
        ),
        "alloc" | "alloc_ipv6" => e.on(path, "address_mode", no_alloc_address(&c.address_mode)),
        other => e.on(
            path,
            "address_mode",
            format!("invalid address_mode {other:?}"),
        ),
    }
    if !c.on_update.is_empty() && !ON_UPDATE.contains(&c.on_update.as_str()) {
        e.on(
            path,
            "on_update",
            format!(
                "on_update must be \"require_healthy\", \"ignore_warnings\", or \"ignore\"; got {:?}",
                c.on_update
            ),
        );
    }
    for (name, v) in [
        ("success_before_passing", c.success_before_passing),
        ("failures_before_critical", c.failures_before_critical),
        ("failures_before_warning", c.failures_before_warning),
    ] {
        if v < 0 {
            e.on(path, name, format!("{name} must be non-negative"));
        } else if v > 0 && kind == "script" {
            e.on(
                path,
                name,
                format!("{name} not supported for check of type \"script\""),
            );
        }
    }
    for (set, field) in [
        (c.tls_skip_verify, "tls_skip_verify"),
        (!c.tls_server_name.is_empty(), "tls_server_name"),
        (c.grpc_use_tls, "grpc_use_tls"),
    ] {
        if set {
            e.on(path, field, NO_TLS);
        }
    }
    if c.expose {
        e.on(
            path,
            "",
            "expose (Expose) is not supported by Caravan: Caravan has no Consul Connect proxy to expose a check through",
        );
    }
    if let Some(r) = &c.check_restart {
        if c.on_update == "ignore" {
            e.on(
                path,
                "check_restart",
                "on_update value \"ignore\" is not compatible with check_restart",
            );
        }
        if !r.ignore_warnings && c.on_update == "ignore_warnings" {
            e.on(
                path,
                "check_restart",
                "on_update value \"ignore_warnings\" not supported with check_restart ignore_warnings value \"false\"",
            );
        }
        if r.limit < 0 {
            e.on(
                path,
                "check_restart.limit",
                format!(
                    "limit must be greater than or equal to 0 but found {}",
                    r.limit
                ),
            );
        }
        if r.grace_ns < 0 {
            e.on(
                path,
                "check_restart.grace",
                format!(
                    "grace period must be greater than or equal to 0 but found {}",
                    r.grace_ns
                ),
            );
        }
    }
    match level {
        Level::Task(task) if !c.task_name.is_empty() && c.task_name != task => e.on(
            path,
            "task",
            format!(
                "Check {} is invalid: may only specify task the check belongs to, got {:?}",
                c.name, c.task_name
            ),
        ),
        Level::Group if !c.task_name.is_empty() && !tasks.contains(c.task_name.as_str()) => e.on(
            path,
            "task",
            format!(
                "Check {} invalid: refers to non-existent task {}",
                c.name, c.task_name
            ),
        ),
        _ => {}
    }
    if kind != "script" {
        let effective = if c.port_label.is_empty() {
            &s.port_label
        } else {
            &c.port_label
        };
        if effective.is_empty() {
            e.on(
                path,
                "port",
                format!(
                    "Check {} invalid: check requires a port but neither check nor service {:?} have a port",
                    c.name, s.name
                ),
            );
        } else if !c.port_label.is_empty() {
            port(
                &c.port_label,
                &s.name,
                &c.address_mode,
                path,
                "port",
                ports,
                e,
            );
        }
    }
}

/// A warning for each service that names Consul (Nomad's default provider): Caravan
/// serves it from its own registry, where Consul's clients will not look.
pub(super) fn consul_warnings(tg: &TaskGroup, base: &str) -> Vec<String> {
    let group = tg
        .services
        .iter()
        .enumerate()
        .map(|(i, s)| (join(base, &format!("service[{i}]")), s));
    let tasks = tg.tasks.iter().enumerate().flat_map(|(ti, t)| {
        let tbase = task_base(base, t, ti);
        t.services
            .iter()
            .enumerate()
            .map(move |(i, s)| (join(&tbase, &format!("service[{i}]")), s))
    });
    group
        .chain(tasks)
        .filter(|(_, s)| s.provider == PROVIDER_CONSUL)
        .map(|(path, s)| {
            format!(
                "{path}: service {:?} has provider \"consul\" (the default): Caravan has no Consul \
                 integration and registers it in its own service registry (/v1/service/{}, \
                 caravan service info {}); set provider = \"nomad\" to say so",
                s.name, s.name, s.name
            )
        })
        .collect()
}

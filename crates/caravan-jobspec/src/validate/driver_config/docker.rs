//! The `docker` driver's config: every option of Nomad's docker driver,
//! those Caravan honours with their types, the others refused with the
//! reason (docs/drivers.md lists both), and the checks a schema cannot
//! make: ports the group defines, `ports` with `port_map`, network modes,
//! mount types, and relative bind sources that stay in the task dir.

use std::collections::BTreeSet;

use caravan_proto::{Task, TaskGroup};
use prost_types::Struct;

use super::super::Errors;
use super::schema::{Field, Schema, Ty, as_map, as_string, as_strings, no, objects, opt, req};

const NETWORKS: &str = "user-defined networks and per-container addresses are not supported: network_mode is bridge, host or none";
const NAMESPACES: &str = "the container's namespaces are not configurable";

const AUTH: &[Field] = &[
    opt("username", Ty::Str),
    opt("password", Ty::Str),
    opt("email", Ty::Str),
    opt("server_address", Ty::Str),
];

const BIND_OPTIONS: &[Field] = &[opt("propagation", Ty::Str)];
const TMPFS_OPTIONS: &[Field] = &[opt("size", Ty::Num), opt("mode", Ty::Num)];
const MOUNT: &[Field] = &[
    opt("type", Ty::Str),
    opt("target", Ty::Str),
    opt("source", Ty::Str),
    opt("readonly", Ty::Bool),
    opt("bind_options", Ty::Block(BIND_OPTIONS)),
    opt("tmpfs_options", Ty::Block(TMPFS_OPTIONS)),
    no(
        "volume_options",
        "named Docker volumes are not supported: use a bind or tmpfs mount",
    ),
];
const HEALTHCHECKS: &[Field] = &[opt("disable", Ty::Bool)];

/// The docker driver's schema.
pub const SCHEMA: Schema = Schema {
    driver: "docker",
    fields: &[
        req("image", Ty::Str),
        opt("args", Ty::StrList),
        opt("command", Ty::Str),
        opt("entrypoint", Ty::StrList),
        opt("work_dir", Ty::Str),
        opt("labels", Ty::StrMap),
        opt("hostname", Ty::Str),
        opt("force_pull", Ty::Bool),
        opt("image_pull_timeout", Ty::Duration),
        // Caravan pulls without credentials, so there is no failure of
        // them to soften: accepted, with nothing to do.
        opt("auth_soft_fail", Ty::Bool),
        opt("ports", Ty::StrList),
        opt("port_map", Ty::NumMap),
        opt("network_mode", Ty::Str),
        opt("volumes", Ty::StrList),
        opt("mount", Ty::Blocks(MOUNT)),
        opt("mounts", Ty::Blocks(MOUNT)),
        opt("cpu_hard_limit", Ty::Bool),
        opt("cpu_cfs_period", Ty::Num),
        opt("memory_hard_limit", Ty::Num),
        opt("init", Ty::Bool),
        opt("dns_servers", Ty::StrList),
        opt("dns_search_domains", Ty::StrList),
        opt("dns_options", Ty::StrList),
        opt("extra_hosts", Ty::StrList),
        opt("group_add", Ty::StrList),
        opt("healthchecks", Ty::Block(HEALTHCHECKS)),
        opt("interactive", Ty::Bool),
        opt("tty", Ty::Bool),
        opt("oom_score_adj", Ty::Num),
        opt("pids_limit", Ty::Num),
        opt("readonly_rootfs", Ty::Bool),
        opt("shm_size", Ty::Num),
        opt("sysctl", Ty::StrMap),
        opt("ulimit", Ty::StrMap),
        // `auth` is type-checked for a clear error, then refused.
        Field {
            unsupported: Some(
                "registry credentials are not supported: images are pulled anonymously or built on the node",
            ),
            ..opt("auth", Ty::Block(AUTH))
        },
        no("advertise_ipv6_address", NETWORKS),
        no("ipv4_address", NETWORKS),
        no("ipv6_address", NETWORKS),
        no("mac_address", NETWORKS),
        no("network_aliases", NETWORKS),
        no(
            "cap_add",
            "Linux capabilities are not configurable (the client has no allow_caps list)",
        ),
        no(
            "cap_drop",
            "Linux capabilities are not configurable (the client has no allow_caps list)",
        ),
        no("cgroupns", NAMESPACES),
        no("ipc_mode", NAMESPACES),
        no("pid_mode", NAMESPACES),
        no("uts_mode", NAMESPACES),
        no("userns_mode", NAMESPACES),
        no(
            "container_exists_attempts",
            "a container left with the task's name is removed once, not retried",
        ),
        no(
            "cpuset_cpus",
            "cores are pinned by the task's resources.cores",
        ),
        no("devices", "host devices are not passed to containers"),
        no("isolation", "Windows isolation modes are not supported"),
        no(
            "load",
            "images are not loaded from artifacts (artifacts are not supported)",
        ),
        no(
            "logging",
            "the container's output always goes to the task's log files (alloc logs)",
        ),
        no(
            "privileged",
            "privileged containers are not allowed (Nomad's allow_privileged, off by default)",
        ),
        no(
            "runtime",
            "the daemon's default runtime is used (no allow_runtimes on the client)",
        ),
        no("security_opt", "security options are not configurable"),
        no("storage_opt", "storage driver options are not configurable"),
        no(
            "volume_driver",
            "volume drivers are not supported: use bind or tmpfs mounts",
        ),
    ],
};

/// The port labels a group and its tasks define.
fn port_labels(group: &TaskGroup) -> BTreeSet<&str> {
    let nets = group.networks.iter().chain(
        group
            .tasks
            .iter()
            .flat_map(|t| t.resources.iter().flat_map(|r| r.networks.iter())),
    );
    nets.flat_map(|n| n.reserved_ports.iter().chain(n.dynamic_ports.iter()))
        .map(|p| p.label.as_str())
        .collect()
}

/// Whether a relative path leaves the directory it is relative to.
fn escapes(rel: &str) -> bool {
    let mut depth: i64 = 0;
    for part in rel.split('/') {
        match part {
            "" | "." => {}
            ".." => depth -= 1,
            _ => depth += 1,
        }
        if depth < 0 {
            return true;
        }
    }
    false
}

/// What the schema cannot check.
pub fn check_more(group: &TaskGroup, _task: &Task, config: &Struct, path: &str, e: &mut Errors) {
    let get = |k: &str| config.fields.get(k);
    group_network_options(group, config, path, e);
    let labels = port_labels(group);
    if let Some(ports) = get("ports") {
        for (i, label) in as_strings(ports).iter().enumerate() {
            if !labels.contains(label.as_str()) {
                e.at(
                    path,
                    &format!("ports[{i}]"),
                    format!("port label {label:?} is not defined in the group's network"),
                );
            }
        }
        if get("port_map").is_some() {
            e.at(
                path,
                "port_map",
                "use of port_map and ports together is not allowed: map ports with the network block's `to`",
            );
        }
    }
    if let Some(map) = get("port_map") {
        for (label, port) in as_map(map) {
            let n = as_string(port).and_then(|p| p.parse::<f64>().ok());
            if !n.is_some_and(|n| n.fract() == 0.0 && (1.0..=65535.0).contains(&n)) {
                e.at(
                    path,
                    &format!("port_map.{label}"),
                    "expected a port between 1 and 65535",
                );
            }
        }
    }
    if let Some(mode) = get("network_mode").and_then(as_string)
        && !matches!(mode.as_str(), "" | "bridge" | "default" | "host" | "none")
    {
        e.at(
            path,
            "network_mode",
            format!("{mode:?} is not supported: {NETWORKS}"),
        );
    }
    if let Some(volumes) = get("volumes") {
        for (i, v) in as_strings(volumes).iter().enumerate() {
            let parts: Vec<&str> = v.split(':').collect();
            let field = format!("volumes[{i}]");
            match parts.as_slice() {
                [source, target] | [source, target, "ro" | "rw"] => {
                    if !target.starts_with('/') {
                        e.at(
                            path,
                            &field,
                            format!("{v:?}: the target must be an absolute path"),
                        );
                    }
                    if !source.starts_with('/') && escapes(source) {
                        e.at(
                            path,
                            &field,
                            format!("{v:?}: the relative source leaves the task directory"),
                        );
                    }
                }
                [_, _, mode] => e.at(
                    path,
                    &field,
                    format!("{v:?}: unknown mode {mode:?} (ro or rw)"),
                ),
                _ => e.at(
                    path,
                    &field,
                    format!("{v:?}: expected source:target[:ro|rw]"),
                ),
            }
        }
    }
    for key in ["mount", "mounts"] {
        let Some(blocks) = get(key).and_then(|v| v.kind.as_ref()).and_then(objects) else {
            continue;
        };
        for (i, m) in blocks.into_iter().enumerate() {
            let at = format!("{key}[{i}]");
            let field = |k: &str| m.fields.get(k).and_then(as_string);
            let ty = field("type").unwrap_or_else(|| "volume".into());
            match ty.as_str() {
                "bind" => match field("source") {
                    None => e.at(path, &format!("{at}.source"), "required for a bind mount"),
                    Some(s) if !s.starts_with('/') && escapes(&s) => e.at(
                        path,
                        &format!("{at}.source"),
                        format!("{s:?}: the relative source leaves the task directory"),
                    ),
                    Some(_) => {}
                },
                "tmpfs" => {}
                "volume" => e.at(
                    path,
                    &format!("{at}.type"),
                    "named Docker volumes are not supported: use type = \"bind\" or \"tmpfs\"",
                ),
                other => e.at(
                    path,
                    &format!("{at}.type"),
                    format!("unknown mount type {other:?} (bind or tmpfs)"),
                ),
            }
            if field("target").is_none_or(|t| !t.starts_with('/')) {
                e.at(
                    path,
                    &format!("{at}.target"),
                    "an absolute path is required",
                );
            }
        }
    }
    if let Some(ulimits) = get("ulimit") {
        for (name, v) in as_map(ulimits) {
            let ok = as_string(v).is_some_and(|l| {
                let mut parts = l.splitn(2, ':');
                parts.all(|p| p.trim().parse::<i64>().is_ok())
            });
            if !ok {
                e.at(
                    path,
                    &format!("ulimit.{name}"),
                    "expected \"soft\" or \"soft:hard\" numbers",
                );
            }
        }
    }
}

/// The options that fight the group's network: a task that joins a
/// `bridge`/`none` group network (no `network_mode` of its own) shares the
/// infra container's namespace, where Docker refuses a hostname or DNS
/// settings of the task's own; and the group's `dns` block writes the
/// task's resolv.conf, which the driver's DNS options would also set.
fn group_network_options(group: &TaskGroup, config: &Struct, path: &str, e: &mut Errors) {
    let net = group.networks.first();
    let set = |k: &str| {
        config.fields.get(k).is_some_and(|v| match as_string(v) {
            Some(s) => !s.is_empty(),
            None => !as_strings(v).is_empty(),
        })
    };
    let own_mode = config
        .fields
        .get("network_mode")
        .and_then(as_string)
        .is_some_and(|m| !m.is_empty());
    let group_ns = super::super::group_network::joined_by_docker(net);
    let joined = !own_mode && group_ns;
    // A task of its own network keeps its own hostname: the group's would
    // silently miss it unless it names one itself.
    if own_mode && group_ns && net.is_some_and(|n| !n.hostname.is_empty()) && !set("hostname") {
        e.at(
            path,
            "network_mode",
            "keeps the task out of the group's bridge/none network, so the group network's \
             hostname cannot reach it: leave network_mode unset to join the group's network, \
             or set the task's own hostname",
        );
    }
    for key in [
        "hostname",
        "dns_servers",
        "dns_search_domains",
        "dns_options",
    ] {
        if !set(key) {
            continue;
        }
        if joined {
            e.at(
                path,
                key,
                "cannot be set for a task that joins the group's bridge/none network \
                 (it shares the alloc's infra container's namespace): \
                 set the group network's hostname or dns block",
            );
        } else if key != "hostname" && net.is_some_and(|n| n.dns.is_some()) {
            e.at(
                path,
                key,
                "conflicts with the group network's dns block, which writes this task's \
                 /etc/resolv.conf: set one or the other",
            );
        }
    }
}

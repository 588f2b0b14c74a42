//! A group network's `hostname` and `dns`: where they apply (the tasks of a
//! group that have a namespace and file system of their own) and their
//! shape. The docker driver's own options that would fight them are checked
//! with its config (`driver_config/docker.rs`).

use std::net::IpAddr;

use caravan_proto::{NetworkResource, TaskGroup};

use super::{Errors, task_base};

/// Drivers whose tasks get the group network's hostname and resolv.conf.
const TAKE_NAMES: &[&str] = &["docker", "exec"];

/// The longest hostname the kernel keeps (`HOST_NAME_MAX`).
const HOSTNAME_MAX: usize = 64;

/// Checks the group's network `hostname` and `dns`, and that every task of
/// the group can take them; a task-level network may set neither.
pub(super) fn check(tg: &TaskGroup, base: &str, e: &mut Errors) {
    for (ti, task) in tg.tasks.iter().enumerate() {
        for (i, net) in task
            .resources
            .iter()
            .flat_map(|r| r.networks.iter())
            .enumerate()
        {
            let path = crate::error::join_path(
                &task_base(base, task, ti),
                &format!("resources.network[{i}]"),
            );
            for (field, set) in [
                ("hostname", !net.hostname.is_empty()),
                ("dns", net.dns.is_some()),
            ] {
                if set {
                    e.on(
                        &path,
                        field,
                        "is a group network setting: set it in the group's network block",
                    );
                }
            }
        }
    }
    let Some(net) = tg.networks.first() else {
        return;
    };
    let path = crate::error::join_path(base, "network[0]");
    if !net.hostname.is_empty() {
        if !matches!(net.mode.as_str(), "bridge" | "none") {
            e.on(
                &path,
                "hostname",
                "applies to a bridge or none network only: the tasks of a host network share the node's hostname",
            );
        }
        // A name to interpolate is checked on the client, once it is known.
        if !net.hostname.contains("${")
            && let Err(why) = check_hostname(&net.hostname)
        {
            // Nomad's text, then why.
            e.on(
                &path,
                "hostname",
                format!("Hostname is not a valid DNS name: {why}"),
            );
        }
    }
    if let Some(dns) = &net.dns {
        for (i, server) in dns.servers.iter().enumerate() {
            if server.parse::<IpAddr>().is_err() {
                e.on(
                    &path,
                    &format!("dns.servers[{i}]"),
                    format!("{server:?} is not an IP address"),
                );
            }
        }
        for (i, option) in dns.options.iter().enumerate() {
            if option.is_empty() || option.contains(char::is_whitespace) {
                e.on(
                    &path,
                    &format!("dns.options[{i}]"),
                    format!("{option:?} is not a resolver option (one word, such as ndots:2)"),
                );
            }
        }
        for (i, search) in dns.searches.iter().enumerate() {
            if search.is_empty() || search.contains(char::is_whitespace) {
                e.on(
                    &path,
                    &format!("dns.searches[{i}]"),
                    format!("{search:?} is not a search domain"),
                );
            }
        }
    }
    let wanted: Vec<&str> = [
        (!net.hostname.is_empty()).then_some("hostname"),
        net.dns.is_some().then_some("dns"),
    ]
    .into_iter()
    .flatten()
    .collect();
    if wanted.is_empty() {
        return;
    }
    for (ti, task) in tg.tasks.iter().enumerate() {
        if !TAKE_NAMES.contains(&task.driver.as_str()) {
            e.on(
                &task_base(base, task, ti),
                "driver",
                format!(
                    "{:?} tasks run in the node's own file system, so the group network's {} cannot reach them: \
                     only docker and exec tasks take it",
                    task.driver,
                    wanted.join(" and ")
                ),
            );
        }
    }
}

/// Whether `name` can be a namespace's hostname: DNS labels of letters,
/// digits, `-` and `_`, at most 63 bytes each and 64 in all.
pub fn check_hostname(name: &str) -> Result<(), String> {
    if name.len() > HOSTNAME_MAX {
        return Err(format!("longer than {HOSTNAME_MAX} bytes"));
    }
    for label in name.strip_suffix('.').unwrap_or(name).split('.') {
        if label.is_empty() {
            return Err("empty label".into());
        }
        if label.len() > 63 {
            return Err(format!("label {label:?} is longer than 63 bytes"));
        }
        if let Some(c) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_')))
        {
            return Err(format!("{c:?} in label {label:?}"));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(format!("label {label:?} starts or ends with '-'"));
        }
    }
    Ok(())
}

/// Whether `net` is a group network that docker tasks without a
/// `network_mode` of their own join through the alloc's infra container.
pub(super) fn joined_by_docker(net: Option<&NetworkResource>) -> bool {
    net.is_some_and(|n| matches!(n.mode.as_str(), "bridge" | "none"))
}

#[cfg(test)]
mod tests {
    use super::check_hostname;

    #[test]
    fn hostnames_are_dns_labels_within_the_kernels_limit() {
        for ok in ["web", "web-1.example.com", "db_2", "a.b."] {
            assert!(check_hostname(ok).is_ok(), "{ok}");
        }
        for (bad, why) in [
            ("", "empty label"),
            ("a..b", "empty label"),
            ("web server", "' ' in label"),
            ("-web", "starts or ends"),
            (&"a".repeat(65), "longer than 64"),
            ("${NOMAD_ALLOC_INDEX}-web", "'$' in label"),
        ] {
            let got = check_hostname(bad).unwrap_err();
            assert!(got.contains(why), "{bad}: {got}");
        }
    }
}

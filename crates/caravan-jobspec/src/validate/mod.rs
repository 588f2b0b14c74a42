//! The shape of a job, as Nomad's `Job.Validate` checks it; every error names its field.
//!
//! Placement-rule semantics (constraint operators, regexps, versions, spread percentages,
//! affinity weights) are `caravan_scheduler::validate`'s; the gateway runs both.

mod artifacts;
mod driver_config;
mod group_network;
pub use driver_config::LINUX_CAPABILITIES;
pub use group_network::check_hostname;
mod identities;
mod paths;
mod periodic;
mod policy;
mod services;
pub(crate) use services::PROVIDER_CONSUL;
mod templates;
mod volumes;
pub use volumes::HOST as VOLUME_TYPE_HOST;

use crate::defaults;
use crate::error::{FieldError, FieldErrors};
use caravan_model::{JobExt, JobTypeExt, NomadName};
use caravan_proto::{Job, JobType, NetworkResource, Task, TaskGroup};
use std::collections::BTreeMap;

/// Collects field errors; paths are Nomad-style (`group "web": task "app": driver`).
#[derive(Debug, Default)]
pub(crate) struct Errors(pub Vec<FieldError>);

impl Errors {
    /// An error on `field` of the block at `path` (`group "g": restart` + `mode`).
    fn at(&mut self, path: &str, field: &str, message: impl Into<String>) {
        let full = match (path.is_empty(), field.is_empty()) {
            (true, _) => field.to_string(),
            (false, true) => path.to_string(),
            (false, false) => format!("{path}.{field}"),
        };
        self.0.push(FieldError::new(full, message));
    }

    /// An error on a field of a named object (`group "g"` + `count`).
    fn on(&mut self, base: &str, field: &str, message: impl Into<String>) {
        self.0.push(FieldError::new(
            crate::error::join_path(base, field),
            message,
        ));
    }
}

/// Checks a canonical job's shape and returns every problem found.
pub fn validate(job: &Job) -> Result<(), FieldErrors> {
    let mut e = Errors::default();
    let job_type = match JobType::try_from(job.r#type) {
        Ok(JobType::Unspecified) => {
            e.on("", "type", "missing job type");
            JobType::Service
        }
        Ok(t) => t,
        Err(_) => {
            e.on("", "type", format!("invalid job type {}", job.r#type));
            JobType::Service
        }
    };
    let type_name = job_type.nomad_name();
    let system = job_type.runs_on_every_node();

    if job.id.is_empty() {
        e.on("", "id", "missing job ID");
    } else if job.id.contains(' ') {
        e.on("", "id", "job ID contains a space");
    } else if job.id.contains('\0') {
        e.on("", "id", "job ID contains a null character");
    }
    if job.name.is_empty() {
        e.on("", "name", "missing job name");
    } else if job.name.contains('\0') {
        e.on("", "name", "job name contains a null character");
    }
    if job.namespace.is_empty() {
        e.on("", "namespace", "missing namespace");
    }
    if !(defaults::MIN_PRIORITY..=defaults::MAX_PRIORITY).contains(&job.priority) {
        e.on(
            "",
            "priority",
            format!(
                "must be between {} and {} (got {})",
                defaults::MIN_PRIORITY,
                defaults::MAX_PRIORITY,
                job.priority
            ),
        );
    }
    if job.datacenters.is_empty() {
        e.on("", "datacenters", "missing job datacenters");
    }
    for (i, dc) in job.datacenters.iter().enumerate() {
        if dc.is_empty() {
            e.on(
                "",
                &format!("datacenters[{i}]"),
                "datacenter must be a non-empty string",
            );
        }
    }
    if system && !job.affinities.is_empty() {
        e.on(
            "",
            "affinity",
            format!("{type_name} jobs may not have an affinity block"),
        );
    }
    if system && !job.spreads.is_empty() {
        e.on(
            "",
            "spread",
            format!("{type_name} jobs may not have a spread block"),
        );
    }

    if job.task_groups.is_empty() {
        e.on(
            "",
            "group",
            "missing job task groups: a job needs at least one group",
        );
    }
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, tg) in job.task_groups.iter().enumerate() {
        let base = group_base(tg, i);
        if tg.name.is_empty() {
            e.on(&base, "name", "missing task group name");
        } else if let Some(first) = seen.insert(&tg.name, i) {
            seen.insert(&tg.name, first);
            e.on(
                &base,
                "name",
                format!(
                    "group {} redefines {:?} from group {}",
                    i + 1,
                    tg.name,
                    first + 1
                ),
            );
        }
        group(tg, &base, job_type, &mut e);
    }

    let is_periodic = job.is_periodic();
    let is_parameterized = job.is_parameterized();
    if let Some(p) = job.periodic.as_ref().filter(|p| p.enabled) {
        if !job_type.runs_to_completion() {
            e.on(
                "",
                "periodic",
                format!("periodic can only be used with batch or sysbatch jobs, not {type_name}"),
            );
        }
        periodic::periodic(p, "periodic", &mut e);
    }
    if let Some(p) = job.parameterized.as_ref().filter(|_| is_parameterized) {
        if !job_type.runs_to_completion() {
            e.on(
                "",
                "parameterized",
                format!(
                    "parameterized can only be used with batch or sysbatch jobs, not {type_name}"
                ),
            );
        }
        if is_periodic {
            e.on(
                "",
                "parameterized",
                "a periodic job can't also be parameterized",
            );
        }
        if !matches!(p.payload.as_str(), "optional" | "required" | "forbidden") {
            e.at(
                "parameterized",
                "payload",
                format!(
                    "unknown payload requirement {:?}; must be optional, required or forbidden",
                    p.payload
                ),
            );
        }
        let both: Vec<&String> = p
            .meta_required
            .iter()
            .filter(|k| p.meta_optional.contains(k))
            .collect();
        if !both.is_empty() {
            e.at(
                "parameterized",
                "meta_optional",
                format!("required and optional meta keys must be disjoint; both list {both:?}"),
            );
        }
    }
    FieldErrors(e.0).into_result()
}

/// Non-fatal advice about a job, as Nomad's `Job.Warnings` gives it.
pub fn warnings(job: &Job) -> Vec<String> {
    let mut out = Vec::new();
    for (i, tg) in job.task_groups.iter().enumerate() {
        if let Some(u) = &tg.update
            && u.max_parallel > tg.count
        {
            out.push(format!(
                    "{}: update max_parallel is greater than the group's count ({} > {}): a destructive \
                     change would replace every allocation at once",
                    group_base(tg, i),
                    u.max_parallel,
                    tg.count
                ));
        }
        out.extend(services::consul_warnings(tg, &group_base(tg, i)));
        for (ti, t) in tg.tasks.iter().enumerate() {
            out.extend(identities::warnings(
                t,
                &task_base(&group_base(tg, i), t, ti),
            ));
        }
    }
    out
}

/// The `disconnect` block, with Nomad's checks and messages.
fn disconnect(
    d: &caravan_proto::DisconnectStrategy,
    base: &str,
    job_type: JobType,
    e: &mut Errors,
) {
    let base = &crate::error::join_path(base, "disconnect");
    if let Some(stop) = d.stop_on_client_after_ns {
        if stop < 0 {
            e.on(
                base,
                "stop_on_client_after",
                "stop_after cannot be a negative duration",
            );
        }
        if !matches!(job_type, JobType::Service | JobType::Batch) {
            e.on(
                base,
                "stop_on_client_after",
                "stop_after can only be used with service or batch job types",
            );
        }
        if d.lost_after_ns != 0 {
            e.on(
                base,
                "stop_on_client_after",
                "Disconnect cannot be configured with both lost_after and stop_after",
            );
        }
    }
    if d.lost_after_ns < 0 {
        e.on(
            base,
            "lost_after",
            "lost_after cannot be a negative duration",
        );
    }
    if !d.reconcile.is_empty()
        && !caravan_model::disconnect::RECONCILE_STRATEGIES.contains(&d.reconcile.as_str())
    {
        e.on(
            base,
            "reconcile",
            format!(
                "reconcile option is invalid: {} (one of {})",
                d.reconcile,
                caravan_model::disconnect::RECONCILE_STRATEGIES.join(", ")
            ),
        );
    }
}

fn group_base(tg: &TaskGroup, index: usize) -> String {
    if tg.name.is_empty() {
        format!("group #{}", index + 1)
    } else {
        format!("group {:?}", tg.name)
    }
}

fn group(tg: &TaskGroup, base: &str, job_type: JobType, e: &mut Errors) {
    let type_name = job_type.nomad_name();
    let system = job_type.runs_on_every_node();
    if tg.count < 0 {
        e.on(base, "count", format!("must be >= 0 (got {})", tg.count));
    } else if tg.count > defaults::MAX_COUNT {
        e.on(
            base,
            "count",
            format!("must be <= {} (got {})", defaults::MAX_COUNT, tg.count),
        );
    } else if job_type == JobType::System && tg.count > 1 {
        e.on(
            base,
            "count",
            format!(
                "cannot exceed 1 with the system scheduler (got {})",
                tg.count
            ),
        );
    }
    if system && !tg.affinities.is_empty() {
        e.on(
            base,
            "affinity",
            format!("{type_name} jobs may not have an affinity block"),
        );
    }
    if system && !tg.spreads.is_empty() {
        e.on(
            base,
            "spread",
            format!("{type_name} jobs may not have a spread block"),
        );
    }
    if tg.shutdown_delay_ns < 0 {
        e.on(base, "shutdown_delay", "must be >= 0");
    }
    if tg.max_client_disconnect_ns < 0 {
        e.on(base, "max_client_disconnect", "must be >= 0");
    }
    if let Some(d) = &tg.disconnect {
        disconnect(d, base, job_type, e);
    }
    if let Some(s) = &tg.scaling {
        policy::scaling(tg.count, s, &crate::error::join_path(base, "scaling"), e);
    }
    match &tg.restart_policy {
        Some(r) => policy::restart(r, &crate::error::join_path(base, "restart"), e),
        None => e.on(base, "restart", "missing restart policy"),
    }
    match (&tg.reschedule_policy, system) {
        (Some(_), true) => e.on(
            base,
            "reschedule",
            format!("{type_name} jobs should not have a reschedule policy"),
        ),
        (Some(r), false) => policy::reschedule(r, &crate::error::join_path(base, "reschedule"), e),
        (None, false) => e.on(base, "reschedule", "missing reschedule policy"),
        (None, true) => {}
    }
    if tg.ephemeral_disk.is_none() {
        e.on(base, "ephemeral_disk", "missing ephemeral disk");
    }
    if let Some(u) = &tg.update {
        if !matches!(job_type, JobType::Service | JobType::System) {
            e.on(
                base,
                "update",
                format!("job type {type_name:?} does not allow an update block"),
            );
        }
        policy::update(u, &crate::error::join_path(base, "update"), e);
    }
    if let Some(m) = &tg.migrate {
        if job_type == JobType::Service {
            policy::migrate(m, &crate::error::join_path(base, "migrate"), e);
        } else {
            e.on(
                base,
                "migrate",
                format!("job type {type_name:?} does not allow a migrate block"),
            );
        }
    }
    if tg.networks.len() > 1 {
        e.on(
            base,
            "network",
            "only one network block is allowed per group",
        );
    }

    if tg.tasks.is_empty() {
        e.on(
            base,
            "task",
            "missing tasks for task group: a group needs at least one task",
        );
    }
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    let mut leaders = 0;
    for (i, task) in tg.tasks.iter().enumerate() {
        let tbase = task_base(base, task, i);
        if !task.name.is_empty()
            && let Some(first) = names.insert(&task.name, i)
        {
            names.insert(&task.name, first);
            e.on(
                &tbase,
                "name",
                format!(
                    "task {} redefines {:?} from task {}",
                    i + 1,
                    task.name,
                    first + 1
                ),
            );
        }
        leaders += usize::from(task.leader);
        self::task(task, &tbase, job_type, e);
        artifacts::check(task, &tbase, e);
        templates::check(task, &tbase, e);
        identities::check(task, &tbase, e);
        driver_config::check(tg, task, &tbase, e);
    }
    if leaders > 1 {
        e.on(base, "task", "only one task may be marked as leader");
    }
    volumes::check(tg, base, job_type, e);
    services::check(tg, base, e);
    ports(tg, base, e);
    group_network::check(tg, base, e);
}

fn task_base(group_base: &str, task: &Task, index: usize) -> String {
    if task.name.is_empty() {
        crate::error::join_path(group_base, &format!("task #{}", index + 1))
    } else {
        crate::error::join_path(group_base, &format!("task {:?}", task.name))
    }
}

fn task(t: &Task, base: &str, job_type: JobType, e: &mut Errors) {
    if t.name.is_empty() {
        e.on(base, "name", "missing task name");
    } else if t.name.contains('/') {
        e.on(base, "name", "task name cannot include slashes");
    } else if t.name.contains('\0') {
        e.on(base, "name", "task name contains a null character");
    }
    if t.driver.is_empty() {
        e.on(base, "driver", "missing driver");
    }
    if t.kill_timeout_ns < 0 {
        e.on(base, "kill_timeout", "must be >= 0");
    }
    if t.shutdown_delay_ns < 0 {
        e.on(base, "shutdown_delay", "must be >= 0");
    }
    if job_type.runs_on_every_node() && !t.affinities.is_empty() {
        e.on(
            base,
            "affinity",
            format!(
                "{} jobs may not have an affinity block",
                job_type.nomad_name()
            ),
        );
    }
    if let Some(l) = &t.lifecycle
        && !matches!(l.hook.as_str(), "prestart" | "poststart" | "poststop")
    {
        e.at(
            &crate::error::join_path(base, "lifecycle"),
            "hook",
            format!(
                "invalid hook {:?}; must be prestart, poststart or poststop",
                l.hook
            ),
        );
    }
    if let Some(r) = &t.restart_policy {
        policy::restart(r, &crate::error::join_path(base, "restart"), e);
    }
    if let Some(l) = &t.log_config {
        let at = crate::error::join_path(base, "logs");
        if l.max_files < 1 {
            e.at(
                &at,
                "max_files",
                format!("must be at least 1 (got {})", l.max_files),
            );
        }
        if l.max_file_size_mb < 1 {
            e.at(
                &at,
                "max_file_size",
                format!("must be at least 1 MB (got {})", l.max_file_size_mb),
            );
        }
    }
    if !t.dispatch_payload_file.is_empty() && escapes_task_dir(&t.dispatch_payload_file) {
        e.at(
            &crate::error::join_path(base, "dispatch_payload"),
            "file",
            "destination escapes the task's local directory",
        );
    }
    let Some(r) = &t.resources else {
        e.on(base, "resources", "missing resources");
        return;
    };
    let rpath = crate::error::join_path(base, "resources");
    if r.cores > 0 && r.cpu_mhz > 0 {
        e.at(&rpath, "cores", "a task can ask for cpu or cores, not both");
    }
    if r.cpu_mhz < 1 && r.cores == 0 {
        e.at(&rpath, "cpu", format!("must be >= 1 (got {})", r.cpu_mhz));
    }
    if r.memory_mb < 10 {
        e.at(
            &rpath,
            "memory",
            format!("must be >= 10 (got {})", r.memory_mb),
        );
    }
    if r.memory_max_mb != 0 && r.memory_max_mb < r.memory_mb {
        e.at(
            &rpath,
            "memory_max",
            format!("must be >= memory ({} < {})", r.memory_max_mb, r.memory_mb),
        );
    }
    if r.disk_mb > 0 {
        e.at(
            &rpath,
            "disk",
            "a task can't ask for disk; set ephemeral_disk on the group",
        );
    }
    for (i, d) in r.devices.iter().enumerate() {
        if d.name.is_empty() {
            e.at(&rpath, &format!("device[{i}]"), "missing device name");
        }
    }
}

/// Whether a relative path leaves the directory it is relative to (or is absolute).
fn escapes_task_dir(path: &str) -> bool {
    if path.starts_with('/') || path.starts_with('\\') {
        return true;
    }
    let mut depth: i64 = 0;
    for part in path.split(['/', '\\']) {
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

/// Port labels unique across the group and its tasks; static ports in range and not
/// reserved twice on the same host network.
fn ports(tg: &TaskGroup, base: &str, e: &mut Errors) {
    let mut seen = PortsSeen::default();
    for (i, net) in tg.networks.iter().enumerate() {
        let where_ = crate::error::join_path(base, &format!("network[{i}]"));
        if net.mode.starts_with("cni/") {
            e.on(
                &where_,
                "mode",
                format!(
                    "network mode {:?} is not supported by Caravan: it has no CNI networks of the operator's own",
                    net.mode
                ),
            );
        }
        check_network(net, where_, &mut seen, e);
    }
    for (ti, task) in tg.tasks.iter().enumerate() {
        let tbase = task_base(base, task, ti);
        for (i, net) in task
            .resources
            .iter()
            .flat_map(|r| r.networks.iter())
            .enumerate()
        {
            check_network(
                net,
                crate::error::join_path(&tbase, &format!("resources.network[{i}]")),
                &mut seen,
                e,
            );
        }
    }
}

/// Port labels and static ports already claimed in a group, with who claimed them.
#[derive(Default)]
struct PortsSeen<'a> {
    labels: BTreeMap<&'a str, String>,
    statics: BTreeMap<(&'a str, u32), String>,
}

/// Whether a port's `host_network` is a plain name or a node target the
/// scheduler resolves per node.
fn valid_host_network(name: &str) -> bool {
    if let Some(inner) = name.strip_prefix("${").and_then(|n| n.strip_suffix('}')) {
        return matches!(
            inner,
            "node.unique.id" | "node.unique.name" | "node.datacenter" | "node.class" | "node.pool"
        ) || ["attr.", "meta."]
            .iter()
            .any(|p| inner.strip_prefix(p).is_some_and(|k| !k.is_empty()));
    }
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

fn check_network<'a>(
    net: &'a NetworkResource,
    where_: String,
    seen: &mut PortsSeen<'a>,
    e: &mut Errors,
) {
    let PortsSeen { labels, statics } = seen;
    if !matches!(net.mode.as_str(), "" | "host" | "bridge" | "none")
        && !net.mode.starts_with("cni/")
    {
        e.on(
            &where_,
            "mode",
            format!(
                "invalid network mode {:?}; must be host, bridge, none or cni/<name>",
                net.mode
            ),
        );
    }
    for (port, reserved) in net
        .reserved_ports
        .iter()
        .map(|p| (p, true))
        .chain(net.dynamic_ports.iter().map(|p| (p, false)))
    {
        let pbase = crate::error::join_path(&where_, &format!("port {:?}", port.label));
        if port.label.is_empty() {
            e.on(&where_, "port", "missing port label");
        } else if let Some(other) = labels.get(port.label.as_str()) {
            e.on(
                &pbase,
                "label",
                format!("port label {:?} is already used by {other}", port.label),
            );
        } else {
            labels.insert(&port.label, where_.clone());
        }
        // "" and "default" both name the node's own network.
        let network = if port.host_network.is_empty() {
            "default"
        } else {
            port.host_network.as_str()
        };
        if !valid_host_network(network) {
            e.on(
                &pbase,
                "host_network",
                format!(
                    "{network:?} is not a host network name (letters, digits, '_', '-', '.') \
                     or a ${{node.*}}, ${{attr.*}} or ${{meta.*}} target"
                ),
            );
        }
        if reserved {
            if !(1..=65535).contains(&port.value) {
                e.on(
                    &pbase,
                    "static",
                    format!("must be between 1 and 65535 (got {})", port.value),
                );
            } else if let Some(other) = statics.get(&(network, port.value)) {
                e.on(
                    &pbase,
                    "static",
                    format!("static port {} is already reserved by {other}", port.value),
                );
            } else {
                statics.insert((network, port.value), format!("port {:?}", port.label));
            }
        }
        if port.to > 65535 {
            e.on(
                &pbase,
                "to",
                format!("must be between 0 and 65535 (got {})", port.to),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_paths() {
        assert!(!escapes_task_dir("input.json"));
        assert!(!escapes_task_dir("a/../b"));
        assert!(escapes_task_dir("../x"));
        assert!(escapes_task_dir("/etc/passwd"));
        assert!(escapes_task_dir("a/../../b"));
    }
}

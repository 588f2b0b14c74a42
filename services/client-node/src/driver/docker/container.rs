//! The container a docker task runs in, as the daemon's create request: the
//! image and command, the task's environment, the alloc's directories at
//! `/alloc`, `/local` and `/secrets`, volumes and mounts, published ports,
//! CPU and memory limits, and labels naming the alloc.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use bollard::models::{
    ContainerCreateBody, HealthConfig, HostConfig, Mount, MountBindOptions,
    MountBindOptionsPropagationEnum, MountTmpfsOptions, MountType, PortBinding, ResourcesUlimits,
};

use super::task_config::{DockerTask, MountSpec, NetworkMode};
use crate::driver::{DriverError, TaskResources, TaskSpec};
use crate::task_env::container_paths;

/// The labels Nomad puts on a task's container (and that Caravan's cleanup
/// goes by).
pub mod labels {
    /// The alloc's id.
    pub const ALLOC_ID: &str = "com.hashicorp.nomad.alloc_id";
    /// The job's id.
    pub const JOB_ID: &str = "com.hashicorp.nomad.job_id";
    /// The job's name.
    pub const JOB_NAME: &str = "com.hashicorp.nomad.job_name";
    /// The task group.
    pub const GROUP: &str = "com.hashicorp.nomad.task_group_name";
    /// The task.
    pub const TASK: &str = "com.hashicorp.nomad.task_name";
    /// The namespace.
    pub const NAMESPACE: &str = "com.hashicorp.nomad.namespace";
    /// The node's id: only the node that made a container removes it.
    pub const NODE_ID: &str = "com.hashicorp.nomad.node_id";
    /// The node's name.
    pub const NODE_NAME: &str = "com.hashicorp.nomad.node_name";
}

/// Docker's smallest CPU share.
const MIN_CPU_SHARES: i64 = 2;
const MIB: i64 = 1024 * 1024;

/// The node a container runs for, as its labels name it.
#[derive(Debug, Clone, Default)]
pub struct NodeLabels {
    /// The node's id.
    pub id: String,
    /// The node's name.
    pub name: String,
}

/// The container's name, as Nomad names it: `<task>-<alloc id>`, with
/// what Docker does not allow in a name replaced.
pub fn container_name(task: &str, alloc_id: &str) -> String {
    let task: String = task
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{task}-{alloc_id}")
}

fn fatal(why: impl Into<String>) -> DriverError {
    DriverError::fatal(why)
}

/// Whether a relative path stays under the directory it is relative to.
fn stays_inside(rel: &Path) -> bool {
    let mut depth: i64 = 0;
    for c in rel.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::ParentDir => depth -= 1,
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return false,
        }
        if depth < 0 {
            return false;
        }
    }
    true
}

/// The host path of a bind source: relative to the task dir (and inside
/// it), or absolute when the client enables volumes.
fn bind_source(
    source: &str,
    task_dir: &Path,
    volumes_enabled: bool,
    what: &str,
) -> Result<PathBuf, DriverError> {
    let p = Path::new(source);
    if p.is_absolute() {
        if !volumes_enabled {
            return Err(fatal(format!(
                "volumes are not enabled; cannot mount host paths: {what}"
            )));
        }
        return Ok(p.to_path_buf());
    }
    if !stays_inside(p) {
        return Err(fatal(format!(
            "{what}: the source leaves the task directory"
        )));
    }
    Ok(task_dir.join(p))
}

pub(super) fn bind(source: &Path, target: &str, read_only: bool) -> Mount {
    Mount {
        target: Some(target.to_string()),
        source: Some(source.display().to_string()),
        typ: Some(MountType::BIND),
        read_only: Some(read_only),
        ..Default::default()
    }
}

/// The mounts: the alloc's dirs, then `volumes`, then `mount` blocks.
fn mounts(
    task: &DockerTask,
    spec: &TaskSpec,
    volumes_enabled: bool,
) -> Result<Vec<Mount>, DriverError> {
    let Some(dirs) = &spec.dirs else {
        return Err(fatal("docker needs the task's dirs"));
    };
    let mut out = vec![
        bind(&dirs.alloc_dir, container_paths::ALLOC, false),
        bind(&dirs.local_dir, container_paths::LOCAL, false),
        bind(&dirs.secrets_dir, container_paths::SECRETS, false),
    ];
    // The host volumes of the task's `volume_mount`s.
    for m in &spec.volume_mounts {
        if !m.destination.starts_with('/') {
            return Err(fatal(format!(
                "volume_mount {:?}: the destination must be an absolute path",
                m.destination
            )));
        }
        out.push(bind(&m.host_path, &m.destination, m.read_only));
    }
    for (i, v) in task.volumes.iter().enumerate() {
        let what = format!("config.volumes[{i}] {v:?}");
        let parts: Vec<&str> = v.split(':').collect();
        let (source, target, mode) = match parts.as_slice() {
            [s, t] => (*s, *t, None),
            [s, t, m] => (*s, *t, Some(*m)),
            _ => return Err(fatal(format!("{what}: expected source:target[:mode]"))),
        };
        if !target.starts_with('/') {
            return Err(fatal(format!(
                "{what}: the target must be an absolute path"
            )));
        }
        let read_only = match mode {
            None | Some("rw") => false,
            Some("ro") => true,
            Some(other) => return Err(fatal(format!("{what}: unknown mode {other:?} (ro or rw)"))),
        };
        let host = bind_source(source, &dirs.task_dir, volumes_enabled, &what)?;
        out.push(bind(&host, target, read_only));
    }
    for (i, m) in task.mounts.iter().enumerate() {
        match m {
            MountSpec::Bind {
                source,
                target,
                readonly,
                propagation,
            } => {
                let what = format!("config.mount[{i}] source {source:?}");
                let host = bind_source(source, &dirs.task_dir, volumes_enabled, &what)?;
                let mut m = bind(&host, target, *readonly);
                if let Some(p) = propagation {
                    let parsed: MountBindOptionsPropagationEnum = p.parse().map_err(|_| {
                        fatal(format!(
                            "config.mount[{i}].bind_options.propagation: unknown mode {p:?}"
                        ))
                    })?;
                    m.bind_options = Some(MountBindOptions {
                        propagation: Some(parsed),
                        ..Default::default()
                    });
                }
                out.push(m);
            }
            MountSpec::Tmpfs {
                target,
                size,
                mode,
                readonly,
            } => out.push(Mount {
                target: Some(target.clone()),
                typ: Some(MountType::TMPFS),
                read_only: Some(*readonly),
                tmpfs_options: Some(MountTmpfsOptions {
                    size_bytes: *size,
                    mode: *mode,
                    ..Default::default()
                }),
                ..Default::default()
            }),
        }
    }
    Ok(out)
}

/// Container ports to expose, and their bindings on the host.
type Published = (Vec<String>, HashMap<String, Option<Vec<PortBinding>>>);

/// The published ports: `ports` labels from the alloc's group and task
/// networks to their `to` port (the same port when `to` is unset), or, with
/// none named, the task's own ports through `port_map`.
fn ports(task: &DockerTask, res: &TaskResources) -> Result<Published, DriverError> {
    let mut exposed = Vec::new();
    let mut bindings: HashMap<String, Option<Vec<PortBinding>>> = HashMap::new();
    if task.network_mode != NetworkMode::Bridge {
        return Ok((exposed, bindings));
    }
    let all = || res.group_ports.iter().chain(res.task_ports.iter());
    let mut publish = |host_ip: &str, host_port: u32, container_port: u32| {
        for proto in ["tcp", "udp"] {
            let key = format!("{container_port}/{proto}");
            if !exposed.contains(&key) {
                exposed.push(key.clone());
            }
            bindings
                .entry(key)
                .or_insert_with(|| Some(Vec::new()))
                .get_or_insert_with(Vec::new)
                .push(PortBinding {
                    host_ip: Some(host_ip.to_string()),
                    host_port: Some(host_port.to_string()),
                });
        }
    };
    let ip_of = |p: &caravan_proto::AllocatedPort| {
        if p.host_ip.is_empty() {
            res.node_ip.clone()
        } else {
            p.host_ip.clone()
        }
    };
    if task.ports.is_empty() {
        for p in &res.task_ports {
            let inner = task.port_map.get(&p.label).copied().unwrap_or(if p.to > 0 {
                p.to
            } else {
                p.value
            });
            publish(&ip_of(p), p.value, inner);
        }
    } else {
        for label in &task.ports {
            let Some(p) = all().find(|p| &p.label == label) else {
                return Err(fatal(format!(
                    "config.ports: port label {label:?} is not in the group's network"
                )));
            };
            let inner =
                task.port_map
                    .get(label)
                    .copied()
                    .unwrap_or(if p.to > 0 { p.to } else { p.value });
            publish(&ip_of(p), p.value, inner);
        }
    }
    Ok((exposed, bindings))
}

/// The container's labels: the task's, then those naming its alloc.
pub fn container_labels(
    task: &DockerTask,
    spec: &TaskSpec,
    node: &NodeLabels,
) -> HashMap<String, String> {
    let mut out: HashMap<String, String> = task.labels.clone().into_iter().collect();
    let res = spec.resources.as_deref();
    let mut put = |k: &str, v: &str| {
        out.insert(k.to_string(), v.to_string());
    };
    put(labels::ALLOC_ID, &spec.alloc_id);
    put(labels::TASK, &spec.task);
    put(labels::NODE_ID, &node.id);
    put(labels::NODE_NAME, &node.name);
    if let Some(r) = res {
        put(labels::JOB_ID, &r.job_id);
        put(labels::JOB_NAME, &r.job_name);
        put(labels::GROUP, &r.group);
        put(labels::NAMESPACE, &r.namespace);
    }
    out
}

/// The daemon's create request for `task`.
pub fn create_body(
    task: &DockerTask,
    spec: &TaskSpec,
    node: &NodeLabels,
    volumes_enabled: bool,
) -> Result<ContainerCreateBody, DriverError> {
    let res = spec.resources.clone().unwrap_or_default();
    let env: Vec<String> = spec
        .env
        .as_ref()
        .map(|e| {
            e.process_env()
                .into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect()
        })
        .unwrap_or_default();
    // In a `bridge`/`none` group a task without a `network_mode` of its
    // own joins the namespace of the alloc's infra container, whose ports
    // CNI maps: it publishes none.
    let joined = super::group_net::joins_group(task, spec)
        .then(|| format!("container:{}", super::infra::infra_name(&spec.alloc_id)));
    let is_joined = joined.is_some();
    let (exposed, bindings) = if is_joined {
        // Docker refuses these in a namespace it does not own (the job's
        // validation refuses them first); `extra_hosts` go into the hosts
        // file the group's namespace gets (`group_net::etc_mounts`).
        let conflicting = [
            ("hostname", task.hostname.is_some()),
            ("dns_servers", !task.dns_servers.is_empty()),
            ("dns_search_domains", !task.dns_search_domains.is_empty()),
            ("dns_options", !task.dns_options.is_empty()),
        ];
        if let Some((key, _)) = conflicting.iter().find(|(_, set)| *set) {
            return Err(fatal(format!(
                "config.{key}: cannot be set for a task in the group's bridge/none network (it shares the alloc's infra container's namespace)"
            )));
        }
        Default::default()
    } else {
        ports(task, &res)?
    };
    let mut cmd: Vec<String> = Vec::new();
    if let Some(c) = &task.command {
        cmd.push(c.clone());
    }
    cmd.extend(task.args.iter().cloned());
    // A reservation alone is a soft limit; `memory_max` (or the driver's
    // `memory_hard_limit`) raises the hard one above it.
    let reserved = i64::from(res.memory_mb) * MIB;
    let hard = match (res.memory_max_mb, task.memory_hard_limit) {
        (max, _) if max > res.memory_mb => i64::from(max) * MIB,
        (_, Some(h)) if h > u64::from(res.memory_mb) => {
            i64::try_from(h).unwrap_or(i64::MAX / MIB) * MIB
        }
        _ => reserved,
    };
    let mut host = HostConfig {
        mounts: Some(mounts(task, spec, volumes_enabled)?),
        network_mode: Some(joined.unwrap_or_else(|| task.network_mode.as_str().to_string())),
        port_bindings: (!bindings.is_empty()).then_some(bindings),
        cpu_shares: Some(i64::from(res.cpu_mhz).max(MIN_CPU_SHARES)),
        init: task.init.then_some(true),
        dns: nonempty(&task.dns_servers),
        dns_search: nonempty(&task.dns_search_domains),
        dns_options: nonempty(&task.dns_options),
        extra_hosts: if is_joined {
            None
        } else {
            nonempty(&task.extra_hosts)
        },
        group_add: nonempty(&task.group_add),
        oom_score_adj: task.oom_score_adj,
        pids_limit: task.pids_limit,
        readonly_rootfs: task.readonly_rootfs.then_some(true),
        shm_size: task.shm_size,
        sysctls: (!task.sysctl.is_empty()).then(|| task.sysctl.clone().into_iter().collect()),
        ulimits: (!task.ulimits.is_empty()).then(|| {
            task.ulimits
                .iter()
                .map(|(name, (soft, hard))| ResourcesUlimits {
                    name: Some(name.clone()),
                    soft: Some(*soft),
                    hard: Some(*hard),
                })
                .collect()
        }),
        ..Default::default()
    };
    if reserved > 0 {
        host.memory = Some(hard);
        // No swap beyond the limit, as Nomad sets it.
        host.memory_swap = Some(hard);
        if hard > reserved {
            host.memory_reservation = Some(reserved);
        }
    }
    if !res.cores.is_empty() {
        let cores: Vec<String> = res.cores.iter().map(u32::to_string).collect();
        host.cpuset_cpus = Some(cores.join(","));
    }
    if task.cpu_hard_limit && res.node_cpu_mhz > 0 {
        let share = f64::from(res.cpu_mhz) / res.node_cpu_mhz as f64;
        let period = i64::try_from(task.cpu_cfs_period).unwrap_or(100_000);
        host.cpu_period = Some(period);
        host.cpu_quota = Some((share * period as f64) as i64 * i64::from(res.node_cores.max(1)));
    }
    Ok(ContainerCreateBody {
        image: Some(task.image.clone()),
        cmd: (!cmd.is_empty()).then_some(cmd),
        entrypoint: task.entrypoint.clone(),
        working_dir: task.work_dir.clone(),
        hostname: task.hostname.clone(),
        env: Some(env),
        labels: Some(container_labels(task, spec, node)),
        exposed_ports: (!exposed.is_empty()).then_some(exposed),
        tty: task.tty.then_some(true),
        open_stdin: task.interactive.then_some(true),
        healthcheck: task.healthcheck_disabled.then(|| HealthConfig {
            test: Some(vec!["NONE".to_string()]),
            ..Default::default()
        }),
        host_config: Some(host),
        ..Default::default()
    })
}

fn nonempty(v: &[String]) -> Option<Vec<String>> {
    (!v.is_empty()).then(|| v.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_paths() {
        assert_eq!(container_name("redis", "a1"), "redis-a1");
        assert_eq!(container_name("my task", "a1"), "my_task-a1");
        assert!(stays_inside(Path::new("data/x")));
        assert!(stays_inside(Path::new("a/../b")));
        assert!(!stays_inside(Path::new("../x")));
        assert!(!stays_inside(Path::new("a/../../x")));
    }
}

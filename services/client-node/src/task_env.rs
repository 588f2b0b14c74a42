//! The environment of a task: the variables Nomad sets (`NOMAD_ALLOC_ID`,
//! `NOMAD_PORT_<label>`, `NOMAD_META_<key>`…), the task's own `env`, and the
//! `${…}` interpolation of those and of `${attr.*}`, `${meta.*}`, `${node.*}`
//! and `${env.*}` in task config and env values.

use std::collections::BTreeMap;
use std::sync::Arc;

use caravan_model::trailing_alloc_index;
use caravan_proto::{AllocatedPort, Allocation, Job, Node, Task, TaskGroup};

use crate::alloc_dir::TaskDirs;

/// The region every Caravan job lives in.
pub const REGION: &str = "global";

/// Where a task whose driver isolates its file system in an image sees its
/// directories, as Nomad mounts them.
pub mod container_paths {
    /// The shared alloc dir.
    pub const ALLOC: &str = "/alloc";
    /// The task's local dir.
    pub const LOCAL: &str = "/local";
    /// The task's secrets dir.
    pub const SECRETS: &str = "/secrets";
}

/// A task's environment, and the node it interpolates node references against.
#[derive(Debug, Clone)]
pub struct TaskEnv {
    vars: BTreeMap<String, String>,
    node: Arc<Node>,
}

/// An env variable name with every character other than letters, digits and
/// `_` replaced by `_`, as Nomad cleans names for the process environment.
pub fn clean_env_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl TaskEnv {
    /// Builds the environment of `task` in `alloc` on `node`; `in_image`
    /// names the task's dirs where a driver that isolates its file system
    /// mounts them (`/alloc`, `/local`, `/secrets`) rather than on the host.
    pub fn build(
        node: Arc<Node>,
        alloc: &Allocation,
        job: &Job,
        group: &TaskGroup,
        task: &Task,
        dirs: Option<&TaskDirs>,
        in_image: bool,
    ) -> TaskEnv {
        Self::build_in(node, alloc, job, group, task, dirs, in_image, None)
    }

    /// As [`build`](Self::build), for a task in the alloc's own network
    /// namespace at `alloc_ip` (bridge mode): each group port also gets
    /// `NOMAD_ALLOC_IP_`, `NOMAD_ALLOC_ADDR_` and `NOMAD_ALLOC_INTERFACE_`.
    #[allow(clippy::too_many_arguments)]
    pub fn build_in(
        node: Arc<Node>,
        alloc: &Allocation,
        job: &Job,
        group: &TaskGroup,
        task: &Task,
        dirs: Option<&TaskDirs>,
        in_image: bool,
        alloc_ip: Option<&str>,
    ) -> TaskEnv {
        let mut vars = BTreeMap::new();
        let mut set = |k: &str, v: String| {
            vars.insert(k.to_string(), v);
        };
        set("NOMAD_ALLOC_ID", alloc.id.clone());
        set(
            "NOMAD_SHORT_ALLOC_ID",
            alloc.id.chars().take(8).collect::<String>(),
        );
        set("NOMAD_ALLOC_NAME", alloc.name.clone());
        if let Some(i) = trailing_alloc_index(&alloc.name) {
            set("NOMAD_ALLOC_INDEX", i.to_string());
        }
        set("NOMAD_JOB_ID", job.id.clone());
        set(
            "NOMAD_JOB_NAME",
            if job.name.is_empty() {
                job.id.clone()
            } else {
                job.name.clone()
            },
        );
        if !job.parent_id.is_empty() {
            set("NOMAD_JOB_PARENT_ID", job.parent_id.clone());
        }
        set("NOMAD_GROUP_NAME", group.name.clone());
        set("NOMAD_TASK_NAME", task.name.clone());
        set(
            "NOMAD_NAMESPACE",
            if alloc.namespace.is_empty() {
                job.namespace.clone()
            } else {
                alloc.namespace.clone()
            },
        );
        set("NOMAD_DC", node.datacenter.clone());
        set("NOMAD_REGION", REGION.to_string());
        if in_image {
            set("NOMAD_ALLOC_DIR", container_paths::ALLOC.to_string());
            set("NOMAD_TASK_DIR", container_paths::LOCAL.to_string());
            set("NOMAD_SECRETS_DIR", container_paths::SECRETS.to_string());
        } else if let Some(d) = dirs {
            set("NOMAD_ALLOC_DIR", d.alloc_dir.display().to_string());
            set("NOMAD_TASK_DIR", d.local_dir.display().to_string());
            set("NOMAD_SECRETS_DIR", d.secrets_dir.display().to_string());
        }
        let allocated = alloc
            .allocated_resources
            .as_ref()
            .and_then(|r| r.tasks.get(&task.name));
        let asked = task.resources.as_ref();
        let cpu = allocated
            .map(|r| r.cpu_mhz)
            .or(asked.map(|r| r.cpu_mhz))
            .unwrap_or(0);
        let memory = allocated
            .map(|r| r.memory_mb)
            .or(asked.map(|r| r.memory_mb))
            .unwrap_or(0);
        let memory_max = allocated
            .map(|r| r.memory_max_mb)
            .or(asked.map(|r| r.memory_max_mb))
            .unwrap_or(0);
        set("NOMAD_CPU_LIMIT", cpu.to_string());
        set("NOMAD_MEMORY_LIMIT", memory.to_string());
        if memory_max > 0 {
            set("NOMAD_MEMORY_MAX_LIMIT", memory_max.to_string());
        }
        if let Some(r) = allocated
            && !r.reserved_cores.is_empty()
        {
            let cores: Vec<String> = r.reserved_cores.iter().map(u32::to_string).collect();
            set("NOMAD_CPU_CORES", cores.join(","));
        }
        let node_ip = node
            .resources
            .as_ref()
            .and_then(|r| r.networks.first())
            .map(|n| n.ip.clone())
            .unwrap_or_else(|| "127.0.0.1".to_string());
        let shared_ports = alloc
            .allocated_resources
            .as_ref()
            .and_then(|r| r.shared.as_ref())
            .map(|s| s.ports.as_slice())
            .unwrap_or_default();
        let task_ports = allocated.map(|r| r.ports.as_slice()).unwrap_or_default();
        for port in shared_ports.iter().chain(task_ports) {
            port_vars(&mut vars, port, &node_ip);
        }
        if let Some(ip) = alloc_ip.filter(|ip| !ip.is_empty()) {
            for port in shared_ports {
                alloc_network_vars(&mut vars, port, ip);
            }
        }
        let mut meta: BTreeMap<&str, &str> = BTreeMap::new();
        for m in [&job.meta, &group.meta, &task.meta] {
            for (k, v) in m {
                meta.insert(k, v);
            }
        }
        for (k, v) in meta {
            vars.insert(format!("NOMAD_META_{}", k.to_uppercase()), v.to_string());
            vars.insert(format!("NOMAD_META_{k}"), v.to_string());
        }
        let mut env = TaskEnv { vars, node };
        // User values may refer to the variables above, and override them.
        let user: Vec<(String, String)> = task
            .env
            .iter()
            .map(|(k, v)| (k.clone(), env.interpolate(v)))
            .collect();
        env.vars.extend(user);
        env
    }

    /// The variables by name.
    pub fn vars(&self) -> &BTreeMap<String, String> {
        &self.vars
    }

    /// Sets one variable (a template's `env = true` output, a workload
    /// identity's `NOMAD_TOKEN`).
    pub fn set(&mut self, name: String, value: String) {
        self.vars.insert(name, value);
    }

    /// No variables at all, for a task whose driver takes no environment.
    pub fn empty() -> Self {
        TaskEnv {
            vars: BTreeMap::new(),
            node: Arc::new(Node::default()),
        }
    }

    /// The variables as the process gets them: names cleaned for the shell.
    pub fn process_env(&self) -> Vec<(String, String)> {
        self.vars
            .iter()
            .map(|(k, v)| (clean_env_name(k), v.clone()))
            .collect()
    }

    /// Replaces every `${…}` this environment knows; unknown references stay as written.
    pub fn interpolate(&self, input: &str) -> String {
        interpolate(input, |key| self.lookup(key))
    }

    fn lookup(&self, key: &str) -> Option<String> {
        let node = &self.node;
        match key {
            "node.unique.id" => return Some(node.id.clone()),
            "node.unique.name" => return Some(node.name.clone()),
            "node.datacenter" => return Some(node.datacenter.clone()),
            "node.region" => return Some(REGION.to_string()),
            "node.class" => return Some(node.node_class.clone()),
            "node.pool" => return Some(node.node_pool.clone()),
            _ => {}
        }
        if let Some(k) = key.strip_prefix("attr.") {
            return node.attributes.get(k).cloned();
        }
        if let Some(k) = key.strip_prefix("meta.") {
            return node.meta.get(k).cloned();
        }
        if let Some(k) = key.strip_prefix("env.") {
            return self.vars.get(k).cloned();
        }
        self.vars.get(key).cloned()
    }
}

fn port_vars(vars: &mut BTreeMap<String, String>, port: &AllocatedPort, node_ip: &str) {
    let label = &port.label;
    let ip = if port.host_ip.is_empty() {
        node_ip
    } else {
        port.host_ip.as_str()
    };
    let inner = if port.to > 0 { port.to } else { port.value };
    // A port on a named host network carries that network's address.
    vars.insert(format!("NOMAD_IP_{label}"), ip.to_string());
    vars.insert(format!("NOMAD_HOST_IP_{label}"), ip.to_string());
    vars.insert(format!("NOMAD_PORT_{label}"), inner.to_string());
    vars.insert(format!("NOMAD_HOST_PORT_{label}"), port.value.to_string());
    vars.insert(format!("NOMAD_ALLOC_PORT_{label}"), inner.to_string());
    vars.insert(format!("NOMAD_HOST_IP_{label}"), ip.to_string());
    vars.insert(
        format!("NOMAD_ADDR_{label}"),
        join_host_port(ip, port.value),
    );
    vars.insert(
        format!("NOMAD_HOST_ADDR_{label}"),
        join_host_port(ip, port.value),
    );
}

/// A group port's address inside the alloc's network namespace.
fn alloc_network_vars(vars: &mut BTreeMap<String, String>, port: &AllocatedPort, alloc_ip: &str) {
    let label = &port.label;
    let inner = if port.to > 0 { port.to } else { port.value };
    vars.insert(format!("NOMAD_ALLOC_INTERFACE_{label}"), "eth0".to_string());
    vars.insert(format!("NOMAD_ALLOC_IP_{label}"), alloc_ip.to_string());
    vars.insert(
        format!("NOMAD_ALLOC_ADDR_{label}"),
        join_host_port(alloc_ip, inner),
    );
}

fn join_host_port(ip: &str, port: u32) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

/// Replaces each `${key}` in `input` with `lookup(key)`; a key the lookup
/// doesn't know, or an unclosed `${`, is kept verbatim.
pub fn interpolate(input: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find('}') {
            Some(end) => {
                let key = after[..end].trim();
                match lookup(key) {
                    Some(v) => out.push_str(&v),
                    None => out.push_str(&rest[start..start + 2 + end + 1]),
                }
                rest = &after[end + 1..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use caravan_proto::{
        AllocatedResources, AllocatedSharedResources, AllocatedTaskResources, NodeNetwork,
        NodeResources,
    };

    use super::*;

    fn node() -> Arc<Node> {
        let mut n = Node {
            id: "node-1".into(),
            name: "box-a".into(),
            datacenter: "dc1".into(),
            node_class: "large".into(),
            node_pool: "default".into(),
            resources: Some(NodeResources {
                networks: vec![NodeNetwork {
                    ip: "10.0.0.5".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        n.attributes.insert("kernel.name".into(), "linux".into());
        n.meta.insert("rack".into(), "r1".into());
        Arc::new(n)
    }

    fn fixture() -> (Allocation, Job, TaskGroup, Task) {
        let mut task_res = AllocatedTaskResources {
            cpu_mhz: 250,
            memory_mb: 128,
            ..Default::default()
        };
        task_res.ports.push(AllocatedPort {
            label: "http-admin".into(),
            value: 23456,
            to: 0,
            host_ip: String::new(),
        });
        let mut tasks = BTreeMap::new();
        tasks.insert("web".to_string(), task_res);
        let alloc = Allocation {
            id: "0f2c9a77-1111-2222-3333-444455556666".into(),
            name: "shop.frontend[3]".into(),
            namespace: "default".into(),
            allocated_resources: Some(AllocatedResources {
                tasks: tasks.into(),
                shared: Some(AllocatedSharedResources {
                    ports: vec![AllocatedPort {
                        label: "db".into(),
                        value: 25000,
                        to: 5432,
                        host_ip: "10.0.0.9".into(),
                    }],
                    ..Default::default()
                }),
            }),
            ..Default::default()
        };
        let mut job = Job {
            id: "shop".into(),
            name: "shop".into(),
            namespace: "default".into(),
            ..Default::default()
        };
        job.meta.insert("owner".into(), "team-a".into());
        job.meta.insert("tier".into(), "job".into());
        let mut group = TaskGroup {
            name: "frontend".into(),
            ..Default::default()
        };
        group.meta.insert("tier".into(), "group".into());
        let mut task = Task {
            name: "web".into(),
            driver: "raw_exec".into(),
            ..Default::default()
        };
        task.env.insert(
            "GREETING".into(),
            "hi ${NOMAD_ALLOC_INDEX} on ${attr.kernel.name}".into(),
        );
        task.env.insert("NOMAD_DC".into(), "overridden".into());
        (alloc, job, group, task)
    }

    #[test]
    fn nomad_variables_are_set() {
        let (alloc, job, group, task) = fixture();
        let dirs = crate::alloc_dir::AllocDir::new(std::path::Path::new("/data"), &alloc.id)
            .unwrap()
            .task("web")
            .unwrap();
        let env = TaskEnv::build(node(), &alloc, &job, &group, &task, Some(&dirs), false);
        let v = env.vars();
        assert_eq!(v["NOMAD_ALLOC_ID"], alloc.id);
        assert_eq!(v["NOMAD_SHORT_ALLOC_ID"], "0f2c9a77");
        assert_eq!(v["NOMAD_ALLOC_INDEX"], "3");
        assert_eq!(v["NOMAD_ALLOC_NAME"], "shop.frontend[3]");
        assert_eq!(v["NOMAD_JOB_ID"], "shop");
        assert_eq!(v["NOMAD_JOB_NAME"], "shop");
        assert_eq!(v["NOMAD_GROUP_NAME"], "frontend");
        assert_eq!(v["NOMAD_TASK_NAME"], "web");
        assert_eq!(v["NOMAD_NAMESPACE"], "default");
        assert_eq!(v["NOMAD_REGION"], "global");
        assert_eq!(v["NOMAD_CPU_LIMIT"], "250");
        assert_eq!(v["NOMAD_MEMORY_LIMIT"], "128");
        assert_eq!(
            v["NOMAD_ALLOC_DIR"],
            format!("/data/allocs/{}/alloc", alloc.id)
        );
        assert_eq!(
            v["NOMAD_TASK_DIR"],
            format!("/data/allocs/{}/web/local", alloc.id)
        );
        assert_eq!(
            v["NOMAD_SECRETS_DIR"],
            format!("/data/allocs/{}/web/secrets", alloc.id)
        );
        // The task's env overrides Nomad's variables.
        assert_eq!(v["NOMAD_DC"], "overridden");
        // In an image the dirs are where the driver mounts them.
        let env = TaskEnv::build(node(), &alloc, &job, &group, &task, Some(&dirs), true);
        let v = env.vars();
        assert_eq!(v["NOMAD_ALLOC_DIR"], "/alloc");
        assert_eq!(v["NOMAD_TASK_DIR"], "/local");
        assert_eq!(v["NOMAD_SECRETS_DIR"], "/secrets");
    }

    #[test]
    fn a_bridge_alloc_names_its_own_address_for_group_ports() {
        let (alloc, job, group, task) = fixture();
        let env = TaskEnv::build_in(
            node(),
            &alloc,
            &job,
            &group,
            &task,
            None,
            false,
            Some("172.26.64.9"),
        );
        let v = env.vars();
        assert_eq!(v["NOMAD_ALLOC_IP_db"], "172.26.64.9");
        assert_eq!(v["NOMAD_ALLOC_ADDR_db"], "172.26.64.9:5432");
        assert_eq!(v["NOMAD_ALLOC_PORT_db"], "5432");
        assert_eq!(v["NOMAD_ALLOC_INTERFACE_db"], "eth0");
        assert_eq!(v["NOMAD_HOST_PORT_db"], "25000");
        // A task's own (legacy) port is not the group's.
        assert!(!v.contains_key("NOMAD_ALLOC_IP_http-admin"));
    }

    #[test]
    fn ports_and_meta() {
        let (alloc, job, group, task) = fixture();
        let env = TaskEnv::build(node(), &alloc, &job, &group, &task, None, false);
        let v = env.vars();
        assert_eq!(v["NOMAD_PORT_http-admin"], "23456");
        assert_eq!(v["NOMAD_HOST_PORT_http-admin"], "23456");
        assert_eq!(v["NOMAD_IP_http-admin"], "10.0.0.5");
        assert_eq!(v["NOMAD_ADDR_http-admin"], "10.0.0.5:23456");
        assert_eq!(v["NOMAD_PORT_db"], "5432");
        assert_eq!(v["NOMAD_ALLOC_PORT_db"], "5432");
        assert_eq!(v["NOMAD_HOST_PORT_db"], "25000");
        // As Nomad: the address is the host's, with the host port.
        assert_eq!(v["NOMAD_ADDR_db"], "10.0.0.9:25000");
        assert_eq!(v["NOMAD_HOST_IP_db"], "10.0.0.9");
        assert!(!v.contains_key("NOMAD_ALLOC_IP_db"), "host networking");
        assert_eq!(v["NOMAD_HOST_ADDR_db"], "10.0.0.9:25000");
        assert_eq!(v["NOMAD_IP_db"], "10.0.0.9");
        assert_eq!(v["NOMAD_HOST_IP_db"], "10.0.0.9");
        assert_eq!(v["NOMAD_HOST_IP_http-admin"], "10.0.0.5");
        // Group meta overrides job meta; both cases are set.
        assert_eq!(v["NOMAD_META_TIER"], "group");
        assert_eq!(v["NOMAD_META_tier"], "group");
        assert_eq!(v["NOMAD_META_OWNER"], "team-a");
        let process: BTreeMap<String, String> = env.process_env().into_iter().collect();
        assert_eq!(process["NOMAD_PORT_http_admin"], "23456");
    }

    #[test]
    fn interpolation_of_env_node_and_unknowns() {
        let (alloc, job, group, task) = fixture();
        let env = TaskEnv::build(node(), &alloc, &job, &group, &task, None, false);
        assert_eq!(env.vars()["GREETING"], "hi 3 on linux");
        assert_eq!(
            env.interpolate(
                "${node.unique.name}/${node.unique.id}/${node.datacenter}/${node.class}/${node.pool}/${node.region}"
            ),
            "box-a/node-1/dc1/large/default/global"
        );
        assert_eq!(
            env.interpolate("${meta.rack}-${env.NOMAD_JOB_ID}"),
            "r1-shop"
        );
        assert_eq!(env.interpolate("${ NOMAD_TASK_NAME }"), "web");
        assert_eq!(
            env.interpolate("keep ${attr.nope} and $HOME and ${unclosed"),
            "keep ${attr.nope} and $HOME and ${unclosed"
        );
        assert_eq!(env.interpolate(""), "");
        assert_eq!(env.interpolate("${}"), "${}");
    }
}

//! What an alloc runner hands a driver for one task: the task's config,
//! directories, environment (with its dirs where the driver shows them) and
//! the resources and identity the driver enforces and labels with.

use std::sync::Arc;

use caravan_proto::{Node, Task, TaskGroup};

use super::AllocRunner;
use crate::driver::{
    Driver, FsIsolation, GroupNetSettings, TaskConfig, TaskResources, TaskSpec, VolumeMountSpec,
};
use crate::network::GroupNetwork;
use crate::task_env::TaskEnv;

impl AllocRunner {
    /// The spec `driver` starts (or recovers) `task` from; `Err` is why the
    /// task cannot have one (its dirs).
    pub(super) fn task_spec(
        &self,
        group: &TaskGroup,
        task: &Task,
        driver: &dyn Driver,
    ) -> Result<TaskSpec, String> {
        let dirs = self
            .alloc_dir()
            .map(|d| d.task(&task.name))
            .transpose()
            .map_err(|e| e.to_string())?;
        let network = match (GroupNetwork::of(group), self.networks()) {
            (Some(_), Some(networks)) => Some(networks.load(&self.alloc.id).ok_or_else(|| {
                // Never the host's network instead.
                "failed to configure networking for alloc: its network namespace is gone"
                    .to_string()
            })?),
            _ => None,
        };
        let group_net = GroupNetSettings {
            hostname: self.group_hostname(group)?,
            ip: network.as_ref().map(|n| n.ip.clone()).unwrap_or_default(),
            dns: group.networks.first().and_then(|n| n.dns.clone()),
        };
        let (env, resources) = if driver.wants_env() {
            let in_image = matches!(
                driver.capabilities().fs_isolation,
                FsIsolation::Image | FsIsolation::Chroot
            );
            let env = TaskEnv::build_in(
                self.ctx.node.clone(),
                &self.alloc,
                &self.job,
                group,
                task,
                dirs.as_ref(),
                in_image,
                network.as_ref().map(|n| n.ip.as_str()),
            );
            (Some(env), Some(Arc::new(self.task_resources(group, task))))
        } else {
            (None, None)
        };
        let volume_mounts = volume_mounts(
            &self.alloc.name,
            group,
            task,
            &self.ctx.node,
            driver.capabilities().mounts,
        )?;
        Ok(TaskSpec {
            alloc_id: self.alloc.id.clone(),
            task: task.name.clone(),
            config: TaskConfig(task.config.clone().unwrap_or_default()),
            env,
            dirs,
            logs: crate::log_rotate::LogLimits::of(task.log_config.as_ref()),
            user: task.user.clone(),
            resources,
            volume_mounts,
            netns: network.map(|n| n.netns),
            group_net,
        })
    }

    /// The hostname of a `bridge`/`none` group's namespace, interpolated
    /// with the alloc's environment (as seen by the group's first task);
    /// `Err` when what it interpolates to is no hostname.
    pub(super) fn group_hostname(&self, group: &TaskGroup) -> Result<Option<String>, String> {
        if GroupNetwork::of(group).is_none() {
            return Ok(None);
        }
        let written = match group.networks.first() {
            Some(n) if !n.hostname.is_empty() => &n.hostname,
            _ => return Ok(None),
        };
        let name = match group.tasks.first() {
            Some(task) if written.contains("${") => TaskEnv::build_in(
                self.ctx.node.clone(),
                &self.alloc,
                &self.job,
                group,
                task,
                None,
                false,
                None,
            )
            .interpolate(written),
            _ => written.clone(),
        };
        caravan_jobspec::check_hostname(&name)
            .map(|()| Some(name.clone()))
            // Nomad's text, then why.
            .map_err(|why| format!("network hostname {name:?} is not a valid DNS name: {why}"))
    }

    /// What the alloc gives `task`, as the servers allocated it (or as the
    /// task asks, for an alloc that names no resources).
    fn task_resources(&self, group: &TaskGroup, task: &Task) -> TaskResources {
        let allocated = self
            .alloc
            .allocated_resources
            .as_ref()
            .and_then(|r| r.tasks.get(&task.name));
        let asked = task.resources.as_ref();
        let node = &self.ctx.node;
        let node_res = node.resources.as_ref();
        TaskResources {
            job_id: self.job.id.clone(),
            job_name: if self.job.name.is_empty() {
                self.job.id.clone()
            } else {
                self.job.name.clone()
            },
            namespace: self.alloc.namespace.clone(),
            group: group.name.clone(),
            cpu_mhz: allocated
                .map(|r| r.cpu_mhz)
                .or(asked.map(|r| r.cpu_mhz))
                .unwrap_or(0),
            cores: allocated
                .map(|r| r.reserved_cores.clone())
                .unwrap_or_default(),
            memory_mb: allocated
                .map(|r| r.memory_mb)
                .or(asked.map(|r| r.memory_mb))
                .unwrap_or(0),
            memory_max_mb: allocated
                .map(|r| r.memory_max_mb)
                .or(asked.map(|r| r.memory_max_mb))
                .unwrap_or(0),
            node_cpu_mhz: node_res.map_or(0, |r| r.cpu_mhz),
            node_cores: node_res.map_or(0, |r| u32::try_from(r.core_ids.len()).unwrap_or(0)),
            group_ports: self
                .alloc
                .allocated_resources
                .as_ref()
                .and_then(|r| r.shared.as_ref())
                .map(|s| s.ports.clone())
                .unwrap_or_default(),
            task_ports: allocated.map(|r| r.ports.clone()).unwrap_or_default(),
            node_ip: node_res
                .and_then(|r| r.networks.first())
                .map(|n| n.ip.clone())
                .unwrap_or_else(|| "127.0.0.1".to_string()),
        }
    }
}

/// The node's host volumes `task` mounts, as Nomad's volume hook finds them:
/// each mount's group volume, its source (with the allocation's index under
/// `per_alloc`) among the node's host volumes, read-only when the volume, the
/// request or the mount says so; `driver_mounts` is whether the task's driver
/// can mount at all. `Err` says why the task cannot start.
fn volume_mounts(
    alloc_name: &str,
    group: &TaskGroup,
    task: &Task,
    node: &Node,
    driver_mounts: bool,
) -> Result<Vec<VolumeMountSpec>, String> {
    let mut out = Vec::with_capacity(task.volume_mounts.len());
    for m in &task.volume_mounts {
        let Some(req) = group.volumes.get(&m.volume) else {
            return Err(format!(
                "volume mount references undefined volume {:?}",
                m.volume
            ));
        };
        if req.r#type != caravan_jobspec::VOLUME_TYPE_HOST {
            return Err(format!(
                "volume {:?} has type {:?}: only host volumes can be mounted",
                m.volume, req.r#type
            ));
        }
        let source = if req.per_alloc {
            let Some(index) = caravan_model::alloc_index(alloc_name) else {
                return Err(format!(
                    "volume {:?} is per_alloc but the allocation's name {alloc_name:?} has no index",
                    m.volume
                ));
            };
            caravan_model::per_alloc_source(&req.source, index)
        } else {
            req.source.clone()
        };
        let Some(host) = node.host_volumes.get(&source) else {
            // Nomad's text.
            return Err(format!("host volume validation error: missing {source}"));
        };
        out.push(VolumeMountSpec {
            host_path: host.path.clone().into(),
            destination: m.destination.clone(),
            read_only: host.read_only || req.read_only || m.read_only,
        });
    }
    if !out.is_empty() && !driver_mounts {
        // Nomad's text.
        return Err(format!(
            "task driver {:?} for {:?} does not support host volumes",
            task.driver, task.name
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use caravan_proto::{ClientHostVolume, VolumeMount, VolumeRequest};

    fn node() -> Node {
        let mut n = Node::default();
        for (name, read_only) in [("data", false), ("pg[2]", false), ("certs", true)] {
            n.host_volumes.insert(
                name.into(),
                ClientHostVolume {
                    name: name.into(),
                    path: format!("/srv/{name}"),
                    read_only,
                },
            );
        }
        n
    }

    fn group(volumes: &[(&str, &str, bool, bool)]) -> TaskGroup {
        let mut g = TaskGroup::default();
        for (name, source, read_only, per_alloc) in volumes {
            g.volumes.insert(
                (*name).into(),
                VolumeRequest {
                    r#type: "host".into(),
                    source: (*source).into(),
                    read_only: *read_only,
                    per_alloc: *per_alloc,
                },
            );
        }
        g
    }

    fn task(mounts: &[(&str, &str, bool)]) -> Task {
        Task {
            name: "t".into(),
            driver: "docker".into(),
            volume_mounts: mounts
                .iter()
                .map(|(volume, destination, read_only)| VolumeMount {
                    volume: (*volume).into(),
                    destination: (*destination).into(),
                    read_only: *read_only,
                    propagation_mode: "private".into(),
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn mounts_resolve_to_the_nodes_dirs_read_only_if_any_side_says_so() {
        let g = group(&[
            ("a", "data", false, false),
            ("b", "pg", false, true),
            ("c", "certs", false, false),
            ("d", "data", true, false),
        ]);
        let t = task(&[
            ("a", "/a", false),
            ("b", "/b", false),
            ("c", "/c", false),
            ("d", "/d", false),
            ("a", "/a-ro", true),
        ]);
        let got = volume_mounts("j.g[2]", &g, &t, &node(), true).unwrap();
        let view: Vec<(String, &str, bool)> = got
            .iter()
            .map(|m| {
                (
                    m.host_path.display().to_string(),
                    m.destination.as_str(),
                    m.read_only,
                )
            })
            .collect();
        assert_eq!(
            view,
            vec![
                ("/srv/data".to_string(), "/a", false),
                ("/srv/pg[2]".to_string(), "/b", false),
                ("/srv/certs".to_string(), "/c", true),
                ("/srv/data".to_string(), "/d", true),
                ("/srv/data".to_string(), "/a-ro", true),
            ]
        );
    }

    #[test]
    fn a_missing_volume_or_a_driver_that_cannot_mount_fails_the_task() {
        let g = group(&[("b", "pg", false, true)]);
        let t = task(&[("b", "/b", false)]);
        assert_eq!(
            volume_mounts("j.g[0]", &g, &t, &node(), true).unwrap_err(),
            "host volume validation error: missing pg[0]"
        );
        let g = group(&[("a", "data", false, false)]);
        let t = task(&[("a", "/a", false)]);
        assert_eq!(
            volume_mounts("j.g[0]", &g, &t, &node(), false).unwrap_err(),
            "task driver \"docker\" for \"t\" does not support host volumes"
        );
        assert!(volume_mounts("j.g[0]", &g, &task(&[]), &node(), false).is_ok());
    }
}

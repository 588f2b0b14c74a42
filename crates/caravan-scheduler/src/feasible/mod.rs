//! Feasibility: which nodes may run a job's task group at all.
//!
//! Checks split in two: those that depend only on what a node *is* (constraints,
//! drivers) are cached per computed node class for one evaluation unless a
//! constraint looks at a unique attribute; those that depend on the plan
//! (`distinct_hosts`, `distinct_property`) run on every candidate.

pub mod class;
pub mod constraint;
pub mod host_networks;
pub mod host_volumes;
pub mod target;
pub mod version;

use std::borrow::Cow;

use caravan_proto::{Job, Node, TaskGroup};

use crate::model;
pub use class::compute_node_class;
pub use constraint::{CompileError, Compiled, Operator};

/// Whether a datacenter matches a list of names or `*` globs (empty means all).
pub fn datacenter_matches(patterns: &[String], dc: &str) -> bool {
    patterns.is_empty() || patterns.iter().any(|p| glob(p, dc))
}

/// `*`-only glob matching, as datacenter lists use.
pub fn glob(pattern: &str, s: &str) -> bool {
    if !pattern.as_bytes().contains(&b'*') {
        return pattern == s;
    }
    let parts: Vec<&str> = pattern.split('*').collect();
    let mut rest = s;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(part) else {
                return false;
            };
            rest = r;
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
    }
    true
}

/// Whether a node belongs to the job's node pool (`all` takes every pool).
pub fn pool_matches(job_pool: &str, node: &Node) -> bool {
    let want = if job_pool.is_empty() {
        "default"
    } else {
        job_pool
    };
    let have = if node.node_pool.is_empty() {
        "default"
    } else {
        &node.node_pool
    };
    want == "all" || want == have
}

/// Whether a node is in the job's datacenters and node pool.
pub fn node_in_job_scope(job: &Job, node: &Node) -> bool {
    datacenter_matches(&job.datacenters, &node.datacenter) && pool_matches(&job.node_pool, node)
}

/// Whether the node has the driver, detected and healthy.
pub fn has_driver(node: &Node, driver: &str) -> bool {
    match node.drivers.get(driver) {
        Some(d) => d.detected && d.healthy,
        None => node
            .attributes
            .get(&format!("driver.{driver}"))
            .is_some_and(|v| v == "1" || v == "true"),
    }
}

/// Checks of one level (job or task group), compiled once per evaluation.
#[derive(Debug, Clone, Default)]
pub struct Checks {
    /// Node-only constraints.
    pub constraints: Vec<Compiled>,
    /// Drivers every node must have (groups only).
    pub drivers: Vec<String>,
    /// A constraint reads a unique attribute, so results cannot be cached per class.
    pub escaped: bool,
    /// `distinct_hosts` at this level.
    pub distinct_hosts: bool,
    /// `distinct_property` constraints at this level with their limits.
    pub distinct_properties: Vec<(Compiled, u32)>,
    /// Host volumes every allocation of the group mounts (groups only).
    pub host_volumes: Vec<host_volumes::HostVolumeAsk>,
    /// Host volumes each allocation asks for under its own name (`per_alloc`):
    /// checked per placement, never cached per class.
    pub per_alloc_volumes: Vec<host_volumes::HostVolumeAsk>,
    /// Ports naming a host network the node must have (groups only).
    pub host_networks: Vec<host_networks::HostNetworkAsk>,
    /// A network mode the node must offer (`bridge`); `None` for host
    /// networking and `none`, which every node has.
    pub network_mode: Option<String>,
}

/// The reason a node without the group's network mode is filtered.
pub const MISSING_NETWORK: &str = "missing network";

/// Whether `node` offers networking in `mode`.
pub fn has_network_mode(node: &Node, mode: &str) -> bool {
    node.resources
        .iter()
        .flat_map(|r| r.networks.iter())
        .any(|n| {
            let m = if n.mode.is_empty() {
                "host"
            } else {
                n.mode.as_str()
            };
            m == mode
        })
}

impl Checks {
    /// The job-level checks.
    pub fn for_job(job: &Job) -> Result<Self, CompileError> {
        let mut c = Self::default();
        for k in &job.constraints {
            c.add(Compiled::new(&k.l_target, &k.r_target, &k.operand)?);
        }
        Ok(c)
    }

    /// The group-level checks (group and task constraints, drivers).
    pub fn for_group(tg: &TaskGroup) -> Result<Self, CompileError> {
        let mut c = Self::default();
        for k in &tg.constraints {
            c.add(Compiled::new(&k.l_target, &k.r_target, &k.operand)?);
        }
        for t in &tg.tasks {
            for k in &t.constraints {
                c.add(Compiled::new(&k.l_target, &k.r_target, &k.operand)?);
            }
            if !t.driver.is_empty() && !c.drivers.contains(&t.driver) {
                c.drivers.push(t.driver.clone());
            }
        }
        (c.host_volumes, c.per_alloc_volumes) = host_volumes::asks(tg);
        c.host_networks = host_networks::asks(tg);
        c.escaped |= c
            .host_networks
            .iter()
            .any(|n| target::is_unique(&n.network));
        c.network_mode = tg
            .networks
            .first()
            .map(|n| n.mode.as_str())
            .filter(|m| !matches!(*m, "" | "host" | "none"))
            .map(str::to_string);
        Ok(c)
    }

    fn add(&mut self, k: Compiled) {
        match k.op {
            Operator::DistinctHosts => self.distinct_hosts = true,
            Operator::DistinctProperty => {
                let limit = k
                    .r_target
                    .parse::<u32>()
                    .ok()
                    .filter(|n| *n > 0)
                    .unwrap_or(1);
                self.distinct_properties.push((k, limit));
            }
            _ => {
                self.escaped |= k.unique;
                self.constraints.push(k);
            }
        }
    }

    /// Runs the node-only checks; the error is the label of what failed.
    pub fn check_node(&self, node: &Node) -> Result<(), Cow<'_, str>> {
        for d in &self.drivers {
            if !has_driver(node, d) {
                return Err(Cow::Borrowed("missing drivers"));
            }
        }
        for k in &self.constraints {
            if !k.check(node) {
                return Err(Cow::Borrowed(&k.label));
            }
        }
        if !self
            .host_volumes
            .iter()
            .all(|v| host_volumes::node_has(node, &v.source, v.read_only))
        {
            return Err(Cow::Borrowed(host_volumes::MISSING_HOST_VOLUMES));
        }
        for n in &self.host_networks {
            n.check(node)?;
        }
        if let Some(mode) = &self.network_mode
            && !has_network_mode(node, mode)
        {
            return Err(Cow::Borrowed(MISSING_NETWORK));
        }
        Ok(())
    }

    /// Whether the node has the host volumes an allocation of index `index` asks for
    /// under `per_alloc`; without an index (none to append) it cannot have them.
    pub fn check_per_alloc_volumes(&self, node: &Node, index: Option<u32>) -> Result<(), &str> {
        let ok = self.per_alloc_volumes.iter().all(|v| {
            index.is_some_and(|i| {
                host_volumes::node_has(
                    node,
                    &caravan_model::per_alloc_source(&v.source, i),
                    v.read_only,
                )
            })
        });
        if ok {
            Ok(())
        } else {
            Err(host_volumes::MISSING_HOST_VOLUMES)
        }
    }
}

/// Whether a group has any soft placement preferences (which widens the limit).
pub fn has_preferences(job: &Job, tg: &TaskGroup) -> bool {
    !job.affinities.is_empty()
        || !tg.affinities.is_empty()
        || tg.tasks.iter().any(|t| !t.affinities.is_empty())
        || !job.spreads.is_empty()
        || !tg.spreads.is_empty()
}

/// The job's type is one the scheduler can place for.
pub fn schedulable_type(job: &Job) -> bool {
    !matches!(model::job_type(job), caravan_proto::JobType::Unspecified)
}

#[cfg(test)]
mod tests {
    use super::*;
    use caravan_proto::DriverInfo;

    #[test]
    fn globs_and_pools() {
        assert!(glob("dc*", "dc1"));
        assert!(glob("*", "anything"));
        assert!(glob("us-*-1", "us-east-1"));
        assert!(!glob("us-*-1", "us-east-2"));
        assert!(!glob("dc1", "dc10"));
        assert!(datacenter_matches(&[], "x"));
        assert!(datacenter_matches(&["eu*".into(), "dc2".into()], "dc2"));
        let mut n = Node::default();
        assert!(pool_matches("", &n));
        assert!(pool_matches("all", &n));
        n.node_pool = "gpu".into();
        assert!(!pool_matches("default", &n));
        assert!(pool_matches("gpu", &n));
    }

    #[test]
    fn drivers_must_be_detected_and_healthy() {
        let mut n = Node::default();
        n.drivers.insert(
            "docker".into(),
            DriverInfo {
                detected: true,
                healthy: false,
                ..Default::default()
            },
        );
        n.drivers.insert(
            "exec".into(),
            DriverInfo {
                detected: true,
                healthy: true,
                ..Default::default()
            },
        );
        assert!(!has_driver(&n, "docker"));
        assert!(has_driver(&n, "exec"));
        assert!(!has_driver(&n, "qemu"));
        n.attributes.insert("driver.raw_exec".into(), "1".into());
        assert!(has_driver(&n, "raw_exec"));
    }

    #[test]
    fn a_bridge_group_needs_a_node_with_the_bridge_network() {
        use caravan_proto::{NetworkResource, NodeNetwork, NodeResources, TaskGroup};
        let group = |mode: &str| TaskGroup {
            networks: vec![NetworkResource {
                mode: mode.into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let host_only = Node {
            resources: Some(NodeResources {
                networks: vec![NodeNetwork {
                    mode: "host".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut bridged = host_only.clone();
        if let Some(r) = bridged.resources.as_mut() {
            r.networks.push(NodeNetwork {
                mode: "bridge".into(),
                ..Default::default()
            });
        }
        let bridge = Checks::for_group(&group("bridge")).expect("checks");
        assert_eq!(
            bridge.check_node(&host_only),
            Err(Cow::Borrowed(MISSING_NETWORK))
        );
        assert_eq!(bridge.check_node(&bridged), Ok(()));
        for mode in ["", "host", "none"] {
            let c = Checks::for_group(&group(mode)).expect("checks");
            assert_eq!(c.check_node(&host_only), Ok(()), "mode {mode:?}");
        }
        assert_ne!(
            class::compute_node_class(&host_only),
            class::compute_node_class(&bridged),
            "the bridge network is part of the class"
        );
    }
}

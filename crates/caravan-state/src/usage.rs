//! What the non-terminal allocations of a node hold: kept incrementally by
//! the cache on every alloc write, never recomputed by a scan.

use caravan_model::AllocExt;
use caravan_proto::Allocation;

use crate::index::Id;

/// A host port held on a node.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UsedPort {
    /// The port number.
    pub port: u32,
    /// The host address it is bound on (empty when the alloc named none).
    pub host_ip: Id,
}

/// The sum of what the non-terminal allocations of one node hold.
///
/// Ports and cores are sorted multisets in flat vectors: a node holds a few
/// hundred ports, and a flat vector is both faster to update in place and
/// cheaper to copy (when a snapshot shares it) than a tree of that size.
#[derive(Clone, Debug, Default)]
pub struct NodeUsage {
    /// CPU in MHz.
    pub cpu_mhz: u64,
    /// Memory in MB.
    pub memory_mb: u64,
    /// Memory the tasks may burst to, in MB (a task without a max counts its
    /// memory, as Nomad adds them).
    pub memory_max_mb: u64,
    /// Disk in MB.
    pub disk_mb: u64,
    /// Number of non-terminal allocations.
    pub allocs: u64,
    /// Device instances held, counted once per allocation holding them.
    pub device_instances: u64,
    /// Reserved core ids, once per alloc holding them (twice only if
    /// committed state is already over-committed).
    cores: Vec<u32>,
    /// `port << 32 | index into host_ips`, once per alloc holding it.
    ports: Vec<u64>,
    /// The host addresses ports were bound on; a node has one or a few.
    host_ips: Vec<Id>,
}

impl PartialEq for NodeUsage {
    fn eq(&self, other: &Self) -> bool {
        self.cpu_mhz == other.cpu_mhz
            && self.memory_mb == other.memory_mb
            && self.memory_max_mb == other.memory_max_mb
            && self.disk_mb == other.disk_mb
            && self.allocs == other.allocs
            && self.device_instances == other.device_instances
            && self.cores == other.cores
            && self.port_list() == other.port_list()
    }
}

impl Eq for NodeUsage {}

impl NodeUsage {
    /// The reserved core ids, ascending, each once.
    pub fn reserved_cores(&self) -> impl Iterator<Item = u32> + '_ {
        let mut last = None;
        self.cores.iter().copied().filter(move |c| {
            let new = last != Some(*c);
            last = Some(*c);
            new
        })
    }

    /// Whether a core is reserved by some allocation.
    pub fn core_reserved(&self, core: u32) -> bool {
        self.cores.binary_search(&core).is_ok()
    }

    /// The ports held, ordered by port then address, each once.
    pub fn used_ports(&self) -> Vec<UsedPort> {
        let mut ports = self.port_list();
        ports.dedup();
        ports
    }

    /// Whether `port` is held on any address of the node.
    pub fn port_in_use(&self, port: u32) -> bool {
        let from = u64::from(port) << 32;
        let at = self.ports.partition_point(|p| *p < from);
        self.ports
            .get(at)
            .is_some_and(|p| p >> 32 == u64::from(port))
    }

    /// Whether `port` is held on the address `host_ip`.
    pub fn port_in_use_on(&self, host_ip: &str, port: u32) -> bool {
        self.host_ips
            .iter()
            .position(|ip| ip.as_str() == host_ip)
            .is_some_and(|ix| self.ports.binary_search(&pack(port, ix)).is_ok())
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.allocs == 0
            && self.cpu_mhz == 0
            && self.memory_mb == 0
            && self.memory_max_mb == 0
            && self.disk_mb == 0
            && self.device_instances == 0
            && self.cores.is_empty()
            && self.ports.is_empty()
    }

    /// The reserved core ids, ascending, once per allocation holding them.
    pub fn held_cores(&self) -> &[u32] {
        &self.cores
    }

    /// The held ports with their addresses, ordered by port, once per
    /// allocation holding them.
    pub fn held_ports(&self) -> impl Iterator<Item = (u32, &str)> + '_ {
        self.ports.iter().map(|p| {
            let ip = self
                .host_ips
                .get((p & 0xffff_ffff) as usize)
                .map_or("", Id::as_str);
            ((p >> 32) as u32, ip)
        })
    }

    /// Counts a non-terminal allocation in (a terminal one holds nothing).
    pub fn add_alloc(&mut self, alloc: &Allocation) {
        if let Some(u) = AllocUsage::of(alloc) {
            self.add(&u);
        }
    }

    /// Counts a non-terminal allocation out (a terminal one held nothing).
    pub fn sub_alloc(&mut self, alloc: &Allocation) {
        if let Some(u) = AllocUsage::of(alloc) {
            self.sub(&u);
        }
    }

    /// Every held port with its address, sorted, duplicates kept.
    fn port_list(&self) -> Vec<UsedPort> {
        let mut ports: Vec<UsedPort> = self
            .ports
            .iter()
            .map(|p| UsedPort {
                port: (p >> 32) as u32,
                host_ip: self
                    .host_ips
                    .get((p & 0xffff_ffff) as usize)
                    .cloned()
                    .unwrap_or_else(|| Id::from("")),
            })
            .collect();
        ports.sort();
        ports
    }

    fn ip_index(&mut self, host_ip: &str) -> usize {
        match self.host_ips.iter().position(|ip| ip.as_str() == host_ip) {
            Some(ix) => ix,
            None => {
                self.host_ips.push(Id::from(host_ip));
                self.host_ips.len() - 1
            }
        }
    }

    pub(crate) fn add(&mut self, u: &AllocUsage<'_>) {
        self.cpu_mhz = self.cpu_mhz.saturating_add(u.cpu_mhz);
        self.memory_mb = self.memory_mb.saturating_add(u.memory_mb);
        self.memory_max_mb = self.memory_max_mb.saturating_add(u.memory_max_mb);
        self.disk_mb = self.disk_mb.saturating_add(u.disk_mb);
        self.allocs = self.allocs.saturating_add(1);
        self.device_instances = self.device_instances.saturating_add(u.device_instances);
        for core in &u.cores {
            let at = self.cores.partition_point(|c| c < core);
            self.cores.insert(at, *core);
        }
        for (port, ip) in &u.ports {
            let packed = pack(*port, self.ip_index(ip));
            let at = self.ports.partition_point(|p| *p < packed);
            self.ports.insert(at, packed);
        }
    }

    pub(crate) fn sub(&mut self, u: &AllocUsage<'_>) {
        // Saturating: a bug elsewhere must not panic every worker; it would
        // show as usage lower than the allocs' sum, which the tests check.
        self.cpu_mhz = self.cpu_mhz.saturating_sub(u.cpu_mhz);
        self.memory_mb = self.memory_mb.saturating_sub(u.memory_mb);
        self.memory_max_mb = self.memory_max_mb.saturating_sub(u.memory_max_mb);
        self.disk_mb = self.disk_mb.saturating_sub(u.disk_mb);
        self.allocs = self.allocs.saturating_sub(1);
        self.device_instances = self.device_instances.saturating_sub(u.device_instances);
        for core in &u.cores {
            if let Ok(at) = self.cores.binary_search(core) {
                self.cores.remove(at);
            }
        }
        for (port, ip) in &u.ports {
            let Some(ix) = self.host_ips.iter().position(|h| h.as_str() == *ip) else {
                continue;
            };
            if let Ok(at) = self.ports.binary_search(&pack(*port, ix)) {
                self.ports.remove(at);
            }
        }
    }
}

/// One port on one of the node's addresses, as a sortable integer.
fn pack(port: u32, ip_index: usize) -> u64 {
    (u64::from(port) << 32) | (ip_index as u64 & 0xffff_ffff)
}

/// What one non-terminal allocation holds on its node.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct AllocUsage<'a> {
    cpu_mhz: u64,
    memory_mb: u64,
    memory_max_mb: u64,
    disk_mb: u64,
    device_instances: u64,
    cores: Vec<u32>,
    /// (port, host ip), each once.
    ports: Vec<(u32, &'a str)>,
}

impl<'a> AllocUsage<'a> {
    /// What `alloc` holds, or `None` once it is terminal.
    pub(crate) fn of(alloc: &'a Allocation) -> Option<Self> {
        if alloc.is_terminal() {
            return None;
        }
        let mut u = AllocUsage::default();
        let Some(res) = &alloc.allocated_resources else {
            return Some(u);
        };
        for task in res.tasks.values() {
            u.cpu_mhz += u64::from(task.cpu_mhz);
            u.memory_mb += u64::from(task.memory_mb);
            u.memory_max_mb += u64::from(if task.memory_max_mb != 0 {
                task.memory_max_mb
            } else {
                task.memory_mb
            });
            u.cores.extend_from_slice(&task.reserved_cores);
            u.device_instances += task
                .devices
                .iter()
                .map(|d| d.device_ids.len() as u64)
                .sum::<u64>();
            u.ports
                .extend(task.ports.iter().map(|p| (p.value, p.host_ip.as_str())));
        }
        if let Some(shared) = &res.shared {
            u.disk_mb = u64::from(shared.disk_mb);
            u.ports
                .extend(shared.ports.iter().map(|p| (p.value, p.host_ip.as_str())));
        }
        u.cores.sort_unstable();
        u.cores.dedup();
        u.ports.retain(|(port, _)| *port != 0);
        u.ports.sort_unstable();
        u.ports.dedup();
        Some(u)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caravan_proto::{
        AllocClientStatus, AllocDesiredStatus, AllocatedDevice, AllocatedPort, AllocatedResources,
        AllocatedSharedResources, AllocatedTaskResources,
    };

    fn port(value: u32, ip: &str) -> AllocatedPort {
        AllocatedPort {
            label: format!("p{value}"),
            value,
            to: 0,
            host_ip: ip.into(),
        }
    }

    fn alloc() -> Allocation {
        let mut res = AllocatedResources::default();
        res.tasks.insert(
            "web".into(),
            AllocatedTaskResources {
                cpu_mhz: 500,
                memory_mb: 256,
                memory_max_mb: 512,
                reserved_cores: vec![2, 3],
                ports: vec![port(8080, "10.0.0.1")],
                ..Default::default()
            },
        );
        res.tasks.insert(
            "sidecar".into(),
            AllocatedTaskResources {
                cpu_mhz: 100,
                memory_mb: 64,
                ports: vec![port(8080, "10.0.0.1")],
                ..Default::default()
            },
        );
        res.shared = Some(AllocatedSharedResources {
            disk_mb: 300,
            ports: vec![port(25000, "10.0.0.1")],
            networks: vec![],
        });
        Allocation {
            id: "a".into(),
            desired_status: AllocDesiredStatus::Run as i32,
            client_status: AllocClientStatus::Running as i32,
            allocated_resources: Some(res),
            ..Default::default()
        }
    }

    #[test]
    fn a_terminal_alloc_holds_nothing() {
        let mut a = alloc();
        assert!(AllocUsage::of(&a).is_some());
        for s in [
            AllocClientStatus::Pending,
            AllocClientStatus::Running,
            AllocClientStatus::Unknown,
        ] {
            a.client_status = s as i32;
            assert!(AllocUsage::of(&a).is_some(), "{s:?}");
        }
        for s in [
            AllocClientStatus::Complete,
            AllocClientStatus::Failed,
            AllocClientStatus::Lost,
        ] {
            a.client_status = s as i32;
            assert!(AllocUsage::of(&a).is_none(), "{s:?}");
        }
        a.client_status = AllocClientStatus::Running as i32;
        for d in [AllocDesiredStatus::Stop, AllocDesiredStatus::Evict] {
            a.desired_status = d as i32;
            assert!(AllocUsage::of(&a).is_none(), "{d:?}");
        }
    }

    #[test]
    fn an_alloc_holds_the_sum_of_its_tasks() {
        let a = alloc();
        let u = AllocUsage::of(&a).unwrap();
        assert_eq!(u.cpu_mhz, 600);
        assert_eq!(u.memory_mb, 320);
        assert_eq!(u.memory_max_mb, 512 + 64);
        assert_eq!(u.disk_mb, 300);
        assert_eq!(u.cores, vec![2, 3]);
        assert_eq!(u.ports, vec![(8080, "10.0.0.1"), (25000, "10.0.0.1")]);
    }

    #[test]
    fn add_then_sub_leaves_nothing() {
        let a = alloc();
        let u = AllocUsage::of(&a).unwrap();
        let mut node = NodeUsage::default();
        node.add(&u);
        node.add(&u);
        assert_eq!(node.cpu_mhz, 1200);
        assert_eq!(node.allocs, 2);
        assert!(node.core_reserved(2) && !node.core_reserved(1));
        assert!(node.port_in_use(8080));
        assert!(node.port_in_use_on("10.0.0.1", 25000));
        assert!(!node.port_in_use_on("10.0.0.2", 25000));
        assert!(!node.port_in_use(8081));
        let ip = Id::from("10.0.0.1");
        assert_eq!(
            node.used_ports(),
            vec![
                UsedPort {
                    port: 8080,
                    host_ip: ip.clone()
                },
                UsedPort {
                    port: 25000,
                    host_ip: ip
                },
            ]
        );
        node.sub(&u);
        assert!(node.port_in_use(8080), "still held by the second alloc");
        assert_eq!(node.reserved_cores().collect::<Vec<_>>(), vec![2, 3]);
        node.sub(&u);
        assert!(node.is_empty(), "{node:?}");
        assert_eq!(node, NodeUsage::default());
    }

    #[test]
    fn held_cores_ports_and_devices_count_every_holder() {
        let mut a = alloc();
        a.allocated_resources
            .as_mut()
            .unwrap()
            .tasks
            .get_mut("web")
            .unwrap()
            .devices
            .push(AllocatedDevice {
                name: "nvidia/gpu".into(),
                device_ids: vec!["gpu-0".into(), "gpu-1".into()],
            });
        let mut node = NodeUsage::default();
        node.add_alloc(&a);
        node.add_alloc(&a);
        assert_eq!(node.device_instances, 4);
        assert_eq!(node.held_cores(), &[2, 2, 3, 3]);
        assert_eq!(
            node.held_ports().collect::<Vec<_>>(),
            vec![
                (8080, "10.0.0.1"),
                (8080, "10.0.0.1"),
                (25000, "10.0.0.1"),
                (25000, "10.0.0.1"),
            ]
        );
        let mut stopped = a.clone();
        stopped.desired_status = AllocDesiredStatus::Stop as i32;
        node.sub_alloc(&stopped);
        assert_eq!(node.allocs, 2, "a terminal allocation held nothing");
        node.sub_alloc(&a);
        node.sub_alloc(&a);
        assert!(node.is_empty(), "{node:?}");
    }
}

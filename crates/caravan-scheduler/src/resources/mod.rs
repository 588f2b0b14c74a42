//! Resource accounting: what a node offers, what allocations hold, what a group asks.

use caravan_model::AllocExt;
use caravan_proto::{Allocation, Node, TaskGroup};

use crate::ports::{self, PortSet};

mod exact;

pub use exact::{FitError, Kept, allocs_fit, fits_beside};

/// Nomad's defaults for a task that leaves them unset.
const DEFAULT_CPU_MHZ: u64 = 100;
const DEFAULT_MEMORY_MB: u64 = 300;
const DEFAULT_DISK_MB: u64 = 300;

/// Resources held on a node by its non-terminal allocations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeUsage {
    /// CPU in MHz (reserved cores count at the node's per-core speed).
    pub cpu_mhz: u64,
    /// Memory in MB.
    pub memory_mb: u64,
    /// Memory allocations may burst to, in MB.
    pub memory_max_mb: u64,
    /// Ephemeral disk in MB.
    pub disk_mb: u64,
    /// Exclusively reserved core ids, sorted.
    pub cores: Vec<u32>,
    /// Host ports in use, sorted.
    pub ports: Vec<u32>,
}

impl NodeUsage {
    /// Sums the non-terminal allocations given.
    pub fn from_allocs<'a>(allocs: impl IntoIterator<Item = &'a Allocation>) -> Self {
        let mut u = Self::default();
        for a in allocs {
            if !a.is_terminal() {
                u.add(a);
            }
        }
        u
    }

    /// Counts an allocation in.
    pub fn add(&mut self, a: &Allocation) {
        let Some(r) = &a.allocated_resources else {
            return;
        };
        for t in r.tasks.values() {
            self.cpu_mhz = self.cpu_mhz.saturating_add(u64::from(t.cpu_mhz));
            self.memory_mb = self.memory_mb.saturating_add(u64::from(t.memory_mb));
            self.memory_max_mb = self
                .memory_max_mb
                .saturating_add(u64::from(t.memory_max_mb.max(t.memory_mb)));
            for c in &t.reserved_cores {
                insert_sorted(&mut self.cores, *c);
            }
            for p in &t.ports {
                insert_sorted(&mut self.ports, p.value);
            }
        }
        if let Some(s) = &r.shared {
            self.disk_mb = self.disk_mb.saturating_add(u64::from(s.disk_mb));
            for p in &s.ports {
                insert_sorted(&mut self.ports, p.value);
            }
        }
    }

    /// Counts an allocation out.
    pub fn remove(&mut self, a: &Allocation) {
        let Some(r) = &a.allocated_resources else {
            return;
        };
        for t in r.tasks.values() {
            self.cpu_mhz = self.cpu_mhz.saturating_sub(u64::from(t.cpu_mhz));
            self.memory_mb = self.memory_mb.saturating_sub(u64::from(t.memory_mb));
            self.memory_max_mb = self
                .memory_max_mb
                .saturating_sub(u64::from(t.memory_max_mb.max(t.memory_mb)));
            for c in &t.reserved_cores {
                remove_sorted(&mut self.cores, *c);
            }
            for p in &t.ports {
                remove_sorted(&mut self.ports, p.value);
            }
        }
        if let Some(s) = &r.shared {
            self.disk_mb = self.disk_mb.saturating_sub(u64::from(s.disk_mb));
            for p in &s.ports {
                remove_sorted(&mut self.ports, p.value);
            }
        }
    }
}

fn insert_sorted(v: &mut Vec<u32>, x: u32) {
    let i = v.partition_point(|&y| y < x);
    v.insert(i, x);
}

fn remove_sorted(v: &mut Vec<u32>, x: u32) {
    if let Ok(i) = v.binary_search(&x) {
        v.remove(i);
    }
}

/// What a node can hand out: its totals less what it reserves for itself.
#[derive(Debug, Clone, Default)]
pub struct Capacity {
    /// CPU in MHz.
    pub cpu_mhz: u64,
    /// Memory in MB.
    pub memory_mb: u64,
    /// Disk in MB.
    pub disk_mb: u64,
    /// Core ids that may be reserved, sorted.
    pub cores: Vec<u32>,
    /// MHz of one core.
    pub mhz_per_core: u64,
    /// Host ports the node keeps for itself.
    pub reserved_ports: PortSet,
    /// Dynamic port range, inclusive.
    pub dynamic_range: (u32, u32),
    /// The node's named host networks (empty for most nodes).
    pub host_networks: Vec<NetworkCapacity>,
}

/// A named host network of a node: its address and the ports reserved on it.
#[derive(Debug, Clone, Default)]
pub struct NetworkCapacity {
    /// The network's name.
    pub name: String,
    /// The node's address on it; ports asking for the network bind there.
    pub address: String,
    /// Ports reserved on this address only.
    pub reserved_ports: PortSet,
}

impl Capacity {
    /// The ports reserved on the network a port asking for `network` lands on:
    /// that network's, or every network's when the name is resolved per node
    /// (a `${meta.*}` target), which may only refuse more, never less.
    pub fn network_reserved(&self, network: &str, port: u32) -> bool {
        self.host_networks
            .iter()
            .filter(|n| network.contains("${") || n.name == network)
            .any(|n| n.reserved_ports.contains(port))
    }
}

impl Capacity {
    /// The capacity of a node.
    pub fn of(node: &Node) -> Self {
        let none_res = caravan_proto::NodeResources::default();
        let none_rsv = caravan_proto::NodeReservedResources::default();
        let res = node.resources.as_ref().unwrap_or(&none_res);
        let rsv = node.reserved.as_ref().unwrap_or(&none_rsv);
        let mut cores: Vec<u32> = res
            .core_ids
            .iter()
            .copied()
            .filter(|c| !rsv.core_ids.contains(c))
            .collect();
        cores.sort_unstable();
        cores.dedup();
        let mhz_per_core = if res.core_ids.is_empty() {
            0
        } else {
            res.cpu_mhz / res.core_ids.len() as u64
        };
        let reserved_cpu = rsv
            .cpu_mhz
            .saturating_add(mhz_per_core.saturating_mul(rsv.core_ids.len() as u64));
        let (lo, hi) = match (res.min_dynamic_port, res.max_dynamic_port) {
            (0, 0) => (ports::DEFAULT_MIN_DYNAMIC, ports::DEFAULT_MAX_DYNAMIC),
            (lo, 0) => (lo, ports::DEFAULT_MAX_DYNAMIC),
            (0, hi) => (ports::DEFAULT_MIN_DYNAMIC, hi),
            (lo, hi) => (lo, hi),
        };
        Self {
            cpu_mhz: res.cpu_mhz.saturating_sub(reserved_cpu),
            memory_mb: res.memory_mb.saturating_sub(rsv.memory_mb),
            disk_mb: res.disk_mb.saturating_sub(rsv.disk_mb),
            cores,
            mhz_per_core,
            reserved_ports: if rsv.reserved_host_ports.is_empty() {
                PortSet::default()
            } else {
                PortSet::parse_lenient(&rsv.reserved_host_ports)
            },
            dynamic_range: (lo, hi.max(lo)),
            host_networks: node
                .host_networks
                .iter()
                .map(|n| NetworkCapacity {
                    name: n.name.clone(),
                    address: n.address.clone(),
                    reserved_ports: PortSet::parse_lenient(&n.reserved_ports),
                })
                .collect(),
        }
    }
}

/// One task's ask.
#[derive(Debug, Clone, Default)]
pub struct TaskAsk {
    /// Task name.
    pub name: String,
    /// CPU in MHz when not reserving cores.
    pub cpu_mhz: u64,
    /// Whole cores reserved exclusively.
    pub cores: u32,
    /// Memory in MB.
    pub memory_mb: u64,
    /// Memory burst ceiling in MB (0: none).
    pub memory_max_mb: u64,
}

/// What one allocation of a group asks for.
#[derive(Debug, Clone, Default)]
pub struct GroupAsk {
    /// Per task.
    pub tasks: Vec<TaskAsk>,
    /// Sum of MHz asked without cores.
    pub cpu_mhz: u64,
    /// Sum of cores.
    pub cores: u32,
    /// Sum of memory.
    pub memory_mb: u64,
    /// Ephemeral disk.
    pub disk_mb: u64,
    /// Static host ports with their labels.
    pub static_ports: Vec<(String, u32, u32)>,
    /// Labels of dynamic ports with their `to`.
    pub dynamic_ports: Vec<(String, u32)>,
    /// Labels of the ports (static or dynamic) that name a host network, with
    /// the name; empty unless the group uses host networks.
    pub host_networks: Vec<(String, String)>,
}

impl GroupAsk {
    /// The host network the port `label` asks for, if it names one.
    pub fn network_of(&self, label: &str) -> Option<&str> {
        self.host_networks
            .iter()
            .find(|(l, _)| l == label)
            .map(|(_, n)| n.as_str())
    }
}

impl GroupAsk {
    /// The ask of one allocation of `tg`.
    pub fn of(tg: &TaskGroup) -> Self {
        let mut ask = GroupAsk {
            disk_mb: match &tg.ephemeral_disk {
                Some(d) if d.size_mb > 0 => u64::from(d.size_mb),
                _ => DEFAULT_DISK_MB,
            },
            ..Default::default()
        };
        let mut networks: Vec<&caravan_proto::NetworkResource> = tg.networks.iter().collect();
        for t in &tg.tasks {
            let r = t.resources.clone().unwrap_or_default();
            let cores = r.cores;
            let cpu = if cores > 0 {
                0
            } else if r.cpu_mhz == 0 {
                DEFAULT_CPU_MHZ
            } else {
                u64::from(r.cpu_mhz)
            };
            let mem = if r.memory_mb == 0 {
                DEFAULT_MEMORY_MB
            } else {
                u64::from(r.memory_mb)
            };
            ask.cpu_mhz = ask.cpu_mhz.saturating_add(cpu);
            ask.cores = ask.cores.saturating_add(cores);
            ask.memory_mb = ask.memory_mb.saturating_add(mem);
            ask.tasks.push(TaskAsk {
                name: t.name.clone(),
                cpu_mhz: cpu,
                cores,
                memory_mb: mem,
                memory_max_mb: u64::from(r.memory_max_mb),
            });
            if let Some(res) = &t.resources {
                networks.extend(res.networks.iter());
            }
        }
        for n in networks {
            for p in n.reserved_ports.iter().chain(n.dynamic_ports.iter()) {
                if !crate::feasible::host_networks::is_default(&p.host_network) {
                    ask.host_networks
                        .push((p.label.clone(), p.host_network.clone()));
                }
            }
            for p in &n.reserved_ports {
                ask.static_ports.push((p.label.clone(), p.value, p.to));
            }
            for p in &n.dynamic_ports {
                if p.value > 0 {
                    ask.static_ports.push((p.label.clone(), p.value, p.to));
                } else {
                    ask.dynamic_ports.push((p.label.clone(), p.to));
                }
            }
        }
        ask
    }
}

/// The resource a node ran out of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exhausted {
    /// Not enough CPU.
    Cpu,
    /// Not enough memory.
    Memory,
    /// Not enough disk.
    Disk,
    /// Not enough free cores.
    Cores,
    /// A static port is taken.
    ReservedPort,
    /// No free dynamic port.
    DynamicPort,
    /// Two allocations (or an allocation and the node) hold one host port.
    PortCollision,
    /// A device instance is missing or held twice.
    Devices,
}

impl Exhausted {
    /// The dimension name used in metrics.
    pub fn dimension(self) -> &'static str {
        match self {
            Exhausted::Cpu => "cpu",
            Exhausted::Memory => "memory",
            Exhausted::Disk => "disk",
            Exhausted::Cores => "cores",
            Exhausted::ReservedPort => "network: reserved port collision",
            Exhausted::DynamicPort => "network: dynamic port selection failed",
            Exhausted::PortCollision => "network: port collision",
            Exhausted::Devices => "devices",
        }
    }
}

/// Checks whether `ask` fits next to `used`.
pub fn fits(cap: &Capacity, used: &NodeUsage, ask: &GroupAsk) -> Result<(), Exhausted> {
    // Cores first: short of cores is also short of their MHz, and "cores" says why.
    if ask.cores > 0 {
        let free = cap
            .cores
            .iter()
            .filter(|c| used.cores.binary_search(c).is_err())
            .count();
        if free < ask.cores as usize {
            return Err(Exhausted::Cores);
        }
    }
    let cpu = ask
        .cpu_mhz
        .saturating_add(u64::from(ask.cores).saturating_mul(cap.mhz_per_core));
    if used.cpu_mhz.saturating_add(cpu) > cap.cpu_mhz {
        return Err(Exhausted::Cpu);
    }
    if used.memory_mb.saturating_add(ask.memory_mb) > cap.memory_mb {
        return Err(Exhausted::Memory);
    }
    if used.disk_mb.saturating_add(ask.disk_mb) > cap.disk_mb {
        return Err(Exhausted::Disk);
    }
    ports_fit(cap, used, ask)
}

/// Ports are compared by number whatever their address: a port on a host
/// network and the same port on the node's own address count as one, which
/// may refuse a fit the exact check would allow but never allows an
/// over-commit. A group without host networks pays nothing for them.
fn ports_fit(cap: &Capacity, used: &NodeUsage, ask: &GroupAsk) -> Result<(), Exhausted> {
    for (i, (label, port, _)) in ask.static_ports.iter().enumerate() {
        if used.ports.binary_search(port).is_ok()
            || cap.reserved_ports.contains(*port)
            || ask.static_ports[..i]
                .iter()
                .any(|(other, p, _)| p == port && same_address(cap, ask, label, other))
            || (!ask.host_networks.is_empty()
                && ask
                    .network_of(label)
                    .is_some_and(|n| cap.network_reserved(n, *port)))
        {
            return Err(Exhausted::ReservedPort);
        }
    }
    if !ask.dynamic_ports.is_empty() {
        let (lo, hi) = cap.dynamic_range;
        let span = u64::from(hi - lo) + 1;
        let taken = used.ports.iter().filter(|p| (lo..=hi).contains(*p)).count() as u64
            + cap.reserved_ports.count_in(lo, hi)
            + ask
                .static_ports
                .iter()
                .filter(|(_, p, _)| (lo..=hi).contains(p))
                .count() as u64
            + network_reserved_in(cap, ask, lo, hi);
        if span.saturating_sub(taken) < ask.dynamic_ports.len() as u64 {
            return Err(Exhausted::DynamicPort);
        }
    }
    Ok(())
}

/// Whether two ports of one group land on the same address (or may: the
/// node's own network covers every address, and a `${meta.*}` name or one
/// the node lacks is taken to collide).
fn same_address(cap: &Capacity, ask: &GroupAsk, a: &str, b: &str) -> bool {
    if ask.host_networks.is_empty() {
        return true;
    }
    let address = |label: &str| {
        let name = ask.network_of(label)?;
        cap.host_networks
            .iter()
            .find(|n| !name.contains("${") && n.name == name)
            .map(|n| n.address.as_str())
    };
    match (address(a), address(b)) {
        (Some(x), Some(y)) => x == y,
        _ => true,
    }
}

/// Dynamic-range ports reserved on the host networks the group's dynamic
/// ports ask for (an overlap counts twice: it may only refuse more).
fn network_reserved_in(cap: &Capacity, ask: &GroupAsk, lo: u32, hi: u32) -> u64 {
    if ask.host_networks.is_empty() {
        return 0;
    }
    cap.host_networks
        .iter()
        .filter(|n| {
            ask.dynamic_ports.iter().any(|(label, _)| {
                ask.network_of(label)
                    .is_some_and(|want| want.contains("${") || want == n.name)
            })
        })
        .map(|n| n.reserved_ports.count_in(lo, hi))
        .sum()
}

/// Picks the cores for an ask that fits: the lowest free ids.
pub fn pick_cores(cap: &Capacity, used: &NodeUsage, n: u32) -> Vec<u32> {
    cap.cores
        .iter()
        .copied()
        .filter(|c| used.cores.binary_search(c).is_err())
        .take(n as usize)
        .collect()
}

/// Binpack fitness in 0..=1 (1 = fullest) of a node once `ask` is added.
pub fn score_fit(cap: &Capacity, used: &NodeUsage, ask: &GroupAsk, spread: bool) -> f64 {
    let cpu = used
        .cpu_mhz
        .saturating_add(ask.cpu_mhz)
        .saturating_add(u64::from(ask.cores).saturating_mul(cap.mhz_per_core)) as f64;
    let mem = used.memory_mb.saturating_add(ask.memory_mb) as f64;
    let free_cpu = if cap.cpu_mhz == 0 {
        0.0
    } else {
        1.0 - cpu / cap.cpu_mhz as f64
    };
    let free_mem = if cap.memory_mb == 0 {
        0.0
    } else {
        1.0 - mem / cap.memory_mb as f64
    };
    let total = 10f64.powf(free_cpu) + 10f64.powf(free_mem);
    let raw = if spread { total - 2.0 } else { 20.0 - total };
    raw.clamp(0.0, 18.0) / 18.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use caravan_proto::{
        AllocatedPort, AllocatedResources, AllocatedSharedResources, AllocatedTaskResources,
    };

    fn alloc(cpu: u32, mem: u32, port: u32) -> Allocation {
        let mut tasks = std::collections::BTreeMap::new();
        tasks.insert(
            "t".to_string(),
            AllocatedTaskResources {
                cpu_mhz: cpu,
                memory_mb: mem,
                ..Default::default()
            },
        );
        Allocation {
            allocated_resources: Some(AllocatedResources {
                tasks: tasks.into(),
                shared: Some(AllocatedSharedResources {
                    disk_mb: 10,
                    ports: vec![AllocatedPort {
                        label: "http".into(),
                        value: port,
                        ..Default::default()
                    }],
                    networks: vec![],
                }),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn usage_adds_and_removes() {
        let a = alloc(500, 256, 25000);
        let b = alloc(100, 128, 25001);
        let mut u = NodeUsage::from_allocs([&a, &b]);
        assert_eq!(u.cpu_mhz, 600);
        assert_eq!(u.ports, vec![25000, 25001]);
        u.remove(&a);
        assert_eq!(u.cpu_mhz, 100);
        assert_eq!(u.memory_mb, 128);
        assert_eq!(u.disk_mb, 10);
        assert_eq!(u.ports, vec![25001]);
    }

    #[test]
    fn binpack_prefers_fuller_spread_prefers_emptier() {
        let cap = Capacity {
            cpu_mhz: 4000,
            memory_mb: 8192,
            disk_mb: 10000,
            dynamic_range: (20000, 32000),
            ..Default::default()
        };
        let ask = GroupAsk {
            cpu_mhz: 500,
            memory_mb: 512,
            ..Default::default()
        };
        let empty = NodeUsage::default();
        let busy = NodeUsage {
            cpu_mhz: 2000,
            memory_mb: 4096,
            ..Default::default()
        };
        assert!(score_fit(&cap, &busy, &ask, false) > score_fit(&cap, &empty, &ask, false));
        assert!(score_fit(&cap, &empty, &ask, true) > score_fit(&cap, &busy, &ask, true));
        assert_eq!(
            fits(
                &cap,
                &busy,
                &GroupAsk {
                    cpu_mhz: 2001,
                    ..Default::default()
                }
            ),
            Err(Exhausted::Cpu)
        );
    }
}

//! The no-over-commit invariant, checked on what is stored: the live
//! allocations of each node ask for no more cpu, memory and disk than the
//! node offers after its reservation, and no host port (per address), no
//! reserved core and no device instance is held twice or taken from what
//! the node keeps for itself.
//!
//! Written apart from the scheduler's fit check on purpose: the scheduler
//! and the plan applier both rest on that one, so a bug in it would pass
//! them both; this reading of the stored objects would still catch it.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use caravan_model::AllocExt;
use caravan_proto::{AllocatedResources, Allocation, Node};

/// What the live allocations of one node hold.
#[derive(Default)]
struct Held<'a> {
    cpu_mhz: u64,
    memory_mb: u64,
    disk_mb: u64,
    /// Host port → (address, allocation) for each holder; an empty address
    /// is every address of the node.
    ports: BTreeMap<u32, Vec<(&'a str, &'a str)>>,
    /// Reserved core → the allocations holding it.
    cores: BTreeMap<u32, Vec<&'a str>>,
    /// Device instance → the allocations holding it.
    devices: BTreeMap<&'a str, Vec<&'a str>>,
}

impl<'a> Held<'a> {
    fn add(&mut self, alloc_id: &'a str, res: &'a AllocatedResources) {
        // A port a task and its group both list is one port of the alloc.
        let mut ports: BTreeSet<(u32, &'a str)> = BTreeSet::new();
        for task in res.tasks.values() {
            self.cpu_mhz += u64::from(task.cpu_mhz);
            self.memory_mb += u64::from(task.memory_mb);
            for core in &task.reserved_cores {
                self.cores.entry(*core).or_default().push(alloc_id);
            }
            ports.extend(task.ports.iter().map(|p| (p.value, p.host_ip.as_str())));
            for device in &task.devices {
                for instance in &device.device_ids {
                    self.devices
                        .entry(instance.as_str())
                        .or_default()
                        .push(alloc_id);
                }
            }
        }
        if let Some(shared) = &res.shared {
            self.disk_mb += u64::from(shared.disk_mb);
            ports.extend(shared.ports.iter().map(|p| (p.value, p.host_ip.as_str())));
        }
        for (port, address) in ports {
            // Port 0 is a port not given yet, not a host port.
            if port != 0 {
                self.ports
                    .entry(port)
                    .or_default()
                    .push((address, alloc_id));
            }
        }
    }
}

/// Nodes whose live allocations ask for more than the node offers (after
/// its reservation) or hold one port, core or device instance twice, with
/// what was found; one line per breach.
pub fn overcommitted_nodes(nodes: &[Node], allocs: &[Allocation]) -> Vec<String> {
    let mut held: HashMap<&str, Held<'_>> = HashMap::new();
    for a in allocs.iter().filter(|a| a.is_live()) {
        let entry = held.entry(a.node_id.as_str()).or_default();
        if let Some(res) = &a.allocated_resources {
            entry.add(&a.id, res);
        }
    }
    let mut over = Vec::new();
    for n in nodes {
        if let Some(h) = held.remove(n.id.as_str()) {
            over.extend(
                breaches(n, &h)
                    .into_iter()
                    .map(|b| format!("node {} ({}): {b}", n.name, n.id)),
            );
        }
    }
    let mut unknown: Vec<&str> = held.into_keys().collect();
    unknown.sort_unstable();
    for id in unknown {
        over.push(format!("live allocations on unknown node {id}"));
    }
    over
}

/// What the allocations holding `h` breach on node `n`.
fn breaches(n: &Node, h: &Held<'_>) -> Vec<String> {
    let total = n.resources.clone().unwrap_or_default();
    let reserved = n.reserved.clone().unwrap_or_default();
    let mut found = Vec::new();
    let cap_cpu = total.cpu_mhz.saturating_sub(reserved.cpu_mhz);
    let cap_mem = total.memory_mb.saturating_sub(reserved.memory_mb);
    let cap_disk = total.disk_mb.saturating_sub(reserved.disk_mb);
    if h.cpu_mhz > cap_cpu || h.memory_mb > cap_mem || h.disk_mb > cap_disk {
        found.push(format!(
            "cpu {}/{cap_cpu} MHz, memory {}/{cap_mem} MB, disk {}/{cap_disk} MB",
            h.cpu_mhz, h.memory_mb, h.disk_mb
        ));
    }
    let node_ports = match host_ports(&reserved.reserved_host_ports) {
        Ok(ports) => ports,
        Err(bad) => {
            found.push(format!("reserved host ports {bad:?} do not parse"));
            BTreeSet::new()
        }
    };
    // Ports a named host network reserves, on that network's address only.
    let mut network_ports: Vec<(&str, &str, BTreeSet<u32>)> = Vec::new();
    for net in &n.host_networks {
        match host_ports(&net.reserved_ports) {
            Ok(ports) => network_ports.push((&net.name, &net.address, ports)),
            Err(bad) => found.push(format!(
                "host network {} reserved ports {bad:?} do not parse",
                net.name
            )),
        }
    }
    for (port, holders) in &h.ports {
        for (name, address, ports) in &network_ports {
            for (held_on, id) in holders {
                if held_on == address && ports.contains(port) {
                    found.push(format!(
                        "port {port} is reserved on host network {name} ({address}), held by {id}"
                    ));
                }
            }
        }
        if node_ports.contains(port) {
            let ids: Vec<&str> = holders.iter().map(|(_, id)| *id).collect();
            found.push(format!(
                "port {port} is reserved by the node, held by {}",
                ids.join(", ")
            ));
        }
        for (i, (address, id)) in holders.iter().enumerate() {
            for (other_address, other) in &holders[i + 1..] {
                if address.is_empty() || other_address.is_empty() || address == other_address {
                    found.push(format!(
                        "port {port} held by {id} (on {}) and {other} (on {})",
                        shown(address),
                        shown(other_address)
                    ));
                }
            }
        }
    }
    let offered: BTreeSet<u32> = total
        .core_ids
        .iter()
        .filter(|c| !reserved.core_ids.contains(c))
        .copied()
        .collect();
    for (core, holders) in &h.cores {
        if holders.len() > 1 {
            found.push(format!("core {core} held by {}", holders.join(", ")));
        }
        if !offered.contains(core) {
            found.push(format!(
                "core {core} held by {} is not one the node offers",
                holders.join(", ")
            ));
        }
    }
    let instances: BTreeSet<&str> = total
        .devices
        .iter()
        .flat_map(|d| d.instance_ids.iter().map(String::as_str))
        .collect();
    for (instance, holders) in &h.devices {
        if holders.len() > 1 {
            found.push(format!(
                "device instance {instance} held by {}",
                holders.join(", ")
            ));
        }
        if !instances.contains(instance) {
            found.push(format!(
                "device instance {instance} held by {} is not on the node",
                holders.join(", ")
            ));
        }
    }
    found
}

fn shown(address: &str) -> &str {
    if address.is_empty() {
        "every address"
    } else {
        address
    }
}

/// The ports of a node's `reserved_host_ports` list ("22,80,8000-8100").
fn host_ports(list: &str) -> Result<BTreeSet<u32>, String> {
    let mut ports = BTreeSet::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let parse = |s: &str| s.trim().parse::<u32>().map_err(|_| list.to_string());
        let (lo, hi) = (parse(lo)?, parse(hi)?);
        if lo > hi || hi > 65_535 {
            return Err(list.to_string());
        }
        ports.extend(lo..=hi);
    }
    Ok(ports)
}

#[cfg(test)]
mod tests {
    use caravan_proto::{
        AllocClientStatus, AllocDesiredStatus, AllocatedDevice, AllocatedPort,
        AllocatedSharedResources, AllocatedTaskResources, NodeDevice, NodeReservedResources,
        NodeResources,
    };

    use super::*;

    fn node() -> Node {
        Node {
            id: "n1".into(),
            name: "one".into(),
            resources: Some(NodeResources {
                cpu_mhz: 4000,
                core_ids: vec![0, 1, 2, 3],
                memory_mb: 8192,
                disk_mb: 10_000,
                devices: vec![NodeDevice {
                    name: "nvidia/gpu/t4".into(),
                    instance_ids: vec!["gpu-0".into(), "gpu-1".into()],
                    ..Default::default()
                }],
                ..Default::default()
            }),
            reserved: Some(NodeReservedResources {
                core_ids: vec![0],
                reserved_host_ports: "22, 8000-8002".into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn port(value: u32, host_ip: &str) -> AllocatedPort {
        AllocatedPort {
            label: format!("p{value}"),
            value,
            host_ip: host_ip.into(),
            ..Default::default()
        }
    }

    /// A live allocation on n1 with a task holding `cores`, `task_ports`
    /// and `devices`, and `group_ports` for the group.
    fn alloc(
        id: &str,
        cores: &[u32],
        task_ports: Vec<AllocatedPort>,
        group_ports: Vec<AllocatedPort>,
        devices: &[&str],
    ) -> Allocation {
        let task = AllocatedTaskResources {
            cpu_mhz: 100,
            memory_mb: 64,
            reserved_cores: cores.to_vec(),
            ports: task_ports,
            devices: vec![AllocatedDevice {
                name: "nvidia/gpu/t4".into(),
                device_ids: devices.iter().map(|d| d.to_string()).collect(),
            }],
            ..Default::default()
        };
        Allocation {
            id: id.into(),
            node_id: "n1".into(),
            desired_status: AllocDesiredStatus::Run as i32,
            client_status: AllocClientStatus::Running as i32,
            allocated_resources: Some(AllocatedResources {
                tasks: [("t".to_string(), task)].into(),
                shared: Some(AllocatedSharedResources {
                    disk_mb: 100,
                    ports: group_ports,
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }
    }

    fn check(allocs: &[Allocation]) -> Vec<String> {
        overcommitted_nodes(&[node()], allocs)
    }

    #[test]
    fn allocations_that_share_nothing_pass() {
        let a = alloc(
            "a",
            &[1],
            vec![port(25000, "10.0.0.1")],
            vec![port(8080, "")],
            &["gpu-0"],
        );
        // The same port on another address, a port listed by the task and
        // its group alike, and a core, port and device held by a stopped
        // allocation share nothing with live ones.
        let b = alloc(
            "b",
            &[2],
            vec![port(25000, "10.0.0.2"), port(9090, "10.0.0.2")],
            vec![port(9090, "10.0.0.2")],
            &["gpu-1"],
        );
        let mut stopped = alloc("c", &[1], vec![port(8080, "")], vec![], &["gpu-0"]);
        stopped.desired_status = AllocDesiredStatus::Stop as i32;
        assert_eq!(check(&[a, b, stopped]), Vec::<String>::new());
    }

    #[test]
    fn a_double_booked_port_is_caught_per_address() {
        let a = alloc("a", &[], vec![port(25000, "10.0.0.1")], vec![], &[]);
        let same = alloc("b", &[], vec![], vec![port(25000, "10.0.0.1")], &[]);
        let found = check(&[a.clone(), same]);
        assert_eq!(
            found,
            vec!["node one (n1): port 25000 held by a (on 10.0.0.1) and b (on 10.0.0.1)"]
        );
        // A port held without an address is held on every address.
        let everywhere = alloc("c", &[], vec![port(25000, "")], vec![], &[]);
        let found = check(&[a, everywhere]);
        assert_eq!(
            found,
            vec!["node one (n1): port 25000 held by a (on 10.0.0.1) and c (on every address)"]
        );
        // A port the node keeps for itself is not the allocations' to hold.
        let reserved = alloc("d", &[], vec![port(8001, "10.0.0.1")], vec![], &[]);
        assert_eq!(
            check(&[reserved]),
            vec!["node one (n1): port 8001 is reserved by the node, held by d"]
        );
    }

    #[test]
    fn a_double_booked_core_is_caught() {
        let a = alloc("a", &[1, 2], vec![], vec![], &[]);
        let b = alloc("b", &[2], vec![], vec![], &[]);
        assert_eq!(check(&[a, b]), vec!["node one (n1): core 2 held by a, b"]);
        // Core 0 is the node's own; core 7 does not exist.
        let own = alloc("c", &[0, 7], vec![], vec![], &[]);
        assert_eq!(
            check(&[own]),
            vec![
                "node one (n1): core 0 held by c is not one the node offers",
                "node one (n1): core 7 held by c is not one the node offers",
            ]
        );
    }

    #[test]
    fn a_double_booked_device_instance_is_caught() {
        let a = alloc("a", &[], vec![], vec![], &["gpu-0"]);
        let b = alloc("b", &[], vec![], vec![], &["gpu-0", "gpu-9"]);
        assert_eq!(
            check(&[a, b]),
            vec![
                "node one (n1): device instance gpu-0 held by a, b",
                "node one (n1): device instance gpu-9 held by b is not on the node",
            ]
        );
    }

    #[test]
    fn cpu_memory_and_disk_beyond_the_node_are_caught() {
        let mut big = alloc("a", &[], vec![], vec![], &[]);
        let res = big.allocated_resources.as_mut().unwrap();
        res.tasks.get_mut("t").unwrap().memory_mb = 9000;
        let found = check(&[big]);
        assert_eq!(
            found,
            vec!["node one (n1): cpu 100/4000 MHz, memory 9000/8192 MB, disk 100/10000 MB"]
        );
        let mut elsewhere = alloc("b", &[], vec![], vec![], &[]);
        elsewhere.node_id = "n9".into();
        assert_eq!(
            check(&[elsewhere]),
            vec!["live allocations on unknown node n9"]
        );
    }

    #[test]
    fn reserved_host_port_lists_parse_like_the_node_writes_them() {
        assert_eq!(
            host_ports("22, 80,8000-8002").unwrap(),
            BTreeSet::from([22, 80, 8000, 8001, 8002])
        );
        assert!(host_ports("").unwrap().is_empty());
        assert!(host_ports("80-22").is_err());
        assert!(host_ports("http").is_err());
    }

    #[test]
    fn a_port_reserved_on_a_host_network_is_caught_on_its_address_only() {
        let mut n = node();
        n.host_networks.push(caravan_proto::NodeHostNetwork {
            name: "public".into(),
            address: "203.0.113.5".into(),
            interface: "eth1".into(),
            reserved_ports: "443".into(),
            ..Default::default()
        });
        let on_public = alloc("a", &[], vec![port(443, "203.0.113.5")], vec![], &[]);
        let elsewhere = alloc("b", &[], vec![port(443, "10.0.0.1")], vec![], &[]);
        assert_eq!(
            overcommitted_nodes(&[n.clone()], &[on_public]),
            vec![
                "node one (n1): port 443 is reserved on host network public (203.0.113.5), held by a"
                    .to_string()
            ]
        );
        assert_eq!(
            overcommitted_nodes(&[n], &[elsewhere]),
            Vec::<String>::new()
        );
    }
}

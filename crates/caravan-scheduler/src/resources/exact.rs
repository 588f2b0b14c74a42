//! The exact fit of a node's allocations: what the plan applier checks before a
//! commit and what the test harness verifies fixture plans with.
//!
//! Selection works on [`super::NodeUsage`] sums, which compare ports by number
//! and ignore devices; this check counts what the allocations actually hold:
//! cpu, memory and disk against the node's [`Capacity`], exclusive core ids,
//! host ports per address (the node's reserved ports included) and device
//! instances.

use std::collections::{HashMap, HashSet};

use caravan_model::AllocExt;
use caravan_proto::{AllocatedResources, AllocatedTaskResources, Allocation, Node};

use super::{Capacity, Exhausted};

/// Why a set of allocations does not fit on a node: the dimension, and what
/// exactly ran out or collided.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct FitError {
    /// The dimension that ran out or collided.
    pub exhausted: Exhausted,
    /// A sentence naming the dimension first, then the values or holders.
    pub detail: String,
}

impl FitError {
    fn new(exhausted: Exhausted, detail: impl std::fmt::Display) -> Self {
        Self {
            exhausted,
            detail: format!("{}: {detail}", exhausted.dimension()),
        }
    }
}

/// Checks that the non-terminal allocations among `allocs` fit on `node`
/// together; the error names the dimension that ran out or collided.
pub fn allocs_fit<'a>(
    node: &Node,
    allocs: impl IntoIterator<Item = &'a Allocation>,
) -> Result<(), FitError> {
    let mut held = Holdings::of(node);
    held.add_allocs(allocs)?;
    held.check_totals()
}

/// What the allocations staying on a node hold, summed: the start of
/// [`fits_beside`]. Cores and ports are listed once per allocation holding
/// them, so a collision among the kept allocations still shows.
#[derive(Debug, Default, Clone)]
pub struct Kept<'a> {
    /// CPU in MHz.
    pub cpu_mhz: u64,
    /// Memory in MB.
    pub memory_mb: u64,
    /// Disk in MB.
    pub disk_mb: u64,
    /// Reserved core ids.
    pub cores: &'a [u32],
    /// Host ports with the address each is held on (empty: every address).
    pub ports: Vec<(u32, &'a str)>,
}

/// Checks that `placing` fits on `node` beside allocations holding `kept`,
/// refusing exactly what [`allocs_fit`] refuses for the kept allocations and
/// `placing` together, as long as the kept allocations hold no device
/// instances (their holders are not in the sum: check those with
/// [`allocs_fit`]). Its cost follows `placing` and the kept cores and ports,
/// not the number of allocations kept.
pub fn fits_beside<'a>(
    node: &Node,
    kept: &Kept<'a>,
    placing: impl IntoIterator<Item = &'a Allocation>,
) -> Result<(), FitError> {
    let mut held = Holdings::of(node);
    held.cpu = kept.cpu_mhz;
    held.memory = kept.memory_mb;
    held.disk = kept.disk_mb;
    for core in kept.cores {
        held.claim_core(KEPT_HOLDER, *core)?;
    }
    held.own_ports.extend_from_slice(&kept.ports);
    held.claim_ports()?;
    held.add_allocs(placing)?;
    held.check_totals()
}

/// How collisions name an allocation known only through a [`Kept`] sum.
const KEPT_HOLDER: &str = "an allocation on the node";

/// What the allocations checked so far hold on one node.
struct Holdings<'n, 'a> {
    cap: Capacity,
    /// Device instances the node has.
    node_devices: HashSet<&'n str>,
    cpu: u64,
    memory: u64,
    disk: u64,
    /// Reserved core → the allocation holding it.
    cores: HashMap<u32, &'a str>,
    /// Host port → the addresses it is held on.
    ports: HashMap<u32, Vec<&'a str>>,
    /// Device instance → the allocation holding it.
    devices: HashMap<&'a str, &'a str>,
    /// The ports of the allocation being added, reused between allocations.
    own_ports: Vec<(u32, &'a str)>,
}

impl<'n, 'a> Holdings<'n, 'a> {
    fn of(node: &'n Node) -> Self {
        Self {
            cap: Capacity::of(node),
            node_devices: node
                .resources
                .iter()
                .flat_map(|r| r.devices.iter())
                .flat_map(|d| d.instance_ids.iter().map(String::as_str))
                .collect(),
            cpu: 0,
            memory: 0,
            disk: 0,
            cores: HashMap::new(),
            ports: HashMap::new(),
            devices: HashMap::new(),
            own_ports: Vec::new(),
        }
    }

    /// Adds what the non-terminal allocations among `allocs` hold; `Err` on
    /// the first collision.
    fn add_allocs(
        &mut self,
        allocs: impl IntoIterator<Item = &'a Allocation>,
    ) -> Result<(), FitError> {
        for alloc in allocs {
            if alloc.is_terminal() {
                continue;
            }
            if let Some(res) = &alloc.allocated_resources {
                self.add(&alloc.id, res)?;
            }
        }
        Ok(())
    }

    /// Adds one allocation's resources; `Err` on the first collision.
    fn add(&mut self, alloc_id: &'a str, res: &'a AllocatedResources) -> Result<(), FitError> {
        self.own_ports.clear();
        for task in res.tasks.values() {
            self.add_task(alloc_id, task)?;
        }
        if let Some(shared) = &res.shared {
            self.disk = self.disk.saturating_add(u64::from(shared.disk_mb));
            self.own_ports
                .extend(shared.ports.iter().map(|p| (p.value, p.host_ip.as_str())));
        }
        self.claim_own_ports()
    }

    /// Adds a task's cpu and memory, claims its cores and device instances,
    /// and notes its ports.
    fn add_task(
        &mut self,
        alloc_id: &'a str,
        task: &'a AllocatedTaskResources,
    ) -> Result<(), FitError> {
        self.cpu = self.cpu.saturating_add(u64::from(task.cpu_mhz));
        self.memory = self.memory.saturating_add(u64::from(task.memory_mb));
        for core in &task.reserved_cores {
            self.claim_core(alloc_id, *core)?;
        }
        self.own_ports
            .extend(task.ports.iter().map(|p| (p.value, p.host_ip.as_str())));
        for device in &task.devices {
            for instance in &device.device_ids {
                if !self.node_devices.contains(instance.as_str()) {
                    return Err(FitError::new(
                        Exhausted::Devices,
                        format_args!("instance {instance} of {} is not on the node", device.name),
                    ));
                }
                if let Some(other) = self.devices.insert(instance, alloc_id) {
                    return Err(FitError::new(
                        Exhausted::Devices,
                        format_args!("instance {instance} is held by {other} and {alloc_id}"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Claims one reserved core for `alloc_id`.
    fn claim_core(&mut self, alloc_id: &'a str, core: u32) -> Result<(), FitError> {
        if self.cap.cores.binary_search(&core).is_err() {
            return Err(FitError::new(
                Exhausted::Cores,
                format_args!("core {core} is not available on the node"),
            ));
        }
        if let Some(other) = self.cores.insert(core, alloc_id) {
            return Err(FitError::new(
                Exhausted::Cores,
                format_args!("core {core} is reserved by {other} and {alloc_id}"),
            ));
        }
        Ok(())
    }

    /// Claims the host ports of the allocation being added.
    fn claim_own_ports(&mut self) -> Result<(), FitError> {
        // The same port may be listed by a task and the group it belongs to.
        self.own_ports.retain(|(port, _)| *port != 0);
        self.own_ports.sort_unstable();
        self.own_ports.dedup();
        self.claim_ports()
    }

    /// Claims every port in `own_ports`.
    fn claim_ports(&mut self) -> Result<(), FitError> {
        for &(port, ip) in &self.own_ports {
            if self.cap.reserved_ports.contains(port) {
                return Err(FitError::new(
                    Exhausted::PortCollision,
                    format_args!("port {port} is reserved by the node"),
                ));
            }
            if let Some(net) = self
                .cap
                .host_networks
                .iter()
                .find(|n| !ip.is_empty() && n.address == ip && n.reserved_ports.contains(port))
            {
                return Err(FitError::new(
                    Exhausted::PortCollision,
                    format_args!("port {port} is reserved on host network {:?}", net.name),
                ));
            }
            let holders = self.ports.entry(port).or_default();
            // An allocation that names no address holds the port on every address.
            if holders
                .iter()
                .any(|held| held.is_empty() || ip.is_empty() || *held == ip)
            {
                return Err(FitError::new(
                    Exhausted::PortCollision,
                    format_args!("port {port} is already in use"),
                ));
            }
            holders.push(ip);
        }
        Ok(())
    }

    /// Checks cpu, memory and disk against the node's capacity.
    fn check_totals(&self) -> Result<(), FitError> {
        for (used, available, dimension) in [
            (self.cpu, self.cap.cpu_mhz, Exhausted::Cpu),
            (self.memory, self.cap.memory_mb, Exhausted::Memory),
            (self.disk, self.cap.disk_mb, Exhausted::Disk),
        ] {
            if used > available {
                return Err(FitError {
                    exhausted: dimension,
                    detail: format!(
                        "{} exhausted: {used} needed, {available} available",
                        dimension.dimension()
                    ),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use caravan_proto::{
        AllocClientStatus, AllocDesiredStatus, AllocatedDevice, AllocatedPort, AllocatedResources,
        AllocatedSharedResources, AllocatedTaskResources, NodeDevice, NodeReservedResources,
        NodeResources,
    };

    use super::*;

    fn node() -> Node {
        Node {
            id: "n1".into(),
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
                reserved_host_ports: "22".into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn alloc(id: &str, cpu: u32, mem: u32) -> Allocation {
        let mut tasks = BTreeMap::new();
        tasks.insert(
            "t".to_string(),
            AllocatedTaskResources {
                cpu_mhz: cpu,
                memory_mb: mem,
                ..Default::default()
            },
        );
        Allocation {
            id: id.into(),
            desired_status: AllocDesiredStatus::Run as i32,
            client_status: AllocClientStatus::Pending as i32,
            allocated_resources: Some(AllocatedResources {
                tasks: tasks.into(),
                shared: Some(AllocatedSharedResources {
                    disk_mb: 100,
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }
    }

    fn task(a: &mut Allocation) -> &mut AllocatedTaskResources {
        a.allocated_resources
            .as_mut()
            .unwrap()
            .tasks
            .get_mut("t")
            .unwrap()
    }

    fn with_port(mut a: Allocation, port: u32, ip: &str) -> Allocation {
        task(&mut a).ports.push(AllocatedPort {
            label: "http".into(),
            value: port,
            to: 0,
            host_ip: ip.into(),
        });
        a
    }

    fn dimension(r: Result<(), FitError>) -> &'static str {
        match r {
            Ok(()) => "fits",
            Err(e) => e.exhausted.dimension(),
        }
    }

    #[test]
    fn cpu_memory_and_disk_add_up() {
        let n = node();
        // 3 usable cores of 1000 MHz: the reserved core's share is not offered.
        let a = alloc("a", 1500, 4096);
        let b = alloc("b", 1500, 4096);
        assert_eq!(allocs_fit(&n, [&a, &b]), Ok(()));
        let c = alloc("c", 1, 1);
        let err = allocs_fit(&n, [&a, &b, &c]).unwrap_err();
        assert_eq!(err.exhausted, Exhausted::Cpu);
        assert_eq!(
            err.to_string(),
            "cpu exhausted: 3001 needed, 3000 available"
        );
        assert_eq!(dimension(allocs_fit(&n, [&alloc("m", 10, 9000)])), "memory");
        let mut d = alloc("d", 10, 10);
        d.allocated_resources
            .as_mut()
            .unwrap()
            .shared
            .as_mut()
            .unwrap()
            .disk_mb = 10_001;
        assert_eq!(dimension(allocs_fit(&n, [&d])), "disk");
    }

    #[test]
    fn terminal_allocs_hold_nothing() {
        let n = node();
        let mut a = alloc("a", 3000, 100);
        let b = alloc("b", 3000, 100);
        assert!(allocs_fit(&n, [&a, &b]).is_err());
        a.set_desired_status(AllocDesiredStatus::Stop);
        assert_eq!(allocs_fit(&n, [&a, &b]), Ok(()));
        a.set_desired_status(AllocDesiredStatus::Run);
        a.set_client_status(AllocClientStatus::Complete);
        assert_eq!(allocs_fit(&n, [&a, &b]), Ok(()));
    }

    #[test]
    fn ports_collide_per_address_and_with_the_node() {
        let n = node();
        let a = with_port(alloc("a", 10, 10), 8080, "10.0.0.1");
        let b = with_port(alloc("b", 10, 10), 8080, "10.0.0.2");
        assert_eq!(allocs_fit(&n, [&a, &b]), Ok(()), "different addresses");
        let c = with_port(alloc("c", 10, 10), 8080, "10.0.0.1");
        let err = allocs_fit(&n, [&a, &c]).unwrap_err();
        assert_eq!(err.exhausted, Exhausted::PortCollision);
        assert_eq!(
            err.to_string(),
            "network: port collision: port 8080 is already in use"
        );
        let any = with_port(alloc("d", 10, 10), 8080, "");
        assert!(allocs_fit(&n, [&b, &any]).is_err(), "no address means all");
        let ssh = with_port(alloc("e", 10, 10), 22, "10.0.0.1");
        let err = allocs_fit(&n, [&ssh]).unwrap_err();
        assert!(err.to_string().contains("reserved by the node"), "{err}");
        // A port listed by a task and by its group is held once.
        let mut twice = with_port(alloc("f", 10, 10), 25000, "10.0.0.1");
        twice
            .allocated_resources
            .as_mut()
            .unwrap()
            .shared
            .as_mut()
            .unwrap()
            .ports
            .push(AllocatedPort {
                label: "http".into(),
                value: 25000,
                to: 0,
                host_ip: "10.0.0.1".into(),
            });
        assert_eq!(allocs_fit(&n, [&twice]), Ok(()));
    }

    #[test]
    fn cores_are_exclusive_and_must_exist() {
        let n = node();
        let cores = |id: &str, ids: &[u32]| {
            let mut a = alloc(id, 1000, 10);
            task(&mut a).reserved_cores = ids.to_vec();
            a
        };
        assert_eq!(
            allocs_fit(&n, [&cores("a", &[1]), &cores("b", &[2])]),
            Ok(())
        );
        let err = allocs_fit(&n, [&cores("a", &[1]), &cores("c", &[1])]).unwrap_err();
        assert_eq!(err.to_string(), "cores: core 1 is reserved by a and c");
        let err = allocs_fit(&n, [&cores("r", &[0])]).unwrap_err();
        assert!(err.to_string().contains("not available"), "{err}");
        assert_eq!(dimension(allocs_fit(&n, [&cores("m", &[9])])), "cores");
    }

    #[test]
    fn a_kept_sum_collides_like_the_allocations_it_sums() {
        let n = node();
        let kept = Kept {
            cpu_mhz: 1500,
            memory_mb: 4096,
            disk_mb: 100,
            cores: &[1],
            ports: vec![(8080, "10.0.0.1")],
        };
        assert_eq!(fits_beside(&n, &kept, [&alloc("b", 1500, 4096)]), Ok(()));
        let err = fits_beside(&n, &kept, [&alloc("c", 1501, 1)]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cpu exhausted: 3001 needed, 3000 available"
        );
        let any = with_port(alloc("d", 1, 1), 8080, "");
        let err = fits_beside(&n, &kept, [&any]).unwrap_err();
        assert_eq!(err.exhausted, Exhausted::PortCollision);
        let other = with_port(alloc("e", 1, 1), 8080, "10.0.0.2");
        assert_eq!(fits_beside(&n, &kept, [&other]), Ok(()));
        let mut core = alloc("f", 1, 1);
        task(&mut core).reserved_cores = vec![1];
        let err = fits_beside(&n, &kept, [&core]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cores: core 1 is reserved by an allocation on the node and f"
        );
        // Terminal placements hold nothing.
        let mut done = alloc("g", 4000, 1);
        done.set_client_status(AllocClientStatus::Complete);
        assert_eq!(fits_beside(&n, &kept, [&done]), Ok(()));
    }

    #[test]
    fn a_kept_sum_that_already_collides_takes_nothing_more() {
        let n = node();
        let small = alloc("s", 1, 1);
        for (kept, dim) in [
            (
                Kept {
                    cores: &[1, 1],
                    ..Kept::default()
                },
                Exhausted::Cores,
            ),
            (
                Kept {
                    cores: &[0],
                    ..Kept::default()
                },
                Exhausted::Cores,
            ),
            (
                Kept {
                    ports: vec![(9000, "10.0.0.1"), (9000, "")],
                    ..Kept::default()
                },
                Exhausted::PortCollision,
            ),
            (
                Kept {
                    ports: vec![(22, "10.0.0.1")],
                    ..Kept::default()
                },
                Exhausted::PortCollision,
            ),
            (
                Kept {
                    memory_mb: 9000,
                    ..Kept::default()
                },
                Exhausted::Memory,
            ),
        ] {
            let err = fits_beside(&n, &kept, [&small]).unwrap_err();
            assert_eq!(err.exhausted, dim, "{kept:?}");
        }
    }

    #[test]
    fn device_instances_are_exclusive_and_must_exist() {
        let n = node();
        let gpu = |id: &str, inst: &str| {
            let mut a = alloc(id, 10, 10);
            task(&mut a).devices.push(AllocatedDevice {
                name: "nvidia/gpu/t4".into(),
                device_ids: vec![inst.into()],
            });
            a
        };
        assert_eq!(
            allocs_fit(&n, [&gpu("a", "gpu-0"), &gpu("b", "gpu-1")]),
            Ok(())
        );
        let err = allocs_fit(&n, [&gpu("a", "gpu-0"), &gpu("c", "gpu-0")]).unwrap_err();
        assert_eq!(err.exhausted, Exhausted::Devices);
        assert!(err.to_string().contains("gpu-0"), "{err}");
        let err = allocs_fit(&n, [&gpu("g", "gpu-7")]).unwrap_err();
        assert!(err.to_string().contains("not on the node"), "{err}");
    }

    #[test]
    fn host_network_reserved_ports_bind_only_on_that_address() {
        let mut n = node();
        n.host_networks.push(caravan_proto::NodeHostNetwork {
            name: "public".into(),
            address: "203.0.113.5".into(),
            interface: "eth1".into(),
            reserved_ports: "8080".into(),
            ..Default::default()
        });
        let on_public = with_port(alloc("a", 100, 100), 8080, "203.0.113.5");
        let err = allocs_fit(&n, [&on_public]).unwrap_err();
        assert_eq!(
            err.detail,
            "network: port collision: port 8080 is reserved on host network \"public\""
        );
        let elsewhere = with_port(alloc("b", 100, 100), 8080, "10.0.0.1");
        assert_eq!(dimension(allocs_fit(&n, [&elsewhere])), "fits");
    }
}

//! Whether a set of allocations fits on a node: cpu, memory, disk, reserved
//! cores, host ports per address and device instances, each counted exactly.
//!
//! The check is the scheduler's [`caravan_scheduler::resources::allocs_fit`],
//! so the applier refuses exactly what the scheduler's own verification (its
//! test harness) refuses; this is the last line before a commit.

use caravan_proto::{Allocation, Node};

/// Checks that the non-terminal allocations among `allocs` fit on `node`
/// together; the error says which dimension ran out or collided.
pub(crate) fn allocs_fit<'a>(
    node: &Node,
    allocs: impl IntoIterator<Item = &'a Allocation>,
) -> Result<(), String> {
    caravan_scheduler::resources::allocs_fit(node, allocs).map_err(|e| e.to_string())
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
                tasks,
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

    fn with_cores(mut a: Allocation, cores: &[u32]) -> Allocation {
        task(&mut a).reserved_cores = cores.to_vec();
        a
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
        assert!(err.starts_with("cpu exhausted"), "{err}");
        let big = alloc("big", 10, 9000);
        assert!(allocs_fit(&n, [&big]).unwrap_err().starts_with("memory"));
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
    fn ports_collide_per_address() {
        let n = node();
        let a = with_port(alloc("a", 10, 10), 8080, "10.0.0.1");
        let b = with_port(alloc("b", 10, 10), 8080, "10.0.0.2");
        assert_eq!(allocs_fit(&n, [&a, &b]), Ok(()), "different addresses");
        let c = with_port(alloc("c", 10, 10), 8080, "10.0.0.1");
        assert!(allocs_fit(&n, [&a, &c]).unwrap_err().contains("port 8080"));
        let any = with_port(alloc("d", 10, 10), 8080, "");
        assert!(allocs_fit(&n, [&b, &any]).is_err(), "no address means all");
        let ssh = with_port(alloc("e", 10, 10), 22, "10.0.0.1");
        assert!(
            allocs_fit(&n, [&ssh])
                .unwrap_err()
                .contains("reserved by the node")
        );
    }

    #[test]
    fn a_port_listed_twice_by_one_alloc_is_held_once() {
        let n = node();
        let mut a = with_port(alloc("a", 10, 10), 25000, "10.0.0.1");
        a.allocated_resources
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
        assert_eq!(allocs_fit(&n, [&a]), Ok(()));
    }

    #[test]
    fn cores_are_exclusive_and_must_exist() {
        let n = node();
        let a = with_cores(alloc("a", 1000, 10), &[1]);
        let b = with_cores(alloc("b", 1000, 10), &[2]);
        assert_eq!(allocs_fit(&n, [&a, &b]), Ok(()));
        let c = with_cores(alloc("c", 1000, 10), &[1]);
        assert!(allocs_fit(&n, [&a, &c]).unwrap_err().contains("core 1"));
        let reserved = with_cores(alloc("r", 1000, 10), &[0]);
        assert!(
            allocs_fit(&n, [&reserved])
                .unwrap_err()
                .contains("not available")
        );
        let missing = with_cores(alloc("m", 1000, 10), &[9]);
        assert!(allocs_fit(&n, [&missing]).is_err());
    }

    #[test]
    fn device_instances_are_exclusive() {
        let n = node();
        let gpu = |id: &str, inst: &str| {
            let mut a = alloc(id, 10, 10);
            task(&mut a).devices.push(AllocatedDevice {
                name: "nvidia/gpu/t4".into(),
                device_ids: vec![inst.into()],
            });
            a
        };
        let (a, b) = (gpu("a", "gpu-0"), gpu("b", "gpu-1"));
        assert_eq!(allocs_fit(&n, [&a, &b]), Ok(()));
        let c = gpu("c", "gpu-0");
        assert!(allocs_fit(&n, [&a, &c]).unwrap_err().contains("gpu-0"));
        let ghost = gpu("g", "gpu-7");
        assert!(
            allocs_fit(&n, [&ghost])
                .unwrap_err()
                .contains("not on the node")
        );
    }
}

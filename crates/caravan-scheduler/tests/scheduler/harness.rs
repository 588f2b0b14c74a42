//! The harness verifies plans with the applier's exact fit: core ids, device
//! instances and host ports per address, not only summed resources.
#![allow(clippy::unwrap_used)]

use crate::common::*;
use caravan_proto::{
    AllocList, AllocatedDevice, AllocatedPort, Allocation, NodeDevice, Plan, PlanResult,
};
use caravan_scheduler::harness::Harness;
use caravan_scheduler::{Planner, State};

fn harness() -> Harness {
    let j = service("web", 2);
    let mut n = node("n0", "dc1", 4000, 8192);
    let res = n.resources.as_mut().unwrap();
    res.core_ids = vec![0, 1, 2, 3];
    res.devices.push(NodeDevice {
        name: "nvidia/gpu/t4".into(),
        instance_ids: vec!["gpu-0".into(), "gpu-1".into()],
        ..Default::default()
    });
    let mut h = cluster(vec![reclass(n)], &j);
    h.state.upsert_alloc(alloc("a0", &j, 0, "n0"));
    h
}

/// A new allocation of the job on n0 with `edit` applied to its task.
fn placing(id: &str, edit: impl Fn(&mut caravan_proto::AllocatedTaskResources)) -> Allocation {
    let j = service("web", 2);
    let mut a = alloc(id, &j, 1, "n0");
    a.client_status = caravan_proto::AllocClientStatus::Pending as i32;
    let t = a
        .allocated_resources
        .as_mut()
        .unwrap()
        .tasks
        .get_mut("server")
        .unwrap();
    edit(t);
    a
}

fn submit(h: &mut Harness, allocs: Vec<Allocation>) -> PlanResult {
    let plan = Plan {
        eval_id: "e1".into(),
        snapshot_revision: h.state.revision,
        node_allocation: [("n0".to_string(), AllocList { allocs })].into(),
        ..Default::default()
    };
    h.submit_plan(plan).unwrap().result
}

fn edit_existing(h: &mut Harness, edit: impl Fn(&mut caravan_proto::AllocatedTaskResources)) {
    let mut a = (*h.state.alloc("a0").unwrap()).clone();
    edit(
        a.allocated_resources
            .as_mut()
            .unwrap()
            .tasks
            .get_mut("server")
            .unwrap(),
    );
    h.state.upsert_alloc(a);
}

#[test]
fn a_core_held_by_another_alloc_is_refused() {
    let mut h = harness();
    edit_existing(&mut h, |t| t.reserved_cores = vec![2]);
    let r = submit(&mut h, vec![placing("b", |t| t.reserved_cores = vec![2])]);
    assert_eq!(r.rejected_nodes, vec!["n0".to_string()]);
    assert_eq!(
        r.rejection_reasons["n0"],
        "cores: core 2 is reserved by a0 and b"
    );
    let r = submit(&mut h, vec![placing("c", |t| t.reserved_cores = vec![3])]);
    assert!(r.rejected_nodes.is_empty(), "{r:?}");
}

#[test]
fn a_device_instance_held_twice_is_refused() {
    let mut h = harness();
    let gpu = |inst: &'static str| {
        move |t: &mut caravan_proto::AllocatedTaskResources| {
            t.devices.push(AllocatedDevice {
                name: "nvidia/gpu/t4".into(),
                device_ids: vec![inst.into()],
            })
        }
    };
    edit_existing(&mut h, gpu("gpu-0"));
    let r = submit(&mut h, vec![placing("b", gpu("gpu-0"))]);
    assert!(
        r.rejection_reasons["n0"].starts_with("devices: instance gpu-0"),
        "{r:?}"
    );
    let r = submit(&mut h, vec![placing("c", gpu("gpu-1"))]);
    assert!(r.rejected_nodes.is_empty(), "{r:?}");
}

#[test]
fn ports_collide_only_on_the_same_address() {
    let mut h = harness();
    let port = |ip: &'static str| {
        move |t: &mut caravan_proto::AllocatedTaskResources| {
            t.ports.push(AllocatedPort {
                label: "http".into(),
                value: 8080,
                to: 0,
                host_ip: ip.into(),
            })
        }
    };
    edit_existing(&mut h, port("10.0.0.1"));
    let r = submit(&mut h, vec![placing("b", port("10.0.0.2"))]);
    assert!(r.rejected_nodes.is_empty(), "{r:?}");
    let r = submit(&mut h, vec![placing("c", port("10.0.0.1"))]);
    assert_eq!(
        r.rejection_reasons["n0"],
        "network: port collision: port 8080 is already in use"
    );
}

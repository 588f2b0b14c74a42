//! The room check from the cache's running usage refuses exactly what the
//! check summing every allocation on the node refuses, whatever the overlay
//! and the plan hold.

use std::collections::HashSet;

use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, AllocatedDevice, AllocatedPort, NodeDevice,
    NodeReservedResources,
};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

use super::*;
use crate::fixtures::{self, place, plan, snapshot};
use crate::overlay::{Overlay, OverlayLayer};

const SNAPSHOT_REVISION: Revision = 100;

/// The whole-node check: every non-terminal allocation on the node that the
/// plan does not stop, evict or replace, plus the placements.
fn fit_by_every_alloc(view: &View, plan: &Plan, node_id: &str) -> Result<(), FitError> {
    let node = view.node(node_id).expect("the node is in the snapshot");
    let placing = allocs_of(&plan.node_allocation, node_id);
    fit_by_sum(view, node, node_id, &removed_on(plan, node_id), placing)
}

/// A random allocation on `node`: cpu and memory near the node's share,
/// sometimes a host port, a core or a device instance, sometimes terminal.
fn random_alloc(rng: &mut Pcg64, id: &str, node: &str) -> Allocation {
    let mut a = fixtures::alloc(id, node, rng.random_range(0..900), rng.random_range(0..900));
    let res = a
        .allocated_resources
        .as_mut()
        .expect("fixture has resources");
    if let Some(shared) = res.shared.as_mut() {
        shared.disk_mb = rng.random_range(0..3000);
        if rng.random_bool(0.3) {
            shared.ports.push(AllocatedPort {
                label: "http".into(),
                value: [0, 22, 8080, 8081, 9000][rng.random_range(0..5)],
                to: 0,
                host_ip: ["", "10.0.0.1", "10.0.0.2"][rng.random_range(0..3)].into(),
            });
        }
    }
    let task = res.tasks.get_mut("server").expect("fixture has a task");
    if rng.random_bool(0.2) {
        task.reserved_cores.push(rng.random_range(0..6));
    }
    if rng.random_bool(0.05) {
        task.devices.push(AllocatedDevice {
            name: "nvidia/gpu".into(),
            device_ids: vec![format!("gpu-{}", rng.random_range(0..3))],
        });
    }
    if rng.random_bool(0.15) {
        a.set_desired_status(AllocDesiredStatus::Stop);
    } else if rng.random_bool(0.1) {
        a.set_client_status(AllocClientStatus::Complete);
    }
    a
}

/// A node of 4,000 MHz and 4,096 MB, with port 22 reserved, core 0 kept
/// for the node, and now and then two device instances.
fn random_node(rng: &mut Pcg64) -> Node {
    let mut n = fixtures::node("n1");
    n.reserved = Some(NodeReservedResources {
        core_ids: vec![0],
        reserved_host_ports: "22".into(),
        ..Default::default()
    });
    if rng.random_bool(0.1)
        && let Some(r) = n.resources.as_mut()
    {
        r.devices.push(NodeDevice {
            name: "nvidia/gpu".into(),
            instance_ids: vec!["gpu-0".into(), "gpu-1".into()],
            ..Default::default()
        });
    }
    n
}

/// One random case: a node with allocations in the cache, layers that
/// rewrite some and add others, and a plan that stops, evicts, replaces and
/// places some more.
fn random_case(rng: &mut Pcg64) -> (View, Plan) {
    let node = random_node(rng);
    let mut ids: Vec<String> = Vec::new();
    let mut cached = Vec::new();
    for i in 0..rng.random_range(0..12) {
        let id = format!("c{i}");
        cached.push(random_alloc(rng, &id, "n1"));
        ids.push(id);
    }
    cached.push(random_alloc(rng, "elsewhere", "n2"));
    let snap = snapshot(SNAPSHOT_REVISION, &[node, fixtures::node("n2")], &cached);
    let mut overlay = Overlay::default();
    let layers = rng.random_range(0..4);
    for seq in 0..layers {
        let mut layer = OverlayLayer::new(seq);
        for i in 0..rng.random_range(0..4) {
            let id = if !ids.is_empty() && rng.random_bool(0.5) {
                ids[rng.random_range(0..ids.len())].clone()
            } else {
                let id = format!("l{seq}-{i}");
                ids.push(id.clone());
                id
            };
            layer.put_alloc(Arc::new(random_alloc(rng, &id, "n1")));
        }
        if seq + 1 == layers && rng.random_bool(0.5) {
            overlay.push_in_flight(layer);
        } else {
            layer.revision = Some(SNAPSHOT_REVISION + 1 + seq as Revision);
            overlay.settle(seq, layer);
        }
    }
    let view = overlay.view(snap);
    let mut p = plan(SNAPSHOT_REVISION);
    let pick = |rng: &mut Pcg64, ids: &[String]| -> String {
        match rng.random_range(0..10) {
            0 => "unknown".into(),
            1 => "elsewhere".into(),
            _ if ids.is_empty() => "unknown".into(),
            _ => ids[rng.random_range(0..ids.len())].clone(),
        }
    };
    for _ in 0..rng.random_range(0..3) {
        let id = pick(rng, &ids);
        fixtures::stop(&mut p, "n1", &id);
    }
    for _ in 0..rng.random_range(0..2) {
        let id = pick(rng, &ids);
        let mut evicted = random_alloc(rng, &id, "n1");
        evicted.set_desired_status(AllocDesiredStatus::Evict);
        p.node_preemptions
            .entry("n1".into())
            .or_default()
            .allocs
            .push(evicted);
    }
    let mut placed = HashSet::new();
    for i in 0..rng.random_range(1..5) {
        let id = if rng.random_bool(0.3) {
            pick(rng, &ids)
        } else {
            format!("p{i}")
        };
        // A plan places an allocation once (its shape is checked before).
        if id != "elsewhere" && placed.insert(id.clone()) {
            place(&mut p, random_alloc(rng, &id, "n1"));
        }
    }
    (view, p)
}

#[test]
fn the_running_usage_refuses_exactly_what_the_whole_node_sum_refuses() {
    let (mut fits, mut refused) = (0, 0);
    for seed in 0..20_000u64 {
        let mut rng = Pcg64::seed_from_u64(seed);
        let (view, p) = random_case(&mut rng);
        let node = view.node("n1").expect("the node is in the snapshot");
        let fast = fit(&view, &p, node, "n1");
        let whole = fit_by_every_alloc(&view, &p, "n1");
        assert_eq!(
            fast.is_ok(),
            whole.is_ok(),
            "seed {seed}: from the running usage {fast:?}, from every allocation {whole:?}\n\
             on the node: {:#?}\nplan: {p:#?}",
            view.allocs_on_node("n1"),
        );
        if whole.is_ok() {
            fits += 1;
        } else {
            refused += 1;
        }
    }
    // Both outcomes are common, so the comparison means something.
    assert!(
        fits > 2_000 && refused > 2_000,
        "{fits} fit, {refused} refused"
    );
}

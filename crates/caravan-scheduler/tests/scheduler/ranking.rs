//! Ranking scenarios: binpack and spread fit, anti-affinity, affinities and
//! spreads honoured over many placements, ports, determinism.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use crate::common::*;
use caravan_proto::{
    Affinity, AllocatedPort, EvalStatus, NetworkResource, NodePool, NodePoolSchedulerConfig, Port,
    SchedulerAlgorithm, SchedulerConfiguration, Spread, SpreadTarget,
};

fn busy_and_empty(algorithm: SchedulerAlgorithm) -> String {
    let j = service("web", 1);
    let other = service("other", 1);
    let mut h = cluster(
        vec![node("a", "dc1", 4000, 8192), node("b", "dc1", 4000, 8192)],
        &j,
    );
    h.state.upsert_job(other.clone());
    let mut big = alloc("x1", &other, 0, "a");
    if let Some(r) = big.allocated_resources.as_mut() {
        let t = r.tasks.get_mut("server").unwrap();
        t.cpu_mhz = 2000;
        t.memory_mb = 4096;
    }
    h.state.upsert_alloc(big);
    h.state.set_config(SchedulerConfiguration {
        scheduler_algorithm: algorithm as i32,
        ..Default::default()
    });
    h.process(&eval("e1", &j, "job-register")).unwrap();
    placed(&h)[0].node_id.clone()
}

#[test]
fn binpack_chooses_the_fuller_node_and_spread_the_emptier() {
    assert_eq!(busy_and_empty(SchedulerAlgorithm::Binpack), "a");
    assert_eq!(busy_and_empty(SchedulerAlgorithm::Spread), "b");
}

/// A job in a node pool that sets its own algorithm is placed with it,
/// over the cluster's; a pool that sets none leaves the cluster's.
#[test]
fn a_node_pools_algorithm_wins_over_the_clusters() {
    let place = |pool_algorithm: SchedulerAlgorithm| {
        let mut j = service("web", 1);
        j.node_pool = "gpu".into();
        let other = service("other", 1);
        let mut nodes = vec![node("a", "dc1", 4000, 8192), node("b", "dc1", 4000, 8192)];
        for n in &mut nodes {
            n.node_pool = "gpu".into();
        }
        let mut h = cluster(nodes, &j);
        h.state.upsert_job(other.clone());
        let mut big = alloc("x1", &other, 0, "a");
        if let Some(r) = big.allocated_resources.as_mut() {
            let t = r.tasks.get_mut("server").unwrap();
            t.cpu_mhz = 2000;
            t.memory_mb = 4096;
        }
        h.state.upsert_alloc(big);
        h.state.set_config(SchedulerConfiguration {
            scheduler_algorithm: SchedulerAlgorithm::Binpack as i32,
            ..Default::default()
        });
        h.state.upsert_node_pool(NodePool {
            name: "gpu".into(),
            scheduler_config: Some(NodePoolSchedulerConfig {
                scheduler_algorithm: pool_algorithm as i32,
            }),
            ..Default::default()
        });
        h.process(&eval("e1", &j, "job-register")).unwrap();
        placed(&h)[0].node_id.clone()
    };
    assert_eq!(place(SchedulerAlgorithm::Spread), "b");
    assert_eq!(place(SchedulerAlgorithm::Unspecified), "a");
}

#[test]
fn job_anti_affinity_spreads_a_group() {
    let j = service("web", 3);
    let nodes = (0..3)
        .map(|i| node(&format!("n{i}"), "dc1", 4000, 8192))
        .collect();
    let mut h = cluster(nodes, &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert_eq!(
        live_by_node(&h).values().copied().collect::<Vec<_>>(),
        vec![1, 1, 1]
    );
    let p = placed(&h);
    let meta = &p[2].metrics.as_ref().unwrap().score_meta[0];
    assert!(meta.scores.contains_key("binpack"));
}

fn two_dcs(n: usize) -> Vec<caravan_proto::Node> {
    (0..2 * n)
        .map(|i| {
            node(
                &format!("n{i:02}"),
                if i < n { "dc1" } else { "dc2" },
                64000,
                131072,
            )
        })
        .collect()
}

fn per_dc(h: &caravan_scheduler::harness::Harness) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for a in placed(h) {
        let dc = h
            .state
            .allocs()
            .find(|x| x.id == a.id)
            .map(|x| x.node_id.clone())
            .unwrap();
        let dc = if dc.as_str() < "n10" { "dc1" } else { "dc2" };
        *m.entry(dc.to_string()).or_insert(0) += 1;
    }
    m
}

#[test]
fn affinities_are_honoured_over_100_placements() {
    for (weight, want_dc1) in [(100, 100), (50, 100), (-100, 0)] {
        let mut j = service("web", 100);
        j.affinities.push(Affinity {
            l_target: "${node.datacenter}".into(),
            r_target: "dc1".into(),
            operand: "=".into(),
            weight,
        });
        let mut h = cluster(two_dcs(10), &j);
        h.process(&eval("e1", &j, "job-register")).unwrap();
        let got = per_dc(&h).get("dc1").copied().unwrap_or(0) as i64;
        assert!((got - want_dc1).abs() <= 5, "weight {weight}: {got} in dc1");
    }
}

#[test]
fn spread_targets_are_honoured_over_100_placements() {
    let mut j = service("web", 100);
    j.task_groups[0].spreads.push(Spread {
        attribute: "${node.datacenter}".into(),
        weight: 100,
        targets: vec![
            SpreadTarget {
                value: "dc1".into(),
                percent: 70,
            },
            SpreadTarget {
                value: "dc2".into(),
                percent: 30,
            },
        ],
    });
    let mut h = cluster(two_dcs(10), &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let m = per_dc(&h);
    assert!((m["dc1"] as i64 - 70).abs() <= 5, "{m:?}");
    assert!((m["dc2"] as i64 - 30).abs() <= 5, "{m:?}");
}

#[test]
fn even_spread_balances_racks() {
    let mut j = service("web", 99);
    j.spreads.push(Spread {
        attribute: "${meta.rack}".into(),
        weight: 50,
        targets: vec![],
    });
    let nodes = (0..12)
        .map(|i| {
            let mut n = node(&format!("n{i:02}"), "dc1", 64000, 131072);
            n.meta.insert("rack".into(), format!("r{}", i % 3));
            reclass(n)
        })
        .collect();
    let mut h = cluster(nodes, &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let mut racks: BTreeMap<String, i64> = BTreeMap::new();
    for a in placed(&h) {
        let i: usize = a.node_id[1..].parse().unwrap();
        *racks.entry(format!("r{}", i % 3)).or_insert(0) += 1;
    }
    for (rack, n) in &racks {
        assert!((n - 33).abs() <= 5, "{rack}: {n} ({racks:?})");
    }
}

#[test]
fn static_port_collisions_are_avoided() {
    let mut j = service("web", 2);
    j.task_groups[0].networks.push(NetworkResource {
        reserved_ports: vec![Port {
            label: "http".into(),
            value: 8080,
            ..Default::default()
        }],
        ..Default::default()
    });
    let other = service("other", 1);
    let mut h = cluster(
        vec![node("a", "dc1", 8000, 16384), node("b", "dc1", 8000, 16384)],
        &j,
    );
    h.state.upsert_job(other.clone());
    let mut holder = alloc("x1", &other, 0, "a");
    if let Some(s) = holder
        .allocated_resources
        .as_mut()
        .and_then(|r| r.shared.as_mut())
    {
        s.ports.push(AllocatedPort {
            label: "http".into(),
            value: 8080,
            ..Default::default()
        });
    }
    h.state.upsert_alloc(holder);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let p = placed(&h);
    assert_eq!(names_nodes(&p), vec![("web.web[0]".into(), "b".into())]);
    let ports = &p[0]
        .allocated_resources
        .as_ref()
        .unwrap()
        .shared
        .as_ref()
        .unwrap()
        .ports;
    assert_eq!(ports[0].value, 8080);
    let e = h.last_update().unwrap();
    assert_eq!(
        e.failed_tg_allocs["web"].dimension_exhausted["network: reserved port collision"],
        2
    );
}

#[test]
fn dynamic_ports_never_collide_on_a_node() {
    let mut j = service("web", 5);
    j.task_groups[0].networks.push(NetworkResource {
        dynamic_ports: vec![Port {
            label: "http".into(),
            ..Default::default()
        }],
        ..Default::default()
    });
    let mut n = node("a", "dc1", 64000, 131072);
    if let Some(r) = n.resources.as_mut() {
        r.min_dynamic_port = 20000;
        r.max_dynamic_port = 20004;
    }
    if let Some(r) = n.reserved.as_mut() {
        r.reserved_host_ports = "20000".into();
    }
    let mut h = cluster(vec![reclass(n)], &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let mut ports: Vec<u32> = placed(&h)
        .iter()
        .flat_map(|a| {
            a.allocated_resources
                .as_ref()
                .unwrap()
                .shared
                .as_ref()
                .unwrap()
                .ports
                .clone()
        })
        .map(|p| p.value)
        .collect();
    ports.sort();
    assert_eq!(ports, vec![20001, 20002, 20003, 20004]);
    let e = h.last_update().unwrap();
    assert_eq!(e.queued_allocations["web"], 1);
    assert!(
        e.failed_tg_allocs["web"]
            .dimension_exhausted
            .contains_key("network: dynamic port selection failed")
    );
}

#[test]
fn same_eval_and_state_give_the_same_plan() {
    let j = service("web", 20);
    let nodes: Vec<_> = (0..30)
        .map(|i| node(&format!("n{i:02}"), "dc1", 4000, 8192))
        .collect();
    let mut h1 = cluster(nodes.clone(), &j);
    let mut h2 = cluster(nodes, &j);
    h1.process(&eval("e1", &j, "job-register")).unwrap();
    h2.process(&eval("e1", &j, "job-register")).unwrap();
    assert_eq!(h1.plans, h2.plans);
    assert_eq!(h1.last_update(), h2.last_update());
    let mut h3 = cluster(
        (0..30)
            .map(|i| node(&format!("n{i:02}"), "dc1", 4000, 8192))
            .collect(),
        &j,
    );
    h3.process(&eval("e2", &j, "job-register")).unwrap();
    assert_ne!(names_nodes(&placed(&h1)), names_nodes(&placed(&h3)));
    assert_eq!(last_status(&h1), EvalStatus::Complete);
}

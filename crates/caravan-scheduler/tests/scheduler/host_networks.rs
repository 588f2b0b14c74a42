//! Host networks: a port naming one is placed only on a node whose client
//! resolved it, binds to that network's address, avoids the ports reserved on
//! it, and is blocked with Nomad's reason when no node has it.
#![allow(clippy::unwrap_used)]

use crate::common::*;
use caravan_proto::{EvalStatus, Job, NetworkResource, Node, NodeHostNetwork, Port};

fn with_network(mut n: Node, name: &str, address: &str, reserved: &str) -> Node {
    n.host_networks.push(NodeHostNetwork {
        name: name.into(),
        address: address.into(),
        interface: "eth1".into(),
        reserved_ports: reserved.into(),
        ..Default::default()
    });
    reclass(n)
}

/// A job whose group has a dynamic port `http` and a static port `admin` (if
/// not 0) on `network`, and a dynamic port `metrics` on the node's own network.
fn asking(count: i32, network: &str, admin: u32) -> Job {
    let mut j = service("api", count);
    let port = |label: &str, value: u32, host_network: &str| Port {
        label: label.into(),
        value,
        host_network: host_network.into(),
        ..Default::default()
    };
    let mut net = NetworkResource {
        mode: "host".into(),
        dynamic_ports: vec![port("http", 0, network), port("metrics", 0, "")],
        ..Default::default()
    };
    if admin > 0 {
        net.reserved_ports.push(port("admin", admin, network));
    }
    j.task_groups[0].networks = vec![net];
    j
}

fn host_ip(alloc: &caravan_proto::Allocation, label: &str) -> (String, u32) {
    let ports = &alloc
        .allocated_resources
        .as_ref()
        .unwrap()
        .shared
        .as_ref()
        .unwrap()
        .ports;
    let p = ports.iter().find(|p| p.label == label).unwrap();
    (p.host_ip.clone(), p.value)
}

#[test]
fn a_port_on_a_host_network_is_placed_where_it_exists_and_binds_its_address() {
    let nodes = vec![
        node("a", "dc1", 4000, 8192),
        with_network(node("b", "dc1", 4000, 8192), "public", "203.0.113.5", ""),
        node("c", "dc1", 4000, 8192),
    ];
    let j = asking(1, "public", 8443);
    let mut h = cluster(nodes, &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert_eq!(last_status(&h), EvalStatus::Complete);
    let allocs = placed(&h);
    assert_eq!(
        names_nodes(&allocs),
        vec![("api.web[0]".to_string(), "b".to_string())]
    );
    assert_eq!(host_ip(&allocs[0], "admin"), ("203.0.113.5".into(), 8443));
    assert_eq!(host_ip(&allocs[0], "http").0, "203.0.113.5");
    // A port without a host network keeps the node's own address.
    assert_eq!(host_ip(&allocs[0], "metrics").0, "");
}

#[test]
fn a_network_no_node_has_blocks_the_group_with_nomads_reason() {
    let nodes = (0..3)
        .map(|i| {
            with_network(
                node(&format!("n{i}"), "dc1", 4000, 8192),
                "private",
                "10.9.0.1",
                "",
            )
        })
        .collect();
    let j = asking(2, "public", 0);
    let mut h = cluster(nodes, &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert!(h.plans.is_empty(), "nothing to commit");
    let e = h.last_update().unwrap();
    let m = &e.failed_tg_allocs["web"];
    assert_eq!(m.nodes_filtered, 3);
    assert_eq!(
        m.constraint_filtered["missing host network \"public\" for port \"http\""],
        1
    );
    assert_eq!(m.constraint_filtered["computed class ineligible"], 2);
    assert_eq!(h.created_evals[0].status(), EvalStatus::Blocked);
}

#[test]
fn default_names_the_nodes_own_network_and_needs_no_host_network() {
    let j = asking(1, "default", 0);
    let mut h = cluster(vec![node("a", "dc1", 4000, 8192)], &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let allocs = placed(&h);
    assert_eq!(allocs.len(), 1);
    assert_eq!(host_ip(&allocs[0], "http").0, "");
}

#[test]
fn ports_reserved_on_the_network_are_neither_given_nor_picked() {
    // Only one dynamic port stays free on "public": 20000-20009 less 20000-20008.
    let mut n = with_network(
        node("a", "dc1", 4000, 8192),
        "public",
        "203.0.113.5",
        "20000-20008",
    );
    n.resources.as_mut().unwrap().min_dynamic_port = 20000;
    n.resources.as_mut().unwrap().max_dynamic_port = 20011;
    let n = reclass(n);
    let j = asking(1, "public", 0);
    let mut h = cluster(vec![n.clone()], &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let allocs = placed(&h);
    assert_eq!(allocs.len(), 1);
    let (_, http) = host_ip(&allocs[0], "http");
    assert!((20009..=20011).contains(&http), "picked {http}");

    // A static port reserved on the network does not fit.
    let j = asking(1, "public", 20005);
    let mut h = cluster(vec![n], &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let m = &h.last_update().unwrap().failed_tg_allocs["web"];
    assert_eq!(m.dimension_exhausted["network: reserved port collision"], 1);
}

#[test]
fn an_interpolated_network_name_resolves_per_node() {
    let mut a = with_network(node("a", "dc1", 4000, 8192), "edge", "198.51.100.7", "");
    a.meta.insert("net".into(), "edge".into());
    let mut b = node("b", "dc1", 4000, 8192);
    b.meta.insert("net".into(), "edge".into());
    let j = asking(1, "${meta.net}", 0);
    let mut h = cluster(vec![reclass(a), reclass(b)], &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let allocs = placed(&h);
    assert_eq!(
        names_nodes(&allocs),
        vec![("api.web[0]".to_string(), "a".to_string())]
    );
    assert_eq!(host_ip(&allocs[0], "http").0, "198.51.100.7");
}

#[test]
fn one_static_port_on_two_networks_binds_both_addresses() {
    let n = with_network(node("a", "dc1", 4000, 8192), "public", "203.0.113.5", "");
    let n = with_network(n, "private", "10.9.0.1", "");
    let mut j = asking(1, "public", 8080);
    j.task_groups[0].networks[0].reserved_ports.push(Port {
        label: "peer".into(),
        value: 8080,
        host_network: "private".into(),
        ..Default::default()
    });
    let mut h = cluster(vec![n], &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let allocs = placed(&h);
    assert_eq!(allocs.len(), 1, "{:?}", h.last_update());
    assert_eq!(host_ip(&allocs[0], "admin"), ("203.0.113.5".into(), 8080));
    assert_eq!(host_ip(&allocs[0], "peer"), ("10.9.0.1".into(), 8080));
    // The harness commits plans through the plan applier's exact fit check.
    assert_eq!(last_status(&h), EvalStatus::Complete);
    assert!(
        h.results.iter().all(|r| r.rejected_nodes.is_empty()),
        "{:?}",
        h.results
    );
}

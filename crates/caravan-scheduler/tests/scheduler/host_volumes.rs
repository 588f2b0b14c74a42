//! Host volumes: a group that mounts one is placed only on a node whose client
//! offers it (writable unless asked read-only), and blocked with Nomad's reason
//! when no node does; `per_alloc` asks each allocation for its own volume.
#![allow(clippy::unwrap_used)]

use crate::common::*;
use caravan_proto::{ClientHostVolume, EvalStatus, Job, Node, VolumeRequest};

const MISSING: &str = "missing compatible host volumes";

fn with_volume(mut n: Node, name: &str, read_only: bool) -> Node {
    n.host_volumes.insert(
        name.into(),
        ClientHostVolume {
            name: name.into(),
            path: format!("/srv/{name}"),
            read_only,
        },
    );
    reclass(n)
}

fn asking(count: i32, source: &str, read_only: bool, per_alloc: bool) -> Job {
    let mut j = service("db", count);
    j.task_groups[0].volumes.insert(
        "data".into(),
        VolumeRequest {
            r#type: "host".into(),
            source: source.into(),
            read_only,
            per_alloc,
        },
    );
    j
}

#[test]
fn a_group_is_placed_on_the_node_that_has_its_volume() {
    let nodes = vec![
        node("a", "dc1", 4000, 8192),
        with_volume(node("b", "dc1", 4000, 8192), "pgdata", false),
        node("c", "dc1", 4000, 8192),
    ];
    let j = asking(1, "pgdata", false, false);
    let mut h = cluster(nodes, &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert_eq!(last_status(&h), EvalStatus::Complete);
    assert_eq!(
        names_nodes(&placed(&h)),
        vec![("db.web[0]".to_string(), "b".to_string())]
    );
}

#[test]
fn a_volume_no_node_has_blocks_the_group_with_the_reason() {
    let nodes = (0..4)
        .map(|i| with_volume(node(&format!("n{i}"), "dc1", 4000, 8192), "other", false))
        .collect();
    let j = asking(2, "pgdata", false, false);
    let mut h = cluster(nodes, &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert!(h.plans.is_empty(), "nothing to commit");
    let e = h.last_update().unwrap();
    let m = &e.failed_tg_allocs["web"];
    assert_eq!(m.nodes_filtered, 4);
    // One real check, the rest cached for the nodes' shared class.
    assert_eq!(m.constraint_filtered[MISSING], 1);
    assert_eq!(m.constraint_filtered["computed class ineligible"], 3);
    let b = &h.created_evals[0];
    assert_eq!(b.status(), EvalStatus::Blocked);
    assert_eq!(e.blocked_eval, b.id);
}

#[test]
fn a_read_only_volume_serves_only_a_read_only_request() {
    let nodes = vec![with_volume(node("a", "dc1", 4000, 8192), "certs", true)];
    let j = asking(1, "certs", false, false);
    let mut h = cluster(nodes.clone(), &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let m = &h.last_update().unwrap().failed_tg_allocs["web"];
    assert_eq!(m.constraint_filtered[MISSING], 1);

    let j = asking(1, "certs", true, false);
    let mut h = cluster(nodes, &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert_eq!(
        names_nodes(&placed(&h)),
        vec![("db.web[0]".to_string(), "a".to_string())]
    );
}

#[test]
fn per_alloc_volumes_put_each_allocation_beside_its_own() {
    let nodes = vec![
        with_volume(node("a", "dc1", 4000, 8192), "pgdata[1]", false),
        with_volume(node("b", "dc1", 4000, 8192), "pgdata[0]", false),
        with_volume(node("c", "dc1", 4000, 8192), "pgdata", false),
    ];
    let j = asking(3, "pgdata", false, true);
    let mut h = cluster(nodes, &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let mut got = names_nodes(&placed(&h));
    got.sort();
    assert_eq!(
        got,
        vec![
            ("db.web[0]".to_string(), "b".to_string()),
            ("db.web[1]".to_string(), "a".to_string()),
        ],
        "db.web[2] has no node with pgdata[2]"
    );
    let e = h.last_update().unwrap();
    assert_eq!(e.failed_tg_allocs["web"].constraint_filtered[MISSING], 3);
}

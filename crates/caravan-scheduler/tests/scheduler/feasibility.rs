//! Feasibility scenarios: every operator, class caching and its escape, scope
//! (datacenters, pools, drivers) and the distinct constraints.
#![allow(clippy::unwrap_used)]

use crate::common::*;
use caravan_proto::{DriverInfo, EvalStatus, JobType};

/// Places one allocation on two nodes where only `b` satisfies the constraint.
fn only_b_matches(
    l: &str,
    op: &str,
    r: &str,
    a_val: Option<&str>,
    b_val: Option<&str>,
) -> Vec<(String, String)> {
    let key = l.trim_start_matches("${attr.").trim_end_matches('}');
    let mut a = node("a", "dc1", 4000, 8192);
    let mut b = node("b", "dc1", 4000, 8192);
    if let Some(v) = a_val {
        a.attributes.insert(key.into(), v.into());
    }
    if let Some(v) = b_val {
        b.attributes.insert(key.into(), v.into());
    }
    let mut j = service("web", 1);
    j.constraints.push(constraint(l, op, r));
    let mut h = cluster(vec![reclass(a), reclass(b)], &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert_eq!(last_status(&h), EvalStatus::Complete, "{op}");
    names_nodes(&placed(&h))
}

#[test]
fn each_operator_selects_only_matching_nodes() {
    let rows: &[(&str, &str, Option<&str>, Option<&str>)] = &[
        ("=", "2", Some("1"), Some("2")),
        ("==", "2", Some("1"), Some("2")),
        ("is", "2", Some("1"), Some("2")),
        ("!=", "2", Some("2"), Some("1")),
        ("not", "2", Some("2"), Some("1")),
        ("<", "10", Some("20"), Some("3")),
        ("<=", "10", Some("11"), Some("10")),
        (">", "10", Some("9"), Some("11")),
        (">=", "10", Some("9"), Some("10")),
        ("regexp", "^bar[0-9]$", Some("foo"), Some("bar7")),
        ("version", ">= 2.0, < 3", Some("1.2.0"), Some("2.1.0")),
        ("semver", ">= 2.0.0", Some("1.9.9"), Some("2.0.0")),
        ("set_contains", "z,x", Some("x,y"), Some("x,y,z")),
        ("set_contains_all", "z,x", Some("x,y"), Some("x,y,z")),
        ("set_contains_any", "z", Some("p,q"), Some("q,z")),
        ("is_set", "", None, Some("1")),
        ("is_not_set", "", Some("1"), None),
    ];
    for (op, r, a, b) in rows {
        let got = only_b_matches("${attr.x}", op, r, *a, *b);
        assert_eq!(
            got,
            vec![("web.web[0]".to_string(), "b".to_string())],
            "operator {op}"
        );
    }
}

#[test]
fn node_fields_and_meta_interpolate() {
    for (l, r) in [
        ("${node.datacenter}", "dc2"),
        ("${node.class}", "large"),
        ("${meta.rack}", "r2"),
        ("${node.unique.name}", "b"),
        ("${node.pool}", "default"),
    ] {
        let a = node("a", "dc1", 4000, 8192);
        let mut b = node("b", "dc2", 4000, 8192);
        b.node_class = "large".into();
        b.meta.insert("rack".into(), "r2".into());
        let mut a = a;
        a.node_pool = "other".into();
        let mut j = service("web", 1);
        j.node_pool = "all".into();
        j.constraints.push(constraint(l, "=", r));
        let mut h = cluster(vec![reclass(a), reclass(b)], &j);
        h.process(&eval("e1", &j, "job-register")).unwrap();
        assert_eq!(
            names_nodes(&placed(&h)),
            vec![("web.web[0]".to_string(), "b".to_string())],
            "{l}"
        );
    }
}

#[test]
fn group_and_task_constraints_apply() {
    let a = node("a", "dc1", 4000, 8192);
    let mut b = node("b", "dc1", 4000, 8192);
    b.attributes.insert("arch".into(), "arm64".into());
    b.meta.insert("tier".into(), "gold".into());
    let mut j = service("web", 1);
    j.task_groups[0]
        .constraints
        .push(constraint("${attr.arch}", "=", "arm64"));
    j.task_groups[0].tasks[0]
        .constraints
        .push(constraint("${meta.tier}", "=", "gold"));
    let mut h = cluster(vec![a, reclass(b)], &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert_eq!(
        names_nodes(&placed(&h)),
        vec![("web.web[0]".into(), "b".into())]
    );
}

#[test]
fn no_feasible_node_fails_the_group_and_blocks() {
    let mut j = service("web", 2);
    j.constraints
        .push(constraint("${attr.kernel.name}", "=", "windows"));
    let nodes = (0..10)
        .map(|i| node(&format!("n{i}"), "dc1", 4000, 8192))
        .collect();
    let mut h = cluster(nodes, &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert!(h.plans.is_empty(), "nothing to commit");
    let e = h.last_update().unwrap();
    assert_eq!(e.status(), EvalStatus::Complete);
    let m = &e.failed_tg_allocs["web"];
    assert_eq!(m.nodes_evaluated, 10);
    assert_eq!(m.nodes_filtered, 10);
    assert_eq!(m.coalesced_failures, 1);
    // Class caching: one real check, nine cache hits.
    assert_eq!(m.constraint_filtered["${attr.kernel.name} = windows"], 1);
    assert_eq!(m.constraint_filtered["computed class ineligible"], 9);
    assert_eq!(e.queued_allocations["web"], 2);
    assert_eq!(h.created_evals.len(), 1);
    let b = &h.created_evals[0];
    assert_eq!(b.status(), EvalStatus::Blocked);
    assert_eq!(b.triggered_by, "queued-allocs");
    assert!(!b.escaped_computed_class);
    let class = caravan_scheduler::compute_node_class(&node("x", "dc1", 4000, 8192));
    assert_eq!(b.class_eligibility.get(&class), Some(&false));
    assert_eq!(e.blocked_eval, b.id);
}

#[test]
fn unique_attributes_escape_class_caching() {
    let mut j = service("web", 1);
    j.constraints
        .push(constraint("${attr.unique.hostname}", "=", "nope"));
    let nodes = (0..5)
        .map(|i| node(&format!("n{i}"), "dc1", 4000, 8192))
        .collect();
    let mut h = cluster(nodes, &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let m = &h.last_update().unwrap().failed_tg_allocs["web"];
    // Every node is checked for real.
    assert_eq!(m.constraint_filtered["${attr.unique.hostname} = nope"], 5);
    assert!(
        !m.constraint_filtered
            .contains_key("computed class ineligible")
    );
    let b = &h.created_evals[0];
    assert!(b.escaped_computed_class);
    assert!(b.class_eligibility.is_empty());

    // And a unique constraint that matches one node places there.
    let mut j = service("web", 1);
    j.constraints
        .push(constraint("${attr.unique.hostname}", "=", "n3"));
    let nodes = (0..5)
        .map(|i| node(&format!("n{i}"), "dc1", 4000, 8192))
        .collect();
    let mut h = cluster(nodes, &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert_eq!(
        names_nodes(&placed(&h)),
        vec![("web.web[0]".into(), "n3".into())]
    );
}

#[test]
fn datacenter_globs_pools_and_drivers_scope_candidates() {
    let mut j = service("web", 2);
    j.datacenters = vec!["eu-*".into()];
    j.task_groups[0]
        .constraints
        .push(constraint("", "distinct_hosts", ""));
    let nodes = vec![
        node("a", "dc1", 4000, 8192),
        node("b", "eu-west", 4000, 8192),
        node("c", "eu-east", 4000, 8192),
    ];
    let mut h = cluster(nodes, &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let mut on: Vec<String> = placed(&h).iter().map(|a| a.node_id.clone()).collect();
    on.sort();
    assert_eq!(on, vec!["b", "c"]);

    let mut j = service("web", 1);
    j.node_pool = "gpu".into();
    let mut g = node("g", "dc1", 4000, 8192);
    g.node_pool = "gpu".into();
    let mut h = cluster(vec![node("a", "dc1", 4000, 8192), reclass(g)], &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert_eq!(
        names_nodes(&placed(&h)),
        vec![("web.web[0]".into(), "g".into())]
    );

    let j = service("web", 1);
    let mut sick = node("a", "dc1", 4000, 8192);
    sick.drivers.insert(
        "exec".into(),
        DriverInfo {
            detected: true,
            healthy: false,
            ..Default::default()
        },
    );
    let mut h = cluster(vec![reclass(sick), node("b", "dc1", 4000, 8192)], &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert_eq!(
        names_nodes(&placed(&h)),
        vec![("web.web[0]".into(), "b".into())]
    );
}

#[test]
fn distinct_hosts_puts_one_alloc_per_node() {
    let mut j = service("web", 4);
    j.constraints.push(constraint("", "distinct_hosts", ""));
    let nodes = (0..3)
        .map(|i| node(&format!("n{i}"), "dc1", 8000, 16384))
        .collect();
    let mut h = cluster(nodes, &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let p = placed(&h);
    assert_eq!(p.len(), 3);
    assert_eq!(
        live_by_node(&h).values().copied().collect::<Vec<_>>(),
        vec![1, 1, 1]
    );
    let e = h.last_update().unwrap();
    assert_eq!(
        e.failed_tg_allocs["web"].constraint_filtered["distinct_hosts"],
        3
    );
    assert_eq!(e.queued_allocations["web"], 1);
}

#[test]
fn distinct_property_limits_allocs_per_value() {
    let mut j = service("web", 5);
    j.constraints
        .push(constraint("${meta.rack}", "distinct_property", "2"));
    let nodes = (0..4)
        .map(|i| {
            let mut n = node(&format!("n{i}"), "dc1", 8000, 16384);
            n.meta.insert("rack".into(), format!("r{}", i / 2));
            reclass(n)
        })
        .collect();
    let mut h = cluster(nodes, &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let p = placed(&h);
    assert_eq!(p.len(), 4);
    let r0 = p
        .iter()
        .filter(|a| a.node_id == "n0" || a.node_id == "n1")
        .count();
    assert_eq!(r0, 2);
    assert_eq!(
        h.last_update().unwrap().failed_tg_allocs["web"].coalesced_failures,
        0
    );
    assert_eq!(h.last_update().unwrap().queued_allocations["web"], 1);
}

#[test]
fn invalid_jobs_fail_the_eval_with_the_field() {
    let mut j = service("web", 1);
    j.task_groups[0]
        .constraints
        .push(constraint("${attr.x}", "regexp", "(["));
    let mut h = cluster(vec![node("a", "dc1", 4000, 8192)], &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let e = h.last_update().unwrap();
    assert_eq!(e.status(), EvalStatus::Failed);
    assert!(
        e.status_description
            .contains("group \"web\": constraint[0]: value: invalid regular expression"),
        "{}",
        e.status_description
    );
    assert!(h.plans.is_empty());

    let mut j = service("web", 1);
    j.r#type = JobType::Unspecified as i32;
    let mut h = cluster(vec![node("a", "dc1", 4000, 8192)], &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert_eq!(last_status(&h), EvalStatus::Failed);
}

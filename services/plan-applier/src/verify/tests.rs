//! Verification of plans: shape, freshness, per-node checks.

use caravan_proto::{DrainStrategy, NodeStatus, SchedulingEligibility};

use super::*;
use crate::fixtures::{alloc, node, place, plan, snapshot, stop, with_cores, with_port};

#[test]
fn a_plan_that_fits_is_accepted_on_every_node() {
    let snap = snapshot(10, &[node("n1"), node("n2")], &[]);
    let mut p = plan(10);
    place(&mut p, alloc("a1", "n1", 1000, 1024));
    place(&mut p, alloc("a2", "n2", 1000, 1024));
    let v = verify_plan(&View::of(snap), &p, 2);
    assert_eq!(v.accepted, vec!["n1", "n2"]);
    assert!(v.rejected.is_empty());
}

#[test]
fn an_over_committed_node_is_refused_alone() {
    let existing = alloc("old", "n1", 3000, 1024);
    let snap = snapshot(10, &[node("n1"), node("n2")], &[existing]);
    let mut p = plan(10);
    place(&mut p, alloc("a1", "n1", 1500, 512));
    place(&mut p, alloc("a2", "n2", 1500, 512));
    let v = verify_plan(&View::of(snap), &p, 1);
    assert_eq!(v.accepted, vec!["n2"]);
    assert!(v.rejected["n1"].starts_with("cpu exhausted"), "{v:?}");
}

#[test]
fn stops_in_the_same_plan_make_room() {
    let existing = alloc("old", "n1", 3000, 1024);
    let snap = snapshot(10, &[node("n1")], &[existing]);
    let mut p = plan(10);
    stop(&mut p, "n1", "old");
    place(&mut p, alloc("new", "n1", 3500, 1024));
    assert!(verify_node(&View::of(snap), &p, "n1").is_ok());
}

#[test]
fn ports_and_cores_are_checked_against_what_runs() {
    let running = with_cores(with_port(alloc("old", "n1", 1000, 256), 8080), &[1]);
    let snap = snapshot(10, &[node("n1")], &[running]);
    let view = View::of(snap);
    let mut p = plan(10);
    place(&mut p, with_port(alloc("a", "n1", 100, 64), 8080));
    let err = verify_node(&view, &p, "n1").unwrap_err();
    assert!(err.contains("port 8080"), "{err}");

    let mut p = plan(10);
    place(&mut p, with_cores(alloc("b", "n1", 1000, 64), &[1]));
    let err = verify_node(&view, &p, "n1").unwrap_err();
    assert!(err.contains("core 1"), "{err}");

    let mut p = plan(10);
    place(
        &mut p,
        with_cores(with_port(alloc("c", "n1", 1000, 64), 8081), &[2]),
    );
    assert_eq!(verify_node(&view, &p, "n1"), Ok(()));
}

#[test]
fn two_placements_of_one_plan_collide_with_each_other() {
    let snap = snapshot(10, &[node("n1")], &[]);
    let mut p = plan(10);
    place(&mut p, with_port(alloc("a", "n1", 100, 64), 9000));
    place(&mut p, with_port(alloc("b", "n1", 100, 64), 9000));
    assert!(verify_node(&View::of(snap), &p, "n1").is_err());
}

#[test]
fn missing_down_and_ineligible_nodes_take_no_new_allocations() {
    let mut down = node("down");
    down.set_status(NodeStatus::Down);
    let mut inel = node("inel");
    inel.set_scheduling_eligibility(SchedulingEligibility::Ineligible);
    let mut drain = node("drain");
    drain.drain_strategy = Some(DrainStrategy::default());
    let here = alloc("here", "inel", 100, 64);
    let snap = snapshot(10, &[down, inel, drain], std::slice::from_ref(&here));
    let view = View::of(snap);
    let mut p = plan(10);
    place(&mut p, alloc("x", "gone", 100, 64));
    place(&mut p, alloc("y", "down", 100, 64));
    place(&mut p, alloc("z", "inel", 100, 64));
    place(&mut p, alloc("w", "drain", 100, 64));
    let v = verify_plan(&view, &p, 1);
    assert!(v.accepted.is_empty());
    assert_eq!(v.rejected["gone"], "node does not exist");
    assert!(v.rejected["down"].contains("not ready"));
    assert!(v.rejected["inel"].contains("ineligible"));
    assert!(v.rejected["drain"].contains("draining"));

    // An ineligible node accepts an in-place update and a stop.
    let mut p = plan(10);
    let mut updated = here.clone();
    updated.job_version = 2;
    place(&mut p, updated);
    assert_eq!(verify_node(&view, &p, "inel"), Ok(()));
    let mut p = plan(10);
    stop(&mut p, "inel", "here");
    assert_eq!(verify_node(&view, &p, "inel"), Ok(()));
}

#[test]
fn an_allocation_cannot_move_between_nodes() {
    let a = alloc("a", "n1", 100, 64);
    let snap = snapshot(10, &[node("n1"), node("n2")], &[a]);
    let mut p = plan(10);
    place(&mut p, alloc("a", "n2", 100, 64));
    let err = verify_node(&View::of(snap), &p, "n2").unwrap_err();
    assert!(err.contains("already lives on node n1"), "{err}");
}

#[test]
fn many_nodes_verify_in_parallel_with_the_same_outcome() {
    let nodes: Vec<_> = (0..64).map(|i| node(&format!("n{i:02}"))).collect();
    let full: Vec<_> = (0..64)
        .step_by(4)
        .map(|i| alloc(&format!("f{i}"), &format!("n{i:02}"), 4000, 64))
        .collect();
    let snap = snapshot(10, &nodes, &full);
    let mut p = plan(10);
    for i in 0..64 {
        place(
            &mut p,
            alloc(&format!("a{i}"), &format!("n{i:02}"), 500, 64),
        );
    }
    let view = View::of(snap);
    let serial = verify_plan(&view, &p, 1);
    let parallel = verify_plan(&view, &p, 4);
    assert_eq!(serial, parallel);
    assert_eq!(parallel.rejected.len(), 16);
    assert_eq!(parallel.accepted.len(), 48);
}

#[test]
fn a_plan_older_than_the_jobs_last_change_is_stale() {
    let mut placed = alloc("a", "n1", 100, 64);
    placed.alloc_modify_revision = 15;
    let snap = snapshot(20, &[node("n1")], &[placed]);
    let view = View::of(snap);
    let mut p = plan(12);
    place(&mut p, alloc("b", "n1", 100, 64));
    assert_eq!(stale_revision(&view, &p), Some(("web".to_string(), 15)));
    p.snapshot_revision = 15;
    assert_eq!(stale_revision(&view, &p), None);
    // A plan that only stops the job's allocations is checked too.
    let mut p = plan(12);
    stop(&mut p, "n1", "a");
    assert!(stale_revision(&view, &p).is_some());
}

#[test]
fn malformed_plans_name_the_field() {
    let err = |p: &Plan| match validate_plan(p) {
        Err(ApplierError::Invalid { field, .. }) => field,
        other => panic!("expected invalid, got {other:?}"),
    };
    let mut p = plan(10);
    p.eval_id.clear();
    assert_eq!(err(&p), "plan.eval_id");
    let mut p = plan(10);
    p.eval_token.clear();
    assert_eq!(err(&p), "plan.eval_token");
    assert_eq!(err(&plan(0)), "plan.snapshot_revision");
    let mut p = plan(10);
    let mut a = alloc("a", "n1", 1, 1);
    a.node_id = "n2".into();
    p.node_allocation
        .insert("n1".into(), caravan_proto::AllocList { allocs: vec![a] });
    assert_eq!(err(&p), "plan.node_allocation[\"n1\"].allocs[0].node_id");
    let mut p = plan(10);
    place(&mut p, alloc("a", "n1", 1, 1));
    place(&mut p, alloc("a", "n2", 1, 1));
    assert_eq!(err(&p), "plan.node_allocation[\"n2\"].allocs[0].id");
    let mut p = plan(10);
    stop(&mut p, "n1", "");
    assert_eq!(err(&p), "plan.node_update[\"n1\"].allocs[0].id");
    let mut ok = plan(10);
    place(&mut ok, alloc("a", "n1", 1, 1));
    assert!(validate_plan(&ok).is_ok());
}

#[test]
fn a_disconnected_node_takes_only_the_unknown_marks_of_its_own_allocations() {
    let mut away = node("n1");
    away.status = NodeStatus::Disconnected as i32;
    let running = alloc("a1", "n1", 1000, 1024);
    let snap = snapshot(10, &[away], std::slice::from_ref(&running));
    let view = View::of(snap);
    let mut marked = running.clone();
    marked.client_status = caravan_proto::AllocClientStatus::Unknown as i32;
    let mut p = plan(10);
    place(&mut p, marked.clone());
    assert!(verify_node(&view, &p, "n1").is_ok());
    // Anything else (a new allocation, or an update that is not the mark)
    // needs a ready node.
    let mut p = plan(10);
    place(&mut p, marked);
    place(&mut p, alloc("new", "n1", 100, 64));
    let err = verify_node(&view, &p, "n1").unwrap_err();
    assert!(err.contains("not ready"), "{err}");
    let mut p = plan(10);
    place(&mut p, running);
    assert!(verify_node(&view, &p, "n1").is_err());
}

//! System and sysbatch scenarios: one allocation per feasible node, nodes that
//! join later, completed sysbatch work, rolling updates, tainted nodes.
#![allow(clippy::unwrap_used)]

use crate::common::*;
use caravan_proto::{
    AllocClientStatus, DrainStrategy, EvalStatus, JobType, NodeStatus, SchedulingEligibility,
    UpdateStrategy,
};
use caravan_scheduler::*;

const S: i64 = 1_000_000_000;

fn sys(count_ignored: i32) -> caravan_proto::Job {
    job("agent", JobType::System, count_ignored)
}

fn on_nodes(h: &harness::Harness) -> Vec<String> {
    let mut v: Vec<String> = placed(h).iter().map(|a| a.node_id.clone()).collect();
    v.sort();
    v
}

#[test]
fn one_alloc_per_feasible_ready_node() {
    let mut j = sys(1);
    j.constraints.push(constraint("${meta.role}", "!=", "edge"));
    let mut edge = node("n2", "dc1", 4000, 8192);
    edge.meta.insert("role".into(), "edge".into());
    let mut down = node("n3", "dc1", 4000, 8192);
    down.status = NodeStatus::Down as i32;
    let mut ineligible = node("n4", "dc1", 4000, 8192);
    ineligible.scheduling_eligibility = SchedulingEligibility::Ineligible as i32;
    let nodes = vec![
        node("n0", "dc1", 4000, 8192),
        node("n1", "dc1", 4000, 8192),
        reclass(edge),
        down,
        ineligible,
    ];
    let mut h = cluster(nodes, &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert_eq!(on_nodes(&h), vec!["n0", "n1"]);
    assert!(placed(&h).iter().all(|a| a.name == "agent.web[0]"));
    let e = h.last_update().unwrap();
    assert_eq!(e.status(), EvalStatus::Complete);
    assert_eq!(e.queued_allocations["web"], 0);
    assert!(
        e.failed_tg_allocs.is_empty(),
        "filtered nodes are not failures"
    );
    assert!(h.created_evals.is_empty());
}

#[test]
fn a_node_that_joins_later_gets_one() {
    let j = sys(1);
    let mut h = cluster(
        vec![node("n0", "dc1", 4000, 8192), node("n1", "dc1", 4000, 8192)],
        &j,
    );
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert_eq!(on_nodes(&h), vec!["n0", "n1"]);
    h.state.upsert_node(node("n2", "dc1", 4000, 8192));
    let mut e = eval("e2", &j, "node-update");
    e.node_id = "n2".into();
    h.process(&e).unwrap();
    assert_eq!(h.plans.len(), 2);
    assert_eq!(on_nodes(&h), vec!["n2"]);
    assert!(stopped(&h).is_empty());
    // Nothing more to do afterwards.
    h.process(&eval("e3", &j, "node-update")).unwrap();
    assert_eq!(h.plans.len(), 2);
}

#[test]
fn completed_sysbatch_allocs_are_done() {
    let j = job("once", JobType::Sysbatch, 1);
    let mut h = cluster(
        vec![node("n0", "dc1", 4000, 8192), node("n1", "dc1", 4000, 8192)],
        &j,
    );
    let mut done = alloc("a0", &j, 0, "n0");
    done.client_status = AllocClientStatus::Complete as i32;
    h.state.upsert_alloc(done);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert_eq!(on_nodes(&h), vec!["n1"]);

    // A system job replaces a finished allocation instead.
    let j = sys(1);
    let mut h = cluster(vec![node("n0", "dc1", 4000, 8192)], &j);
    let mut done = alloc("a0", &j, 0, "n0");
    done.client_status = AllocClientStatus::Complete as i32;
    h.state.upsert_alloc(done);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert_eq!(on_nodes(&h), vec!["n0"]);
    assert_eq!(placed(&h)[0].previous_allocation, "a0");
}

#[test]
fn rolling_updates_are_limited_by_max_parallel() {
    let mut j = sys(1);
    let nodes = (0..4)
        .map(|i| node(&format!("n{i}"), "dc1", 4000, 8192))
        .collect();
    let mut h = cluster(nodes, &j);
    for i in 0..4 {
        h.state
            .upsert_alloc(alloc(&format!("a{i}"), &j, 0, &format!("n{i}")));
    }
    j.version = 1;
    j.update = Some(UpdateStrategy {
        max_parallel: 2,
        stagger_ns: 30 * S,
        ..Default::default()
    });
    j.task_groups[0].tasks[0]
        .resources
        .as_mut()
        .unwrap()
        .cpu_mhz = 700;
    h.state.upsert_job(j.clone());
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let s = stopped(&h);
    assert_eq!(s.len(), 2);
    assert!(s.iter().all(|a| a.desired_description == ALLOC_UPDATING));
    let p = placed(&h);
    assert_eq!(p.len(), 2);
    for a in &p {
        assert!(
            s.iter()
                .any(|x| x.node_id == a.node_id && x.id == a.previous_allocation)
        );
        assert_eq!(a.job_version, 1);
    }
    let next = h.created_evals[0].clone();
    assert_eq!(next.triggered_by, "rolling-update");
    assert_eq!(next.wait_until_unix_ns, h.now + 30 * S);
    assert_eq!(h.last_update().unwrap().next_eval, next.id);

    // The rolling eval finishes the other two.
    h.process(&next).unwrap();
    assert_eq!(stopped(&h).len(), 2);
    assert_eq!(placed(&h).len(), 2);
    assert_eq!(h.created_evals.len(), 1);
}

#[test]
fn tainted_nodes_lose_or_keep_system_allocs() {
    let j = sys(1);
    let mut h = cluster(
        vec![node("n0", "dc1", 4000, 8192), node("n1", "dc1", 4000, 8192)],
        &j,
    );
    h.state.upsert_alloc(alloc("a0", &j, 0, "n0"));
    h.state.upsert_alloc(alloc("a1", &j, 0, "n1"));
    let mut down = node("n0", "dc1", 4000, 8192);
    down.status = NodeStatus::Down as i32;
    h.state.upsert_node(down);
    let mut draining = node("n1", "dc1", 4000, 8192);
    draining.drain_strategy = Some(DrainStrategy {
        ignore_system_jobs: true,
        ..Default::default()
    });
    h.state.upsert_node(draining);
    h.process(&eval("e1", &j, "node-update")).unwrap();
    let s = stopped(&h);
    assert_eq!(
        s.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
        vec!["a0"]
    );
    assert_eq!(s[0].client_status(), AllocClientStatus::Lost);
    assert!(placed(&h).is_empty());
}

#[test]
fn stopping_a_system_job_stops_every_alloc() {
    let mut j = sys(1);
    let mut h = cluster(
        vec![node("n0", "dc1", 4000, 8192), node("n1", "dc1", 4000, 8192)],
        &j,
    );
    h.state.upsert_alloc(alloc("a0", &j, 0, "n0"));
    h.state.upsert_alloc(alloc("a1", &j, 0, "n1"));
    j.stop = true;
    h.state.upsert_job(j.clone());
    h.process(&eval("e1", &j, "job-deregister")).unwrap();
    assert_eq!(stopped(&h).len(), 2);
    assert_eq!(last_status(&h), EvalStatus::Complete);
}

#[test]
fn a_full_node_is_a_failure_with_a_blocked_eval() {
    let j = sys(1);
    let mut h = cluster(
        vec![node("n0", "dc1", 400, 8192), node("n1", "dc1", 4000, 8192)],
        &j,
    );
    h.state.set_config(caravan_proto::SchedulerConfiguration {
        preemption_config: Some(caravan_proto::PreemptionConfig::default()),
        ..Default::default()
    });
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert_eq!(on_nodes(&h), vec!["n1"]);
    let e = h.last_update().unwrap();
    assert_eq!(e.failed_tg_allocs["web"].dimension_exhausted["cpu"], 1);
    assert_eq!(e.queued_allocations["web"], 1);
    assert_eq!(h.created_evals.len(), 1);
    assert_eq!(h.created_evals[0].status(), EvalStatus::Blocked);
}

#[test]
fn an_alloc_whose_node_no_longer_matches_is_stopped_not_updated_in_place() {
    let mut j = sys(1);
    let mut edge = node("n1", "dc1", 4000, 8192);
    edge.meta.insert("role".into(), "edge".into());
    let mut h = cluster(vec![node("n0", "dc1", 4000, 8192), reclass(edge)], &j);
    h.state.upsert_alloc(alloc("a0", &j, 0, "n0"));
    h.state.upsert_alloc(alloc("a1", &j, 0, "n1"));
    // Constraints alone would be an in-place change; n1 no longer matches.
    j.version = 1;
    j.constraints.push(constraint("${meta.role}", "!=", "edge"));
    h.state.upsert_job(j.clone());
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let s = stopped(&h);
    assert_eq!(
        s.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
        vec!["a1"]
    );
    let p = placed(&h);
    assert_eq!(
        p.iter()
            .map(|a| (a.id.as_str(), a.job_version))
            .collect::<Vec<_>>(),
        vec![("a0", 1)]
    );
    assert_eq!(last_status(&h), EvalStatus::Complete);
    assert!(h.last_update().unwrap().failed_tg_allocs.is_empty());
}

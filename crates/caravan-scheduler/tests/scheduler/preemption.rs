//! Preemption scenarios: the lowest-priority set is evicted, the priority delta
//! is respected, and the configuration turns it on per scheduler.
#![allow(clippy::unwrap_used)]

use crate::common::*;
use caravan_proto::{
    AllocDesiredStatus, EvalStatus, Job, JobType, PreemptionConfig, SchedulerConfiguration,
};
use caravan_scheduler::harness::Harness;

fn low(id: &str, priority: i32) -> Job {
    let mut j = service(id, 1);
    j.priority = priority;
    j
}

/// Node n0 of 4000 MHz filled by three allocs of given priorities and MHz.
fn full_node(placing: &Job, others: &[(&str, i32, u32)]) -> Harness {
    let mut h = cluster(vec![node("n0", "dc1", 4000, 8192)], placing);
    for (id, prio, mhz) in others {
        let j = low(id, *prio);
        h.state.upsert_job(j.clone());
        let mut a = alloc(&format!("{id}-a"), &j, 0, "n0");
        a.allocated_resources
            .as_mut()
            .unwrap()
            .tasks
            .get_mut("server")
            .unwrap()
            .cpu_mhz = *mhz;
        h.state.upsert_alloc(a);
    }
    h
}

fn system_job(priority: i32, mhz: u32) -> Job {
    let mut j = job("sys", JobType::System, 1);
    j.priority = priority;
    j.task_groups[0].tasks[0]
        .resources
        .as_mut()
        .unwrap()
        .cpu_mhz = mhz;
    j
}

#[test]
fn system_jobs_evict_the_lowest_priority_set() {
    let j = system_job(100, 1500);
    let mut h = full_node(
        &j,
        &[("low", 20, 1500), ("mid", 30, 1500), ("high", 85, 1000)],
    );
    let mut e = eval("e1", &j, "job-register");
    e.annotate_plan = true;
    h.process(&e).unwrap();
    let plan = h.plans.last().unwrap();
    let p = placed(&h);
    assert_eq!(p.len(), 1);
    let evicted = &plan.node_preemptions["n0"].allocs;
    assert_eq!(
        evicted.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
        vec!["low-a"]
    );
    assert_eq!(evicted[0].desired_status(), AllocDesiredStatus::Evict);
    assert_eq!(evicted[0].preempted_by_allocation, p[0].id);
    assert_eq!(p[0].preempted_allocations, vec!["low-a".to_string()]);
    assert!(
        p[0].metrics.as_ref().unwrap().score_meta[0]
            .scores
            .contains_key("preemption")
    );
    assert_eq!(plan.evals.len(), 1);
    assert_eq!(plan.evals[0].job_id, "low");
    assert_eq!(plan.evals[0].triggered_by, "preemption");
    let ann = plan.annotations.as_ref().unwrap();
    assert_eq!(ann.desired_tg_updates["web"].preemptions, 1);
    assert_eq!(ann.preempted_allocs[0].id, "low-a");
}

#[test]
fn several_low_allocs_are_evicted_when_one_is_not_enough() {
    let j = system_job(100, 2500);
    let mut h = full_node(&j, &[("a", 20, 1000), ("b", 20, 1000), ("c", 40, 2000)]);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let evicted: Vec<String> = h.plans[0].node_preemptions["n0"]
        .allocs
        .iter()
        .map(|a| a.id.clone())
        .collect();
    // 2500 MHz needed: the two priority-20 allocs free only 2000 and the
    // priority-40 one alone frees 2000, so the cheapest set is the priority-40
    // alloc plus one priority-20 alloc (net priority 60).
    let net: i32 = evicted
        .iter()
        .map(|id| match id.as_str() {
            "a-a" | "b-a" => 20,
            _ => 40,
        })
        .sum();
    assert!(evicted.contains(&"c-a".to_string()));
    assert_eq!(evicted.len(), 2, "{evicted:?}");
    assert_eq!(net, 60);
}

#[test]
fn preemption_refuses_when_the_priority_delta_is_below_ten() {
    let j = system_job(100, 1500);
    let mut h = full_node(&j, &[("x", 91, 2000), ("y", 95, 2000)]);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert!(h.plans.is_empty());
    let e = h.last_update().unwrap();
    assert_eq!(e.failed_tg_allocs["web"].nodes_exhausted, 1);
    assert_eq!(h.created_evals[0].status(), EvalStatus::Blocked);

    // At exactly ten below, it may evict.
    let mut h = full_node(&j, &[("x", 90, 2000), ("y", 95, 2000)]);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert_eq!(h.plans[0].node_preemptions["n0"].allocs[0].id, "x-a");
}

#[test]
fn service_preemption_follows_the_scheduler_configuration() {
    let mut j = service("web", 1);
    j.priority = 80;
    j.task_groups[0].tasks[0]
        .resources
        .as_mut()
        .unwrap()
        .cpu_mhz = 1500;
    let mut h = full_node(&j, &[("low", 20, 4000)]);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert!(h.plans.is_empty(), "off by default for service jobs");

    let mut h = full_node(&j, &[("low", 20, 4000)]);
    h.state.set_config(SchedulerConfiguration {
        preemption_config: Some(PreemptionConfig {
            service_scheduler_enabled: true,
            ..Default::default()
        }),
        ..Default::default()
    });
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert_eq!(h.plans[0].node_preemptions["n0"].allocs[0].id, "low-a");
    assert_eq!(placed(&h).len(), 1);
    // The applied plan evicted it in state.
    let low = h.state.allocs().find(|a| a.id == "low-a").unwrap();
    assert_eq!(low.desired_status(), AllocDesiredStatus::Evict);
}

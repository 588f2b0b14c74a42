//! Every evaluation the schedulers create carries the revision of the snapshot
//! they worked from, so the broker can tell whether a change came after it.
#![allow(clippy::unwrap_used)]

use crate::common::*;
use caravan_proto::{AllocClientStatus, EvalStatus, JobType, TaskState, UpdateStrategy};
use caravan_scheduler::harness::Harness;

const S: i64 = 1_000_000_000;
const REVISION: i64 = 7;

fn at_revision(mut h: Harness) -> Harness {
    h.state.revision = REVISION;
    h
}

#[test]
fn blocked_evals_carry_the_snapshot_revision() {
    let j = service("web", 2);
    let mut h = at_revision(cluster(vec![node("n0", "dc1", 600, 8192)], &j));
    let mut e = eval("e1", &j, "job-register");
    e.snapshot_revision = 3;
    h.process(&e).unwrap();
    let b = h.created_evals.last().unwrap();
    assert_eq!(b.status(), EvalStatus::Blocked);
    assert_eq!(b.snapshot_revision, REVISION);
}

#[test]
fn max_plan_attempts_blocked_evals_carry_the_last_refreshed_revision() {
    let j = service("web", 1);
    let mut h = at_revision(cluster(vec![node("n0", "dc1", 4000, 8192)], &j));
    h.reject_nodes = ["n0".to_string()].into_iter().collect();
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let b = h.created_evals.last().unwrap();
    assert_eq!(b.triggered_by, "max-plan-attempts");
    // Each refused plan was answered with a fresher snapshot.
    assert!(h.state.revision > REVISION);
    assert_eq!(b.snapshot_revision, h.state.revision);
}

#[test]
fn follow_up_evals_carry_the_snapshot_revision() {
    let j = service("web", 1);
    let mut h = at_revision(cluster(vec![node("n0", "dc1", 4000, 8192)], &j));
    let mut a = alloc("a0", &j, 0, "n0");
    a.client_status = AllocClientStatus::Failed as i32;
    a.task_states.insert(
        "server".into(),
        TaskState {
            state: "dead".into(),
            failed: true,
            finished_at_unix_ns: h.now - 5 * S,
            ..Default::default()
        },
    );
    h.state.upsert_alloc(a);
    h.process(&eval("e1", &j, "alloc-failure")).unwrap();
    let f = h.created_evals.last().unwrap();
    assert_eq!(f.triggered_by, "retry-failed-alloc");
    assert_eq!(f.snapshot_revision, REVISION);
}

#[test]
fn rolling_update_evals_carry_the_snapshot_revision() {
    let mut j = job("agent", JobType::System, 1);
    let nodes = (0..2)
        .map(|i| node(&format!("n{i}"), "dc1", 4000, 8192))
        .collect();
    let mut h = at_revision(cluster(nodes, &j));
    for i in 0..2 {
        h.state
            .upsert_alloc(alloc(&format!("a{i}"), &j, 0, &format!("n{i}")));
    }
    j.version = 1;
    j.update = Some(UpdateStrategy {
        max_parallel: 1,
        ..Default::default()
    });
    j.task_groups[0].tasks[0]
        .resources
        .as_mut()
        .unwrap()
        .cpu_mhz = 700;
    h.state.upsert_job(j.clone());
    let mut e = eval("e1", &j, "job-register");
    e.snapshot_revision = 3;
    h.process(&e).unwrap();
    let next = &h.created_evals[0];
    assert_eq!(next.triggered_by, "rolling-update");
    assert_eq!(next.snapshot_revision, REVISION);
}

#[test]
fn preemption_evals_carry_the_snapshot_revision() {
    let mut j = job("sys", JobType::System, 1);
    j.priority = 100;
    let mut h = at_revision(cluster(vec![node("n0", "dc1", 1000, 8192)], &j));
    let mut low = service("low", 1);
    low.priority = 20;
    h.state.upsert_job(low.clone());
    let mut a = alloc("low-a", &low, 0, "n0");
    a.allocated_resources
        .as_mut()
        .unwrap()
        .tasks
        .get_mut("server")
        .unwrap()
        .cpu_mhz = 1000;
    h.state.upsert_alloc(a);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let plan = h.plans.last().unwrap();
    let p = &plan.evals[0];
    assert_eq!(
        (p.triggered_by.as_str(), p.job_id.as_str()),
        ("preemption", "low")
    );
    assert_eq!(p.snapshot_revision, REVISION);
}

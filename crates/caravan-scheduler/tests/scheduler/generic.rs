//! Generic scheduler scenarios (service and batch): placement, scaling,
//! updates, stops, lost and draining nodes, rescheduling, partial commits,
//! blocked evals, deployments and canaries.
#![allow(clippy::unwrap_used)]

use crate::common::*;
use caravan_proto::{
    AllocClientStatus, AllocDeploymentStatus, AllocDesiredStatus, DeploymentStatus,
    DesiredTransition, DrainStrategy, EvalStatus, JobType, NodeStatus, ReschedulePolicy, TaskState,
    UpdateStrategy,
};
use caravan_scheduler::harness::Harness;
use caravan_scheduler::*;

const S: i64 = 1_000_000_000;

fn three_nodes() -> Vec<caravan_proto::Node> {
    (0..3)
        .map(|i| node(&format!("n{i}"), "dc1", 4000, 8192))
        .collect()
}

/// A cluster where `job` (version 0) runs `count` allocs, one per node n0, n1, ….
fn running(job: &caravan_proto::Job, count: u32) -> Harness {
    let nodes = (0..count.max(3))
        .map(|i| node(&format!("n{i}"), "dc1", 4000, 8192))
        .collect();
    let mut h = cluster(nodes, job);
    for i in 0..count {
        h.state
            .upsert_alloc(alloc(&format!("a{i}"), job, i, &format!("n{i}")));
    }
    h
}

fn names(allocs: &[caravan_proto::Allocation]) -> Vec<String> {
    allocs.iter().map(|a| a.name.clone()).collect()
}

#[test]
fn a_plans_new_alloc_ids_sort_together_with_distinct_short_ids() {
    let j = service("web", 20);
    let mut h = cluster(three_nodes(), &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let mut ids: Vec<String> = placed(&h).into_iter().map(|a| a.id).collect();
    assert_eq!(ids.len(), 20);
    assert!(ids.iter().all(|id| &id[14..15] == "8"), "{ids:?}");
    // Made together, so they lead with the same clock: the whole plan sits
    // within one stretch of the id order, one id after another.
    ids.sort_unstable();
    let lead = |id: &str| u32::from_str_radix(&id[..8], 16).unwrap();
    assert_eq!(lead(&ids[19]) - lead(&ids[0]), 19, "{ids:?}");
    ids.dedup_by(|a, b| a[..8] == b[..8]);
    assert_eq!(ids.len(), 20, "short ids repeat");
}

#[test]
fn places_missing_allocs_with_indexed_names() {
    let j = service("web", 3);
    let mut h = cluster(three_nodes(), &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let p = placed(&h);
    assert_eq!(names(&p), vec!["web.web[0]", "web.web[1]", "web.web[2]"]);
    for a in &p {
        assert_eq!(a.eval_id, "e1");
        assert_eq!(a.desired_status(), AllocDesiredStatus::Run);
        assert_eq!(a.client_status(), AllocClientStatus::Pending);
        let t = &a.allocated_resources.as_ref().unwrap().tasks["server"];
        assert_eq!((t.cpu_mhz, t.memory_mb), (500, 256));
    }
    let e = h.last_update().unwrap();
    assert_eq!(e.status(), EvalStatus::Complete);
    assert_eq!(e.queued_allocations["web"], 0);
    assert!(h.created_evals.is_empty());
    // A second eval has nothing to do.
    h.process(&eval("e2", &j, "job-register")).unwrap();
    assert_eq!(h.plans.len(), 1);
}

#[test]
fn scaling_down_stops_the_highest_indexes_and_up_fills_gaps() {
    let mut j = service("web", 5);
    let mut h = running(&j, 5);
    j.task_groups[0].count = 2;
    j.version = 1;
    h.state.upsert_job(j.clone());
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let s = stopped(&h);
    assert_eq!(names(&s), vec!["web.web[2]", "web.web[3]", "web.web[4]"]);
    assert!(s.iter().all(|a| a.desired_description == ALLOC_NOT_NEEDED));

    let j = service("web", 4);
    let mut h = cluster(three_nodes(), &j);
    h.state.upsert_alloc(alloc("a0", &j, 0, "n0"));
    h.state.upsert_alloc(alloc("a2", &j, 2, "n1"));
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert_eq!(names(&placed(&h)), vec!["web.web[1]", "web.web[3]"]);
}

#[test]
fn non_destructive_changes_update_in_place() {
    let mut j = service("web", 2);
    let mut h = running(&j, 2);
    j.version = 1;
    j.task_groups[0].tasks[0].kill_timeout_ns = 30 * S;
    h.state.upsert_job(j.clone());
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let p = placed(&h);
    assert_eq!(
        p.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
        vec!["a0", "a1"]
    );
    assert!(p.iter().all(|a| a.job_version == 1 && a.eval_id == "e1"));
    assert!(stopped(&h).is_empty());
}

#[test]
fn in_place_updates_recheck_constraints_on_the_node() {
    let mut j = service("web", 2);
    let mut h = running(&j, 2);
    j.version = 1;
    j.task_groups[0]
        .constraints
        .push(constraint("${node.unique.name}", "!=", "n0"));
    h.state.upsert_job(j.clone());
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let s = stopped(&h);
    assert_eq!(
        s.iter()
            .map(|a| (a.id.as_str(), a.desired_description.as_str()))
            .collect::<Vec<_>>(),
        vec![("a0", ALLOC_UPDATING)]
    );
    let p = placed(&h);
    let kept = p
        .iter()
        .find(|a| a.id == "a1")
        .expect("a1 updated in place");
    assert_eq!((kept.job_version, kept.node_id.as_str()), (1, "n1"));
    let moved = p.iter().find(|a| a.previous_allocation == "a0").unwrap();
    assert_eq!(moved.name, "web.web[0]");
    assert_eq!(moved.node_id, "n2");
    assert_eq!(p.len(), 2);
}

#[test]
fn in_place_updates_that_no_longer_fit_are_destructive() {
    let mut j = service("web", 2);
    let mut h = running(&j, 2);
    // n0 now keeps almost all its memory for itself.
    let mut n0 = node("n0", "dc1", 4000, 8192);
    n0.reserved.as_mut().unwrap().memory_mb = 8000;
    h.state.upsert_node(reclass(n0));
    j.version = 1;
    j.task_groups[0].tasks[0].kill_timeout_ns = 30 * S;
    h.state.upsert_job(j.clone());
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert_eq!(
        stopped(&h)
            .iter()
            .map(|a| a.id.as_str())
            .collect::<Vec<_>>(),
        vec!["a0"]
    );
    let p = placed(&h);
    assert!(p.iter().any(|a| a.id == "a1" && a.job_version == 1));
    let moved = p.iter().find(|a| a.previous_allocation == "a0").unwrap();
    assert_ne!(moved.node_id, "n0");
    assert_eq!(last_status(&h), EvalStatus::Complete);
}

#[test]
fn affinity_and_spread_changes_replace_allocs() {
    for change in [
        |j: &mut caravan_proto::Job| {
            j.task_groups[0].affinities.push(caravan_proto::Affinity {
                l_target: "${node.datacenter}".into(),
                r_target: "dc1".into(),
                operand: "=".into(),
                weight: 50,
            })
        },
        |j: &mut caravan_proto::Job| {
            j.spreads.push(caravan_proto::Spread {
                attribute: "${node.datacenter}".into(),
                weight: 50,
                targets: vec![],
            })
        },
    ] {
        let mut j = service("web", 2);
        let mut h = running(&j, 2);
        j.version = 1;
        change(&mut j);
        h.state.upsert_job(j.clone());
        h.process(&eval("e1", &j, "job-register")).unwrap();
        let s = stopped(&h);
        assert_eq!(names(&s), vec!["web.web[0]", "web.web[1]"]);
        assert!(s.iter().all(|a| a.desired_description == ALLOC_UPDATING));
        let p = placed(&h);
        assert!(
            p.iter()
                .all(|a| a.job_version == 1 && a.id != "a0" && a.id != "a1")
        );
        assert_eq!(p.len(), 2);
    }
}

#[test]
fn destructive_changes_roll_max_parallel_at_a_time() {
    let mut j = service("web", 3);
    let mut h = running(&j, 3);
    j.version = 1;
    j.update = Some(UpdateStrategy {
        max_parallel: 1,
        ..Default::default()
    });
    j.task_groups[0].tasks[0]
        .resources
        .as_mut()
        .unwrap()
        .cpu_mhz = 600;
    h.state.upsert_job(j.clone());
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let s = stopped(&h);
    let p = placed(&h);
    assert_eq!(names(&s), vec!["web.web[0]"]);
    assert_eq!(s[0].desired_description, ALLOC_UPDATING);
    assert_eq!(names(&p), vec!["web.web[0]"]);
    assert_eq!(p[0].previous_allocation, "a0");
    let plan = h.plans.last().unwrap();
    let d = plan
        .deployment
        .as_ref()
        .expect("a deployment for the new version");
    assert_eq!(d.job_version, 1);
    assert_eq!(d.status(), DeploymentStatus::Running);
    assert_eq!(d.task_groups["web"].desired_total, 3);
    assert_eq!(p[0].deployment_id, d.id);
    let e = h.last_update().unwrap();
    assert_eq!(e.deployment_id, d.id);
    let ann = plan.annotations.as_ref();
    assert!(ann.is_none(), "annotations only on dry runs");

    // Without an update strategy everything is replaced at once.
    let mut j = service("web", 3);
    let mut h = running(&j, 3);
    j.version = 1;
    j.task_groups[0].tasks[0]
        .resources
        .as_mut()
        .unwrap()
        .cpu_mhz = 600;
    h.state.upsert_job(j.clone());
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert_eq!(stopped(&h).len(), 3);
    assert_eq!(placed(&h).len(), 3);
    assert!(h.plans[0].deployment.is_none());
}

#[test]
fn stopped_and_purged_jobs_stop_everything() {
    let mut j = service("web", 2);
    let mut h = running(&j, 2);
    j.stop = true;
    h.state.upsert_job(j.clone());
    h.process(&eval("e1", &j, "job-deregister")).unwrap();
    assert_eq!(names(&stopped(&h)), vec!["web.web[0]", "web.web[1]"]);
    assert!(placed(&h).is_empty());
    assert_eq!(last_status(&h), EvalStatus::Complete);

    let j = service("gone", 1);
    let mut h = Harness::new();
    h.state.upsert_node(node("n0", "dc1", 4000, 8192));
    h.state.upsert_alloc(alloc("a0", &j, 0, "n0"));
    h.process(&eval("e1", &j, "job-deregister")).unwrap();
    assert_eq!(names(&stopped(&h)), vec!["gone.web[0]"]);
}

#[test]
fn allocs_on_down_nodes_are_lost_and_replaced() {
    let j = service("web", 2);
    let mut h = running(&j, 2);
    let mut down = node("n0", "dc1", 4000, 8192);
    down.status = NodeStatus::Down as i32;
    h.state.upsert_node(down);
    h.process(&eval("e1", &j, "node-update")).unwrap();
    let s = stopped(&h);
    assert_eq!(names(&s), vec!["web.web[0]"]);
    assert_eq!(s[0].client_status(), AllocClientStatus::Lost);
    assert_eq!(s[0].desired_description, ALLOC_LOST);
    let p = placed(&h);
    assert_eq!(names(&p), vec!["web.web[0]"]);
    assert_ne!(p[0].node_id, "n0");
    assert_eq!(p[0].previous_allocation, "a0");
}

#[test]
fn draining_nodes_migrate_max_parallel_at_a_time() {
    let j = service("web", 3);
    let nodes: Vec<_> = (0..4)
        .map(|i| node(&format!("n{i}"), "dc1", 8000, 16384))
        .collect();
    let mut h = cluster(nodes, &j);
    for i in 0..3 {
        h.state.upsert_alloc(alloc(&format!("a{i}"), &j, i, "n0"));
    }
    let mut draining = node("n0", "dc1", 8000, 16384);
    draining.drain_strategy = Some(DrainStrategy::default());
    h.state.upsert_node(draining);
    h.process(&eval("e1", &j, "node-drain")).unwrap();
    let s = stopped(&h);
    assert_eq!(names(&s), vec!["web.web[0]"]);
    assert_eq!(s[0].desired_description, ALLOC_MIGRATING);
    let p = placed(&h);
    assert_eq!(names(&p), vec!["web.web[0]"]);
    assert_ne!(p[0].node_id, "n0");

    // Allocations the drainer flagged move regardless.
    let mut h = cluster(
        (0..4)
            .map(|i| node(&format!("n{i}"), "dc1", 8000, 16384))
            .collect(),
        &j,
    );
    for i in 0..3 {
        let mut a = alloc(&format!("a{i}"), &j, i, "n0");
        a.desired_transition = Some(DesiredTransition {
            migrate: Some(true),
            ..Default::default()
        });
        h.state.upsert_alloc(a);
    }
    let mut draining = node("n0", "dc1", 8000, 16384);
    draining.drain_strategy = Some(DrainStrategy::default());
    h.state.upsert_node(draining);
    h.process(&eval("e1", &j, "node-drain")).unwrap();
    assert_eq!(stopped(&h).len(), 3);
    assert!(placed(&h).iter().all(|a| a.node_id != "n0"));
}

#[test]
fn a_drain_waits_for_the_last_replacement_to_be_healthy() {
    let j = service("web", 3);
    let setup = |healthy: Option<bool>| {
        let mut h = cluster(
            (0..4)
                .map(|i| node(&format!("n{i}"), "dc1", 8000, 16384))
                .collect(),
            &j,
        );
        for i in 1..3 {
            h.state.upsert_alloc(alloc(&format!("a{i}"), &j, i, "n0"));
        }
        let mut old = alloc("a0", &j, 0, "n0");
        old.desired_status = AllocDesiredStatus::Stop as i32;
        old.client_status = AllocClientStatus::Complete as i32;
        h.state.upsert_alloc(old);
        let mut replacement = alloc("r0", &j, 0, "n1");
        replacement.previous_allocation = "a0".into();
        replacement.deployment_status = healthy.map(|healthy| AllocDeploymentStatus {
            healthy: Some(healthy),
            ..Default::default()
        });
        h.state.upsert_alloc(replacement);
        let mut draining = node("n0", "dc1", 8000, 16384);
        draining.drain_strategy = Some(DrainStrategy::default());
        h.state.upsert_node(draining);
        h.process(&eval("e1", &j, "node-drain")).unwrap();
        h
    };
    // Running but not yet healthy: the next batch waits.
    let h = setup(None);
    assert!(stopped(&h).is_empty(), "{:?}", names(&stopped(&h)));
    // Healthy: one more moves.
    let h = setup(Some(true));
    assert_eq!(names(&stopped(&h)), vec!["web.web[1]"]);
    assert_eq!(stopped(&h)[0].desired_description, ALLOC_MIGRATING);
}

fn failed_alloc(j: &caravan_proto::Job, finished: i64) -> caravan_proto::Allocation {
    let mut a = alloc("a0", j, 0, "n0");
    a.client_status = AllocClientStatus::Failed as i32;
    a.task_states.insert(
        "server".into(),
        TaskState {
            state: "dead".into(),
            failed: true,
            finished_at_unix_ns: finished,
            ..Default::default()
        },
    );
    a
}

#[test]
fn failed_allocs_are_rescheduled_now_away_from_their_node() {
    let j = service("web", 1);
    let mut h = cluster(
        vec![node("n0", "dc1", 4000, 8192), node("n1", "dc1", 4000, 8192)],
        &j,
    );
    let now = h.now;
    h.state.upsert_alloc(failed_alloc(&j, now - 60 * S));
    h.process(&eval("e1", &j, "alloc-failure")).unwrap();
    let s = stopped(&h);
    assert_eq!(names(&s), vec!["web.web[0]"]);
    assert_eq!(s[0].desired_description, ALLOC_RESCHEDULED);
    let p = placed(&h);
    assert_eq!(names_nodes(&p), vec![("web.web[0]".into(), "n1".into())]);
    assert_eq!(p[0].previous_allocation, "a0");
    let ev = &p[0].reschedule_tracker.as_ref().unwrap().events;
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].delay_ns, 30 * S);
    assert_eq!(ev[0].prev_node_id, "n0");
    let scores = &p[0].metrics.as_ref().unwrap().score_meta[0].scores;
    assert!(!scores.contains_key("node-reschedule-penalty"));
}

/// A service allocation its client reports complete while it should run
/// (its tasks killed on the client) is replaced under its name, as Nomad's
/// reconciler does: it neither counts as running nor needs stopping.
#[test]
fn a_service_alloc_complete_on_its_client_is_replaced() {
    let j = service("web", 2);
    let mut h = cluster(three_nodes(), &j);
    let mut done = alloc("a0", &j, 0, "n0");
    done.client_status = AllocClientStatus::Complete as i32;
    h.state.upsert_alloc(done);
    h.state.upsert_alloc(alloc("a1", &j, 1, "n1"));
    h.process(&eval("e1", &j, "alloc-failure")).unwrap();
    assert_eq!(names(&placed(&h)), vec!["web.web[0]"]);
    assert!(stopped(&h).is_empty(), "{:?}", names(&stopped(&h)));
    assert_eq!(last_status(&h), EvalStatus::Complete);
}

#[test]
fn failed_allocs_within_their_delay_get_a_follow_up_eval() {
    let j = service("web", 1);
    let mut h = cluster(
        vec![node("n0", "dc1", 4000, 8192), node("n1", "dc1", 4000, 8192)],
        &j,
    );
    let now = h.now;
    h.state.upsert_alloc(failed_alloc(&j, now - 5 * S));
    h.process(&eval("e1", &j, "alloc-failure")).unwrap();
    assert_eq!(h.created_evals.len(), 1);
    let f = &h.created_evals[0];
    assert_eq!(f.triggered_by, "retry-failed-alloc");
    assert_eq!(f.wait_until_unix_ns, now - 5 * S + 30 * S);
    assert_eq!(f.status(), EvalStatus::Pending);
    let p = placed(&h);
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].id, "a0");
    assert_eq!(p[0].followup_eval_id, f.id);
    assert!(stopped(&h).is_empty());

    // The follow-up, when it runs, replaces the allocation.
    h.now = f.wait_until_unix_ns;
    let mut follow = f.clone();
    follow.status = EvalStatus::Pending as i32;
    h.process(&follow).unwrap();
    assert_eq!(names(&placed(&h)), vec!["web.web[0]"]);
    assert_eq!(placed(&h)[0].previous_allocation, "a0");
}

#[test]
fn batch_allocs_that_completed_are_not_replaced_and_failures_use_attempts() {
    let j = job("b", JobType::Batch, 2);
    let mut h = cluster(three_nodes(), &j);
    let mut done = alloc("a0", &j, 0, "n0");
    done.client_status = AllocClientStatus::Complete as i32;
    h.state.upsert_alloc(done);
    h.state.upsert_alloc(alloc("a1", &j, 1, "n1"));
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert!(h.plans.is_empty());
    assert_eq!(last_status(&h), EvalStatus::Complete);

    // Batch default: one attempt. A fresh failure is replaced after 5s…
    let mut h = cluster(three_nodes(), &j);
    let now = h.now;
    let mut f = failed_alloc(&j, now - 10 * S);
    f.name = "b.web[0]".into();
    h.state.upsert_alloc(f);
    h.state.upsert_alloc(alloc("a1", &j, 1, "n1"));
    h.process(&eval("e1", &j, "alloc-failure")).unwrap();
    assert_eq!(names(&placed(&h)), vec!["b.web[0]"]);
    // …but not a second time.
    let mut h = cluster(three_nodes(), &j);
    let mut f = failed_alloc(&j, now - 10 * S);
    f.name = "b.web[0]".into();
    f.reschedule_tracker = Some(Box::new(caravan_proto::RescheduleTracker {
        events: vec![caravan_proto::RescheduleEvent {
            reschedule_time_unix_ns: now - 60 * S,
            delay_ns: 5 * S,
            ..Default::default()
        }],
    }));
    h.state.upsert_alloc(f);
    h.state.upsert_alloc(alloc("a1", &j, 1, "n1"));
    h.process(&eval("e1", &j, "alloc-failure")).unwrap();
    assert!(h.plans.is_empty());
}

#[test]
fn reschedule_policy_of_the_group_is_used() {
    let mut j = service("web", 1);
    j.task_groups[0].reschedule_policy = Some(ReschedulePolicy {
        attempts: 0,
        unlimited: false,
        ..Default::default()
    });
    let mut h = cluster(three_nodes(), &j);
    let now = h.now;
    h.state.upsert_alloc(failed_alloc(&j, now - 600 * S));
    h.process(&eval("e1", &j, "alloc-failure")).unwrap();
    assert!(h.plans.is_empty(), "no reschedule without attempts");
}

#[test]
fn a_failed_alloc_of_an_older_version_is_replaced_when_its_tasks_change() {
    let mut j = service("web", 1);
    j.task_groups[0].reschedule_policy = Some(ReschedulePolicy {
        attempts: 0,
        unlimited: false,
        ..Default::default()
    });
    let mut h = cluster(three_nodes(), &j);
    let now = h.now;
    h.state.upsert_alloc(failed_alloc(&j, now - 600 * S));
    // A version that only changes the job's priority leaves it failed…
    let mut same_tasks = j.clone();
    same_tasks.version = 1;
    same_tasks.priority = 70;
    h.state.upsert_job(same_tasks.clone());
    h.process(&eval("e1", &same_tasks, "job-register")).unwrap();
    assert!(placed(&h).is_empty(), "{:?}", placed(&h));

    // …one that changes its tasks replaces it, as after an auto-revert.
    let mut changed = same_tasks.clone();
    changed.version = 2;
    changed.task_groups[0].tasks[0]
        .resources
        .as_mut()
        .unwrap()
        .cpu_mhz = 600;
    h.state.upsert_job(changed.clone());
    h.process(&eval("e2", &changed, "job-register")).unwrap();
    let p = placed(&h);
    assert_eq!(names(&p), vec!["web.web[0]"]);
    assert_eq!(p[0].job_version, 2);
    assert_eq!(p[0].previous_allocation, "a0");
    assert_eq!(names(&stopped(&h)), vec!["web.web[0]"]);
}

#[test]
fn partial_commits_retry_then_block_on_max_plan_attempts() {
    // Every node refused: five attempts without progress, then a blocked eval.
    let j = service("web", 2);
    let mut h = cluster(three_nodes(), &j);
    h.reject_nodes = ["n0", "n1", "n2"].iter().map(|s| s.to_string()).collect();
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert_eq!(h.plans.len(), MAX_SERVICE_ATTEMPTS as usize);
    let e = h.last_update().unwrap();
    assert_eq!(e.status(), EvalStatus::Failed);
    assert_eq!(e.status_description, "maximum attempts reached (5)");
    let b = h.created_evals.last().unwrap();
    assert_eq!(b.triggered_by, "max-plan-attempts");
    assert_eq!(b.status(), EvalStatus::Blocked);
    assert_eq!(b.status_description, BLOCKED_MAX_PLANS);
    assert_eq!(e.blocked_eval, b.id);

    // Batch gives up after two.
    let jb = job("b", JobType::Batch, 2);
    let mut h = cluster(three_nodes(), &jb);
    h.reject_nodes = ["n0", "n1", "n2"].iter().map(|s| s.to_string()).collect();
    h.process(&eval("e1", &jb, "job-register")).unwrap();
    assert_eq!(h.plans.len(), MAX_BATCH_ATTEMPTS as usize);

    // One node refused: the retry on refreshed state places the rest elsewhere.
    let j = service("web", 3);
    let mut h = cluster(three_nodes(), &j);
    h.reject_nodes = ["n1".to_string()].into_iter().collect();
    h.reject_for_plans = Some(1);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert!(h.plans.len() >= 2);
    assert!(h.results[0].rejected_nodes.contains(&"n1".to_string()));
    let live: usize = live_by_node(&h).values().sum();
    assert_eq!(live, 3);
    let e = h.last_update().unwrap();
    assert_eq!(e.status(), EvalStatus::Complete);
    assert_eq!(e.queued_allocations["web"], 0);
}

#[test]
fn exhausted_resources_fail_the_rest_with_metrics_and_one_blocked_eval() {
    let j = service("web", 4);
    let mut h = cluster(vec![node("n0", "dc1", 1000, 8192)], &j);
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert_eq!(placed(&h).len(), 2);
    let e = h.last_update().unwrap();
    let m = &e.failed_tg_allocs["web"];
    assert_eq!(m.nodes_exhausted, 1);
    assert_eq!(m.dimension_exhausted["cpu"], 1);
    assert_eq!(m.coalesced_failures, 1);
    assert_eq!(m.nodes_available["dc1"], 1);
    assert_eq!(e.queued_allocations["web"], 2);
    assert_eq!(h.created_evals.len(), 1);
    assert_eq!(h.created_evals[0].triggered_by, "queued-allocs");
    assert_eq!(
        h.created_evals[0].status_description,
        BLOCKED_FAILED_PLACEMENTS
    );

    // Processing the blocked eval while still full reblocks it.
    let mut blocked = h.created_evals[0].clone();
    blocked.status = EvalStatus::Blocked as i32;
    let before = h.updated_evals.len();
    h.process(&blocked).unwrap();
    assert_eq!(h.reblocked_evals.len(), 1);
    assert_eq!(h.updated_evals.len(), before);
    assert_eq!(h.created_evals.len(), 1);
}

#[test]
fn unknown_triggers_fail_the_eval() {
    let j = service("web", 1);
    let mut h = cluster(three_nodes(), &j);
    h.process(&eval("e1", &j, "cosmic-rays")).unwrap();
    assert_eq!(last_status(&h), EvalStatus::Failed);
    assert!(h.plans.is_empty());
}

#[test]
fn canaries_then_promotion_across_two_evals() {
    let mut j = service("web", 3);
    let mut h = running(&j, 3);
    j.version = 1;
    j.update = Some(UpdateStrategy {
        max_parallel: 1,
        canary: 1,
        ..Default::default()
    });
    j.task_groups[0].tasks[0]
        .resources
        .as_mut()
        .unwrap()
        .cpu_mhz = 600;
    h.state.upsert_job(j.clone());

    // Eval 1: one canary, nothing stopped.
    h.process(&eval("e1", &j, "job-register")).unwrap();
    assert!(stopped(&h).is_empty());
    let p = placed(&h);
    assert_eq!(names(&p), vec!["web.web[0]"]);
    assert!(p[0].deployment_status.as_ref().unwrap().canary);
    let d = h.plans[0].deployment.clone().unwrap();
    let ds = &d.task_groups["web"];
    assert_eq!(ds.desired_canaries, 1);
    assert_eq!(ds.placed_canaries, vec![p[0].id.clone()]);
    assert!(!ds.promoted);
    let canary_id = p[0].id.clone();

    // Before promotion another eval changes nothing.
    h.process(&eval("e1b", &j, "deployment-watcher")).unwrap();
    assert_eq!(h.plans.len(), 1);

    // The canary turns healthy and the deployment is promoted.
    let mut c = (*h.state.alloc(&canary_id).unwrap()).clone();
    c.client_status = AllocClientStatus::Running as i32;
    c.deployment_status = Some(AllocDeploymentStatus {
        healthy: Some(true),
        canary: true,
        ..Default::default()
    });
    h.state.upsert_alloc(c);
    let mut d = (**h.state.deployments().next().unwrap()).clone();
    let ds = d.task_groups.get_mut("web").unwrap();
    ds.promoted = true;
    ds.healthy_allocs = 1;
    h.state.upsert_deployment(d.clone());

    // Eval 2: the old allocation sharing the canary's name stops, and the next
    // one is replaced.
    h.process(&eval("e2", &j, "deployment-watcher")).unwrap();
    let s = stopped(&h);
    assert_eq!(
        s.iter()
            .map(|a| (a.id.as_str(), a.desired_description.as_str()))
            .collect::<Vec<_>>(),
        vec![("a0", ALLOC_NOT_NEEDED), ("a1", ALLOC_UPDATING)]
    );
    let p = placed(&h);
    assert_eq!(names(&p), vec!["web.web[1]"]);
    assert_eq!(p[0].deployment_id, d.id);
    assert!(p[0].deployment_status.is_none());
}

#[test]
fn non_canary_replacements_run_the_stable_version_until_promotion() {
    // With a deployment of the stable version, and without one (the replaced
    // allocation's version is used).
    for with_deployment in [true, false] {
        non_canary_replacement(with_deployment);
    }
}

fn non_canary_replacement(with_deployment: bool) {
    let mut j = service("web", 3);
    let mut h = running(&j, 3);
    h.state.upsert_node(node("n3", "dc1", 4000, 8192));
    let mut stable = caravan_proto::Deployment {
        id: "d0".into(),
        namespace: j.namespace.clone(),
        job_id: j.id.clone(),
        job_version: 0,
        job_create_revision: 1,
        status: DeploymentStatus::Successful as i32,
        create_revision: 1,
        ..Default::default()
    };
    stable.task_groups.insert(
        "web".into(),
        caravan_proto::DeploymentState {
            desired_total: 3,
            healthy_allocs: 3,
            ..Default::default()
        },
    );
    if with_deployment {
        h.state.upsert_deployment(stable);
    }
    j.version = 1;
    j.update = Some(UpdateStrategy {
        max_parallel: 1,
        canary: 1,
        ..Default::default()
    });
    j.task_groups[0].tasks[0]
        .resources
        .as_mut()
        .unwrap()
        .cpu_mhz = 600;
    h.state.upsert_job(j.clone());
    h.process(&eval("e1", &j, "job-register")).unwrap();
    let canary = placed(&h).remove(0);
    assert!(canary.deployment_status.as_ref().unwrap().canary);
    let new_deployment = canary.deployment_id.clone();

    // A node of the old version goes down while the canary is unpromoted.
    let (lost, lost_node) = (0..3)
        .map(|i| (format!("a{i}"), format!("n{i}")))
        .find(|(_, n)| *n != canary.node_id)
        .unwrap();
    let mut down = node(&lost_node, "dc1", 4000, 8192);
    down.status = NodeStatus::Down as i32;
    h.state.upsert_node(down);
    h.process(&eval("e2", &j, "node-update")).unwrap();
    let p = placed(&h);
    assert_eq!(p.len(), 1, "{:#?}", h.plans.last());
    let r = &p[0];
    assert_eq!(r.previous_allocation, lost);
    assert_eq!(r.job_version, 0, "the stable version, not the canaries'");
    let t = &r.allocated_resources.as_ref().unwrap().tasks["server"];
    assert_eq!(t.cpu_mhz, 500, "the stable version's resources");
    assert_eq!(r.deployment_id, if with_deployment { "d0" } else { "" });
    assert_ne!(r.deployment_id, new_deployment);
    assert!(r.deployment_status.is_none());
    assert_eq!(
        stopped(&h).iter().map(|a| a.id.clone()).collect::<Vec<_>>(),
        vec![lost]
    );
}

#[test]
fn dry_runs_annotate_desired_updates() {
    let mut j = service("web", 3);
    let mut h = running(&j, 2);
    j.version = 1;
    j.task_groups[0].count = 3;
    j.task_groups[0].tasks[0]
        .resources
        .as_mut()
        .unwrap()
        .memory_mb = 300;
    h.state.upsert_job(j.clone());
    let mut e = eval("e1", &j, "job-register");
    e.annotate_plan = true;
    h.process(&e).unwrap();
    let ann = h.plans[0].annotations.as_ref().unwrap();
    let d = &ann.desired_tg_updates["web"];
    assert_eq!(
        (d.place, d.destructive_update, d.stop, d.in_place_update),
        (1, 2, 0, 0)
    );
}

/// `alloc stop` on one allocation of a batch job (Nomad's
/// `Alloc.Stop`: the allocation flagged to migrate, an `alloc-stop`
/// evaluation) stops that one, places its replacement under the same
/// name, and leaves its sibling alone.
#[test]
fn stopping_one_alloc_of_a_batch_job_replaces_only_that_one() {
    for ty in [JobType::Batch, JobType::Service] {
        let j = job("work", ty, 2);
        let mut h = running(&j, 2);
        mark_running(&mut h);
        let mut a0 = h
            .state
            .allocs()
            .find(|a| a.id == "a0")
            .map(|a| (**a).clone())
            .unwrap();
        a0.desired_transition = Some(DesiredTransition {
            migrate: Some(true),
            ..Default::default()
        });
        h.state.upsert_alloc(a0);
        let mut e = eval("e1", &j, "alloc-stop");
        e.related_alloc_ids = vec!["a0".into()];
        h.process(&e).unwrap();
        let s = stopped(&h);
        assert_eq!(
            s.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
            ["a0"],
            "{ty:?}: {:?}",
            s.iter()
                .map(|a| (&a.id, &a.desired_description))
                .collect::<Vec<_>>()
        );
        let p = placed(&h);
        assert_eq!(names(&p), vec!["work.web[0]"], "{ty:?}");
        assert_eq!(p[0].previous_allocation, "a0", "{ty:?}");
    }
}

/// A service scaled 3 → 1 → 2 with an update strategy: the new version's
/// deployment takes the allocation updated in place as one of its own (its
/// health to be judged again) beside the one placed, so it can complete.
#[test]
fn allocations_updated_in_place_join_the_new_deployment() {
    let mut j = service("web", 1);
    j.update = Some(UpdateStrategy {
        max_parallel: 1,
        ..Default::default()
    });
    let mut h = running(&j, 1);
    let mut a0 = h
        .state
        .allocs()
        .find(|a| a.id == "a0")
        .map(|a| (**a).clone())
        .unwrap();
    a0.deployment_id = "d-old".into();
    a0.deployment_status = Some(AllocDeploymentStatus {
        healthy: Some(true),
        ..Default::default()
    });
    h.state.upsert_alloc(a0);
    j.version = 1;
    j.task_groups[0].count = 2;
    h.state.upsert_job(j.clone());
    h.process(&eval("e1", &j, "job-scaling")).unwrap();
    let plan = h.plans.last().unwrap();
    let d = plan
        .deployment
        .as_ref()
        .expect("a deployment for version 1");
    let p = placed(&h);
    assert_eq!(names(&p), vec!["web.web[0]", "web.web[1]"]);
    for a in &p {
        assert_eq!(a.deployment_id, d.id, "{}", a.id);
        assert!(
            a.deployment_status
                .as_ref()
                .and_then(|s| s.healthy)
                .is_none(),
            "{}: health starts over",
            a.id
        );
    }
}

use caravan_proto::{
    AllocClientStatus as C, AllocDesiredStatus as D, EvalStatus, JobType, ParameterizedJobConfig,
};

use super::*;
use crate::testing::{SEC, World, alloc, eval, job, periodic_job};

fn every_minute() -> CronSchedule {
    CronSchedule::parse(
        &periodic_job("p", "* * * * *", false)
            .periodic
            .unwrap_or_default(),
    )
    .expect("schedule")
}

#[test]
fn children_are_named_by_launch_time() {
    assert_eq!(
        child_id("report", 1_700_000_000),
        "report/periodic-1700000000"
    );
    assert_eq!(
        launch_time("report", "report/periodic-1700000000"),
        Some(1_700_000_000)
    );
    assert_eq!(launch_time("report", "report/dispatch-17-abcd"), None);
    assert_eq!(launch_time("report", "reports/periodic-17"), None);
    assert_eq!(launch_time("report", "report/periodic-"), None);
    assert_eq!(launch_time("report", "report/periodic-1x"), None);
    // A parent whose own id looks like a child still parses unambiguously.
    assert_eq!(
        launch_time("a/periodic-1", "a/periodic-1/periodic-5"),
        Some(5)
    );
}

#[test]
fn only_enabled_running_non_parameterized_periodic_jobs_are_followed() {
    let p = periodic_job("p", "* * * * *", false);
    assert!(is_active(&p));
    let mut stopped = p.clone();
    stopped.stop = true;
    assert!(!is_active(&stopped));
    let mut disabled = p.clone();
    if let Some(cfg) = disabled.periodic.as_mut() {
        cfg.enabled = false;
    }
    assert!(!is_active(&disabled));
    let mut template = p.clone();
    template.parameterized = Some(ParameterizedJobConfig::default());
    assert!(!is_active(&template));
    assert!(!is_active(&job("plain", JobType::Batch)));
}

#[test]
fn a_child_is_the_parents_spec_without_periodic() {
    let mut parent = periodic_job("p", "* * * * *", true);
    parent.version = 4;
    parent.stable = true;
    parent.job_modify_revision = 77;
    parent.modify_revision = 78;
    parent.meta.insert("team".into(), "ops".into());
    let child = derive_child(&parent, 1_700_000_060, 5 * SEC);
    assert_eq!(child.id, "p/periodic-1700000060");
    assert_eq!(child.name, child.id);
    assert_eq!(child.parent_id, "p");
    assert!(child.periodic.is_none());
    assert_eq!(child.status(), JobStatus::Pending);
    assert_eq!((child.version, child.stable), (0, false));
    assert_eq!(
        (child.job_modify_revision, child.modify_revision),
        (0, 0),
        "left to the store"
    );
    assert_eq!(child.submit_time_unix_ns, 5 * SEC);
    assert_eq!(child.meta.get("team").map(String::as_str), Some("ops"));
    assert_eq!(child.r#type(), JobType::Batch);
    let e = launch_eval(&child, 5 * SEC);
    assert_eq!(e.triggered_by, "periodic-job");
    assert_eq!(
        (e.job_id.as_str(), e.r#type.as_str()),
        (child.id.as_str(), "batch")
    );
    assert_eq!(e.status(), EvalStatus::Pending);
    assert_eq!(e.job_modify_revision, 0);
}

#[test]
fn the_last_launch_is_the_newest_child_else_the_first_registration() {
    let mut parent = periodic_job("p", "* * * * *", false);
    parent.submit_time_unix_ns = 1_000 * SEC + 400_000_000;
    let mut w = World::new();
    w.job(parent.clone());
    assert_eq!(last_launch(&w.tables, &parent), 1_000);
    w.job(derive_child(&parent, 1_060, 0));
    w.job(derive_child(&parent, 1_120, 0));
    // A dispatched child and an unrelated job with a similar id don't count.
    let mut other = job("p/periodic-9999", JobType::Batch);
    other.parent_id = "someone-else".into();
    w.job(other);
    assert_eq!(last_launch(&w.tables, &parent), 1_120);
}

#[test]
fn a_term_catches_up_one_missed_launch_and_no_more() {
    let s = every_minute();
    // Last launch at 00:01:00; the leader comes back at 00:05:30.
    let (last, now) = (60, 330);
    assert_eq!(first_due(&s, last, now, true), Some(330), "once, now");
    assert_eq!(due_after(&s, 330, 330), Some(360), "then on schedule");
    // Nothing missed: the next scheduled time.
    assert_eq!(first_due(&s, 300, 330, true), Some(360));
    // A parent registered during the term starts from now.
    assert_eq!(first_due(&s, 0, 330, false), Some(360));
}

#[test]
fn a_late_launcher_skips_to_the_latest_run() {
    let s = every_minute();
    assert_eq!(due_after(&s, 60, 61), Some(120), "on time");
    assert_eq!(
        due_after(&s, 60, 305),
        Some(360),
        "runs missed while behind are not replayed"
    );
    assert_eq!(
        due_after(&s, 60, 360),
        Some(360),
        "the run due now still goes"
    );
}

#[test]
fn prohibit_overlap_waits_for_every_child_to_finish() {
    let parent = periodic_job("p", "* * * * *", true);
    let mut w = World::new();
    w.job(parent.clone());
    let launch = decide(&w.tables, &parent, 120);
    assert_eq!(
        launch,
        LaunchDecision::Launch {
            child_id: "p/periodic-120".into()
        }
    );

    // A child whose eval is still pending runs.
    w.job(derive_child(&parent, 60, 0));
    w.eval(eval("e1", "p/periodic-60", "batch", EvalStatus::Pending, 0));
    assert_eq!(decide(&w.tables, &parent, 120), LaunchDecision::Overlap);

    // Its eval done and its alloc running: still running.
    w.eval(eval(
        "e1",
        "p/periodic-60",
        "batch",
        EvalStatus::Complete,
        0,
    ));
    w.alloc(alloc(
        "a1",
        "p/periodic-60",
        "e1",
        "n1",
        D::Run,
        C::Running,
        0,
    ));
    assert_eq!(decide(&w.tables, &parent, 120), LaunchDecision::Overlap);

    // Finished: the next launch goes ahead.
    w.alloc(alloc(
        "a1",
        "p/periodic-60",
        "e1",
        "n1",
        D::Run,
        C::Complete,
        0,
    ));
    assert!(matches!(
        decide(&w.tables, &parent, 120),
        LaunchDecision::Launch { .. }
    ));

    // Without prohibit_overlap a running child doesn't hold launches back.
    let free = periodic_job("p", "* * * * *", false);
    w.alloc(alloc(
        "a1",
        "p/periodic-60",
        "e1",
        "n1",
        D::Run,
        C::Running,
        0,
    ));
    assert!(matches!(
        decide(&w.tables, &free, 120),
        LaunchDecision::Launch { .. }
    ));
}

#[test]
fn a_launch_made_before_a_failover_is_not_made_again() {
    let parent = periodic_job("p", "* * * * *", false);
    let mut w = World::new();
    w.job(parent.clone());
    w.job(derive_child(&parent, 120, 0));
    assert_eq!(
        decide(&w.tables, &parent, 120),
        LaunchDecision::AlreadyLaunched
    );
}

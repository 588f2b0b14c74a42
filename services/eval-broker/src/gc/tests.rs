use caravan_proto::{
    AllocClientStatus as C, AllocDesiredStatus as D, DeploymentStatus as DS, EvalStatus as E,
    JobType, NodeStatus, ParameterizedJobConfig, RescheduleEvent, ReschedulePolicy,
    RescheduleTracker, TaskGroup,
};

use super::*;
use crate::testing::{HOUR, World, alloc, deployment, eval, job, node, periodic_job};

const NOW: i64 = 1_000 * HOUR;

fn cutoffs() -> GcCutoffs {
    GcCutoffs::at(NOW, &GcConfig::default())
}

/// The ids of what `select` picks, by kind, sorted.
fn picked(w: &World, cut: GcCutoffs) -> BTreeMap<&'static str, Vec<String>> {
    let mut out: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    for unit in select(&w.tables, cut, NOW) {
        for o in unit.objects {
            let (kind, id) = match o {
                Doomed::Eval(e) => ("evals", e.id.clone()),
                Doomed::Alloc(a) => ("allocs", a.id.clone()),
                Doomed::Job(j) => ("jobs", j.id.clone()),
                Doomed::Node(n) => ("nodes", n.id.clone()),
                Doomed::Deployment(d) => ("deployments", d.id.clone()),
                Doomed::OrphanStatus(id, _) => ("alloc_status", id.clone()),
            };
            out.entry(kind).or_default().push(id);
        }
    }
    out.values_mut().for_each(|v| v.sort());
    out
}

fn ids(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn running_service(w: &mut World, id: &str) {
    let mut j = job(id, JobType::Service);
    j.submit_time_unix_ns = NOW - 100 * HOUR;
    w.job(j);
}

#[test]
fn cutoffs_follow_the_thresholds() {
    let c = cutoffs();
    assert_eq!(c.eval, NOW - HOUR);
    assert_eq!(c.batch_eval, NOW - 24 * HOUR);
    assert_eq!(c.job, NOW - 4 * HOUR);
    assert_eq!(c.node, NOW - 24 * HOUR);
    assert_eq!(c.deployment, NOW - HOUR);
    assert_eq!(GcCutoffs::forced().eval, i64::MAX);
}

#[test]
fn old_terminal_evals_go_with_their_terminal_allocs() {
    let mut w = World::new();
    running_service(&mut w, "web");
    let old = NOW - 2 * HOUR;
    w.eval(eval("old-done", "web", "service", E::Complete, old));
    w.alloc(alloc(
        "a-stopped",
        "web",
        "old-done",
        "n1",
        D::Stop,
        C::Complete,
        old,
    ));
    // Too young.
    w.eval(eval("young", "web", "service", E::Complete, NOW - HOUR / 2));
    // Not terminal.
    w.eval(eval("pending", "web", "service", E::Pending, old));
    // Terminal, but an alloc of it still runs.
    w.eval(eval("placed", "web", "service", E::Complete, old));
    w.alloc(alloc(
        "a-live",
        "web",
        "placed",
        "n1",
        D::Run,
        C::Running,
        old,
    ));
    let got = picked(&w, cutoffs());
    assert_eq!(got.get("evals"), Some(&ids(&["old-done"])));
    assert_eq!(got.get("allocs"), Some(&ids(&["a-stopped"])));
    assert!(!got.contains_key("jobs"), "a running job stays");
}

#[test]
fn batch_evals_wait_longer_and_stay_while_their_job_lives() {
    let mut w = World::new();
    let mut j = job("report", JobType::Batch);
    j.submit_time_unix_ns = NOW - 100 * HOUR;
    j.version = 1;
    w.job(j);
    let two_hours = NOW - 2 * HOUR;
    let two_days = NOW - 48 * HOUR;
    w.eval(eval("b-young", "report", "batch", E::Complete, two_hours));
    w.eval(eval("b-old", "report", "batch", E::Complete, two_days));
    // The job still runs an alloc of version 1; a finished one of version 0
    // may go, the eval stays.
    let mut live = alloc("a1", "report", "b-old", "n1", D::Run, C::Running, two_days);
    live.job_version = 1;
    w.alloc(live);
    let mut done_v0 = alloc("a0", "report", "b-old", "n1", D::Run, C::Complete, two_days);
    done_v0.job_version = 0;
    w.alloc(done_v0);
    let got = picked(&w, cutoffs());
    assert!(!got.contains_key("evals"), "{got:?}");
    assert_eq!(got.get("allocs"), Some(&ids(&["a0"])));
}

#[test]
fn a_finished_batch_job_goes_whole_after_the_job_threshold() {
    let mut w = World::new();
    let mut j = job("report", JobType::Batch);
    j.submit_time_unix_ns = NOW - 5 * HOUR;
    w.job(j);
    let five = NOW - 5 * HOUR;
    w.eval(eval("e1", "report", "batch", E::Complete, five));
    w.alloc(alloc("a1", "report", "e1", "n1", D::Run, C::Complete, five));
    w.deployment(deployment("d1", "report", DS::Successful, five));
    let got = picked(&w, cutoffs());
    assert_eq!(got.get("jobs"), Some(&ids(&["report"])));
    assert_eq!(got.get("evals"), Some(&ids(&["e1"])));
    assert_eq!(got.get("allocs"), Some(&ids(&["a1"])));
    assert_eq!(got.get("deployments"), Some(&ids(&["d1"])));
    // The job comes last in its unit, after what belonged to it.
    let units = select(&w.tables, cutoffs(), NOW);
    assert!(matches!(
        units[0].objects.last(),
        Some(Doomed::Job(j)) if j.id == "report"
    ));

    // Three hours old: too young.
    let mut w = World::new();
    let mut j = job("report", JobType::Batch);
    j.submit_time_unix_ns = NOW - 3 * HOUR;
    w.job(j);
    w.eval(eval("e1", "report", "batch", E::Complete, NOW - 3 * HOUR));
    assert!(picked(&w, cutoffs()).is_empty());
}

#[test]
fn a_dead_service_job_goes_only_once_stopped() {
    let old = NOW - 10 * HOUR;
    let build = |stop: bool| {
        let mut w = World::new();
        let mut j = job("web", JobType::Service);
        j.submit_time_unix_ns = old;
        j.stop = stop;
        w.job(j);
        w.eval(eval("e1", "web", "service", E::Complete, old));
        w.alloc(alloc("a1", "web", "e1", "n1", D::Stop, C::Complete, old));
        w
    };
    assert_eq!(
        picked(&build(true), cutoffs()).get("jobs"),
        Some(&ids(&["web"]))
    );
    let kept = picked(&build(false), cutoffs());
    assert!(!kept.contains_key("jobs"));
    assert_eq!(
        kept.get("evals"),
        Some(&ids(&["e1"])),
        "its old evals still go"
    );
}

#[test]
fn templates_stay_until_stopped_and_while_they_have_children() {
    let old = NOW - 10 * HOUR;
    let mut w = World::new();
    let mut parent = periodic_job("nightly", "@daily", false);
    parent.submit_time_unix_ns = old;
    w.job(parent.clone());
    let mut tmpl = job("render", JobType::Batch);
    tmpl.parameterized = Some(ParameterizedJobConfig::default());
    tmpl.submit_time_unix_ns = old;
    w.job(tmpl);
    assert!(picked(&w, cutoffs()).is_empty(), "running templates stay");

    // Stopped, with a child that still runs: the parent stays.
    parent.stop = true;
    w.job(parent.clone());
    let mut child = crate::periodic::derive_child(&parent, 100, old);
    child.stop = false;
    w.job(child.clone());
    w.eval(eval("ce", &child.id, "batch", E::Complete, old));
    w.alloc(alloc("ca", &child.id, "ce", "n1", D::Run, C::Running, old));
    assert!(!picked(&w, cutoffs()).contains_key("jobs"));

    // The child finished long ago: both go, the child's unit first.
    w.alloc(alloc("ca", &child.id, "ce", "n1", D::Run, C::Complete, old));
    let got = picked(&w, cutoffs());
    assert_eq!(
        got.get("jobs"),
        Some(&ids(&["nightly", "nightly/periodic-100"]))
    );
    let units = select(&w.tables, cutoffs(), NOW);
    let parent_unit = units
        .iter()
        .position(|u| matches!(u.objects.last(), Some(Doomed::Job(j)) if j.id == "nightly"))
        .expect("the parent's unit");
    let child_unit = units
        .iter()
        .position(|u| matches!(u.objects.last(), Some(Doomed::Job(j)) if j.id == child.id))
        .expect("the child's unit");
    assert_eq!(units[parent_unit].after, vec![child_unit]);
    assert!(child_unit < parent_unit);
}

#[test]
fn failed_allocs_owed_a_reschedule_stay() {
    let old = NOW - 2 * HOUR;
    let mut w = World::new();
    let mut j = job("web", JobType::Service);
    j.submit_time_unix_ns = old;
    j.task_groups = vec![TaskGroup {
        name: "g".into(),
        count: 1,
        reschedule_policy: Some(ReschedulePolicy {
            attempts: 2,
            interval_ns: 4 * HOUR,
            ..Default::default()
        }),
        ..Default::default()
    }];
    w.job(j.clone());
    w.eval(eval("e1", "web", "service", E::Complete, old));
    let mut failed = alloc("f1", "web", "e1", "n1", D::Run, C::Failed, old);
    failed.reschedule_tracker = Some(Box::new(RescheduleTracker {
        events: vec![RescheduleEvent {
            reschedule_time_unix_ns: NOW - HOUR,
            ..Default::default()
        }],
    }));
    w.alloc(failed.clone());
    // A live alloc keeps the job running.
    w.eval(eval("e2", "web", "service", E::Complete, old));
    w.alloc(alloc("a2", "web", "e2", "n1", D::Run, C::Running, old));
    let got = picked(&w, cutoffs());
    assert!(!got.contains_key("evals"), "{got:?}");

    // Replaced: it may go.
    failed.next_allocation = "a2".into();
    w.alloc(failed.clone());
    // But a2 names it as its predecessor: a live alloc still refers to it.
    let mut a2 = alloc("a2", "web", "e2", "n1", D::Run, C::Running, old);
    a2.previous_allocation = "f1".into();
    w.alloc(a2);
    assert!(!picked(&w, cutoffs()).contains_key("allocs"));
    let a2 = alloc("a2", "web", "e2", "n1", D::Run, C::Running, old);
    w.alloc(a2);
    assert_eq!(picked(&w, cutoffs()).get("allocs"), Some(&ids(&["f1"])));
}

#[test]
fn evals_a_live_eval_names_stay() {
    let old = NOW - 2 * HOUR;
    let mut w = World::new();
    running_service(&mut w, "web");
    w.eval(eval("failed", "web", "service", E::Failed, old));
    let mut follow = eval("follow", "web", "service", E::Pending, old);
    follow.previous_eval = "failed".into();
    w.eval(follow);
    assert!(picked(&w, cutoffs()).is_empty());
}

#[test]
fn down_nodes_go_when_old_and_empty() {
    let mut w = World::new();
    running_service(&mut w, "web");
    w.node(node("gone", NodeStatus::Down, NOW - 25 * HOUR));
    w.node(node("recent", NodeStatus::Down, NOW - HOUR));
    w.node(node("busy", NodeStatus::Down, NOW - 25 * HOUR));
    w.node(node("up", NodeStatus::Ready, NOW - 25 * HOUR));
    // Down but heartbeating again (re-registering): stays.
    w.node(node("back", NodeStatus::Down, NOW - 25 * HOUR));
    w.heartbeat("back");
    w.eval(eval("e", "web", "service", E::Pending, NOW));
    w.alloc(alloc("a", "web", "e", "busy", D::Run, C::Running, NOW));
    assert_eq!(picked(&w, cutoffs()).get("nodes"), Some(&ids(&["gone"])));
}

#[test]
fn terminal_deployments_go_unless_a_live_alloc_names_them() {
    let old = NOW - 2 * HOUR;
    let mut w = World::new();
    running_service(&mut w, "web");
    w.deployment(deployment("done", "web", DS::Successful, old));
    w.deployment(deployment("active", "web", DS::Running, old));
    w.deployment(deployment("named", "web", DS::Failed, old));
    w.deployment(deployment("fresh", "web", DS::Cancelled, NOW));
    w.eval(eval("e", "web", "service", E::Pending, NOW));
    let mut a = alloc("a", "web", "e", "n1", D::Run, C::Running, NOW);
    a.deployment_id = "named".into();
    w.alloc(a);
    assert_eq!(
        picked(&w, cutoffs()).get("deployments"),
        Some(&ids(&["done"]))
    );
}

#[test]
fn a_forced_sweep_takes_every_terminal_object_but_nothing_live() {
    let mut w = World::new();
    running_service(&mut w, "web");
    let mut done = job("done", JobType::Batch);
    done.submit_time_unix_ns = NOW;
    w.job(done);
    w.eval(eval("d1", "done", "batch", E::Complete, NOW));
    w.alloc(alloc("da", "done", "d1", "n1", D::Run, C::Complete, NOW));
    w.eval(eval("w1", "web", "service", E::Complete, NOW));
    w.alloc(alloc("wa", "web", "w1", "n1", D::Run, C::Running, NOW));
    w.eval(eval("w0", "web", "service", E::Canceled, NOW));
    w.node(node("n-down", NodeStatus::Down, NOW));
    assert!(picked(&w, cutoffs()).is_empty(), "all too young");
    let got = picked(&w, GcCutoffs::forced());
    assert_eq!(got.get("jobs"), Some(&ids(&["done"])));
    assert_eq!(got.get("evals"), Some(&ids(&["d1", "w0"])));
    assert_eq!(got.get("allocs"), Some(&ids(&["da"])));
    assert_eq!(got.get("nodes"), Some(&ids(&["n-down"])));
}

#[test]
fn allocs_left_by_an_earlier_sweep_go_on_their_own() {
    let old = NOW - 2 * HOUR;
    let mut w = World::new();
    running_service(&mut w, "web");
    w.alloc(alloc(
        "orphan",
        "web",
        "gone-eval",
        "n1",
        D::Stop,
        C::Complete,
        old,
    ));
    w.alloc(alloc(
        "live",
        "web",
        "gone-eval",
        "n1",
        D::Run,
        C::Running,
        old,
    ));
    assert_eq!(picked(&w, cutoffs()).get("allocs"), Some(&ids(&["orphan"])));
}

#[test]
fn counts_add_up() {
    let mut c = GcCounts::default();
    assert!(c.is_empty());
    c.add(&GcUnit {
        objects: vec![
            Doomed::Eval(Arc::new(eval("e", "j", "service", E::Complete, 0))),
            Doomed::Job(Arc::new(job("j", JobType::Batch))),
        ],
        after: Vec::new(),
    });
    assert_eq!((c.evals, c.jobs, c.allocs), (1, 1, 0));
}

#[test]
fn the_newest_child_of_a_launching_parent_stays_as_its_record() {
    let old = NOW - 10 * HOUR;
    let mut w = World::new();
    let mut parent = periodic_job("hourly", "0 * * * *", false);
    parent.submit_time_unix_ns = old;
    w.job(parent.clone());
    for (launch, e) in [(100, "e100"), (200, "e200")] {
        let child = crate::periodic::derive_child(&parent, launch, old);
        w.job(child.clone());
        w.eval(eval(e, &child.id, "batch", E::Complete, old));
    }
    let got = picked(&w, GcCutoffs::forced());
    assert_eq!(
        got.get("jobs"),
        Some(&ids(&["hourly/periodic-100"])),
        "the newest child records the last launch"
    );
    assert_eq!(
        got.get("evals"),
        Some(&ids(&["e100"])),
        "a batch eval stays while its job does"
    );

    // Once the parent stops, the record goes too, before the parent.
    parent.stop = true;
    w.job(parent);
    let got = picked(&w, GcCutoffs::forced());
    assert_eq!(
        got.get("jobs"),
        Some(&ids(&[
            "hourly",
            "hourly/periodic-100",
            "hourly/periodic-200"
        ]))
    );
}

/// A client's report that landed just after its allocation was collected
/// leaves a status key with no record; the next sweep deletes it.
#[test]
fn a_status_left_without_its_allocation_is_collected() {
    let mut w = World::new();
    running_service(&mut w, "web");
    w.tables.apply(caravan_state::Change::AllocStatus {
        id: "gone".into(),
        status: Some(Box::default()),
        revision: 9,
    });
    assert_eq!(
        picked(&w, cutoffs()).get("alloc_status"),
        Some(&ids(&["gone"]))
    );
    let unit = select(&w.tables, cutoffs(), NOW)
        .into_iter()
        .find(|u| matches!(u.objects[..], [Doomed::OrphanStatus(..)]))
        .unwrap();
    assert!(matches!(&unit.objects[0], Doomed::OrphanStatus(id, 9) if id == "gone"));
}

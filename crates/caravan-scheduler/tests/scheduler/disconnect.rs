//! Disconnected clients: allocations of a node that stops heartbeating are
//! marked unknown for their `lost_after` window and replaced when `replace`
//! says so; when the node comes back the `reconcile` strategy keeps one copy
//! of each name; past the window they are lost.
#![allow(clippy::unwrap_used)]

use crate::common::*;
use caravan_model::disconnect as strategy;
use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, Allocation, DisconnectStrategy, EvalStatus, Job,
    NodeStatus, TaskState,
};
use caravan_scheduler::State;
use caravan_scheduler::harness::Harness;

const S: i64 = 1_000_000_000;

/// A service job of `count` whose group has a disconnect block.
fn windowed(count: i32, lost_after: i64, replace: Option<bool>, reconcile: &str) -> Job {
    let mut j = service("web", count);
    j.task_groups[0].disconnect = Some(DisconnectStrategy {
        lost_after_ns: lost_after,
        replace,
        reconcile: reconcile.into(),
        ..Default::default()
    });
    j
}

/// Three nodes, `job` running one alloc a0 on n0 (placed with score 0.5,
/// its task started at `now - 1h`).
fn running_on_n0(job: &Job) -> Harness {
    let nodes = (0..3)
        .map(|i| node(&format!("n{i}"), "dc1", 4000, 8192))
        .collect();
    let mut h = cluster(nodes, job);
    let mut a = alloc("a0", job, 0, "n0");
    a.placement_score = 0.5;
    a.task_states.insert(
        "server".into(),
        TaskState {
            state: "running".into(),
            started_at_unix_ns: h.now - 3600 * S,
            ..Default::default()
        },
    );
    h.state.upsert_alloc(a);
    h
}

fn set_node_status(h: &mut Harness, id: &str, status: NodeStatus) {
    let mut n = (*State::node(&h.state, id).unwrap()).clone();
    n.status = status as i32;
    h.state.upsert_node(n);
}

fn stored(h: &Harness, id: &str) -> Allocation {
    h.state
        .allocs()
        .find(|a| a.id == id)
        .map(|a| (**a).clone())
        .unwrap()
}

/// The replacement of a0 in the state.
fn replacement(h: &Harness) -> Allocation {
    h.state
        .allocs()
        .find(|a| a.previous_allocation == "a0")
        .map(|a| (**a).clone())
        .unwrap()
}

/// Disconnects n0 and runs the node-update eval: a0 unknown, replaced.
fn disconnect(h: &mut Harness, job: &Job) {
    set_node_status(h, "n0", NodeStatus::Disconnected);
    h.process(&eval("e-disc", job, "node-update")).unwrap();
}

/// The client of n0 comes back and reports a0 running; the replacement
/// runs too, with `score` and started at `started`.
fn reconnect(h: &mut Harness, score: f32, started: i64) {
    set_node_status(h, "n0", NodeStatus::Ready);
    let mut back = stored(h, "a0");
    back.client_status = AllocClientStatus::Running as i32;
    h.state.upsert_alloc(back);
    let mut r = replacement(h);
    r.client_status = AllocClientStatus::Running as i32;
    r.placement_score = score;
    r.task_states.insert(
        "server".into(),
        TaskState {
            state: "running".into(),
            started_at_unix_ns: started,
            ..Default::default()
        },
    );
    h.state.upsert_alloc(r);
}

#[test]
fn a_disconnected_nodes_allocs_turn_unknown_keep_their_name_and_are_replaced() {
    let j = windowed(1, 300 * S, None, "");
    let mut h = running_on_n0(&j);
    disconnect(&mut h, &j);
    let a0 = stored(&h, "a0");
    assert_eq!(a0.client_status(), AllocClientStatus::Unknown);
    assert_eq!(a0.desired_status(), AllocDesiredStatus::Run, "not stopped");
    assert_eq!(a0.unknown_since_unix_ns, h.now);
    let r = replacement(&h);
    assert_eq!(r.name, a0.name, "the replacement takes the same name");
    assert_ne!(r.node_id, "n0");
    assert!(stopped(&h).is_empty(), "{:?}", stopped(&h));
    // One follow-up at the end of the window, named on the alloc.
    let timeouts: Vec<_> = h
        .created_evals
        .iter()
        .filter(|e| e.triggered_by == caravan_model::trigger::MAX_DISCONNECT_TIMEOUT)
        .collect();
    assert_eq!(timeouts.len(), 1);
    assert_eq!(timeouts[0].wait_until_unix_ns, h.now + 300 * S);
    assert_eq!(a0.followup_eval_id, timeouts[0].id);
    assert_eq!(last_status(&h), EvalStatus::Complete);
    let ann = h.plans.last().unwrap();
    assert!(ann.node_allocation.contains_key("n0"), "the unknown mark");

    // A second eval while it is away changes nothing: the unknown copy is
    // neither counted nor stopped, the replacement is enough.
    let plans = h.plans.len();
    h.process(&eval("e-again", &j, "node-update")).unwrap();
    assert!(
        h.plans.len() == plans || (placed(&h).is_empty() && stopped(&h).is_empty()),
        "placed {:?} stopped {:?}",
        placed(&h),
        stopped(&h)
    );
}

#[test]
fn without_a_window_a_disconnected_nodes_allocs_are_lost_as_before() {
    let j = service("web", 1);
    let mut h = running_on_n0(&j);
    disconnect(&mut h, &j);
    let a0 = stored(&h, "a0");
    assert_eq!(a0.client_status(), AllocClientStatus::Lost);
    assert_eq!(a0.desired_status(), AllocDesiredStatus::Stop);
    assert_eq!(replacement(&h).name, "web.web[0]");
}

#[test]
fn with_replace_false_an_unknown_alloc_is_not_replaced_until_lost() {
    let j = windowed(1, 300 * S, Some(false), "");
    let mut h = running_on_n0(&j);
    disconnect(&mut h, &j);
    assert_eq!(stored(&h, "a0").client_status(), AllocClientStatus::Unknown);
    assert!(
        h.state.allocs().all(|a| a.previous_allocation != "a0"),
        "no replacement"
    );
    // Past the window the follow-up finds it expired: lost and replaced.
    let timeout = h
        .created_evals
        .iter()
        .find(|e| e.triggered_by == caravan_model::trigger::MAX_DISCONNECT_TIMEOUT)
        .cloned()
        .unwrap();
    h.now = timeout.wait_until_unix_ns;
    h.process(&timeout).unwrap();
    let a0 = stored(&h, "a0");
    assert_eq!(a0.client_status(), AllocClientStatus::Lost);
    assert_eq!(a0.desired_status(), AllocDesiredStatus::Stop);
    assert_eq!(replacement(&h).name, "web.web[0]");
}

#[test]
fn past_lost_after_an_unknown_alloc_is_lost_and_its_replacement_stays() {
    let j = windowed(1, 300 * S, None, "");
    let mut h = running_on_n0(&j);
    disconnect(&mut h, &j);
    let r = replacement(&h);
    h.now += 301 * S;
    h.process(&eval("e-timeout", &j, "max-disconnect-timeout"))
        .unwrap();
    let a0 = stored(&h, "a0");
    assert_eq!(a0.client_status(), AllocClientStatus::Lost);
    assert_eq!(a0.desired_status(), AllocDesiredStatus::Stop);
    assert!(placed(&h).is_empty(), "the replacement already runs");
    assert_eq!(stored(&h, &r.id).desired_status(), AllocDesiredStatus::Run);
}

/// Runs a disconnect then a reconnect under `reconcile`, the replacement
/// placed with `score` and started at `started`; returns (a0, replacement)
/// as stored after the reconnect eval.
fn reconnect_with(reconcile: &str, score: f32, started_ago: i64) -> (Allocation, Allocation) {
    let j = windowed(1, 300 * S, None, reconcile);
    let mut h = running_on_n0(&j);
    disconnect(&mut h, &j);
    h.now += 60 * S;
    let started = h.now - started_ago;
    reconnect(&mut h, score, started);
    h.process(&eval("e-back", &j, "reconnect")).unwrap();
    let r = replacement(&h);
    let a0 = stored(&h, "a0");
    // Exactly one copy of the name keeps running.
    let live: Vec<_> = [&a0, &r]
        .iter()
        .filter(|a| a.desired_status() == AllocDesiredStatus::Run)
        .map(|a| a.id.clone())
        .collect();
    assert_eq!(live.len(), 1, "{reconcile}: {live:?}");
    (a0, r)
}

#[test]
fn best_score_keeps_the_better_placed_copy() {
    let (a0, r) = reconnect_with(strategy::BEST_SCORE, 0.9, 30 * S);
    assert_eq!(a0.desired_status(), AllocDesiredStatus::Stop);
    assert_eq!(r.desired_status(), AllocDesiredStatus::Run);
    let (a0, r) = reconnect_with(strategy::BEST_SCORE, 0.1, 30 * S);
    assert_eq!(a0.desired_status(), AllocDesiredStatus::Run);
    assert_eq!(
        a0.unknown_since_unix_ns, 0,
        "recorded as reconnected: no later eval picks again"
    );
    assert_eq!(r.desired_status(), AllocDesiredStatus::Stop);
    assert_eq!(
        r.desired_description,
        "alloc not needed due to disconnected client reconnect"
    );
}

#[test]
fn keep_original_keeps_the_alloc_that_came_back() {
    let (a0, r) = reconnect_with(strategy::KEEP_ORIGINAL, 0.99, 30 * S);
    assert_eq!(a0.desired_status(), AllocDesiredStatus::Run);
    assert_eq!(r.desired_status(), AllocDesiredStatus::Stop);
}

#[test]
fn keep_replacement_keeps_the_replacement() {
    let (a0, r) = reconnect_with(strategy::KEEP_REPLACEMENT, 0.01, 30 * S);
    assert_eq!(a0.desired_status(), AllocDesiredStatus::Stop);
    assert_eq!(r.desired_status(), AllocDesiredStatus::Run);
}

#[test]
fn longest_running_keeps_the_copy_that_started_first() {
    // a0's task started an hour before the disconnect: it wins.
    let (a0, r) = reconnect_with(strategy::LONGEST_RUNNING, 0.99, 30 * S);
    assert_eq!(a0.desired_status(), AllocDesiredStatus::Run);
    assert_eq!(r.desired_status(), AllocDesiredStatus::Stop);
    // A replacement that (by its report) started before a0: it wins.
    let (a0, r) = reconnect_with(strategy::LONGEST_RUNNING, 0.01, 7200 * S);
    assert_eq!(a0.desired_status(), AllocDesiredStatus::Stop);
    assert_eq!(r.desired_status(), AllocDesiredStatus::Run);
}

#[test]
fn a_node_back_before_its_client_reports_changes_nothing_yet() {
    let j = windowed(1, 300 * S, None, strategy::KEEP_REPLACEMENT);
    let mut h = running_on_n0(&j);
    disconnect(&mut h, &j);
    set_node_status(&mut h, "n0", NodeStatus::Ready);
    h.process(&eval("e-ready", &j, "node-update")).unwrap();
    assert!(stopped(&h).is_empty() || h.plans.len() == 1);
    let a0 = stored(&h, "a0");
    assert_eq!(a0.desired_status(), AllocDesiredStatus::Run);
    assert_eq!(
        replacement(&h).desired_status(),
        AllocDesiredStatus::Run,
        "nothing stops before the client says how its copy is"
    );
}

#[test]
fn an_alloc_that_failed_while_away_is_stopped_when_it_reports() {
    let j = windowed(1, 300 * S, None, strategy::KEEP_ORIGINAL);
    let mut h = running_on_n0(&j);
    disconnect(&mut h, &j);
    set_node_status(&mut h, "n0", NodeStatus::Ready);
    let mut back = stored(&h, "a0");
    back.client_status = AllocClientStatus::Failed as i32;
    h.state.upsert_alloc(back);
    h.process(&eval("e-back", &j, "reconnect")).unwrap();
    assert_eq!(stored(&h, "a0").desired_status(), AllocDesiredStatus::Stop);
    assert_eq!(replacement(&h).desired_status(), AllocDesiredStatus::Run);
}

#[test]
fn the_older_max_client_disconnect_gives_the_same_window() {
    let mut j = service("web", 1);
    j.task_groups[0].max_client_disconnect_ns = 120 * S;
    let mut h = running_on_n0(&j);
    disconnect(&mut h, &j);
    let a0 = stored(&h, "a0");
    assert_eq!(a0.client_status(), AllocClientStatus::Unknown);
    assert_eq!(replacement(&h).name, a0.name);
}

#[test]
fn unknown_allocs_still_count_on_their_node() {
    // No over-commit: the disconnected node's unknown alloc keeps its
    // resources there; the replacement goes elsewhere.
    let j = windowed(3, 300 * S, None, "");
    let mut h = cluster(
        vec![node("n0", "dc1", 1000, 1024), node("n1", "dc1", 4000, 8192)],
        &j,
    );
    h.state.upsert_alloc(alloc("a0", &j, 0, "n0"));
    h.state.upsert_alloc(alloc("a1", &j, 1, "n1"));
    h.state.upsert_alloc(alloc("a2", &j, 2, "n1"));
    disconnect(&mut h, &j);
    let by_node = live_by_node(&h);
    assert_eq!(by_node.get("n0"), Some(&1), "{by_node:?}");
    assert_eq!(by_node.get("n1"), Some(&3), "{by_node:?}");
}

#[test]
fn lost_allocs_whose_client_stops_them_are_replaced_only_after_it_did() {
    let mut j = service("web", 1);
    j.task_groups[0].disconnect = Some(DisconnectStrategy {
        stop_on_client_after_ns: Some(60 * S),
        ..Default::default()
    });
    let mut h = running_on_n0(&j);
    set_node_status(&mut h, "n0", NodeStatus::Down);
    h.process(&eval("e-down", &j, "node-update")).unwrap();
    let a0 = stored(&h, "a0");
    assert_eq!(a0.client_status(), AllocClientStatus::Lost);
    assert!(
        h.state
            .allocs()
            .all(|a| a.previous_allocation != "a0" && a.id == "a0"),
        "nothing placed while the client may still run it"
    );
    let follow = h
        .created_evals
        .iter()
        .find(|e| e.triggered_by == "retry-failed-alloc")
        .cloned()
        .unwrap();
    assert_eq!(follow.wait_until_unix_ns, h.now + 60 * S + 5 * S);
    h.now = follow.wait_until_unix_ns;
    h.process(&follow).unwrap();
    assert_eq!(names(&placed(&h)), vec!["web.web[0]"]);
}

fn names(allocs: &[Allocation]) -> Vec<String> {
    allocs.iter().map(|a| a.name.clone()).collect()
}

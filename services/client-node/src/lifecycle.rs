//! Task lifecycle hooks: prestart tasks run before the main tasks (sidecars
//! keep running beside them), poststart tasks once the main tasks run, and
//! poststop tasks after every other task is dead.

use std::collections::HashSet;

use caravan_proto::{SmallMap, Task, TaskGroup, TaskState};

use crate::task_runner::states;

/// When in an alloc's life a task runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Runs to completion before the main tasks start.
    Prestart,
    /// Starts before the main tasks and runs beside them.
    PrestartSidecar,
    /// An ordinary task.
    Main,
    /// Runs once the main tasks are running.
    Poststart,
    /// Starts once the main tasks are running and runs beside them.
    PoststartSidecar,
    /// Runs after every other task is dead.
    Poststop,
}

impl Phase {
    /// The phase of `task` from its `lifecycle` block.
    pub fn of(task: &Task) -> Phase {
        match task.lifecycle.as_ref() {
            None => Phase::Main,
            Some(l) => match (l.hook.as_str(), l.sidecar) {
                ("prestart", false) => Phase::Prestart,
                ("prestart", true) => Phase::PrestartSidecar,
                ("poststart", false) => Phase::Poststart,
                ("poststart", true) => Phase::PoststartSidecar,
                ("poststop", _) => Phase::Poststop,
                _ => Phase::Main,
            },
        }
    }

    /// Runs beside the main tasks and is stopped when they are all dead.
    pub fn is_sidecar(self) -> bool {
        matches!(self, Phase::PrestartSidecar | Phase::PoststartSidecar)
    }

    /// Runs once: a successful exit completes it even in a service job.
    pub fn is_ephemeral(self) -> bool {
        matches!(self, Phase::Prestart | Phase::Poststart | Phase::Poststop)
    }
}

fn dead(s: Option<&TaskState>) -> bool {
    s.is_some_and(|s| s.state == states::DEAD)
}

fn has_run(s: Option<&TaskState>) -> bool {
    s.is_some_and(|s| {
        s.state == states::RUNNING || s.state == states::DEAD || s.started_at_unix_ns > 0
    })
}

/// The tasks of `group` not in `started` that may start now. `stopping`
/// allows only poststop tasks.
pub fn startable(
    group: &TaskGroup,
    task_states: &SmallMap<TaskState>,
    started: &HashSet<String>,
    stopping: bool,
) -> Vec<String> {
    let of = |p: Phase| group.tasks.iter().filter(move |t| Phase::of(t) == p);
    let state = |t: &Task| task_states.get(&t.name);
    let prestart_done =
        of(Phase::Prestart).all(|t| dead(state(t)) && !state(t).is_some_and(|s| s.failed));
    let sidecars_up = of(Phase::PrestartSidecar).all(|t| has_run(state(t)));
    let main_up = of(Phase::Main).all(|t| has_run(state(t)));
    let others_dead = group
        .tasks
        .iter()
        .filter(|t| Phase::of(t) != Phase::Poststop)
        .all(|t| dead(state(t)));
    group
        .tasks
        .iter()
        .filter(|t| !started.contains(&t.name))
        .filter(|t| match Phase::of(t) {
            Phase::Prestart | Phase::PrestartSidecar => !stopping,
            Phase::Main => !stopping && prestart_done && sidecars_up,
            Phase::Poststart | Phase::PoststartSidecar => !stopping && main_up,
            Phase::Poststop => others_dead,
        })
        .map(|t| t.name.clone())
        .collect()
}

/// Whether the group's main tasks are all dead, so its sidecars should stop.
pub fn main_tasks_dead(group: &TaskGroup, task_states: &SmallMap<TaskState>) -> bool {
    let mut mains = group
        .tasks
        .iter()
        .filter(|t| Phase::of(t) == Phase::Main)
        .peekable();
    mains.peek().is_some() && mains.all(|t| dead(task_states.get(&t.name)))
}

#[cfg(test)]
mod tests {
    use caravan_proto::TaskLifecycle;

    use super::*;

    fn t(name: &str, hook: Option<(&str, bool)>) -> Task {
        Task {
            name: name.into(),
            lifecycle: hook.map(|(h, sidecar)| TaskLifecycle {
                hook: h.into(),
                sidecar,
            }),
            ..Default::default()
        }
    }

    fn st(state: &str, failed: bool) -> TaskState {
        TaskState {
            state: state.into(),
            failed,
            ..Default::default()
        }
    }

    fn group() -> TaskGroup {
        TaskGroup {
            tasks: vec![
                t("init", Some(("prestart", false))),
                t("proxy", Some(("prestart", true))),
                t("web", None),
                t("warm", Some(("poststart", false))),
                t("cleanup", Some(("poststop", false))),
            ],
            ..Default::default()
        }
    }

    fn names(v: Vec<String>) -> Vec<String> {
        let mut v = v;
        v.sort();
        v
    }

    #[test]
    fn phases_follow_each_other() {
        let g = group();
        let mut states = SmallMap::new();
        let mut started = HashSet::new();
        assert_eq!(
            names(startable(&g, &states, &started, false)),
            vec!["init", "proxy"]
        );
        started.extend(["init".to_string(), "proxy".to_string()]);
        states.insert("init".to_string(), st("running", false));
        states.insert("proxy".to_string(), st("running", false));
        assert!(startable(&g, &states, &started, false).is_empty());
        states.insert("init".to_string(), st("dead", false));
        assert_eq!(startable(&g, &states, &started, false), vec!["web"]);
        started.insert("web".to_string());
        states.insert("web".to_string(), st("running", false));
        assert_eq!(startable(&g, &states, &started, false), vec!["warm"]);
        started.insert("warm".to_string());
        states.insert("warm".to_string(), st("dead", false));
        assert!(!main_tasks_dead(&g, &states));
        states.insert("web".to_string(), st("dead", false));
        assert!(main_tasks_dead(&g, &states));
        assert!(
            startable(&g, &states, &started, false).is_empty(),
            "proxy still runs"
        );
        states.insert("proxy".to_string(), st("dead", false));
        assert_eq!(startable(&g, &states, &started, false), vec!["cleanup"]);
    }

    #[test]
    fn a_failed_prestart_holds_the_main_tasks_and_stopping_allows_only_poststop() {
        let g = group();
        let mut states = SmallMap::new();
        let started: HashSet<String> = ["init", "proxy"].iter().map(|s| s.to_string()).collect();
        states.insert("init".to_string(), st("dead", true));
        states.insert("proxy".to_string(), st("running", false));
        assert!(startable(&g, &states, &started, false).is_empty());
        assert!(startable(&g, &states, &HashSet::new(), true).is_empty());
        let plain = TaskGroup {
            tasks: vec![t("a", None), t("b", None)],
            ..Default::default()
        };
        assert_eq!(
            names(startable(&plain, &SmallMap::new(), &HashSet::new(), false)),
            vec!["a", "b"]
        );
        assert!(Phase::of(&t("x", Some(("poststop", false)))).is_ephemeral());
        assert!(Phase::of(&t("x", Some(("poststart", true)))).is_sidecar());
    }
}

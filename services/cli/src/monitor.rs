//! Following an evaluation until it finishes, printing what changed the way
//! `nomad job run` does: allocations created, status changes, the final
//! status and, when placements failed, why and which eval waits for capacity.

use std::collections::BTreeMap;
use std::time::Duration;

use caravan_model::{EvalStatusExt, NomadName, now_unix_ns};
use caravan_proto::{AllocDesiredStatus, Allocation, Evaluation};

use crate::api::Api;
use crate::error::CliError;
use crate::format::{rfc3339, short_id};
use crate::placement::{alloc_metrics, group_header, waiting_for_capacity};
use crate::ui::Ui;

/// Exit code of a run whose placements failed (Nomad's).
pub const EXIT_PLACEMENT_FAILURES: u8 = 2;

/// How long one blocking read of the eval waits for a change.
const POLL: Duration = Duration::from_secs(1);

/// What the monitor last saw of an allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocSeen {
    /// Its task group.
    pub group: String,
    /// Its node.
    pub node: String,
    /// Whether the servers want it running.
    pub desired_run: bool,
    /// Its client status name.
    pub client: String,
    /// Its client description.
    pub client_description: String,
    /// Its create revision.
    pub create_revision: i64,
}

/// What the monitor last saw of an evaluation and its allocations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalSeen {
    /// The eval's status name.
    pub status: String,
    /// The node that triggered it.
    pub node: String,
    /// The job it is for.
    pub job: String,
    /// The deployment it is part of.
    pub deployment: String,
    /// Its create revision.
    pub create_revision: i64,
    /// Its allocations by id.
    pub allocs: BTreeMap<String, AllocSeen>,
}

impl EvalSeen {
    /// The state before anything was read: a pending eval.
    pub fn pending() -> EvalSeen {
        EvalSeen {
            status: "pending".into(),
            node: String::new(),
            job: String::new(),
            deployment: String::new(),
            create_revision: 0,
            allocs: BTreeMap::new(),
        }
    }

    /// The state of `eval` with its `allocs`.
    pub fn of(eval: &Evaluation, allocs: &[Allocation]) -> EvalSeen {
        EvalSeen {
            status: eval.status().nomad_name().to_string(),
            node: eval.node_id.clone(),
            job: eval.job_id.clone(),
            deployment: eval.deployment_id.clone(),
            create_revision: eval.create_revision,
            allocs: allocs
                .iter()
                .map(|a| {
                    (
                        a.id.clone(),
                        AllocSeen {
                            group: a.task_group.clone(),
                            node: a.node_id.clone(),
                            desired_run: a.desired_status() == AllocDesiredStatus::Run,
                            client: a.client_status().nomad_name().to_string(),
                            client_description: a.client_description.clone(),
                            create_revision: a.create_revision,
                        },
                    )
                })
                .collect(),
        }
    }
}

/// The lines announcing what changed from `old` to `new`.
pub fn changes(old: &EvalSeen, new: &EvalSeen) -> Vec<String> {
    let mut lines = Vec::new();
    if old.node.is_empty() && !new.node.is_empty() {
        lines.push(format!(
            "Evaluation triggered by node {:?}",
            short_id(&new.node)
        ));
    }
    if old.job.is_empty() && !new.job.is_empty() {
        lines.push(format!("Evaluation triggered by job {:?}", new.job));
    }
    if old.deployment.is_empty() && !new.deployment.is_empty() {
        lines.push(format!(
            "Evaluation within deployment: {:?}",
            short_id(&new.deployment)
        ));
    }
    for (id, alloc) in &new.allocs {
        match old.allocs.get(id) {
            None if alloc.create_revision < new.create_revision => lines.push(format!(
                "Allocation {:?} modified: node {:?}, group {:?}",
                short_id(id),
                short_id(&alloc.node),
                alloc.group
            )),
            None if alloc.desired_run => lines.push(format!(
                "Allocation {:?} created: node {:?}, group {:?}",
                short_id(id),
                short_id(&alloc.node),
                alloc.group
            )),
            None => {}
            Some(seen) if seen.client != alloc.client => {
                let description = if alloc.client_description.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", alloc.client_description)
                };
                lines.push(format!(
                    "Allocation {:?} status changed: {:?} -> {:?}{description}",
                    short_id(id),
                    seen.client,
                    alloc.client
                ));
            }
            Some(_) => {}
        }
    }
    if !old.status.is_empty() && new.status != "pending" && old.status != new.status {
        lines.push(format!(
            "Evaluation status changed: {:?} -> {:?}",
            old.status, new.status
        ));
    }
    lines
}

/// A monitor line: `==> ` for headlines, four spaces otherwise, then the time.
pub fn stamp(headline: bool, time: &str, text: &str) -> String {
    let lead = if headline { "==> " } else { "    " };
    format!("{lead}{time}: {text}")
}

/// The lines printed once the eval finished: the headline, then per failed
/// task group its header and metrics, then the blocked eval. The bool says
/// whether placements failed.
pub fn finished(eval: &Evaluation, time: &str) -> (Vec<String>, bool) {
    let id = short_id(&eval.id);
    let status = eval.status().nomad_name();
    if eval.failed_tg_allocs.is_empty() {
        let line = format!("Evaluation {id:?} finished with status {status:?}");
        return (vec![stamp(true, time, &line)], false);
    }
    let line = format!(
        "Evaluation {id:?} finished with status {status:?} but failed to place all allocations:"
    );
    let mut lines = vec![stamp(true, time, &line)];
    for (group, m) in &eval.failed_tg_allocs {
        lines.push(stamp(false, time, &group_header(group, m)));
        let metrics = alloc_metrics(m, "      ");
        if !metrics.is_empty() {
            lines.extend(metrics.lines().map(String::from));
        }
    }
    if !eval.blocked_eval.is_empty() {
        lines.push(stamp(
            false,
            time,
            &waiting_for_capacity(&eval.blocked_eval),
        ));
    }
    (lines, true)
}

/// Follows `eval_id` (and the next evals it chains to) until it finishes;
/// returns the exit code: 0, or 2 when placements failed.
pub async fn monitor(api: &Api, ui: &mut Ui, eval_id: &str) -> Result<u8, CliError> {
    let mut eval_id = eval_id.to_string();
    loop {
        let mut seen = EvalSeen::pending();
        ui.output(stamp(
            true,
            &rfc3339(now_unix_ns()),
            &format!("Monitoring evaluation {:?}", short_id(&eval_id)),
        ));
        let mut revision = 0;
        let eval = loop {
            let read = api.evaluation_after(&eval_id, revision, POLL).await?;
            revision = read.revision;
            let eval = read.value;
            let allocs = api.evaluation_allocations(&eval.id).await?;
            let now = EvalSeen::of(&eval, &allocs);
            let time = rfc3339(now_unix_ns());
            for line in changes(&seen, &now) {
                ui.output(stamp(false, &time, &line));
            }
            seen = now;
            if eval.status().is_terminal() {
                break eval;
            }
        };
        let (lines, failed) = finished(&eval, &rfc3339(now_unix_ns()));
        for line in lines {
            ui.output(line);
        }
        if !eval.next_eval.is_empty() {
            eval_id = eval.next_eval.clone();
            continue;
        }
        return Ok(if failed { EXIT_PLACEMENT_FAILURES } else { 0 });
    }
}

#[cfg(test)]
mod tests {
    use caravan_proto::{AllocClientStatus, AllocMetric, EvalStatus};

    use super::*;

    fn eval(status: EvalStatus) -> Evaluation {
        let mut e = Evaluation {
            id: "dd6f804e-0000".into(),
            job_id: "hello".into(),
            create_revision: 10,
            ..Default::default()
        };
        e.set_status(status);
        e
    }

    fn alloc(id: &str, rev: i64, client: AllocClientStatus) -> Allocation {
        let mut a = Allocation {
            id: id.into(),
            node_id: "f9ffc766-1111".into(),
            task_group: "hellos".into(),
            create_revision: rev,
            ..Default::default()
        };
        a.set_desired_status(AllocDesiredStatus::Run);
        a.set_client_status(client);
        a
    }

    #[test]
    fn a_placement_prints_trigger_creation_and_status_change() {
        let start = EvalSeen::pending();
        let done = EvalSeen::of(
            &eval(EvalStatus::Complete),
            &[alloc("60a324d8-2222", 11, AllocClientStatus::Pending)],
        );
        assert_eq!(
            changes(&start, &done),
            vec![
                "Evaluation triggered by job \"hello\"",
                "Allocation \"60a324d8\" created: node \"f9ffc766\", group \"hellos\"",
                "Evaluation status changed: \"pending\" -> \"complete\"",
            ]
        );
        assert!(changes(&done, &done).is_empty());
    }

    #[test]
    fn older_allocations_are_modified_and_client_changes_are_shown() {
        let start = EvalSeen::pending();
        let mut running = alloc("60a324d8-2222", 5, AllocClientStatus::Running);
        let pending = EvalSeen::of(&eval(EvalStatus::Pending), &[running.clone()]);
        assert_eq!(
            changes(&start, &pending),
            vec![
                "Evaluation triggered by job \"hello\"",
                "Allocation \"60a324d8\" modified: node \"f9ffc766\", group \"hellos\"",
            ]
        );
        running.set_client_status(AllocClientStatus::Failed);
        running.client_description = "Failed tasks".into();
        let later = EvalSeen::of(&eval(EvalStatus::Pending), &[running]);
        assert_eq!(
            changes(&pending, &later),
            vec![
                "Allocation \"60a324d8\" status changed: \"running\" -> \"failed\" (Failed tasks)"
            ]
        );
    }

    #[test]
    fn finishing_without_failures_is_one_headline() {
        let (lines, failed) = finished(&eval(EvalStatus::Complete), "T");
        assert_eq!(
            lines,
            vec!["==> T: Evaluation \"dd6f804e\" finished with status \"complete\""]
        );
        assert!(!failed);
    }

    #[test]
    fn failed_placements_are_listed_with_the_blocked_eval() {
        let mut e = eval(EvalStatus::Complete);
        e.blocked_eval = "37440cf2-3333".into();
        e.failed_tg_allocs.insert(
            "hellos".into(),
            AllocMetric {
                nodes_evaluated: 3,
                nodes_exhausted: 3,
                dimension_exhausted: [("memory".to_string(), 3)].into(),
                ..Default::default()
            },
        );
        let (lines, failed) = finished(&e, "T");
        assert!(failed);
        assert_eq!(
            lines.join("\n"),
            "==> T: Evaluation \"dd6f804e\" finished with status \"complete\" but failed to place all allocations:\n    \
             T: Task Group \"hellos\" (failed to place 1 allocation):\n      \
             * Resources exhausted on 3 nodes\n      \
             * Dimension \"memory\" exhausted on 3 nodes\n    \
             T: Evaluation \"37440cf2\" waiting for additional capacity to place remainder"
        );
    }
}

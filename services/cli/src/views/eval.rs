//! `eval status` and `eval list`.

use caravan_model::{NomadName, trigger};
use caravan_proto::{Allocation, EvalStatus, Evaluation};

use crate::format::{kv, pretty_time_diff, rfc3339, short_id, table};
use crate::placement::failed_placements;
use crate::views::alloc_list;

/// The evaluations table, newest first.
pub fn eval_list(evals: &[Evaluation]) -> String {
    let mut sorted: Vec<&Evaluation> = evals.iter().collect();
    sorted.sort_by(|a, b| {
        b.create_revision
            .cmp(&a.create_revision)
            .then_with(|| a.id.cmp(&b.id))
    });
    let mut rows = vec![
        [
            "ID",
            "Priority",
            "Triggered By",
            "Job ID",
            "Namespace",
            "Node ID",
            "Status",
            "Placement Failures",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for e in sorted {
        rows.push(vec![
            short_id(&e.id).to_string(),
            e.priority.to_string(),
            e.triggered_by.clone(),
            e.job_id.clone(),
            e.namespace.clone(),
            short_id(&e.node_id).to_string(),
            e.status().nomad_name().to_string(),
            (!e.failed_tg_allocs.is_empty()).to_string(),
        ]);
    }
    table(rows)
}

/// One evaluation's page: its fields, the allocations it placed and its
/// failed placements.
pub fn eval_page(eval: &Evaluation, allocs: &[Allocation], now: i64) -> String {
    let failures = match eval.status() {
        EvalStatus::Pending => "N/A - In Progress".to_string(),
        _ => (!eval.failed_tg_allocs.is_empty()).to_string(),
    };
    let mut basic: Vec<(&str, String)> = vec![
        ("ID", short_id(&eval.id).to_string()),
        (
            "Create Time",
            pretty_time_diff(eval.create_time_unix_ns, now),
        ),
        (
            "Modify Time",
            pretty_time_diff(eval.modify_time_unix_ns, now),
        ),
        ("Status", eval.status().nomad_name().to_string()),
        ("Status Description", eval.status_description.clone()),
        ("Type", eval.r#type.clone()),
        ("TriggeredBy", eval.triggered_by.clone()),
    ];
    match eval.triggered_by.as_str() {
        trigger::NODE_UPDATE | trigger::NODE_DRAIN => {
            basic.push(("Node ID", short_id(&eval.node_id).to_string()))
        }
        trigger::MAX_PLAN_ATTEMPTS => {
            basic.push(("Previous Eval", short_id(&eval.previous_eval).to_string()))
        }
        _ => {}
    }
    basic.push(("Job ID", eval.job_id.clone()));
    basic.push(("Namespace", eval.namespace.clone()));
    basic.push(("Priority", eval.priority.to_string()));
    basic.push(("Placement Failures", failures));
    if eval.wait_until_unix_ns > 0 {
        basic.push(("Wait Until", rfc3339(eval.wait_until_unix_ns)));
    }
    if !eval.previous_eval.is_empty() && eval.triggered_by != trigger::MAX_PLAN_ATTEMPTS {
        basic.push(("Previous Eval", short_id(&eval.previous_eval).to_string()));
    }
    if !eval.next_eval.is_empty() {
        basic.push(("Next Eval", short_id(&eval.next_eval).to_string()));
    }
    if !eval.blocked_eval.is_empty() {
        basic.push(("Blocked Eval", short_id(&eval.blocked_eval).to_string()));
    }
    let mut out = kv(&basic);
    if !allocs.is_empty() {
        out.push_str("\n\nPlaced Allocations\n");
        out.push_str(&alloc_list(allocs, now));
    }
    if !eval.failed_tg_allocs.is_empty() {
        out.push_str("\n\n");
        out.push_str(&failed_placements(
            &eval.failed_tg_allocs,
            &eval.blocked_eval,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use caravan_proto::AllocMetric;

    use super::*;
    use crate::views::fixtures::*;

    fn eval() -> Evaluation {
        let mut e = Evaluation {
            id: "720ff6d0-0000".into(),
            namespace: "default".into(),
            priority: 50,
            r#type: "service".into(),
            triggered_by: "job-register".into(),
            job_id: "mysql".into(),
            create_time_unix_ns: NOW - 90 * S,
            modify_time_unix_ns: NOW - 89 * S,
            create_revision: 3,
            ..Default::default()
        };
        e.set_status(EvalStatus::Complete);
        e
    }

    #[test]
    fn the_list_shows_status_and_failures() {
        let mut other = eval();
        other.id = "11111111-2222".into();
        other.create_revision = 9;
        other.triggered_by = "node-update".into();
        other.node_id = "f7476465-9999".into();
        assert_eq!(
            eval_list(&[eval(), other]),
            "ID        Priority  Triggered By  Job ID  Namespace  Node ID   Status    Placement Failures\n\
             11111111  50        node-update   mysql   default    f7476465  complete  false\n\
             720ff6d0  50        job-register  mysql   default    <none>    complete  false"
        );
    }

    #[test]
    fn the_page_shows_failed_placements_and_the_blocked_eval() {
        let mut e = eval();
        e.blocked_eval = "0d142ec3-1111".into();
        e.failed_tg_allocs = [(
            "mysql-group".to_string(),
            AllocMetric {
                nodes_evaluated: 2,
                nodes_filtered: 2,
                constraint_filtered: [("missing compatible host volumes".to_string(), 2)].into(),
                ..Default::default()
            },
        )]
        .into();
        assert_eq!(
            eval_page(&e, &[], NOW),
            "ID                 = 720ff6d0\n\
             Create Time        = 1m30s ago\n\
             Modify Time        = 1m29s ago\n\
             Status             = complete\n\
             Status Description = <none>\n\
             Type               = service\n\
             TriggeredBy        = job-register\n\
             Job ID             = mysql\n\
             Namespace          = default\n\
             Priority           = 50\n\
             Placement Failures = true\n\
             Blocked Eval       = 0d142ec3\n\
             \n\
             Failed Placements\n\
             Task Group \"mysql-group\" (failed to place 1 allocation):\n  \
             * Constraint \"missing compatible host volumes\": 2 nodes excluded by filter\n\
             \n\
             Evaluation \"0d142ec3\" waiting for additional capacity to place remainder"
        );
    }
}

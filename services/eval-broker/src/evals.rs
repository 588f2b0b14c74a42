//! The evaluations and node records the broker writes: checks of what
//! workers send, the merge of a worker's update into the stored eval, and
//! the evals the broker makes itself (failed follow-ups, cancellations,
//! unblocks, node-update evals). Pure.

use std::time::Duration;

use caravan_model::{
    DEFAULT_PRIORITY, EvalStatusExt, MAX_PRIORITY, MIN_PRIORITY, NomadName, trigger,
};
use caravan_proto::{EvalStatus, Evaluation, Job, Node, NodeStatus};

use crate::error::BrokerError;

/// Why waiting evals are canceled when their job's eval is processed.
pub const CANCELED_SUPERSEDED: &str = "canceled after more recent eval was processed";
/// Why a blocked eval is canceled when its job has a newer one.
pub const CANCELED_DUPLICATE_BLOCKED: &str = "superseded by a newer blocked evaluation of the job";
/// Why a blocked eval is canceled when a later eval of its job placed
/// everything.
pub const CANCELED_SATISFIED: &str =
    "canceled: a later evaluation of the job placed its allocations";
/// Description of a node the broker marked down.
pub const NODE_DOWN_DESCRIPTION: &str = "node heartbeat missed";

/// Scheduler types an eval may name.
pub const SCHEDULER_TYPES: &[&str] = &["service", "batch", "system", "sysbatch", "_core"];

/// The description of an eval failed at the delivery limit.
pub fn delivery_limit_description(limit: u32) -> String {
    format!("evaluation reached delivery limit ({limit})")
}

/// What the store holds for an eval: the revision fields come from the
/// key's metadata on read, so they are not stored.
pub fn for_store(eval: &Evaluation) -> Vec<u8> {
    let mut e = eval.clone();
    e.create_revision = 0;
    e.modify_revision = 0;
    caravan_state::encode(&e)
}

/// A node as stored, revisions left to the key's metadata.
pub fn node_for_store(node: &Node) -> Vec<u8> {
    let mut n = node.clone();
    n.create_revision = 0;
    n.modify_revision = 0;
    caravan_state::encode(&n)
}

fn invalid(field: &str, problem: impl Into<String>) -> BrokerError {
    BrokerError::InvalidArgument {
        field: field.to_string(),
        problem: problem.into(),
    }
}

/// Checks the identity fields every eval a worker sends must carry.
fn check_identity(eval: &Evaluation) -> Result<(), BrokerError> {
    if eval.id.is_empty() {
        return Err(invalid("eval.id", "must not be empty"));
    }
    if uuid::Uuid::parse_str(&eval.id).is_err() {
        return Err(invalid("eval.id", "must be a UUID"));
    }
    Ok(())
}

/// Checks an eval a worker creates (follow-up, blocked, rolling).
pub fn check_new(eval: &Evaluation) -> Result<(), BrokerError> {
    check_identity(eval)?;
    if eval.namespace.is_empty() {
        return Err(invalid("eval.namespace", "must not be empty"));
    }
    if eval.job_id.is_empty() {
        return Err(invalid("eval.job_id", "must not be empty"));
    }
    if !SCHEDULER_TYPES.contains(&eval.r#type.as_str()) {
        return Err(invalid(
            "eval.type",
            format!("{:?} is not one of {SCHEDULER_TYPES:?}", eval.r#type),
        ));
    }
    if !(MIN_PRIORITY..=MAX_PRIORITY).contains(&eval.priority) {
        return Err(invalid("eval.priority", "must be between 1 and 100"));
    }
    if eval.triggered_by.is_empty() {
        return Err(invalid("eval.triggered_by", "must not be empty"));
    }
    match EvalStatus::try_from(eval.status) {
        Ok(s) if s.is_waiting() => Ok(()),
        _ => Err(invalid(
            "eval.status",
            "a new eval must be pending or blocked",
        )),
    }
}

/// A new eval as the broker stores it: timestamps filled, and a blocked
/// eval without a snapshot revision given the lowest one its worker can
/// have scheduled from, so no later unblock is missed.
pub fn prepare_new(mut eval: Evaluation, wait_revision: i64, now_ns: i64) -> Evaluation {
    if eval.create_time_unix_ns == 0 {
        eval.create_time_unix_ns = now_ns;
    }
    eval.modify_time_unix_ns = now_ns;
    if eval.status() == EvalStatus::Blocked && eval.snapshot_revision == 0 {
        eval.snapshot_revision = wait_revision;
    }
    eval
}

/// The eval being processed with the worker's outcome applied: what the
/// worker decides (status, description, placement metrics, follow-up
/// links, snapshot revision) comes from `update`; what identifies the eval
/// and why it exists stays as stored.
pub fn merge_update(
    stored: &Evaluation,
    update: &Evaluation,
    now_ns: i64,
) -> Result<Evaluation, BrokerError> {
    check_identity(update)?;
    match EvalStatus::try_from(update.status) {
        Ok(EvalStatus::Blocked) => {
            return Err(invalid(
                "eval.status",
                "blocked: put the eval back with ReblockEval",
            ));
        }
        Ok(s) if s == EvalStatus::Pending || s.is_terminal() => {}
        _ => return Err(invalid("eval.status", "unknown status")),
    }
    let mut e = stored.clone();
    e.status = update.status;
    e.status_description = update.status_description.clone();
    e.next_eval = update.next_eval.clone();
    e.blocked_eval = update.blocked_eval.clone();
    e.failed_tg_allocs = update.failed_tg_allocs.clone();
    e.class_eligibility = update.class_eligibility.clone();
    e.escaped_computed_class = update.escaped_computed_class;
    e.quota_limit_reached = update.quota_limit_reached.clone();
    e.queued_allocations = update.queued_allocations.clone();
    e.snapshot_revision = update.snapshot_revision;
    if !update.deployment_id.is_empty() {
        e.deployment_id = update.deployment_id.clone();
    }
    e.modify_time_unix_ns = now_ns;
    Ok(e)
}

/// The eval being processed put back among the blocked, with the class
/// eligibility of its latest attempt.
pub fn merge_reblock(
    stored: &Evaluation,
    update: &Evaluation,
    wait_revision: i64,
    now_ns: i64,
) -> Result<Evaluation, BrokerError> {
    check_identity(update)?;
    let mut e = stored.clone();
    e.status = EvalStatus::Blocked as i32;
    if !update.status_description.is_empty() {
        e.status_description = update.status_description.clone();
    }
    e.failed_tg_allocs = update.failed_tg_allocs.clone();
    e.class_eligibility = update.class_eligibility.clone();
    e.escaped_computed_class = update.escaped_computed_class;
    e.quota_limit_reached = update.quota_limit_reached.clone();
    e.queued_allocations = update.queued_allocations.clone();
    e.snapshot_revision = if update.snapshot_revision > 0 {
        update.snapshot_revision
    } else {
        wait_revision
    };
    e.modify_time_unix_ns = now_ns;
    Ok(e)
}

/// The eval that retries one failed at the delivery limit after `wait`.
pub fn failed_follow_up(eval: &Evaluation, wait: Duration, now_ns: i64) -> Evaluation {
    let wait_ns = i64::try_from(wait.as_nanos()).unwrap_or(i64::MAX);
    Evaluation {
        id: caravan_model::fresh_id(),
        namespace: eval.namespace.clone(),
        priority: eval.priority,
        r#type: eval.r#type.clone(),
        triggered_by: trigger::FAILED_FOLLOW_UP.into(),
        job_id: eval.job_id.clone(),
        job_modify_revision: eval.job_modify_revision,
        status: EvalStatus::Pending as i32,
        wait_until_unix_ns: now_ns.saturating_add(wait_ns),
        previous_eval: eval.id.clone(),
        create_time_unix_ns: now_ns,
        modify_time_unix_ns: now_ns,
        // The retry belongs to the failed eval's trace.
        trace_context: eval.trace_context.clone(),
        ..Default::default()
    }
}

/// The eval marked failed at the delivery limit, pointing at its follow-up.
pub fn failed_at_limit(eval: &Evaluation, follow_up: &str, limit: u32, now_ns: i64) -> Evaluation {
    let mut e = eval.clone();
    e.status = EvalStatus::Failed as i32;
    e.status_description = delivery_limit_description(limit);
    e.next_eval = follow_up.to_string();
    e.modify_time_unix_ns = now_ns;
    e
}

/// The eval canceled, saying why.
pub fn canceled(eval: &Evaluation, reason: &str, now_ns: i64) -> Evaluation {
    let mut e = eval.clone();
    e.status = EvalStatus::Canceled as i32;
    e.status_description = reason.to_string();
    e.modify_time_unix_ns = now_ns;
    e
}

/// A blocked eval released to be scheduled again.
pub fn unblocked(eval: &Evaluation, now_ns: i64) -> Evaluation {
    let mut e = eval.clone();
    e.status = EvalStatus::Pending as i32;
    e.modify_time_unix_ns = now_ns;
    e
}

/// Whether the broker should consider a node with this status up: its
/// heartbeat vanishing means it is down.
pub fn node_counts_as_up(node: &Node) -> bool {
    matches!(node.status(), NodeStatus::Ready | NodeStatus::Initializing)
}

/// The node marked down after its heartbeat lease expired.
pub fn node_down(node: &Node, now_ns: i64) -> Node {
    let mut n = node.clone();
    n.status = NodeStatus::Down as i32;
    n.status_description = NODE_DOWN_DESCRIPTION.into();
    n.status_updated_at_unix_ns = now_ns;
    n
}

/// Description of a node that missed its heartbeats while some of its
/// allocations may ride out a disconnect.
pub const NODE_DISCONNECTED_DESCRIPTION: &str = "node heartbeat missed; its allocations are unknown until it returns or their disconnect window ends";

/// The node marked disconnected after its heartbeat lease expired: its
/// allocations with a disconnect window become unknown rather than lost.
pub fn node_disconnected(node: &Node, now_ns: i64) -> Node {
    let mut n = node.clone();
    n.status = NodeStatus::Disconnected as i32;
    n.status_description = NODE_DISCONNECTED_DESCRIPTION.into();
    n.status_updated_at_unix_ns = now_ns;
    n
}

/// A pending eval of a job's allocations on a node, for `trigger`; type
/// and priority come from the job when it still exists.
pub fn node_eval(
    trigger: &str,
    node_id: &str,
    namespace: &str,
    job_id: &str,
    job: Option<&Job>,
    now_ns: i64,
) -> Evaluation {
    Evaluation {
        id: caravan_model::fresh_id(),
        namespace: namespace.to_string(),
        priority: job.map_or(DEFAULT_PRIORITY, |j| j.priority),
        r#type: job
            .map_or("service", |j| j.r#type().nomad_name())
            .to_string(),
        triggered_by: trigger.into(),
        job_id: job_id.to_string(),
        job_modify_revision: job.map_or(0, |j| j.job_modify_revision),
        node_id: node_id.to_string(),
        status: EvalStatus::Pending as i32,
        create_time_unix_ns: now_ns,
        modify_time_unix_ns: now_ns,
        trace_context: caravan_runtime::trace::of(&tracing::info_span!(
            "node.eval",
            node = %node_id,
            job = %job_id,
            triggered_by = %trigger
        )),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caravan_proto::JobType;

    fn uuid() -> String {
        uuid::Uuid::new_v4().to_string()
    }

    fn valid() -> Evaluation {
        Evaluation {
            id: uuid(),
            namespace: "default".into(),
            job_id: "web".into(),
            r#type: "service".into(),
            priority: 50,
            triggered_by: "queued-allocs".into(),
            status: EvalStatus::Blocked as i32,
            ..Default::default()
        }
    }

    #[test]
    fn new_evals_are_checked_field_by_field() {
        assert!(check_new(&valid()).is_ok());
        type Breakage = Box<dyn Fn(&mut Evaluation)>;
        let cases: Vec<(&str, Breakage)> = vec![
            ("eval.id", Box::new(|e| e.id.clear())),
            ("eval.id", Box::new(|e| e.id = "x".into())),
            ("eval.namespace", Box::new(|e| e.namespace.clear())),
            ("eval.job_id", Box::new(|e| e.job_id.clear())),
            ("eval.type", Box::new(|e| e.r#type = "fancy".into())),
            ("eval.priority", Box::new(|e| e.priority = 0)),
            ("eval.priority", Box::new(|e| e.priority = 101)),
            ("eval.triggered_by", Box::new(|e| e.triggered_by.clear())),
            (
                "eval.status",
                Box::new(|e| e.status = EvalStatus::Complete as i32),
            ),
            ("eval.status", Box::new(|e| e.status = 99)),
        ];
        for (field, break_it) in cases {
            let mut e = valid();
            break_it(&mut e);
            match check_new(&e) {
                Err(BrokerError::InvalidArgument { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
    }

    #[test]
    fn updates_keep_what_the_worker_does_not_own() {
        let stored = Evaluation {
            id: uuid(),
            namespace: "default".into(),
            job_id: "web".into(),
            r#type: "service".into(),
            priority: 70,
            triggered_by: "job-register".into(),
            job_modify_revision: 12,
            status: EvalStatus::Pending as i32,
            create_time_unix_ns: 5,
            ..Default::default()
        };
        let mut update = stored.clone();
        update.job_id = "sneaky".into();
        update.priority = 1;
        update.status = EvalStatus::Complete as i32;
        update.snapshot_revision = 40;
        update.queued_allocations.insert("web".into(), 2);
        update.class_eligibility.insert("c1".into(), true);
        let merged = merge_update(&stored, &update, 99).expect("merge");
        assert_eq!(merged.job_id, "web");
        assert_eq!(merged.priority, 70);
        assert_eq!(merged.job_modify_revision, 12);
        assert_eq!(merged.status(), EvalStatus::Complete);
        assert_eq!(merged.snapshot_revision, 40);
        assert_eq!(merged.queued_allocations.get("web"), Some(&2));
        assert_eq!(merged.class_eligibility.get("c1"), Some(&true));
        assert_eq!(
            (merged.create_time_unix_ns, merged.modify_time_unix_ns),
            (5, 99)
        );

        update.status = EvalStatus::Blocked as i32;
        assert!(matches!(
            merge_update(&stored, &update, 99),
            Err(BrokerError::InvalidArgument { .. })
        ));
        let reblocked = merge_reblock(&stored, &update, 33, 100).expect("reblock");
        assert_eq!(reblocked.status(), EvalStatus::Blocked);
        assert_eq!(reblocked.snapshot_revision, 40);
        update.snapshot_revision = 0;
        assert_eq!(
            merge_reblock(&stored, &update, 33, 100)
                .expect("reblock")
                .snapshot_revision,
            33
        );
    }

    #[test]
    fn failed_follow_up_links_both_ways() {
        let e = Evaluation {
            id: uuid(),
            namespace: "default".into(),
            job_id: "web".into(),
            r#type: "batch".into(),
            priority: 60,
            job_modify_revision: 4,
            status: EvalStatus::Pending as i32,
            ..Default::default()
        };
        let follow = failed_follow_up(&e, Duration::from_secs(90), 1_000);
        assert_eq!(follow.triggered_by, trigger::FAILED_FOLLOW_UP);
        assert_eq!(follow.previous_eval, e.id);
        assert_eq!(follow.wait_until_unix_ns, 1_000 + 90_000_000_000);
        assert_eq!((follow.priority, follow.r#type.as_str()), (60, "batch"));
        assert_eq!(follow.status(), EvalStatus::Pending);
        let failed = failed_at_limit(&e, &follow.id, 3, 1_000);
        assert_eq!(failed.status(), EvalStatus::Failed);
        assert_eq!(failed.next_eval, follow.id);
        assert!(failed.status_description.contains("delivery limit (3)"));
    }

    #[test]
    fn new_blocked_evals_get_a_snapshot_revision() {
        let e = prepare_new(valid(), 77, 10);
        assert_eq!(e.snapshot_revision, 77);
        assert_eq!(e.create_time_unix_ns, 10);
        let mut pending = valid();
        pending.status = EvalStatus::Pending as i32;
        assert_eq!(prepare_new(pending, 77, 10).snapshot_revision, 0);
    }

    #[test]
    fn node_update_evals_follow_the_job() {
        let job = Job {
            priority: 80,
            r#type: JobType::System as i32,
            job_modify_revision: 9,
            ..Default::default()
        };
        let e = node_eval(trigger::NODE_UPDATE, "n1", "default", "web", Some(&job), 5);
        assert_eq!((e.priority, e.r#type.as_str()), (80, "system"));
        assert_eq!((e.node_id.as_str(), e.job_modify_revision), ("n1", 9));
        assert_eq!(e.triggered_by, trigger::NODE_UPDATE);
        let orphan = node_eval(trigger::NODE_UPDATE, "n1", "default", "gone", None, 5);
        assert_eq!((orphan.priority, orphan.r#type.as_str()), (50, "service"));
    }
}

//! Allocations of nodes that went quiet and came back (Nomad's
//! `computeDisconnecting` and `computeReconnecting`): those of a newly
//! disconnected node are marked `unknown` with an evaluation at the end of
//! their `lost_after` window, and replaced meanwhile when the group says so;
//! those that come back are reconciled with their replacements, one copy of
//! each name surviving by the group's `reconcile` strategy.

use std::collections::BTreeSet;
use std::sync::Arc;

use caravan_model::{AllocExt, trigger};
use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, Allocation, DesiredUpdates, EvalStatus, Evaluation,
    TaskGroup,
};

use super::{GroupReconciler, GroupSets};
use crate::reconcile::filter::{self, AllocSet};
use crate::reconcile::reconnect::{self, Keep};
use crate::reconcile::{ALLOC_NOT_NEEDED, ALLOC_RESCHEDULED, Stop};

/// Client description of an allocation whose node disconnected.
pub const ALLOC_UNKNOWN: &str = "alloc is unknown since its node is disconnected";
/// The kill timeout of a task that names none.
const DEFAULT_KILL_TIMEOUT_NS: i64 = 5_000_000_000;

/// Stop description: the copy that came back was kept instead.
pub const ALLOC_RECONNECTED: &str = "alloc not needed due to disconnected client reconnect";

impl GroupReconciler<'_, '_> {
    /// Marks the allocations of a newly disconnected node `unknown`, with a
    /// follow-up evaluation at the end of their window, and queues their
    /// replacement when the group replaces them.
    pub(super) fn compute_disconnecting(
        &mut self,
        tg: &TaskGroup,
        sets: &mut GroupSets,
        disconnecting: AllocSet,
        desired: &mut DesiredUpdates,
    ) {
        if disconnecting.is_empty() {
            return;
        }
        let now = self.input.now;
        let at = now.saturating_add(caravan_model::disconnect::lost_after_ns(tg));
        let eval_id = self.rng.uuid();
        self.results.followup_evals.push(timeout_eval(
            self.input.eval,
            &tg.name,
            eval_id.clone(),
            at,
            now,
        ));
        let replace = caravan_model::disconnect::replace(tg);
        for (id, a) in disconnecting {
            let mut updated = (*a).clone();
            updated.set_client_status(AllocClientStatus::Unknown);
            updated.client_description = ALLOC_UNKNOWN.into();
            updated.unknown_since_unix_ns = now;
            updated.followup_eval_id = eval_id.clone();
            updated.modify_time_unix_ns = now;
            self.results.disconnect_updates.push(updated.clone());
            desired.disconnect += 1;
            let updated = Arc::new(updated);
            if replace {
                sets.replace_disconnected.insert(id, updated);
            } else {
                sets.untainted.insert(id, updated);
            }
        }
    }

    /// Reconciles allocations back from a disconnected node with their
    /// replacements: failed or unwanted ones stop; of a name's copies the
    /// strategy keeps one and stops the others; the kept ones that run are
    /// recorded as reconnected. One still `unknown` (its client has not
    /// reported since it came back) is left until it does, which brings a
    /// `reconnect` evaluation: the servers do not trade a copy they know
    /// runs for one they have not heard from.
    pub(super) fn compute_reconnecting(
        &mut self,
        tg: &TaskGroup,
        sets: &mut GroupSets,
        reconnecting: AllocSet,
        all: &AllocSet,
        desired: &mut DesiredUpdates,
    ) {
        if reconnecting.is_empty() {
            return;
        }
        let mut stopped: BTreeSet<String> = BTreeSet::new();
        for orig in filter::name_order(&reconnecting) {
            if orig.client_status() == AllocClientStatus::Failed {
                self.stop_reconnecting(&orig, ALLOC_RESCHEDULED, &mut stopped);
                continue;
            }
            let transition = orig.desired_transition.unwrap_or_default();
            let unwanted = orig.desired_status() != AllocDesiredStatus::Run
                || transition.migrate == Some(true)
                || transition.reschedule == Some(true)
                || transition.force_reschedule == Some(true)
                || orig.job_version < self.job.version;
            if unwanted {
                self.stop_reconnecting(&orig, ALLOC_NOT_NEEDED, &mut stopped);
                continue;
            }
            if orig.client_status() == AllocClientStatus::Unknown {
                continue;
            }
            for id in replacements(&orig, all) {
                let Some(repl) = all.get(&id) else { continue };
                if repl.desired_status() != AllocDesiredStatus::Run || stopped.contains(&id) {
                    continue;
                }
                match reconnect::pick(tg, &orig, repl) {
                    Keep::Replacement => {
                        self.stop_reconnecting(&orig, ALLOC_NOT_NEEDED, &mut stopped)
                    }
                    Keep::Original => self.stop_reconnecting(repl, ALLOC_RECONNECTED, &mut stopped),
                }
            }
        }
        desired.stop += stopped.len() as u64;
        for set in [
            &mut sets.untainted,
            &mut sets.migrate,
            &mut sets.lost,
            &mut sets.reschedule_now,
        ] {
            set.retain(|id, _| !stopped.contains(id));
        }
        for (id, a) in reconnecting {
            if stopped.contains(&id) {
                continue;
            }
            if a.client_status() != AllocClientStatus::Unknown {
                let mut back = (*a).clone();
                back.unknown_since_unix_ns = 0;
                back.modify_time_unix_ns = self.input.now;
                self.results.reconnect_updates.push(back);
                desired.reconnect += 1;
            }
            sets.untainted.insert(id, a);
        }
    }

    /// Lost allocations of a group whose clients stop them after
    /// `stop_on_client_after`: they may still run until then (plus their
    /// kill timeout), so the group waits for a follow-up evaluation at that
    /// time before placing anything.
    pub(super) fn delay_lost_by_client_stop(&mut self, tg: &TaskGroup, sets: &mut GroupSets) {
        let Some(stop_after) = caravan_model::disconnect::stop_on_client_after_ns(tg) else {
            return;
        };
        if sets.lost.values().all(|a| a.is_terminal()) {
            return;
        }
        let kill = tg
            .tasks
            .iter()
            .map(|t| t.kill_timeout_ns)
            .max()
            .unwrap_or(0)
            .max(DEFAULT_KILL_TIMEOUT_NS);
        let now = self.input.now;
        let at = now.saturating_add(stop_after.max(0)).saturating_add(kill);
        let mut e = timeout_eval(self.input.eval, &tg.name, self.rng.uuid(), at, now);
        e.triggered_by = trigger::RETRY_FAILED_ALLOC.into();
        e.status_description = format!(
            "created to replace group {} once its clients stopped it",
            tg.name
        );
        self.results.followup_evals.push(e);
        sets.lost_later = true;
    }

    fn stop_reconnecting(
        &mut self,
        a: &Arc<Allocation>,
        description: &'static str,
        stopped: &mut BTreeSet<String>,
    ) {
        if stopped.insert(a.id.clone()) {
            self.results.stop.push(Stop {
                alloc: a.clone(),
                description,
                client_status: None,
            });
        }
    }
}

/// The allocations placed to replace `orig`, following the replacement
/// links both ways (a replacement may itself have been replaced).
fn replacements(orig: &Allocation, all: &AllocSet) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut frontier = vec![orig.id.clone()];
    while let Some(id) = frontier.pop() {
        let next = all.get(&id).map(|a| a.next_allocation.clone());
        let mut found: Vec<String> = all
            .values()
            .filter(|a| a.previous_allocation == id)
            .map(|a| a.id.clone())
            .collect();
        if let Some(n) = next.filter(|n| !n.is_empty()) {
            found.push(n);
        }
        for f in found {
            if f != orig.id && !out.contains(&f) && all.contains_key(&f) {
                out.push(f.clone());
                frontier.push(f);
            }
        }
    }
    out
}

/// The evaluation that declares a group's unknown allocations lost at the
/// end of their window, unless their node came back.
fn timeout_eval(e: &Evaluation, group: &str, id: String, at: i64, now: i64) -> Evaluation {
    Evaluation {
        id,
        namespace: e.namespace.clone(),
        priority: e.priority,
        r#type: e.r#type.clone(),
        triggered_by: trigger::MAX_DISCONNECT_TIMEOUT.into(),
        job_id: e.job_id.clone(),
        job_modify_revision: e.job_modify_revision,
        status: EvalStatus::Pending as i32,
        status_description: format!("created for the disconnect timeout of group {group}"),
        wait_until_unix_ns: at,
        previous_eval: e.id.clone(),
        create_time_unix_ns: now,
        modify_time_unix_ns: now,
        ..Default::default()
    }
}

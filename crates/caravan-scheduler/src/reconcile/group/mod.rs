//! Reconciliation of one task group.
//!
//! [`GroupReconciler::compute`] runs the phases of Nomad's `computeGroup`: sort
//! the group's allocations (canaries, tainted nodes, failures to replace now or
//! later), stop what must stop ([`stop`]), decide how older versions follow the
//! job, place canaries ([`canaries`]), replace failed and lost allocations and
//! fill the count, roll destructive updates within the deployment's limit,
//! migrate off draining nodes, and record the group in the deployment.

mod canaries;
mod disconnect;
mod stop;

use caravan_model::AllocExt;
use std::sync::Arc;

use caravan_proto::{
    AllocClientStatus, Allocation, Deployment, DeploymentState, DeploymentStatus, DesiredUpdates,
    EvalStatus, Evaluation, Job, TaskGroup, UpdateStrategy,
};

use super::filter::{self, AllocSet, Delayed};
use super::names::NameIndex;
use super::{
    ALLOC_MIGRATING, ALLOC_NODE_TAINTED, ALLOC_RESCHEDULED, Input, Placement, Results, Stop,
    UpdateKind,
};
use crate::model;
use crate::reschedule;
use crate::rng::Rng;

/// Decides how an allocation of an older version follows the job.
pub(super) type UpdateDecision<'u> =
    dyn FnMut(&Arc<Allocation>, &Job, &TaskGroup) -> UpdateKind + 'u;

pub(super) struct GroupReconciler<'a, 'i> {
    pub input: &'a Input<'i>,
    pub job: &'a Job,
    pub rng: &'a mut Rng,
    pub deployment: Option<Deployment>,
    pub created: bool,
    pub old_deployment: Option<Arc<Deployment>>,
    pub results: &'a mut Results,
}

/// A group's allocations sorted by what happens to them.
struct GroupSets {
    /// Canaries of the current deployment on untainted nodes.
    canaries: AllocSet,
    /// Allocations that stay where they are (terminal ones included).
    untainted: AllocSet,
    /// Allocations to move off draining nodes now.
    migrate: AllocSet,
    /// Allocations on nodes that are down or gone, disconnected ones with
    /// no window, and unknown ones past their window.
    lost: AllocSet,
    /// Allocations of a disconnected node replaced while they are unknown
    /// (they keep running, so they are not stopped).
    replace_disconnected: AllocSet,
    /// Failed allocations to replace now.
    reschedule_now: AllocSet,
    /// Failed allocations to replace after their delay.
    reschedule_later: Vec<Delayed>,
    /// Lost allocations whose client stops them itself
    /// (`stop_on_client_after`): nothing of the group is placed before
    /// then, so two copies of a name never run.
    lost_later: bool,
}

impl GroupSets {
    /// The names the group's allocations hold (terminal ones only for batch,
    /// where a finished allocation keeps its name).
    fn names_in_use(&self, batch: bool) -> impl Iterator<Item = &str> {
        self.untainted
            .values()
            .chain(self.migrate.values())
            .chain(self.reschedule_now.values())
            .chain(self.lost.values())
            .chain(self.replace_disconnected.values())
            .filter(move |a| !a.is_terminal() || batch)
            .map(|a| a.name.as_str())
    }
}

/// One group's reconciliation in progress.
struct GroupState<'t> {
    tg: &'t TaskGroup,
    /// Counts for the annotations.
    desired: DesiredUpdates,
    /// The group's update strategy, when the job runs deployments.
    strategy: Option<UpdateStrategy>,
    /// The group's deployment state: the deployment's, or a new one.
    deployment_state: DeploymentState,
    /// Whether the deployment already had a state for the group.
    had_deployment_state: bool,
    sets: GroupSets,
    /// Names in use, and the next free ones.
    names: NameIndex,
}

impl GroupState<'_> {
    /// Whether canaries are asked for and not promoted yet.
    fn is_canarying(&self) -> bool {
        self.deployment_state.desired_canaries != 0 && !self.deployment_state.promoted
    }

    /// The count the group asks for.
    fn count(&self) -> usize {
        self.tg.count.max(0) as usize
    }
}

/// Allocations of an older version that do not stay as they are.
struct Updates {
    /// To stop and replace.
    destructive: AllocSet,
    /// How many were updated where they run.
    in_place: u64,
}

impl GroupReconciler<'_, '_> {
    fn paused(&self) -> bool {
        self.deployment
            .as_ref()
            .is_some_and(|d| d.status() == DeploymentStatus::Paused)
    }

    fn failed(&self) -> bool {
        self.deployment
            .as_ref()
            .is_some_and(|d| d.status() == DeploymentStatus::Failed)
    }

    fn stop(&mut self, set: &AllocSet, desc: &'static str, client: Option<AllocClientStatus>) {
        for a in set.values() {
            self.results.stop.push(Stop {
                alloc: a.clone(),
                description: desc,
                client_status: client,
            });
        }
    }

    /// Reconciles one group; returns whether its deployment work is complete.
    pub fn compute(
        &mut self,
        tg: &TaskGroup,
        all: AllocSet,
        update: &mut UpdateDecision<'_>,
    ) -> bool {
        let mut desired = DesiredUpdates::default();
        let strategy = if self.input.deployments {
            model::update_strategy(self.job, tg).cloned()
        } else {
            None
        };
        let (deployment_state, had_deployment_state) = self.deployment_state(tg, strategy.as_ref());
        let all = self.drop_batch_history(all, &mut desired);
        let (canaries, all) = self.handle_canaries(all, &mut desired);
        let had_running = all
            .values()
            .any(|a| a.job_version == self.job.version && !a.is_terminal());
        let every = all
            .values()
            .any(|a| caravan_model::disconnect::needs_to_reconnect(a))
            .then(|| all.clone());
        let (mut sets, disconnecting, reconnecting) = self.sort_allocs(tg, canaries, all);
        if let Some(every) = &every {
            self.compute_reconnecting(tg, &mut sets, reconnecting, every, &mut desired);
        }
        self.compute_disconnecting(tg, &mut sets, disconnecting, &mut desired);
        self.delay_lost_by_client_stop(tg, &mut sets);
        let count = tg.count.max(0) as u32;
        let names = NameIndex::new(
            &self.job.id,
            &tg.name,
            count,
            sets.names_in_use(self.input.batch),
        );
        let mut group = GroupState {
            tg,
            desired,
            strategy,
            deployment_state,
            had_deployment_state,
            sets,
            names,
        };

        self.handle_delayed(&tg.name, &group.sets.reschedule_later, &mut group.desired);
        let canarying = group.is_canarying();
        self.compute_stop(&mut group, canarying);
        let updates = self.compute_updates(&mut group, update);
        // Unpromoted canaries run beside the allocations they may replace: they
        // do not count toward the group, so lost and failed ones are replaced.
        if canarying {
            let canaries = &group.sets.canaries;
            group
                .sets
                .untainted
                .retain(|id, _| !canaries.contains_key(id));
        }
        let require_canary = self.place_canaries(&mut group, &updates.destructive);
        let canarying = group.is_canarying();
        let place_ready = !self.paused() && !self.failed() && !canarying;
        let limit = self.compute_limit(&group, &updates.destructive, canarying);
        let placements = self.compute_placements(&mut group, canarying);
        let placed = placements.len();
        self.add_placements(&mut group, placements, place_ready);
        let limit = if place_ready {
            limit.saturating_sub(placed)
        } else {
            limit
        };
        self.add_destructive_updates(&mut group, &updates.destructive, place_ready, limit);
        self.migrate(&mut group, canarying);
        let updating_spec = !updates.destructive.is_empty() || updates.in_place > 0;
        self.record_deployment_state(&mut group, updating_spec, had_running);
        self.results.desired.insert(tg.name.clone(), group.desired);

        let nothing_left = updates.destructive.is_empty()
            && updates.in_place == 0
            && placed == 0
            && group.sets.migrate.is_empty()
            && group.sets.reschedule_now.is_empty()
            && group.sets.reschedule_later.is_empty()
            && !require_canary;
        nothing_left && self.deployment_done(&tg.name)
    }

    /// The group's deployment state, from the deployment or new from the
    /// strategy; and whether the deployment had one.
    fn deployment_state(
        &self,
        tg: &TaskGroup,
        strategy: Option<&UpdateStrategy>,
    ) -> (DeploymentState, bool) {
        let existing = self
            .deployment
            .as_ref()
            .and_then(|d| d.task_groups.get(&tg.name).cloned());
        let had = existing.is_some();
        let state = existing.unwrap_or_else(|| DeploymentState {
            auto_revert: strategy.is_some_and(|s| s.auto_revert),
            auto_promote: strategy.is_some_and(|s| s.auto_promote),
            progress_deadline_ns: strategy.map_or(0, |s| s.progress_deadline_ns),
            ..Default::default()
        });
        (state, had)
    }

    /// Batch: terminal allocations of older versions are history, not part of
    /// the group.
    fn drop_batch_history(&self, mut all: AllocSet, desired: &mut DesiredUpdates) -> AllocSet {
        if self.input.batch {
            let old: Vec<String> = all
                .iter()
                .filter(|(_, a)| a.is_terminal() && a.job_version < self.job.version)
                .map(|(id, _)| id.clone())
                .collect();
            for id in old {
                all.remove(&id);
                desired.ignore += 1;
            }
        }
        all
    }

    /// Sorts the group's allocations: by their node (stay, migrate within the
    /// drain's budget, lost), then failed ones to replace now or later.
    /// Also returns the allocations of newly disconnected nodes and those
    /// back from one, which the disconnect phases sort further.
    fn sort_allocs(
        &self,
        tg: &TaskGroup,
        canaries: AllocSet,
        all: AllocSet,
    ) -> (GroupSets, AllocSet, AllocSet) {
        let by_node = filter::by_node(all, self.input.tainted, tg, self.input.now);
        let (untainted, migrate) = (by_node.untainted, by_node.migrate);
        let mut lost = by_node.lost;
        lost.extend(by_node.expiring);
        let (untainted, migrate) = limit_drain(tg, self.input.batch, untainted, migrate);
        let policy = model::reschedule_policy(model::job_type(self.job), tg);
        let (untainted, reschedule_now, reschedule_later) = filter::by_reschedulable(
            untainted,
            self.input.batch,
            self.input.now,
            &self.input.eval.id,
            self.deployment.as_ref(),
            &policy,
        );
        let sets = GroupSets {
            canaries,
            untainted,
            migrate,
            lost,
            replace_disconnected: AllocSet::new(),
            reschedule_now,
            reschedule_later,
            lost_later: false,
        };
        (sets, by_node.disconnecting, by_node.reconnecting)
    }

    /// Creates follow-up evaluations for failures to retry later and marks the
    /// allocations with them.
    fn handle_delayed(&mut self, group: &str, later: &[Delayed], desired: &mut DesiredUpdates) {
        if later.is_empty() {
            return;
        }
        desired.reschedule_later += later.len() as u64;
        let mut sorted: Vec<&Delayed> = later.iter().collect();
        sorted.sort_by(|a, b| (a.at, &a.alloc.id).cmp(&(b.at, &b.alloc.id)));
        let mut batch_start = i64::MIN;
        let mut eval_id = String::new();
        for d in sorted {
            if eval_id.is_empty() || d.at.saturating_sub(batch_start) > reschedule::BATCH_WINDOW_NS
            {
                batch_start = d.at;
                eval_id = self.rng.uuid();
                let followup = followup_eval(self.input, group, eval_id.clone(), d.at);
                self.results.followup_evals.push(followup);
            }
            let mut updated = (*d.alloc).clone();
            updated.followup_eval_id = eval_id.clone();
            updated.modify_time_unix_ns = self.input.now;
            self.results.attribute_updates.push(updated);
        }
    }

    /// How allocations of an older version follow the job: left alone,
    /// replaced, or updated in place, as `update` decides.
    fn compute_updates(
        &mut self,
        group: &mut GroupState<'_>,
        update: &mut UpdateDecision<'_>,
    ) -> Updates {
        let mut destructive = AllocSet::new();
        let mut in_place = 0u64;
        for (id, a) in &group.sets.untainted {
            if a.job_version == self.job.version {
                group.desired.ignore += 1;
                continue;
            }
            match update(a, self.job, group.tg) {
                UpdateKind::Ignore => group.desired.ignore += 1,
                UpdateKind::Destructive => {
                    destructive.insert(id.clone(), a.clone());
                }
                UpdateKind::InPlace(new) => {
                    in_place += 1;
                    self.results.inplace.push((a.clone(), *new));
                }
            }
        }
        group.desired.in_place_update += in_place;
        Updates {
            destructive,
            in_place,
        }
    }

    /// How many destructive updates and migrations may proceed: the update's
    /// `max_parallel` less the deployment's allocations not yet healthy, none
    /// while one is unhealthy or the deployment is paused, failed or canarying.
    fn compute_limit(
        &self,
        group: &GroupState<'_>,
        destructive: &AllocSet,
        canarying: bool,
    ) -> usize {
        if group.strategy.is_none() || destructive.len() + group.sets.migrate.len() == 0 {
            return group.count();
        }
        if self.paused() || self.failed() || canarying {
            return 0;
        }
        let Some(s) = model::update_strategy(self.job, group.tg) else {
            return group.count();
        };
        let mut limit = i64::from(s.max_parallel);
        if let Some(d) = &self.deployment {
            for a in group
                .sets
                .untainted
                .values()
                .filter(|a| a.deployment_id == d.id)
            {
                match a.deployment_status.as_ref().and_then(|s| s.healthy) {
                    Some(false) => return 0,
                    Some(true) => {}
                    None => limit -= 1,
                }
            }
        }
        limit.max(0) as usize
    }

    /// Replacements of failed and lost allocations, then new allocations up to
    /// the group's count.
    fn compute_placements(&self, group: &mut GroupState<'_>, canarying: bool) -> Vec<Placement> {
        if group.sets.lost_later {
            return Vec::new();
        }
        let count = group.count();
        let mut place: Vec<Placement> = Vec::new();
        for a in filter::name_order(&group.sets.reschedule_now) {
            let mut p = replacement(a, &group.tg.name, canarying);
            p.reschedule = true;
            place.push(p);
        }
        for a in filter::name_order(&group.sets.replace_disconnected) {
            let mut p = replacement(a, &group.tg.name, canarying);
            p.lost = true;
            place.push(p);
        }
        let mut existing = group.sets.untainted.len()
            + group.sets.migrate.len()
            + group.sets.reschedule_now.len()
            + group.sets.replace_disconnected.len();
        for a in filter::name_order(&group.sets.lost) {
            if existing >= count {
                break;
            }
            existing += 1;
            let mut p = replacement(a, &group.tg.name, canarying);
            p.lost = true;
            place.push(p);
        }
        if existing < count {
            for name in group.names.next(count - existing) {
                place.push(new_placement(name, &group.tg.name, false));
            }
        }
        place
    }

    /// Adds the placements to the results, stopping the failed allocations
    /// they replace; while the deployment is paused, failed or canarying only
    /// replacements of failed and lost allocations go ahead.
    fn add_placements(
        &mut self,
        group: &mut GroupState<'_>,
        place: Vec<Placement>,
        place_ready: bool,
    ) {
        if place_ready {
            group.desired.place += place.len() as u64;
            group.desired.stop += group.sets.reschedule_now.len() as u64;
            self.stop(&group.sets.reschedule_now, ALLOC_RESCHEDULED, None);
            self.results.place.extend(place);
            return;
        }
        for p in place {
            if let Some(prev) = &p.previous {
                if p.reschedule {
                    group.desired.stop += 1;
                    self.results.stop.push(Stop {
                        alloc: prev.clone(),
                        description: ALLOC_RESCHEDULED,
                        client_status: None,
                    });
                }
                group.desired.place += 1;
                self.results.place.push(p);
            }
        }
    }

    /// Destructive updates, at most `limit` of them, once placements may proceed.
    fn add_destructive_updates(
        &mut self,
        group: &mut GroupState<'_>,
        destructive: &AllocSet,
        place_ready: bool,
        limit: usize,
    ) {
        if !place_ready {
            group.desired.ignore += destructive.len() as u64;
            return;
        }
        let take = destructive.len().min(limit);
        group.desired.destructive_update += take as u64;
        group.desired.ignore += (destructive.len() - take) as u64;
        for a in filter::name_order(destructive).into_iter().take(take) {
            self.results.destructive.push(a);
        }
    }

    /// Moves allocations off draining nodes (stop and replace), or only stops
    /// them while the deployment is failed or paused.
    fn migrate(&mut self, group: &mut GroupState<'_>, canarying: bool) {
        let blocked = self.failed() || self.paused();
        if blocked {
            group.desired.stop += group.sets.migrate.len() as u64;
        } else {
            group.desired.migrate += group.sets.migrate.len() as u64;
        }
        for a in filter::name_order(&group.sets.migrate) {
            if blocked {
                self.results.stop.push(Stop {
                    alloc: a,
                    description: ALLOC_NODE_TAINTED,
                    client_status: None,
                });
                continue;
            }
            self.results.stop.push(Stop {
                alloc: a.clone(),
                description: ALLOC_MIGRATING,
                client_status: None,
            });
            self.results
                .place
                .push(replacement(a, &group.tg.name, canarying));
        }
    }

    /// Records the group's state in the deployment. A group joins a deployment
    /// (created on first need) when it has a strategy and a count, had no state
    /// yet, and either runs nothing of this version or is being updated.
    fn record_deployment_state(
        &mut self,
        group: &mut GroupState<'_>,
        updating_spec: bool,
        had_running: bool,
    ) {
        group.deployment_state.desired_total = group.tg.count;
        let joins = group.strategy.is_some()
            && !group.had_deployment_state
            && group.deployment_state.desired_total != 0
            && (!had_running || updating_spec);
        if joins && self.deployment.is_none() {
            self.deployment = Some(new_deployment(
                self.job,
                self.input.eval,
                self.rng,
                self.input.now,
            ));
            self.created = true;
        }
        if let Some(d) = self.deployment.as_mut()
            && (group.had_deployment_state || joins)
        {
            d.task_groups
                .insert(group.tg.name.clone(), group.deployment_state.clone());
        }
    }

    /// Whether the group's part of the deployment is done: all healthy, and
    /// canaries promoted.
    fn deployment_done(&self, group: &str) -> bool {
        let Some(state) = self
            .deployment
            .as_ref()
            .and_then(|d| d.task_groups.get(group))
        else {
            return true;
        };
        !(state.healthy_allocs < state.desired_total.max(state.desired_canaries)
            || (state.desired_canaries > 0 && !state.promoted))
    }
}

/// Allocations on draining nodes move at most `migrate.max_parallel` at a time,
/// counting replacements that have not started yet; those the drainer flagged
/// for migration always move.
fn limit_drain(
    tg: &TaskGroup,
    batch: bool,
    mut untainted: AllocSet,
    migrate: AllocSet,
) -> (AllocSet, AllocSet) {
    let flagged = |a: &Allocation| {
        a.desired_transition
            .as_ref()
            .is_some_and(|t| t.migrate == Some(true))
    };
    // A replacement is still on its way until it runs and, for a service
    // group, until its client judges it healthy by the migrate strategy (as
    // Nomad's drainer counts only healthy allocations).
    let arrived = |a: &Allocation| {
        a.client_status() == AllocClientStatus::Running
            && (batch
                || a.deployment_status
                    .as_ref()
                    .is_some_and(|d| d.healthy == Some(true)))
    };
    let in_flight = untainted
        .values()
        .filter(|a| !a.is_terminal() && !a.previous_allocation.is_empty() && !arrived(a))
        .count();
    let already = migrate.values().filter(|a| flagged(a)).count();
    let mut budget = model::migrate_max_parallel(tg).saturating_sub(in_flight + already);
    let mut out = AllocSet::new();
    for a in filter::name_order(&migrate) {
        if flagged(&a) {
            out.insert(a.id.clone(), a);
        } else if budget > 0 {
            budget -= 1;
            out.insert(a.id.clone(), a);
        } else {
            untainted.insert(a.id.clone(), a);
        }
    }
    (untainted, out)
}

fn is_canary(a: &Allocation) -> bool {
    a.deployment_status.as_ref().is_some_and(|s| s.canary)
}

/// A placement that replaces `a` under its name; while canaries are
/// unpromoted a non-canary replacement runs the stable version.
fn replacement(a: Arc<Allocation>, group: &str, canarying: bool) -> Placement {
    Placement {
        name: a.name.clone(),
        group: group.to_string(),
        canary: is_canary(&a),
        downgrade: canarying && !is_canary(&a),
        previous: Some(a),
        reschedule: false,
        lost: false,
    }
}

/// A placement of a new allocation.
fn new_placement(name: String, group: &str, canary: bool) -> Placement {
    Placement {
        name,
        group: group.to_string(),
        previous: None,
        canary,
        reschedule: false,
        lost: false,
        downgrade: false,
    }
}

/// The evaluation that replaces a group's failed allocations at `at`.
fn followup_eval(input: &Input<'_>, group: &str, id: String, at: i64) -> Evaluation {
    let e = input.eval;
    Evaluation {
        id,
        namespace: e.namespace.clone(),
        priority: e.priority,
        r#type: e.r#type.clone(),
        triggered_by: "retry-failed-alloc".into(),
        job_id: e.job_id.clone(),
        job_modify_revision: e.job_modify_revision,
        status: EvalStatus::Pending as i32,
        status_description: format!("created for delayed rescheduling of group {group}"),
        wait_until_unix_ns: at,
        previous_eval: e.id.clone(),
        create_time_unix_ns: input.now,
        modify_time_unix_ns: input.now,
        ..Default::default()
    }
}

fn new_deployment(job: &Job, eval: &Evaluation, rng: &mut Rng, now: i64) -> Deployment {
    Deployment {
        id: rng.uuid(),
        namespace: job.namespace.clone(),
        job_id: job.id.clone(),
        job_version: job.version,
        job_modify_revision: job.modify_revision,
        job_spec_modify_revision: job.job_modify_revision,
        job_create_revision: job.create_revision,
        status: DeploymentStatus::Running as i32,
        status_description: "Deployment is running".into(),
        eval_priority: eval.priority,
        create_time_unix_ns: now,
        modify_time_unix_ns: now,
        ..Default::default()
    }
}

//! Reconciliation of one task group.

use std::sync::Arc;

use caravan_model::AllocExt;
use caravan_proto::{
    AllocClientStatus, Allocation, Deployment, DeploymentState, DeploymentStatus, DesiredUpdates,
    EvalStatus, Evaluation, Job, TaskGroup,
};

use super::filter::{self, AllocSet, Delayed};
use super::names::NameIndex;
use super::{
    ALLOC_LOST, ALLOC_MIGRATING, ALLOC_NODE_TAINTED, ALLOC_NOT_NEEDED, ALLOC_RESCHEDULED, Input,
    Placement, Results, Stop, UpdateKind,
};
use crate::model;
use crate::reschedule;
use crate::rng::Rng;

pub(super) struct GroupReconciler<'a, 'i> {
    pub input: &'a Input<'i>,
    pub job: &'a Job,
    pub rng: &'a mut Rng,
    pub deployment: Option<Deployment>,
    pub created: bool,
    pub old_deployment: Option<Arc<Deployment>>,
    pub results: &'a mut Results,
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
        update: &mut dyn FnMut(&Arc<Allocation>, &Job, &TaskGroup) -> UpdateKind,
    ) -> bool {
        let mut desired = DesiredUpdates::default();
        let strategy = if self.input.deployments {
            model::update_strategy(self.job, tg).cloned()
        } else {
            None
        };
        let existing_dstate = self
            .deployment
            .as_ref()
            .and_then(|d| d.task_groups.get(&tg.name).cloned());
        let had_dstate = existing_dstate.is_some();
        let mut dstate = existing_dstate.unwrap_or_else(|| DeploymentState {
            auto_revert: strategy.as_ref().is_some_and(|s| s.auto_revert),
            auto_promote: strategy.as_ref().is_some_and(|s| s.auto_promote),
            progress_deadline_ns: strategy.as_ref().map_or(0, |s| s.progress_deadline_ns),
            ..Default::default()
        });

        // Batch: terminal allocations of older versions are history.
        let mut all = all;
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

        let (canaries, mut all) = self.handle_canaries(all, &mut desired);
        let (untainted, migrate, lost) = filter::by_tainted(all.clone(), self.input.tainted);
        let (untainted, migrate) = limit_drain(tg, self.input.batch, untainted, migrate);
        let policy = model::reschedule_policy(model::job_type(self.job), tg);
        let (mut untainted, reschedule_now, reschedule_later) = filter::by_reschedulable(
            untainted,
            self.input.batch,
            self.input.now,
            &self.input.eval.id,
            self.deployment.as_ref(),
            &policy,
        );
        // Lost allocations of a job that must not be replaced.
        let names_in_use = untainted
            .values()
            .chain(migrate.values())
            .chain(reschedule_now.values())
            .chain(lost.values())
            .filter(|a| !a.is_terminal() || self.input.batch)
            .map(|a| a.name.as_str());
        let count = tg.count.max(0) as u32;
        let mut names = NameIndex::new(&self.job.id, &tg.name, count, names_in_use);

        self.handle_delayed(&tg.name, &reschedule_later, &mut desired);

        let is_canarying = dstate.desired_canaries != 0 && !dstate.promoted;
        let mut migrate = migrate;
        self.compute_stop(
            tg,
            &mut names,
            &mut untainted,
            &mut migrate,
            &lost,
            &canaries,
            is_canarying,
            &mut desired,
        );

        // Updates of allocations running an older version.
        let mut destructive = AllocSet::new();
        let mut inplace_count = 0u64;
        for (id, a) in &untainted {
            if a.job_version == self.job.version {
                desired.ignore += 1;
                continue;
            }
            match update(a, self.job, tg) {
                UpdateKind::Ignore => desired.ignore += 1,
                UpdateKind::Destructive => {
                    destructive.insert(id.clone(), a.clone());
                }
                UpdateKind::InPlace(new) => {
                    inplace_count += 1;
                    self.results.inplace.push((a.clone(), *new));
                }
            }
        }
        desired.in_place_update += inplace_count;
        // Unpromoted canaries run beside the allocations they may replace: they
        // do not count toward the group, so lost and failed ones are replaced.
        if is_canarying {
            untainted.retain(|id, _| !canaries.contains_key(id));
        }

        // Canaries.
        let mut require_canary = false;
        if let Some(s) = &strategy {
            require_canary =
                !destructive.is_empty() && (canaries.len() as i32) < s.canary && !dstate.promoted;
            if require_canary {
                dstate.desired_canaries = s.canary;
            }
            if require_canary && !self.paused() && !self.failed() {
                let n = (s.canary as usize).saturating_sub(canaries.len());
                desired.canary += n as u64;
                let canary_names: Vec<String> = canaries.values().map(|a| a.name.clone()).collect();
                let destructive_names: Vec<String> = filter::name_order(&destructive)
                    .iter()
                    .map(|a| a.name.clone())
                    .collect();
                for name in names.next_canaries(n, &canary_names, &destructive_names) {
                    self.results.place.push(Placement {
                        name,
                        group: tg.name.clone(),
                        previous: None,
                        canary: true,
                        reschedule: false,
                        lost: false,
                        downgrade: false,
                    });
                }
            }
        }
        let is_canarying = dstate.desired_canaries != 0 && !dstate.promoted;
        let place_ready = !self.paused() && !self.failed() && !is_canarying;

        let mut limit = self.compute_limit(
            tg,
            strategy.is_some(),
            &untainted,
            &destructive,
            &migrate,
            is_canarying,
        );

        // Placements: replacements of failed and lost allocations, then missing ones.
        let mut place: Vec<Placement> = Vec::new();
        for a in filter::name_order(&reschedule_now) {
            place.push(Placement {
                name: a.name.clone(),
                group: tg.name.clone(),
                canary: is_canary(&a),
                downgrade: is_canarying && !is_canary(&a),
                previous: Some(a),
                reschedule: true,
                lost: false,
            });
        }
        let mut existing = untainted.len() + migrate.len() + reschedule_now.len();
        for a in filter::name_order(&lost) {
            if existing >= count as usize {
                break;
            }
            existing += 1;
            place.push(Placement {
                name: a.name.clone(),
                group: tg.name.clone(),
                canary: is_canary(&a),
                downgrade: is_canarying && !is_canary(&a),
                previous: Some(a),
                reschedule: false,
                lost: true,
            });
        }
        if existing < count as usize {
            for name in names.next(count as usize - existing) {
                place.push(Placement {
                    name,
                    group: tg.name.clone(),
                    previous: None,
                    canary: false,
                    reschedule: false,
                    lost: false,
                    downgrade: false,
                });
            }
        }
        let place_len = place.len();
        if place_ready {
            desired.place += place.len() as u64;
            desired.stop += reschedule_now.len() as u64;
            self.stop(&reschedule_now, ALLOC_RESCHEDULED, None);
            self.results.place.extend(place);
            limit = limit.saturating_sub(place_len);
        } else {
            // Replacements of failed and lost allocations go ahead regardless.
            for p in place {
                if let Some(prev) = &p.previous {
                    if p.reschedule {
                        desired.stop += 1;
                        self.results.stop.push(Stop {
                            alloc: prev.clone(),
                            description: ALLOC_RESCHEDULED,
                            client_status: None,
                        });
                    }
                    desired.place += 1;
                    self.results.place.push(p);
                }
            }
        }

        // Destructive updates, at most `limit` of them.
        if place_ready {
            let take = destructive.len().min(limit);
            desired.destructive_update += take as u64;
            desired.ignore += (destructive.len() - take) as u64;
            for a in filter::name_order(&destructive).into_iter().take(take) {
                self.results.destructive.push(a);
            }
        } else {
            desired.ignore += destructive.len() as u64;
        }

        // Migrations.
        let blocked = self.failed() || self.paused();
        if blocked {
            desired.stop += migrate.len() as u64;
        } else {
            desired.migrate += migrate.len() as u64;
        }
        for a in filter::name_order(&migrate) {
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
            self.results.place.push(Placement {
                name: a.name.clone(),
                group: tg.name.clone(),
                canary: is_canary(&a),
                downgrade: is_canarying && !is_canary(&a),
                previous: Some(a),
                reschedule: false,
                lost: false,
            });
        }

        // Deployment bookkeeping.
        let updating_spec = !destructive.is_empty() || inplace_count > 0;
        let had_running = all
            .values()
            .any(|a| a.job_version == self.job.version && !a.is_terminal());
        dstate.desired_total = tg.count;
        let joins = strategy.is_some()
            && !had_dstate
            && dstate.desired_total != 0
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
            && (had_dstate || joins)
        {
            d.task_groups.insert(tg.name.clone(), dstate.clone());
        }
        all.clear();
        self.results.desired.insert(tg.name.clone(), desired);

        let mut complete = destructive.is_empty()
            && inplace_count == 0
            && place_len == 0
            && migrate.is_empty()
            && reschedule_now.is_empty()
            && reschedule_later.is_empty()
            && !require_canary;
        if complete
            && let Some(ds) = self
                .deployment
                .as_ref()
                .and_then(|d| d.task_groups.get(&tg.name))
            && (ds.healthy_allocs < ds.desired_total.max(ds.desired_canaries)
                || (ds.desired_canaries > 0 && !ds.promoted))
        {
            complete = false;
        }
        complete
    }

    /// Stops canaries of old or failed deployments; returns the current canaries
    /// and the remaining allocations.
    fn handle_canaries(
        &mut self,
        mut all: AllocSet,
        desired: &mut DesiredUpdates,
    ) -> (AllocSet, AllocSet) {
        let mut stop_ids: Vec<String> = Vec::new();
        if let Some(old) = &self.old_deployment {
            for ds in old.task_groups.values() {
                if !ds.promoted {
                    stop_ids.extend(ds.placed_canaries.iter().cloned());
                }
            }
        }
        if let Some(d) = &self.deployment
            && d.status() == DeploymentStatus::Failed
        {
            for ds in d.task_groups.values() {
                if !ds.promoted {
                    stop_ids.extend(ds.placed_canaries.iter().cloned());
                }
            }
        }
        let mut stop_set = AllocSet::new();
        for id in stop_ids {
            if let Some(a) = all.remove(&id)
                && !a.is_terminal()
            {
                stop_set.insert(id, a);
            }
        }
        desired.stop += stop_set.len() as u64;
        self.stop(&stop_set, ALLOC_NOT_NEEDED, None);

        let mut canaries = AllocSet::new();
        if let Some(d) = &self.deployment {
            for ds in d.task_groups.values() {
                for id in &ds.placed_canaries {
                    if let Some(a) = all.get(id) {
                        canaries.insert(id.clone(), a.clone());
                    }
                }
            }
        }
        let (untainted, migrate, lost) = filter::by_tainted(canaries, self.input.tainted);
        self.stop(&migrate, ALLOC_MIGRATING, None);
        self.stop(&lost, ALLOC_LOST, Some(AllocClientStatus::Lost));
        for id in migrate.keys().chain(lost.keys()) {
            all.remove(id);
        }
        (untainted, all)
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
                let e = self.input.eval;
                self.results.followup_evals.push(Evaluation {
                    id: eval_id.clone(),
                    namespace: e.namespace.clone(),
                    priority: e.priority,
                    r#type: e.r#type.clone(),
                    triggered_by: "retry-failed-alloc".into(),
                    job_id: e.job_id.clone(),
                    job_modify_revision: e.job_modify_revision,
                    status: EvalStatus::Pending as i32,
                    status_description: format!(
                        "created for delayed rescheduling of group {group}"
                    ),
                    wait_until_unix_ns: d.at,
                    previous_eval: e.id.clone(),
                    create_time_unix_ns: self.input.now,
                    modify_time_unix_ns: self.input.now,
                    ..Default::default()
                });
            }
            let mut updated = (*d.alloc).clone();
            updated.followup_eval_id = eval_id.clone();
            updated.modify_time_unix_ns = self.input.now;
            self.results.attribute_updates.push(updated);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn compute_stop(
        &mut self,
        tg: &TaskGroup,
        names: &mut NameIndex,
        untainted: &mut AllocSet,
        migrate: &mut AllocSet,
        lost: &AllocSet,
        canaries: &AllocSet,
        is_canarying: bool,
        desired: &mut DesiredUpdates,
    ) {
        desired.stop += lost.len() as u64;
        self.stop(lost, ALLOC_LOST, Some(AllocClientStatus::Lost));
        let mut counted: AllocSet = untainted.clone();
        if is_canarying {
            for id in canaries.keys() {
                counted.remove(id);
            }
        }
        let mut remove = counted.len() as i64 + migrate.len() as i64 - i64::from(tg.count.max(0));
        if remove <= 0 {
            return;
        }
        // Terminal allocations count toward the total but need no stop.
        counted.retain(|_, a| !a.is_terminal());
        let do_stop = |this: &mut Self,
                       a: Arc<Allocation>,
                       untainted: &mut AllocSet,
                       desired: &mut DesiredUpdates| {
            untainted.remove(&a.id);
            desired.stop += 1;
            this.results.stop.push(Stop {
                alloc: a,
                description: ALLOC_NOT_NEEDED,
                client_status: None,
            });
        };
        // After promotion, old allocations sharing a canary's name go first.
        if !is_canarying && !canaries.is_empty() {
            let canary_names: Vec<&str> = canaries.values().map(|a| a.name.as_str()).collect();
            for a in filter::name_order(&counted) {
                if remove == 0 {
                    return;
                }
                if !canaries.contains_key(&a.id) && canary_names.contains(&a.name.as_str()) {
                    counted.remove(&a.id);
                    do_stop(self, a, untainted, desired);
                    remove -= 1;
                }
            }
        }
        // Then allocations that were migrating anyway, highest names first.
        if !migrate.is_empty() {
            let mut mig_names = NameIndex::new(
                &self.job.id,
                &tg.name,
                0,
                migrate.values().map(|a| a.name.as_str()),
            );
            let highest = mig_names.highest(remove as usize);
            for a in filter::name_order(migrate).into_iter().rev() {
                if remove == 0 {
                    return;
                }
                if highest.contains(&a.name) {
                    migrate.remove(&a.id);
                    names.unset(&a.name);
                    desired.stop += 1;
                    self.results.stop.push(Stop {
                        alloc: a,
                        description: ALLOC_NOT_NEEDED,
                        client_status: None,
                    });
                    remove -= 1;
                }
            }
        }
        // Then the highest indexes.
        let highest = names.highest(remove as usize);
        for a in filter::name_order(&counted).into_iter().rev() {
            if remove == 0 {
                return;
            }
            if highest.contains(&a.name) {
                counted.remove(&a.id);
                do_stop(self, a, untainted, desired);
                remove -= 1;
            }
        }
        // Duplicate names can leave some over.
        for a in filter::name_order(&counted).into_iter().rev() {
            if remove == 0 {
                return;
            }
            if is_canarying && canaries.contains_key(&a.id) {
                continue;
            }
            do_stop(self, a, untainted, desired);
            remove -= 1;
        }
    }

    fn compute_limit(
        &self,
        tg: &TaskGroup,
        has_strategy: bool,
        untainted: &AllocSet,
        destructive: &AllocSet,
        migrate: &AllocSet,
        canarying: bool,
    ) -> usize {
        if !has_strategy || destructive.len() + migrate.len() == 0 {
            return tg.count.max(0) as usize;
        }
        if self.paused() || self.failed() || canarying {
            return 0;
        }
        let Some(s) = model::update_strategy(self.job, tg) else {
            return tg.count.max(0) as usize;
        };
        let mut limit = i64::from(s.max_parallel);
        if let Some(d) = &self.deployment {
            for a in untainted.values().filter(|a| a.deployment_id == d.id) {
                match a.deployment_status.as_ref().and_then(|s| s.healthy) {
                    Some(false) => return 0,
                    Some(true) => {}
                    None => limit -= 1,
                }
            }
        }
        limit.max(0) as usize
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

//! The generic scheduler for service and batch jobs.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use caravan_model::{AllocExt, DeploymentStatusExt, NomadName};
use caravan_proto::{
    AllocDeploymentStatus, AllocMetric, Allocation, EvalStatus, Evaluation, Job, JobType,
    PlanAnnotations, TaskGroup,
};

use crate::context::{Eligibility, EvalContext, ShortKeyBuild, count_allocs};
use crate::downgrade::{self, StableVersion};
use crate::error::SchedulerError;
use crate::evals::{self, FinalStatus};
use crate::inplace::{self, InPlaceRules};
use crate::planner::Planner;
use crate::rank::{GroupRules, JobRules};
use crate::reconcile::{self, ALLOC_UPDATING, Placement, UpdateKind, filter};
use crate::rng::Rng;
use crate::select::{SelectOptions, Selector, Source};
use crate::state::State;
use crate::{model, placement, reschedule, validate};

/// Plan attempts without progress before giving up (service).
pub const MAX_SERVICE_ATTEMPTS: u32 = 5;
/// Plan attempts without progress before giving up (batch).
pub const MAX_BATCH_ATTEMPTS: u32 = 2;

pub(crate) enum Step<S> {
    Done,
    Retry {
        progress: bool,
        refreshed: Option<S>,
    },
    Failed(String),
}

struct Run<'e> {
    eval: &'e Evaluation,
    batch: bool,
    now: i64,
    attempt: u32,
    rng: Rng,
    queued: BTreeMap<String, i64>,
    failed: BTreeMap<String, AllocMetric>,
    blocked: Option<Evaluation>,
    followups_created: bool,
    deployment_id: String,
    eligibility: Eligibility,
}

/// Processes a service or batch evaluation.
pub fn process<P: Planner>(
    eval: &Evaluation,
    state: P::State,
    planner: &mut P,
    now: i64,
) -> Result<(), SchedulerError> {
    let batch = eval.r#type == "batch";
    let mut run = Run {
        eval,
        batch,
        now,
        attempt: 0,
        rng: Rng::from_seed_parts(&[
            eval.id.as_bytes(),
            b"evals",
            &state.revision().to_be_bytes(),
        ]),
        queued: BTreeMap::new(),
        failed: BTreeMap::new(),
        blocked: None,
        followups_created: false,
        deployment_id: String::new(),
        eligibility: Eligibility::default(),
    };
    if !caravan_model::trigger::KNOWN.contains(&eval.triggered_by.as_str()) {
        let desc = format!(
            "scheduler cannot handle {:?} evaluation reason",
            eval.triggered_by
        );
        return run.finish(planner, &state, EvalStatus::Failed, desc);
    }
    let limit = if batch {
        MAX_BATCH_ATTEMPTS
    } else {
        MAX_SERVICE_ATTEMPTS
    };
    let mut state = state;
    let mut without_progress = 0;
    loop {
        if without_progress >= limit {
            let b = evals::blocked_eval(
                eval,
                &mut run.rng,
                &run.eligibility,
                &run.failed,
                true,
                state.revision(),
                now,
            );
            planner.create_eval(b.clone())?;
            run.blocked = Some(b);
            let desc = format!("maximum attempts reached ({limit})");
            return run.finish(planner, &state, EvalStatus::Failed, desc);
        }
        match run.attempt(&state, planner)? {
            Step::Done => break,
            Step::Failed(desc) => return run.finish(planner, &state, EvalStatus::Failed, desc),
            Step::Retry {
                progress,
                refreshed,
            } => {
                if let Some(s) = refreshed {
                    state = s;
                }
                without_progress = if progress { 0 } else { without_progress + 1 };
            }
        }
        run.attempt += 1;
    }
    if eval.status() == EvalStatus::Blocked && !run.failed.is_empty() {
        let mut e = eval.clone();
        e.escaped_computed_class = run.eligibility.escaped;
        e.class_eligibility = run.eligibility.classes.clone();
        e.failed_tg_allocs = run.failed.clone();
        e.queued_allocations = run.queued.clone();
        e.snapshot_revision = state.revision();
        planner.reblock_eval(e)?;
        return Ok(());
    }
    run.finish(planner, &state, EvalStatus::Complete, String::new())
}

impl Run<'_> {
    fn finish<P: Planner>(
        &mut self,
        planner: &mut P,
        state: &P::State,
        status: EvalStatus,
        description: String,
    ) -> Result<(), SchedulerError> {
        let e = evals::finished(
            self.eval,
            FinalStatus {
                status: status as i32,
                description,
                next_eval: String::new(),
                blocked_eval: self
                    .blocked
                    .as_ref()
                    .map(|b| b.id.clone())
                    .unwrap_or_default(),
                failed: self.failed.clone(),
                queued: self.queued.clone(),
                deployment_id: self.deployment_id.clone(),
            },
            state.revision(),
            self.now,
        );
        planner.update_eval(e)?;
        Ok(())
    }

    fn attempt<P: Planner>(
        &mut self,
        state: &P::State,
        planner: &mut P,
    ) -> Result<Step<P::State>, SchedulerError> {
        let eval = self.eval;
        let sd: &dyn State = state;
        let job = sd.job(&eval.namespace, &eval.job_id);
        if let Some(reason) = job
            .as_ref()
            .filter(|j| !j.stop)
            .and_then(|j| validate::refusal(j))
        {
            return Ok(Step::Failed(reason));
        }
        let allocs = sd.allocs_by_job(&eval.namespace, &eval.job_id);
        let tainted = filter::tainted_nodes(sd, &allocs);
        let runnable: Option<Arc<Job>> = job.clone().filter(|j| !j.stop);
        // Scope filtering happens inside the node table's single pass.
        let nodes = match &runnable {
            Some(_) => sd.ready_nodes(),
            None => Vec::new(),
        };
        let mut ctx = EvalContext::new(sd, eval, job.clone(), nodes, self.now, self.attempt);
        ctx.shuffle_candidates();
        ctx.count_existing(&allocs);
        let mut job_rules = match &runnable {
            Some(j) => match JobRules::new(&mut ctx, j, &allocs) {
                Ok(r) => Some(r),
                Err(e) => return Ok(Step::Failed(format!("invalid job: {e}"))),
            },
            None => None,
        };

        let deployment = if self.batch {
            None
        } else {
            sd.latest_deployment(&eval.namespace, &eval.job_id)
        };
        let input = reconcile::Input {
            job: job.as_deref(),
            batch: self.batch,
            deployments: !self.batch,
            deployment,
            allocs: &allocs,
            tainted: &tainted,
            eval,
            now: self.now,
        };
        let mut rrng = Rng::from_seed_parts(&[
            eval.id.as_bytes(),
            b"reconcile",
            &sd.revision().to_be_bytes(),
            &self.attempt.to_be_bytes(),
        ]);
        let group_count = runnable.as_ref().map_or(0, |j| j.task_groups.len());
        let mut rules: Vec<Option<GroupRules>> = (0..group_count).map(|_| None).collect();
        let mut selector = Selector::default();
        let results = {
            let c = &mut ctx;
            let mut in_place = job_rules.as_mut().map(|jr| InPlaceRules {
                job: jr,
                groups: &mut rules,
                selector: &mut selector,
                batch: self.batch,
                allocs: &allocs,
            });
            let mut decide = |a: &Arc<Allocation>, job: &Job, tg: &TaskGroup| {
                // A finished allocation of an older version (failed and not to
                // be rescheduled, or a completed batch run) is replaced when
                // its tasks changed and otherwise left alone, as Nomad's
                // computeUpdates does: an update can bring a failed group
                // back, as auto-revert relies on.
                if a.is_terminal() {
                    return if inplace::tasks_changed(c, a, job, tg) {
                        UpdateKind::Destructive
                    } else {
                        UpdateKind::Ignore
                    };
                }
                match in_place
                    .as_mut()
                    .and_then(|r| inplace::try_update(c, r, a, job, tg))
                {
                    Some(new) => UpdateKind::InPlace(Box::new(new)),
                    None => UpdateKind::Destructive,
                }
            };
            reconcile::reconcile(&input, &mut rrng, &mut decide)
        };

        for s in &results.stop {
            ctx.stop(&s.alloc, s.description, s.client_status, None);
        }
        for a in results.attribute_updates.iter().cloned() {
            ctx.update_attributes(a);
        }
        ctx.plan.deployment = results.deployment.clone();
        ctx.plan.deployment_updates = results.deployment_updates.clone();
        let mut deployment = results
            .active_deployment
            .clone()
            .filter(|d| d.status().is_active());
        self.deployment_id = deployment
            .as_ref()
            .map(|d| d.id.clone())
            .unwrap_or_default();

        self.queued.clear();
        self.failed.clear();
        if let Some(j) = &runnable {
            for tg in &j.task_groups {
                self.queued.insert(tg.name.clone(), 0);
            }
        }
        let mut placements: Vec<(Placement, bool)> = Vec::new();
        for a in &results.destructive {
            ctx.stop(a, ALLOC_UPDATING, None, None);
            placements.push((
                Placement {
                    name: a.name.clone(),
                    group: a.task_group.clone(),
                    previous: Some(a.clone()),
                    canary: false,
                    reschedule: false,
                    lost: false,
                    downgrade: false,
                },
                true,
            ));
        }
        for p in &results.place {
            let stop_prev = p.previous.is_some() && !p.lost;
            placements.push((p.clone(), stop_prev));
        }
        for (p, _) in &placements {
            *self.queued.entry(p.group.clone()).or_default() += 1;
        }

        let mut annotations = eval.annotate_plan.then(|| PlanAnnotations {
            desired_tg_updates: results.desired.clone(),
            preempted_allocs: Vec::new(),
        });
        let mut new_ids: HashSet<String, ShortKeyBuild> = HashSet::default();
        if let (Some(j), Some(jr)) = (&runnable, job_rules.as_mut()) {
            let preempt = match model::job_type(j) {
                JobType::Batch => ctx
                    .config
                    .preemption_config
                    .as_ref()
                    .is_some_and(|p| p.batch_scheduler_enabled),
                _ => ctx
                    .config
                    .preemption_config
                    .as_ref()
                    .is_some_and(|p| p.service_scheduler_enabled),
            };
            let mut canaries_placed = false;
            let mut stable_rules: StableRules = BTreeMap::new();
            for (p, stop_prev) in placements {
                let Some((ti, tg)) = j
                    .task_groups
                    .iter()
                    .enumerate()
                    .find(|(_, g)| g.name == p.group)
                else {
                    continue;
                };
                if let Some(m) = self.failed.get_mut(&tg.name) {
                    m.coalesced_failures += 1;
                    if stop_prev && let Some(prev) = &p.previous {
                        ctx.pop_stop(prev);
                    }
                    continue;
                }
                let stable = if p.downgrade {
                    downgrade::stable_version(sd, j, &tg.name, p.previous.as_deref())
                } else {
                    None
                };
                let stable_pair = match &stable {
                    Some(s) => {
                        stable_rules_for(&mut stable_rules, &mut ctx, s, ti, self.batch, &allocs)
                    }
                    None => None,
                };
                let (place_job, place_tg, jr, gr): (
                    &Job,
                    &TaskGroup,
                    &mut JobRules,
                    &mut GroupRules,
                ) = match (&stable, stable_pair) {
                    (Some(s), Some((sjr, sgr, stg))) => (&s.job, stg, sjr, sgr),
                    _ => {
                        if rules[ti].is_none() {
                            match GroupRules::new(&mut ctx, j, ti, tg, self.batch, &allocs) {
                                Ok(r) => rules[ti] = Some(r),
                                Err(e) => {
                                    return Ok(Step::Failed(format!("invalid job: {e}")));
                                }
                            }
                        }
                        let Some(gr) = rules[ti].as_mut() else {
                            continue;
                        };
                        (&**j, tg, &mut *jr, gr)
                    }
                };
                // The deployment of the older version a replacement runs, if it does.
                let stable_deployment = stable
                    .as_ref()
                    .filter(|_| !std::ptr::eq(place_job, &**j))
                    .map(|s| s.deployment_id.clone());
                let policy = model::reschedule_policy(model::job_type(j), tg);
                let mut penalty = Vec::new();
                if p.reschedule
                    && let Some(prev) = &p.previous
                {
                    let mut ids: Vec<&str> = vec![prev.node_id.as_str()];
                    if let Some(t) = &prev.reschedule_tracker {
                        ids.extend(t.events.iter().map(|e| e.prev_node_id.as_str()));
                    }
                    penalty = ids
                        .into_iter()
                        .filter_map(|id| ctx.table.find(id))
                        .collect();
                }
                let opts = SelectOptions {
                    penalty_nodes: penalty,
                    preempt,
                    priority: model::priority(place_job),
                };
                let (choice, mut metric) =
                    selector.select(&mut ctx, jr, gr, Source::Candidates, &opts);
                let Some(choice) = choice else {
                    // Availability per datacenter is reported with failures only, so
                    // placements do not each carry a copy of the map.
                    metric.nodes_available = ctx.nodes_available();
                    if stop_prev && let Some(prev) = &p.previous {
                        ctx.pop_stop(prev);
                    }
                    self.failed.insert(tg.name.clone(), metric);
                    continue;
                };
                let mut alloc = placement::build(
                    &mut ctx,
                    place_job,
                    place_tg,
                    gr,
                    &choice,
                    p.name.clone(),
                    metric,
                );
                if let Some(prev) = &p.previous {
                    alloc.previous_allocation = prev.id.clone();
                    if p.reschedule {
                        alloc.reschedule_tracker =
                            Some(reschedule::tracker_for_replacement(prev, &policy, self.now));
                    }
                }
                if let Some(id) = stable_deployment {
                    // It belongs to the version it runs, not to the canaries' deployment.
                    alloc.deployment_id = id;
                } else if let Some(d) = deployment.as_mut() {
                    alloc.deployment_id = d.id.clone();
                    if p.canary {
                        alloc.deployment_status = Some(AllocDeploymentStatus {
                            canary: true,
                            ..Default::default()
                        });
                        d.task_groups
                            .entry(tg.name.clone())
                            .or_default()
                            .placed_canaries
                            .push(alloc.id.clone());
                        canaries_placed = true;
                    }
                }
                self.preempt_for(
                    &mut ctx,
                    &mut alloc,
                    &choice.preempted,
                    annotations.as_mut(),
                    &tg.name,
                );
                new_ids.insert(alloc.id.clone());
                ctx.place(choice.node, alloc);
            }
            if canaries_placed {
                ctx.plan.deployment = deployment.clone();
            }
        }
        ctx.plan.annotations = annotations;
        self.eligibility = ctx.eligibility.clone();

        let delay_instead = !results.followup_evals.is_empty() && eval.wait_until_unix_ns == 0;
        if eval.status() != EvalStatus::Blocked
            && !self.failed.is_empty()
            && self.blocked.is_none()
            && !delay_instead
        {
            let b = evals::blocked_eval(
                eval,
                &mut self.rng,
                &ctx.eligibility,
                &self.failed,
                false,
                sd.revision(),
                self.now,
            );
            planner.create_eval(b.clone())?;
            self.blocked = Some(b);
        }
        if ctx.plan_is_noop() && !eval.annotate_plan {
            return Ok(Step::Done);
        }
        if !results.followup_evals.is_empty() && !self.followups_created {
            for mut e in results.followup_evals.iter().cloned() {
                e.snapshot_revision = sd.revision();
                planner.create_eval(e)?;
            }
            self.followups_created = true;
        }
        let plan = std::mem::take(&mut ctx.plan);
        drop(ctx);
        let expected = count_allocs(&plan.node_allocation);
        let outcome = planner.submit_plan(plan)?;
        let result = outcome.result;
        let progress = !result.node_update.is_empty()
            || !result.node_allocation.is_empty()
            || result.deployment.is_some()
            || !result.deployment_updates.is_empty();
        for list in result.node_allocation.values() {
            for a in &list.allocs {
                if new_ids.contains(&a.id)
                    && let Some(q) = self.queued.get_mut(&a.task_group)
                {
                    *q -= 1;
                }
            }
        }
        if let Some(s) = outcome.refreshed {
            return Ok(Step::Retry {
                progress,
                refreshed: Some(s),
            });
        }
        if count_allocs(&result.node_allocation) < expected {
            return Err(SchedulerError::MissingRefresh);
        }
        Ok(Step::Done)
    }

    fn preempt_for(
        &mut self,
        ctx: &mut EvalContext<'_>,
        alloc: &mut Allocation,
        preempted: &[Arc<Allocation>],
        annotations: Option<&mut PlanAnnotations>,
        group: &str,
    ) {
        preempt_into_plan(ctx, alloc, preempted, annotations, group, self.now);
    }
}

/// Records evictions for a placement: plan preemptions, links, evals for the
/// jobs that lose allocations, annotations.
pub(crate) fn preempt_into_plan(
    ctx: &mut EvalContext<'_>,
    alloc: &mut Allocation,
    preempted: &[Arc<Allocation>],
    annotations: Option<&mut PlanAnnotations>,
    group: &str,
    now: i64,
) {
    if preempted.is_empty() {
        return;
    }
    for e in preempted {
        ctx.preempt(e, &alloc.id);
        alloc.preempted_allocations.push(e.id.clone());
        let has_eval = ctx
            .plan
            .evals
            .iter()
            .any(|x| x.job_id == e.job_id && x.namespace == e.namespace);
        if !has_eval {
            let other = ctx.state.job(&e.namespace, &e.job_id);
            let id = ctx.rng.uuid();
            ctx.plan.evals.push(Evaluation {
                id,
                namespace: e.namespace.clone(),
                priority: other
                    .as_ref()
                    .map_or(model::DEFAULT_PRIORITY, |j| model::priority(j)),
                r#type: other.as_ref().map_or("service".to_string(), |j| {
                    model::job_type(j).nomad_name().to_string()
                }),
                triggered_by: caravan_model::trigger::PREEMPTION.into(),
                job_id: e.job_id.clone(),
                status: EvalStatus::Pending as i32,
                snapshot_revision: ctx.state.revision(),
                create_time_unix_ns: now,
                modify_time_unix_ns: now,
                ..Default::default()
            });
        }
    }
    if let Some(a) = annotations {
        a.desired_tg_updates
            .entry(group.to_string())
            .or_default()
            .preemptions += preempted.len() as u64;
        for e in preempted {
            let mut stub = (**e).clone();
            stub.preempted_by_allocation = alloc.id.clone();
            a.preempted_allocs.push(stub);
        }
    }
}

/// Rules of older job versions for non-canary replacements, by (version, group index).
type StableRules = BTreeMap<(u64, usize), (JobRules, GroupRules)>;

/// The rules to place a replacement with an older job version, built on first
/// use; `None` when that version's rules do not compile (the current version
/// is used instead).
fn stable_rules_for<'r>(
    cache: &'r mut StableRules,
    ctx: &mut EvalContext<'_>,
    stable: &'r StableVersion,
    group_index: usize,
    batch: bool,
    allocs: &[Arc<Allocation>],
) -> Option<(&'r mut JobRules, &'r mut GroupRules, &'r TaskGroup)> {
    let tg = stable
        .job
        .task_groups
        .iter()
        .find(|g| Some(g.name.as_str()) == ctx.group_name(group_index))?;
    let (jr, gr) = match cache.entry((stable.job.version, group_index)) {
        std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::btree_map::Entry::Vacant(e) => {
            let jr = JobRules::new(ctx, &stable.job, allocs).ok()?;
            let gr = GroupRules::new(ctx, &stable.job, group_index, tg, batch, allocs).ok()?;
            e.insert((jr, gr))
        }
    };
    Some((jr, gr, tg))
}

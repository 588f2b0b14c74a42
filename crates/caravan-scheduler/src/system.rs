//! The system and sysbatch schedulers: one allocation per feasible node.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use caravan_model::AllocExt;
use caravan_proto::{
    AllocClientStatus, AllocMetric, Allocation, DesiredUpdates, EvalStatus, Evaluation, Job,
    NodeStatus, PlanAnnotations,
};

use crate::context::{Eligibility, EvalContext, ShortKeyBuild, count_allocs};
use crate::error::SchedulerError;
use crate::evals::{self, FinalStatus};
use crate::feasible::node_in_job_scope;
use crate::generic::{Step, preempt_into_plan};
use crate::inplace::{self, InPlaceRules};
use crate::planner::Planner;
use crate::rank::{GroupRules, JobRules};
use crate::reconcile::{ALLOC_LOST, ALLOC_MIGRATING, ALLOC_NOT_NEEDED, ALLOC_UPDATING, filter};
use crate::rng::Rng;
use crate::select::{SelectOptions, Selector, Source};
use crate::state::State;
use crate::{model, placement, validate};

/// Plan attempts without progress (system).
pub const MAX_SYSTEM_ATTEMPTS: u32 = 5;
/// Plan attempts without progress (sysbatch).
pub const MAX_SYSBATCH_ATTEMPTS: u32 = 2;

struct Run<'e> {
    eval: &'e Evaluation,
    sysbatch: bool,
    now: i64,
    attempt: u32,
    rng: Rng,
    queued: BTreeMap<String, i64>,
    failed: BTreeMap<String, AllocMetric>,
    blocked: Option<Evaluation>,
    next_eval: Option<Evaluation>,
    eligibility: Eligibility,
}

/// One allocation to place on one node.
struct NodePlacement {
    node: u32,
    group: usize,
    name: String,
    previous: Option<Arc<Allocation>>,
    stop_prev: bool,
}

/// Processes a system or sysbatch evaluation.
pub fn process<P: Planner>(
    eval: &Evaluation,
    state: P::State,
    planner: &mut P,
    now: i64,
) -> Result<(), SchedulerError> {
    let sysbatch = eval.r#type == "sysbatch";
    let mut run = Run {
        eval,
        sysbatch,
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
        next_eval: None,
        eligibility: Eligibility::default(),
    };
    if !caravan_model::trigger::KNOWN.contains(&eval.triggered_by.as_str()) {
        let desc = format!(
            "scheduler cannot handle {:?} evaluation reason",
            eval.triggered_by
        );
        return run.finish(planner, &state, EvalStatus::Failed, desc);
    }
    let limit = if sysbatch {
        MAX_SYSBATCH_ATTEMPTS
    } else {
        MAX_SYSTEM_ATTEMPTS
    };
    let mut state = state;
    let mut without_progress = 0;
    loop {
        if without_progress >= limit {
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
                next_eval: self
                    .next_eval
                    .as_ref()
                    .map(|e| e.id.clone())
                    .unwrap_or_default(),
                blocked_eval: self
                    .blocked
                    .as_ref()
                    .map(|b| b.id.clone())
                    .unwrap_or_default(),
                failed: self.failed.clone(),
                queued: self.queued.clone(),
                deployment_id: String::new(),
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
        let runnable: Option<Arc<Job>> = job.clone().filter(|j| !j.stop);
        let allocs = sd.allocs_by_job(&eval.namespace, &eval.job_id);
        let tainted = filter::tainted_nodes(sd, &allocs);
        // Scope filtering happens inside the node table's single pass.
        let nodes = match &runnable {
            Some(_) => sd.ready_nodes(),
            None => Vec::new(),
        };
        let mut ctx = EvalContext::new(sd, eval, job.clone(), nodes, self.now, self.attempt);
        ctx.count_existing(&allocs);
        let mut desired: BTreeMap<String, DesiredUpdates> = BTreeMap::new();
        self.queued.clear();
        self.failed.clear();

        // Allocations on tainted nodes, and live allocations by (node, name).
        let mut live: BTreeMap<(String, String), Arc<Allocation>> = BTreeMap::new();
        let mut terminal: BTreeMap<(String, String), Arc<Allocation>> = BTreeMap::new();
        for a in &allocs {
            let key = (a.node_id.clone(), a.name.clone());
            if a.is_terminal() {
                let newer = terminal.get(&key).is_none_or(|t| {
                    (t.create_time_unix_ns, &t.id) < (a.create_time_unix_ns, &a.id)
                });
                if newer {
                    terminal.insert(key, a.clone());
                }
                continue;
            }
            let d = desired.entry(a.task_group.clone()).or_default();
            if let Some(node) = tainted.get(&a.node_id) {
                match node {
                    Some(n)
                        if !matches!(n.status(), NodeStatus::Down | NodeStatus::Disconnected) =>
                    {
                        let ignore_system = n
                            .drain_strategy
                            .as_ref()
                            .is_some_and(|s| s.ignore_system_jobs);
                        if ignore_system && runnable.is_some() {
                            d.ignore += 1;
                        } else {
                            d.migrate += 1;
                            ctx.stop(a, ALLOC_MIGRATING, None, None);
                        }
                    }
                    _ => {
                        d.stop += 1;
                        ctx.stop(a, ALLOC_LOST, Some(AllocClientStatus::Lost), None);
                    }
                }
                continue;
            }
            if live.contains_key(&key) {
                d.stop += 1;
                ctx.stop(a, ALLOC_NOT_NEEDED, None, None);
                continue;
            }
            live.insert(key, a.clone());
        }

        let mut updates: Vec<(Arc<Allocation>, u32, usize)> = Vec::new();
        for ((node_id, _), a) in &live {
            let d = desired.entry(a.task_group.clone()).or_default();
            let Some(j) = &runnable else {
                d.stop += 1;
                ctx.stop(a, ALLOC_NOT_NEEDED, None, None);
                continue;
            };
            let Some(gi) = j.task_groups.iter().position(|g| g.name == a.task_group) else {
                d.stop += 1;
                ctx.stop(a, ALLOC_NOT_NEEDED, None, None);
                continue;
            };
            let Some(idx) = ctx.table.find(node_id) else {
                // The node no longer takes placements: stop if it left the job's
                // scope, keep the allocation if it is merely ineligible.
                let out_of_scope = sd.node(node_id).is_none_or(|n| !node_in_job_scope(j, &n));
                if out_of_scope {
                    d.stop += 1;
                    ctx.stop(a, ALLOC_NOT_NEEDED, None, None);
                } else {
                    d.ignore += 1;
                }
                continue;
            };
            if a.job_version == j.version {
                d.ignore += 1;
            } else {
                updates.push((a.clone(), idx, gi));
            }
        }

        let mut place: Vec<NodePlacement> = Vec::new();
        let mut job_rules: Option<JobRules> = None;
        let group_count = runnable.as_ref().map_or(0, |j| j.task_groups.len());
        let mut rules: Vec<Option<GroupRules>> = (0..group_count).map(|_| None).collect();
        let mut selector = Selector::default();
        if let Some(j) = &runnable {
            // In-place where possible; the rest are rolling destructive updates.
            let mut destructive: Vec<(Arc<Allocation>, u32, usize)> = Vec::new();
            if !updates.is_empty() {
                match JobRules::new(&mut ctx, j, &allocs) {
                    Ok(r) => job_rules = Some(r),
                    Err(e) => return Ok(Step::Failed(format!("invalid job: {e}"))),
                }
            }
            for (a, idx, gi) in updates {
                let tg = &j.task_groups[gi];
                let updated = job_rules.as_mut().and_then(|jr| {
                    let mut r = InPlaceRules {
                        job: jr,
                        groups: &mut rules,
                        selector: &mut selector,
                        batch: true,
                        allocs: &allocs,
                    };
                    inplace::try_update(&mut ctx, &mut r, &a, j, tg)
                });
                let d = desired.entry(tg.name.clone()).or_default();
                if updated.is_some() {
                    d.in_place_update += 1;
                } else {
                    destructive.push((a, idx, gi));
                }
            }
            let limit = j
                .update
                .as_ref()
                .filter(|u| u.max_parallel > 0)
                .map_or(usize::MAX, |u| u.max_parallel as usize);
            let stagger = j.update.as_ref().map_or(0, |u| u.stagger_ns);
            if destructive.len() > limit && self.next_eval.is_none() {
                let mut next = eval.clone();
                next.id = self.rng.uuid();
                next.triggered_by = caravan_model::trigger::ROLLING_UPDATE.into();
                next.status = EvalStatus::Pending as i32;
                next.status_description = String::new();
                next.previous_eval = eval.id.clone();
                next.wait_until_unix_ns = self.now.saturating_add(stagger);
                next.next_eval = String::new();
                next.blocked_eval = String::new();
                next.failed_tg_allocs.clear();
                next.queued_allocations.clear();
                next.snapshot_revision = sd.revision();
                next.create_time_unix_ns = self.now;
                next.modify_time_unix_ns = self.now;
                planner.create_eval(next.clone())?;
                self.next_eval = Some(next);
            }
            for (n, (a, idx, gi)) in destructive.into_iter().enumerate() {
                let d = desired.entry(j.task_groups[gi].name.clone()).or_default();
                if n >= limit {
                    d.ignore += 1;
                    continue;
                }
                d.destructive_update += 1;
                ctx.stop(&a, ALLOC_UPDATING, None, None);
                place.push(NodePlacement {
                    node: idx,
                    group: gi,
                    name: a.name.clone(),
                    previous: Some(a),
                    stop_prev: true,
                });
            }
            // Missing allocations on every candidate node.
            let kept: BTreeSet<(String, String)> = live
                .keys()
                .cloned()
                .chain(
                    place
                        .iter()
                        .map(|p| (ctx.table.node(p.node).id.clone(), p.name.clone())),
                )
                .collect();
            for idx in 0..ctx.candidates.len() as u32 {
                for (gi, tg) in j.task_groups.iter().enumerate() {
                    let name = caravan_model::alloc_name(&j.id, &tg.name, 0);
                    let key = (ctx.table.node(idx).id.clone(), name.clone());
                    if kept.contains(&key) {
                        continue;
                    }
                    let previous = terminal.get(&key).cloned();
                    if self.sysbatch
                        && let Some(t) = &previous
                        && t.job_version == j.version
                    {
                        desired.entry(tg.name.clone()).or_default().ignore += 1;
                        continue;
                    }
                    desired.entry(tg.name.clone()).or_default().place += 1;
                    place.push(NodePlacement {
                        node: idx,
                        group: gi,
                        name,
                        previous,
                        stop_prev: false,
                    });
                }
            }
            for tg in &j.task_groups {
                self.queued.insert(tg.name.clone(), 0);
            }
            for p in &place {
                *self
                    .queued
                    .entry(j.task_groups[p.group].name.clone())
                    .or_default() += 1;
            }
        }

        let mut annotations = eval.annotate_plan.then(|| PlanAnnotations {
            desired_tg_updates: desired.clone(),
            preempted_allocs: Vec::new(),
        });
        let mut new_ids: HashSet<String, ShortKeyBuild> = HashSet::default();
        if let Some(j) = &runnable
            && !place.is_empty()
        {
            let mut jr = match job_rules.take() {
                Some(r) => r,
                None => match JobRules::new(&mut ctx, j, &allocs) {
                    Ok(r) => r,
                    Err(e) => return Ok(Step::Failed(format!("invalid job: {e}"))),
                },
            };
            let pc = ctx.config.preemption_config;
            let preempt = match &pc {
                None => !self.sysbatch,
                Some(p) if self.sysbatch => p.sysbatch_scheduler_enabled,
                Some(p) => p.system_scheduler_enabled,
            };
            for p in place {
                let tg = &j.task_groups[p.group];
                if rules[p.group].is_none() {
                    match GroupRules::new(&mut ctx, j, p.group, tg, true, &allocs) {
                        Ok(r) => rules[p.group] = Some(r),
                        Err(e) => return Ok(Step::Failed(format!("invalid job: {e}"))),
                    }
                }
                let Some(gr) = rules[p.group].as_mut() else {
                    continue;
                };
                let opts = SelectOptions {
                    penalty_nodes: Vec::new(),
                    preempt,
                    priority: model::priority(j),
                };
                let (choice, mut metric) =
                    selector.select(&mut ctx, &mut jr, gr, Source::One(p.node), &opts);
                let Some(choice) = choice else {
                    // An allocation whose node no longer takes the job stays
                    // stopped; one that merely does not fit keeps running.
                    if p.stop_prev
                        && metric.nodes_filtered == 0
                        && let Some(prev) = &p.previous
                    {
                        ctx.pop_stop(prev);
                    }
                    if metric.nodes_filtered > 0 {
                        // The node does not match the job's constraints: not a failure.
                        if let Some(q) = self.queued.get_mut(&tg.name) {
                            *q -= 1;
                        }
                        if let Some(a) = annotations.as_mut()
                            && let Some(d) = a.desired_tg_updates.get_mut(&tg.name)
                        {
                            d.place = d.place.saturating_sub(1);
                        }
                        continue;
                    }
                    match self.failed.get_mut(&tg.name) {
                        Some(m) => m.coalesced_failures += 1,
                        None => {
                            metric.nodes_available = ctx.nodes_available();
                            self.failed.insert(tg.name.clone(), metric);
                        }
                    }
                    continue;
                };
                let mut alloc =
                    placement::build(&mut ctx, j, tg, gr, &choice, p.name.clone(), metric);
                if let Some(prev) = &p.previous {
                    alloc.previous_allocation = prev.id.clone();
                }
                preempt_into_plan(
                    &mut ctx,
                    &mut alloc,
                    &choice.preempted,
                    annotations.as_mut(),
                    &tg.name,
                    self.now,
                );
                new_ids.insert(alloc.id.clone());
                ctx.place(choice.node, alloc);
            }
        }
        ctx.plan.annotations = annotations;
        self.eligibility = ctx.eligibility.clone();
        if !self.failed.is_empty() && self.blocked.is_none() && eval.status() != EvalStatus::Blocked
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
}

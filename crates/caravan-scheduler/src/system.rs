//! The system and sysbatch schedulers: one allocation per feasible node.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use caravan_proto::{
    AllocClientStatus, Allocation, DesiredUpdates, EvalStatus, Evaluation, NodeStatus,
    PlanAnnotations,
};

use crate::attempt::{CandidateOrder, JobSnapshot};
use crate::context::ShortKeyBuild;
use crate::error::SchedulerError;
use crate::feasible::node_in_job_scope;
use crate::inplace::{self, InPlaceRules};
use crate::planner::Planner;
use crate::preempt;
use crate::rank::{GroupRules, JobRules};
use crate::reconcile::{ALLOC_LOST, ALLOC_MIGRATING, ALLOC_NOT_NEEDED, ALLOC_UPDATING};
use crate::retry::{self, EvalRun, RetryPolicy, Scheduler, Step};
use crate::select::{SelectOptions, Selector, Source};
use crate::state::State;
use crate::{model, placement};

/// Plan attempts without progress (system).
pub const MAX_SYSTEM_ATTEMPTS: u32 = 5;
/// Plan attempts without progress (sysbatch).
pub const MAX_SYSBATCH_ATTEMPTS: u32 = 2;

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
    let policy = RetryPolicy {
        max_attempts: if sysbatch {
            MAX_SYSBATCH_ATTEMPTS
        } else {
            MAX_SYSTEM_ATTEMPTS
        },
        block_when_exhausted: false,
        reblock: false,
    };
    retry::process(
        &mut SystemScheduler { sysbatch },
        &policy,
        eval,
        state,
        planner,
        now,
    )
}

/// The system scheduler of one evaluation.
struct SystemScheduler {
    /// Sysbatch semantics: an allocation that finished on the current version
    /// is not placed again.
    sysbatch: bool,
}

impl Scheduler for SystemScheduler {
    fn attempt<P: Planner>(
        &mut self,
        run: &mut EvalRun<'_>,
        state: &P::State,
        planner: &mut P,
    ) -> Result<Step<P::State>, SchedulerError> {
        let eval = run.eval;
        let sd: &dyn State = state;
        let snapshot = match JobSnapshot::read(sd, run) {
            Ok(s) => s,
            Err(refusal) => return Ok(Step::Failed(refusal)),
        };
        let mut ctx = snapshot.context(sd, run, CandidateOrder::ById);
        let JobSnapshot {
            runnable,
            allocs,
            tainted,
            ..
        } = snapshot;
        let mut desired: BTreeMap<String, DesiredUpdates> = BTreeMap::new();
        run.queued.clear();
        run.failed.clear();

        // Allocations on tainted nodes, and live allocations by (node, name).
        let mut live: BTreeMap<(String, String), Arc<Allocation>> = BTreeMap::new();
        let mut terminal: BTreeMap<(String, String), Arc<Allocation>> = BTreeMap::new();
        for a in &allocs {
            let key = (a.node_id.clone(), a.name.clone());
            if model::terminal(a) {
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
            if destructive.len() > limit && run.next_eval.is_none() {
                let mut next = eval.clone();
                next.id = run.rng.uuid();
                next.triggered_by = "rolling-update".into();
                next.status = EvalStatus::Pending as i32;
                next.status_description = String::new();
                next.previous_eval = eval.id.clone();
                next.wait_until_unix_ns = run.now.saturating_add(stagger);
                next.next_eval = String::new();
                next.blocked_eval = String::new();
                next.failed_tg_allocs.clear();
                next.queued_allocations.clear();
                next.snapshot_revision = sd.revision();
                next.create_time_unix_ns = run.now;
                next.modify_time_unix_ns = run.now;
                planner.create_eval(next.clone())?;
                run.next_eval = Some(next);
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
                    let name = model::alloc_name(&j.id, &tg.name, 0);
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
                run.queued.insert(tg.name.clone(), 0);
            }
            for p in &place {
                *run.queued
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
                        if let Some(q) = run.queued.get_mut(&tg.name) {
                            *q -= 1;
                        }
                        if let Some(a) = annotations.as_mut()
                            && let Some(d) = a.desired_tg_updates.get_mut(&tg.name)
                        {
                            d.place = d.place.saturating_sub(1);
                        }
                        continue;
                    }
                    match run.failed.get_mut(&tg.name) {
                        Some(m) => m.coalesced_failures += 1,
                        None => {
                            metric.nodes_available = ctx.nodes_available();
                            run.failed.insert(tg.name.clone(), metric);
                        }
                    }
                    continue;
                };
                let mut alloc =
                    placement::build(&mut ctx, j, tg, gr, &choice, p.name.clone(), metric);
                if let Some(prev) = &p.previous {
                    alloc.previous_allocation = prev.id.clone();
                }
                preempt::record_evictions(
                    &mut ctx,
                    &mut alloc,
                    &choice.preempted,
                    annotations.as_mut(),
                    &tg.name,
                    run.now,
                );
                new_ids.insert(alloc.id.clone());
                ctx.place(choice.node, alloc);
            }
        }
        ctx.plan.annotations = annotations;
        run.eligibility = ctx.eligibility.clone();
        run.block_failed_placements(planner, sd.revision())?;
        if run.nothing_to_submit(&ctx) {
            return Ok(Step::Done);
        }
        run.submit(planner, ctx, &new_ids)
    }
}

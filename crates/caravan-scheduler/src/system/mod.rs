//! The system and sysbatch schedulers: one allocation per feasible node.
//!
//! An attempt runs the phases of Nomad's system scheduler: read the job and its
//! allocations, sort them by node ([`diff`]), update older versions in place
//! or roll them destructively `max_parallel` at a time, queue an allocation on
//! every candidate node that misses one, place each on its node
//! ([`placements`]), then hand the plan on through the shared tail in
//! [`crate::retry`].

mod diff;
mod placements;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use caravan_proto::{DesiredUpdates, EvalStatus, Evaluation, Job, PlanAnnotations};

use crate::attempt::{AttemptRules, CandidateOrder, JobSnapshot};
use crate::context::EvalContext;
use crate::error::SchedulerError;
use crate::inplace;
use crate::planner::Planner;
use crate::rank::JobRules;
use crate::reconcile::ALLOC_UPDATING;
use crate::retry::{self, EvalRun, RetryPolicy, Scheduler, Step};
use crate::state::State;
use diff::{ExistingAllocs, Outdated};
use placements::{NodePlacement, PlacementInput};

/// Plan attempts without progress (system).
pub const MAX_SYSTEM_ATTEMPTS: u32 = 5;
/// Plan attempts without progress (sysbatch).
pub const MAX_SYSBATCH_ATTEMPTS: u32 = 2;

/// Per task group: what the attempt decided, for annotations.
type Desired = BTreeMap<String, DesiredUpdates>;

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
        let state: &dyn State = state;
        let snapshot = match JobSnapshot::read(state, run) {
            Ok(s) => s,
            Err(refusal) => return Ok(Step::Failed(refusal)),
        };
        let mut ctx = snapshot.context(state, run, CandidateOrder::ById);
        let mut desired = Desired::new();
        run.queued.clear();
        run.failed.clear();

        let existing = diff::diff_allocs(&mut ctx, &snapshot, &mut desired);
        let outdated = diff::outdated_allocs(&mut ctx, &snapshot, &existing.live, &mut desired);
        let mut rules = AttemptRules::new(None, snapshot.group_count());
        let mut queue: Vec<NodePlacement> = Vec::new();
        if let Some(job) = &snapshot.runnable {
            let mut phase = JobPhase {
                ctx: &mut ctx,
                rules: &mut rules,
                snapshot: &snapshot,
                job,
                desired: &mut desired,
                queue: &mut queue,
            };
            let destructive = match phase.update_in_place(outdated) {
                Ok(d) => d,
                Err(reason) => return Ok(Step::Failed(reason)),
            };
            phase.roll_destructive(run, planner, destructive)?;
            phase.place_missing(&existing, self.sysbatch);
            queue_counts(run, job, &queue);
        }

        let mut annotations = run.eval.annotate_plan.then(|| PlanAnnotations {
            desired_tg_updates: desired.clone(),
            preempted_allocs: Vec::new(),
        });
        let placed = match &snapshot.runnable {
            Some(job) if !queue.is_empty() => {
                let input = PlacementInput {
                    job,
                    allocs: &snapshot.allocs,
                    sysbatch: self.sysbatch,
                };
                match placements::compute_placements(
                    &mut ctx,
                    &mut rules,
                    input,
                    queue,
                    annotations.as_mut(),
                    run,
                ) {
                    Ok(placed) => placed,
                    Err(reason) => return Ok(Step::Failed(reason)),
                }
            }
            _ => HashSet::default(),
        };
        ctx.plan.annotations = annotations;
        run.eligibility = ctx.eligibility.clone();
        run.block_failed_placements(planner, state.revision())?;
        if run.nothing_to_submit(&ctx) {
            return Ok(Step::Done);
        }
        run.submit(planner, ctx, &placed)
    }
}

/// The phases of an attempt that need the job to run: updates and the
/// placements they and the missing allocations queue.
struct JobPhase<'p, 'c> {
    ctx: &'p mut EvalContext<'c>,
    rules: &'p mut AttemptRules,
    snapshot: &'p JobSnapshot,
    job: &'p Arc<Job>,
    desired: &'p mut Desired,
    queue: &'p mut Vec<NodePlacement>,
}

impl JobPhase<'_, '_> {
    /// Updates outdated allocations in place where their node still takes the
    /// new version; returns the rest, which need destructive updates. `Err`
    /// when the job's rules do not compile.
    fn update_in_place(&mut self, outdated: Vec<Outdated>) -> Result<Vec<Outdated>, String> {
        let mut destructive: Vec<Outdated> = Vec::new();
        if !outdated.is_empty() {
            match JobRules::new(self.ctx, self.job, &self.snapshot.allocs) {
                Ok(r) => self.rules.job = Some(r),
                Err(e) => return Err(format!("invalid job: {e}")),
            }
        }
        for u in outdated {
            let tg = &self.job.task_groups[u.group];
            let updated = self
                .rules
                .in_place(true, &self.snapshot.allocs)
                .and_then(|mut r| inplace::try_update(self.ctx, &mut r, &u.alloc, self.job, tg));
            let d = self.desired.entry(tg.name.clone()).or_default();
            if updated.is_some() {
                d.in_place_update += 1;
            } else {
                destructive.push(u);
            }
        }
        Ok(destructive)
    }

    /// Replaces outdated allocations at most the update's `max_parallel` at a
    /// time (the rest are left for a rolling-update evaluation after the
    /// stagger, created once per evaluation).
    fn roll_destructive<P: Planner>(
        &mut self,
        run: &mut EvalRun<'_>,
        planner: &mut P,
        destructive: Vec<Outdated>,
    ) -> Result<(), SchedulerError> {
        let update = self.job.update.as_ref();
        let limit = update
            .filter(|u| u.max_parallel > 0)
            .map_or(usize::MAX, |u| u.max_parallel as usize);
        let stagger = update.map_or(0, |u| u.stagger_ns);
        if destructive.len() > limit && run.next_eval.is_none() {
            create_rolling_eval(run, planner, stagger, self.ctx.state.revision())?;
        }
        for (n, u) in destructive.into_iter().enumerate() {
            let d = self
                .desired
                .entry(self.job.task_groups[u.group].name.clone())
                .or_default();
            if n >= limit {
                d.ignore += 1;
                continue;
            }
            d.destructive_update += 1;
            self.ctx.stop(&u.alloc, ALLOC_UPDATING, None, None);
            self.queue.push(NodePlacement {
                node: u.node,
                group: u.group,
                name: u.alloc.name.clone(),
                previous: Some(u.alloc),
                stop_prev: true,
            });
        }
        Ok(())
    }

    /// Queues an allocation of every group on every candidate node that has
    /// none, replacing the newest terminal one there; a sysbatch allocation
    /// that finished on the current version is not run again.
    fn place_missing(&mut self, existing: &ExistingAllocs, sysbatch: bool) {
        let ctx = &*self.ctx;
        let kept: BTreeSet<(String, String)> = existing
            .live
            .keys()
            .cloned()
            .chain(
                self.queue
                    .iter()
                    .map(|p| (ctx.table.node(p.node).id.clone(), p.name.clone())),
            )
            .collect();
        let job = self.job;
        for node in 0..ctx.candidates.len() as u32 {
            for (group, tg) in job.task_groups.iter().enumerate() {
                let name = caravan_model::alloc_name(&job.id, &tg.name, 0);
                let key = (ctx.table.node(node).id.clone(), name.clone());
                if kept.contains(&key) {
                    continue;
                }
                let previous = existing.terminal.get(&key).cloned();
                if sysbatch
                    && let Some(t) = &previous
                    && t.job_version == job.version
                {
                    self.desired.entry(tg.name.clone()).or_default().ignore += 1;
                    continue;
                }
                self.desired.entry(tg.name.clone()).or_default().place += 1;
                self.queue.push(NodePlacement {
                    node,
                    group,
                    name,
                    previous,
                    stop_prev: false,
                });
            }
        }
    }
}

/// Creates the rolling-update evaluation that continues a destructive update
/// after `stagger`.
fn create_rolling_eval<P: Planner>(
    run: &mut EvalRun<'_>,
    planner: &mut P,
    stagger: i64,
    revision: i64,
) -> Result<(), SchedulerError> {
    let eval = run.eval;
    let mut next = eval.clone();
    next.id = run.rng.uuid();
    next.triggered_by = caravan_model::trigger::ROLLING_UPDATE.into();
    next.status = EvalStatus::Pending as i32;
    next.status_description = String::new();
    next.previous_eval = eval.id.clone();
    next.wait_until_unix_ns = run.now.saturating_add(stagger);
    next.next_eval = String::new();
    next.blocked_eval = String::new();
    next.failed_tg_allocs.clear();
    next.queued_allocations.clear();
    next.snapshot_revision = revision;
    next.create_time_unix_ns = run.now;
    next.modify_time_unix_ns = run.now;
    planner.create_eval(next.clone())?;
    run.next_eval = Some(next);
    Ok(())
}

/// Every group of the job starts with nothing queued; each queued placement
/// counts toward its group.
fn queue_counts(run: &mut EvalRun<'_>, job: &Job, queue: &[NodePlacement]) {
    for tg in &job.task_groups {
        run.queued.insert(tg.name.clone(), 0);
    }
    for p in queue {
        *run.queued
            .entry(job.task_groups[p.group].name.clone())
            .or_default() += 1;
    }
}

//! What every scheduler shares around its attempts: the retry loop that gives up
//! after attempts without progress, submitting a plan and counting what it
//! placed, blocked evaluations for what did not fit, and the evaluation's final
//! status.

use std::collections::{BTreeMap, HashSet};

use caravan_proto::{AllocMetric, EvalStatus, Evaluation, Plan, PlanResult};

use crate::context::{Eligibility, EvalContext, ShortKeyBuild, count_allocs};
use crate::error::SchedulerError;
use crate::evals::{self, FinalStatus};
use crate::planner::Planner;
use crate::rng::Rng;
use crate::state::State;

/// How one attempt ended.
pub(crate) enum Step<S> {
    /// The evaluation is done: nothing to submit, or the whole plan committed.
    Done,
    /// Part of the plan was refused; try again, on the refreshed state if any.
    Retry {
        /// Whether the attempt committed anything.
        progress: bool,
        /// The fresher state to plan against.
        refreshed: Option<S>,
    },
    /// The evaluation cannot be processed; the reason becomes its description.
    Failed(String),
}

/// How long a scheduler keeps trying and what it leaves behind.
pub(crate) struct RetryPolicy {
    /// Attempts in a row without progress before the evaluation fails.
    pub max_attempts: u32,
    /// Whether running out of attempts leaves a blocked evaluation behind, so
    /// the placements are tried again once the cluster changes.
    pub block_when_exhausted: bool,
    /// Whether a blocked evaluation that still cannot place everything goes
    /// back into the blocked set instead of completing.
    pub reblock: bool,
}

/// A scheduler that processes an evaluation as a series of attempts.
pub(crate) trait Scheduler {
    /// One attempt against `state`: compute a plan and hand it to `planner`.
    fn attempt<P: Planner>(
        &mut self,
        run: &mut EvalRun<'_>,
        state: &P::State,
        planner: &mut P,
    ) -> Result<Step<P::State>, SchedulerError>;
}

/// What the processing of one evaluation keeps across its attempts.
pub(crate) struct EvalRun<'e> {
    /// The evaluation being processed.
    pub eval: &'e Evaluation,
    /// The time the scheduler was given.
    pub now: i64,
    /// Attempts made so far; seeds each attempt's generators.
    pub attempt: u32,
    /// Ids of the evaluations the scheduler creates (blocked, rolling).
    pub rng: Rng,
    /// Per group: placements still waiting after the last attempt.
    pub queued: BTreeMap<String, i64>,
    /// Per group: why placements failed in the last attempt.
    pub failed: BTreeMap<String, AllocMetric>,
    /// The blocked evaluation created for what did not fit.
    pub blocked: Option<Evaluation>,
    /// The rolling-update evaluation created to continue the update.
    pub next_eval: Option<Evaluation>,
    /// The deployment the placements joined.
    pub deployment_id: String,
    /// Class eligibility learnt by the last attempt, for blocked evaluations.
    pub eligibility: Eligibility,
    /// Whether the evaluation, a blocked one, goes back to the blocked set
    /// instead of completing when placements still fail.
    pub reblocks: bool,
    /// The completion a fully committed plan wrote with its allocations: the
    /// final write it matches is left out.
    pub completed_in_plan: Option<Evaluation>,
}

/// Processes `eval` with `scheduler`: attempts until one is done, fails, or
/// `policy.max_attempts` in a row make no progress; then writes the
/// evaluation's final status.
pub(crate) fn process<S: Scheduler, P: Planner>(
    scheduler: &mut S,
    policy: &RetryPolicy,
    eval: &Evaluation,
    state: P::State,
    planner: &mut P,
    now: i64,
) -> Result<(), SchedulerError> {
    let mut run = EvalRun::new(eval, &state, now);
    run.reblocks = policy.reblock && eval.status() == EvalStatus::Blocked;
    if !caravan_model::trigger::KNOWN.contains(&eval.triggered_by.as_str()) {
        let desc = format!(
            "scheduler cannot handle {:?} evaluation reason",
            eval.triggered_by
        );
        return run.finish(planner, &state, EvalStatus::Failed, desc);
    }
    let mut state = state;
    let mut without_progress = 0;
    loop {
        if without_progress >= policy.max_attempts {
            if policy.block_when_exhausted {
                run.create_blocked_eval(planner, true, state.revision())?;
            }
            let desc = format!("maximum attempts reached ({})", policy.max_attempts);
            return run.finish(planner, &state, EvalStatus::Failed, desc);
        }
        match scheduler.attempt(&mut run, &state, planner)? {
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
    if run.ends_in_reblock() {
        return run.reblock(planner, &state);
    }
    run.finish(planner, &state, EvalStatus::Complete, String::new())
}

impl<'e> EvalRun<'e> {
    fn new(eval: &'e Evaluation, state: &dyn State, now: i64) -> Self {
        Self {
            eval,
            now,
            attempt: 0,
            rng: Rng::from_seed_parts(&[
                eval.id.as_bytes(),
                b"evals",
                &state.revision().to_be_bytes(),
            ])
            .clocked(now),
            queued: BTreeMap::new(),
            failed: BTreeMap::new(),
            blocked: None,
            next_eval: None,
            deployment_id: String::new(),
            eligibility: Eligibility::default(),
            reblocks: false,
            completed_in_plan: None,
        }
    }

    /// Whether the evaluation ends put back among the blocked, not finished.
    fn ends_in_reblock(&self) -> bool {
        self.reblocks && !self.failed.is_empty()
    }

    /// The evaluation as it ends with `status`, `queued` still waiting, on
    /// the state at `revision`.
    fn final_eval(
        &self,
        status: EvalStatus,
        description: String,
        queued: BTreeMap<String, i64>,
        revision: i64,
    ) -> Evaluation {
        evals::finished(
            self.eval,
            FinalStatus {
                status: status as i32,
                description,
                next_eval: id_of(self.next_eval.as_ref()),
                blocked_eval: id_of(self.blocked.as_ref()),
                failed: self.failed.clone(),
                queued,
                deployment_id: self.deployment_id.clone(),
            },
            revision,
            self.now,
        )
    }

    /// The evaluation completed as it would be once `plan` committed in
    /// full: every new placement in it taken off the queue.
    fn completion_on_full_commit(
        &self,
        plan: &Plan,
        placed: &HashSet<String, ShortKeyBuild>,
        revision: i64,
    ) -> Evaluation {
        let mut queued = self.queued.clone();
        for a in plan.node_allocation.values().flat_map(|l| &l.allocs) {
            if placed.contains(&a.id)
                && let Some(q) = queued.get_mut(&a.task_group)
            {
                *q -= 1;
            }
        }
        self.final_eval(EvalStatus::Complete, String::new(), queued, revision)
    }

    /// Writes the evaluation's final status.
    fn finish<P: Planner>(
        &mut self,
        planner: &mut P,
        state: &P::State,
        status: EvalStatus,
        description: String,
    ) -> Result<(), SchedulerError> {
        let e = self.final_eval(status, description, self.queued.clone(), state.revision());
        if self.completed_in_plan.as_ref() == Some(&e) {
            // The plan's commit wrote exactly this already.
            return Ok(());
        }
        planner.update_eval(e)?;
        Ok(())
    }

    /// Puts the blocked evaluation being processed back into the blocked set,
    /// with what still fails.
    fn reblock<P: Planner>(&self, planner: &mut P, state: &P::State) -> Result<(), SchedulerError> {
        let mut e = self.eval.clone();
        e.escaped_computed_class = self.eligibility.escaped;
        e.class_eligibility = self.eligibility.classes.clone();
        e.failed_tg_allocs = self.failed.clone();
        e.queued_allocations = self.queued.clone();
        e.snapshot_revision = state.revision();
        planner.reblock_eval(e)?;
        Ok(())
    }

    /// Creates a blocked evaluation for the failed placements, after repeated
    /// plan conflicts when `plan_failure`.
    fn create_blocked_eval<P: Planner>(
        &mut self,
        planner: &mut P,
        plan_failure: bool,
        revision: i64,
    ) -> Result<(), SchedulerError> {
        let b = evals::blocked_eval(
            self.eval,
            &mut self.rng,
            &self.eligibility,
            &self.failed,
            plan_failure,
            revision,
            self.now,
        );
        planner.create_eval(b.clone())?;
        self.blocked = Some(b);
        Ok(())
    }

    /// Creates the blocked evaluation that waits for capacity when placements
    /// failed, once per evaluation; a blocked evaluation being processed is
    /// reblocked at the end instead.
    pub fn block_failed_placements<P: Planner>(
        &mut self,
        planner: &mut P,
        revision: i64,
    ) -> Result<(), SchedulerError> {
        if self.eval.status() == EvalStatus::Blocked
            || self.failed.is_empty()
            || self.blocked.is_some()
        {
            return Ok(());
        }
        self.create_blocked_eval(planner, false, revision)
    }

    /// Whether the attempt has nothing to hand on: an empty plan and no
    /// annotations asked for.
    pub fn nothing_to_submit(&self, ctx: &EvalContext<'_>) -> bool {
        ctx.plan_is_noop() && !self.eval.annotate_plan
    }

    /// Submits the attempt's plan and takes the committed placements (`placed`
    /// holds the ids of the new ones) off the queue. A partial commit retries
    /// on the refreshed state. Unless the evaluation ends in a reblock, the
    /// plan carries the evaluation's completion for a full commit to write.
    pub fn submit<P: Planner>(
        &mut self,
        planner: &mut P,
        mut ctx: EvalContext<'_>,
        placed: &HashSet<String, ShortKeyBuild>,
    ) -> Result<Step<P::State>, SchedulerError> {
        let plan = std::mem::take(&mut ctx.plan);
        let revision = ctx.state.revision();
        drop(ctx);
        let expected = count_allocs(&plan.node_allocation);
        let completion = (!self.ends_in_reblock())
            .then(|| self.completion_on_full_commit(&plan, placed, revision));
        let outcome = match completion.clone() {
            Some(c) => planner.submit_plan_completing(plan, c)?,
            None => planner.submit_plan(plan)?,
        };
        let result = outcome.result;
        if result.eval_revision > 0 {
            self.completed_in_plan = completion;
        }
        let progress = progress_made(&result);
        for list in result.node_allocation.values() {
            for a in &list.allocs {
                if placed.contains(&a.id)
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

/// Whether a plan result committed anything: stops, placements or deployment
/// changes.
fn progress_made(result: &PlanResult) -> bool {
    !result.node_update.is_empty()
        || !result.node_allocation.is_empty()
        || result.deployment.is_some()
        || !result.deployment_updates.is_empty()
}

fn id_of(eval: Option<&Evaluation>) -> String {
    eval.map(|e| e.id.clone()).unwrap_or_default()
}

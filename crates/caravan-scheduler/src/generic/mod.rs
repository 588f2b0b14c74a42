//! The generic scheduler for service and batch jobs.
//!
//! An attempt runs the phases of Nomad's generic scheduler: read the job and
//! its allocations, reconcile them with what the job wants
//! ([`GenericScheduler::compute_job_allocs`]), stage the reconciler's stops and
//! updates in the plan, queue the placements, pick a node for each
//! ([`placements::compute_placements`]), then hand the plan on through the
//! shared tail in [`crate::retry`].

mod placements;

use caravan_model::{AllocExt, DeploymentStatusExt};
use std::collections::HashSet;
use std::sync::Arc;

use caravan_proto::{Allocation, Deployment, Job, PlanAnnotations, TaskGroup};

use crate::attempt::{AttemptRules, CandidateOrder, JobSnapshot};
use crate::context::EvalContext;
use crate::error::SchedulerError;
use crate::inplace::{self, InPlaceRules};
use crate::planner::Planner;
use crate::rank::JobRules;
use crate::reconcile::{self, ALLOC_UPDATING, Placement, Results, UpdateKind};
use crate::retry::{self, EvalRun, RetryPolicy, Scheduler, Step};
use crate::rng::Rng;
use crate::state::State;
use placements::{PlacementInput, QueuedPlacement};

/// Plan attempts without progress before giving up (service).
pub const MAX_SERVICE_ATTEMPTS: u32 = 5;
/// Plan attempts without progress before giving up (batch).
pub const MAX_BATCH_ATTEMPTS: u32 = 2;

/// Processes a service or batch evaluation.
pub fn process<P: Planner>(
    eval: &caravan_proto::Evaluation,
    state: P::State,
    planner: &mut P,
    now: i64,
) -> Result<(), SchedulerError> {
    let batch = eval.r#type == "batch";
    let policy = RetryPolicy {
        max_attempts: if batch {
            MAX_BATCH_ATTEMPTS
        } else {
            MAX_SERVICE_ATTEMPTS
        },
        block_when_exhausted: true,
        reblock: true,
    };
    let mut scheduler = GenericScheduler {
        batch,
        followups_created: false,
    };
    retry::process(&mut scheduler, &policy, eval, state, planner, now)
}

/// The generic scheduler's state across the attempts of one evaluation.
struct GenericScheduler {
    /// Batch semantics: no deployments, and completed allocations are done.
    batch: bool,
    /// The reconciler's follow-up evaluations were created (once per evaluation).
    followups_created: bool,
}

impl Scheduler for GenericScheduler {
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
        let mut ctx = snapshot.context(state, run, CandidateOrder::Shuffled);
        let job_rules = match &snapshot.runnable {
            Some(job) => match JobRules::new(&mut ctx, job, &snapshot.allocs) {
                Ok(r) => Some(r),
                Err(e) => return Ok(Step::Failed(format!("invalid job: {e}"))),
            },
            None => None,
        };
        let mut rules = AttemptRules::new(job_rules, snapshot.group_count());

        let results = self.compute_job_allocs(&mut ctx, &snapshot, &mut rules, run);
        let deployment = stage_reconciled(&mut ctx, &results, run);
        let queue = queue_placements(&mut ctx, &results, snapshot.runnable.as_deref(), run);
        let mut annotations = run.eval.annotate_plan.then(|| PlanAnnotations {
            desired_tg_updates: results.desired.clone(),
            preempted_allocs: Vec::new(),
        });
        let input = PlacementInput {
            snapshot: &snapshot,
            batch: self.batch,
            now: run.now,
            deployment,
        };
        let placed = match placements::compute_placements(
            &mut ctx,
            &mut rules,
            input,
            queue,
            annotations.as_mut(),
            &mut run.failed,
        ) {
            Ok(placed) => placed,
            Err(reason) => return Ok(Step::Failed(reason)),
        };
        ctx.plan.annotations = annotations;
        run.eligibility = ctx.eligibility.clone();

        // Failures retried later by follow-up evaluations are not blocked on.
        let delay_instead = !results.followup_evals.is_empty() && run.eval.wait_until_unix_ns == 0;
        if !delay_instead {
            run.block_failed_placements(planner, state.revision())?;
        }
        if run.nothing_to_submit(&ctx) {
            return Ok(Step::Done);
        }
        self.create_followups(planner, &results, state.revision())?;
        run.submit(planner, ctx, &placed)
    }
}

impl GenericScheduler {
    /// Reconciles the job's allocations with what the job wants (Nomad's
    /// `computeJobAllocs`): what to stop, update in place or replace, and what
    /// to place.
    fn compute_job_allocs(
        &self,
        ctx: &mut EvalContext<'_>,
        snapshot: &JobSnapshot,
        rules: &mut AttemptRules,
        run: &EvalRun<'_>,
    ) -> Results {
        let eval = run.eval;
        let deployment = if self.batch {
            None
        } else {
            ctx.state.latest_deployment(&eval.namespace, &eval.job_id)
        };
        let input = reconcile::Input {
            job: snapshot.job.as_deref(),
            batch: self.batch,
            deployments: !self.batch,
            deployment,
            allocs: &snapshot.allocs,
            tainted: &snapshot.tainted,
            eval,
            now: run.now,
        };
        let mut rng = Rng::from_seed_parts(&[
            eval.id.as_bytes(),
            b"reconcile",
            &ctx.state.revision().to_be_bytes(),
            &run.attempt.to_be_bytes(),
        ])
        .clocked(run.now);
        let mut in_place = rules.in_place(self.batch, &snapshot.allocs);
        let mut decide = |a: &Arc<Allocation>, job: &Job, tg: &TaskGroup| {
            follow_update(ctx, in_place.as_mut(), a, job, tg)
        };
        reconcile::reconcile(&input, &mut rng, &mut decide)
    }

    /// Creates the reconciler's follow-up evaluations (delayed rescheduling),
    /// once per evaluation.
    fn create_followups<P: Planner>(
        &mut self,
        planner: &mut P,
        results: &Results,
        revision: i64,
    ) -> Result<(), SchedulerError> {
        if results.followup_evals.is_empty() || self.followups_created {
            return Ok(());
        }
        for mut e in results.followup_evals.iter().cloned() {
            e.snapshot_revision = revision;
            planner.create_eval(e)?;
        }
        self.followups_created = true;
        Ok(())
    }
}

/// How an allocation of an older job version follows the job.
///
/// A finished allocation of an older version (failed and not to be
/// rescheduled, or a completed batch run) is replaced when its tasks changed
/// and otherwise left alone, as Nomad's `computeUpdates` does: an update can
/// bring a failed group back, as auto-revert relies on. A running one is
/// updated in place when its node still takes the new version, else replaced.
fn follow_update(
    ctx: &mut EvalContext<'_>,
    in_place: Option<&mut InPlaceRules<'_>>,
    a: &Arc<Allocation>,
    job: &Job,
    tg: &TaskGroup,
) -> UpdateKind {
    if a.is_terminal() {
        return if inplace::tasks_changed(ctx, a, job, tg) {
            UpdateKind::Destructive
        } else {
            UpdateKind::Ignore
        };
    }
    match in_place.and_then(|r| inplace::try_update(ctx, r, a, job, tg)) {
        Some(new) => UpdateKind::InPlace(Box::new(new)),
        None => UpdateKind::Destructive,
    }
}

/// Stages the reconciler's stops, bookkeeping updates and deployment changes in
/// the plan; returns the active deployment new allocations join.
fn stage_reconciled(
    ctx: &mut EvalContext<'_>,
    results: &Results,
    run: &mut EvalRun<'_>,
) -> Option<Deployment> {
    for s in &results.stop {
        ctx.stop(&s.alloc, s.description, s.client_status, None);
    }
    for a in results.attribute_updates.iter().cloned() {
        ctx.update_attributes(a);
    }
    ctx.plan.deployment = results.deployment.clone();
    ctx.plan.deployment_updates = results.deployment_updates.clone();
    let deployment = results
        .active_deployment
        .clone()
        .filter(|d| d.status().is_active());
    run.deployment_id = deployment
        .as_ref()
        .map(|d| d.id.clone())
        .unwrap_or_default();
    join_deployment(ctx, results, &run.deployment_id);
    deployment
}

/// Allocations updated in place join the deployment of the version they now
/// run, their health to be judged again there, so that the deployment counts
/// them among its placements.
fn join_deployment(ctx: &mut EvalContext<'_>, results: &Results, deployment_id: &str) {
    if results.inplace.is_empty() {
        return;
    }
    let updated: HashSet<&str> = results.inplace.iter().map(|(_, n)| n.id.as_str()).collect();
    for list in ctx.plan.node_allocation.values_mut() {
        for a in &mut list.allocs {
            if a.deployment_id != deployment_id && updated.contains(a.id.as_str()) {
                a.deployment_id = deployment_id.to_string();
                a.deployment_status = None;
            }
        }
    }
}

/// Queues what the attempt places: replacements of destructively updated
/// allocations (whose stops are staged here) and the reconciler's placements;
/// every group of the job starts the attempt with nothing queued or failed.
fn queue_placements(
    ctx: &mut EvalContext<'_>,
    results: &Results,
    runnable: Option<&Job>,
    run: &mut EvalRun<'_>,
) -> Vec<QueuedPlacement> {
    run.queued.clear();
    run.failed.clear();
    if let Some(job) = runnable {
        for tg in &job.task_groups {
            run.queued.insert(tg.name.clone(), 0);
        }
    }
    let mut queue: Vec<QueuedPlacement> = Vec::new();
    for a in &results.destructive {
        ctx.stop(a, ALLOC_UPDATING, None, None);
        queue.push(QueuedPlacement {
            placement: Placement {
                name: a.name.clone(),
                group: a.task_group.clone(),
                previous: Some(a.clone()),
                canary: false,
                reschedule: false,
                lost: false,
                downgrade: false,
            },
            stops_previous: true,
        });
    }
    for p in &results.place {
        queue.push(QueuedPlacement {
            stops_previous: p.previous.is_some() && !p.lost,
            placement: p.clone(),
        });
    }
    for q in &queue {
        *run.queued.entry(q.placement.group.clone()).or_default() += 1;
    }
    queue
}

//! The system scheduler's placements: each queued allocation is checked and
//! fitted on its own node, and built into the plan with its evictions.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use caravan_proto::{AllocMetric, Allocation, Job, PlanAnnotations, TaskGroup};

use crate::attempt::AttemptRules;
use crate::context::{EvalContext, ShortKeyBuild};
use crate::rank::{GroupRules, JobRules};
use crate::retry::EvalRun;
use crate::select::{SelectOptions, Selector, Source};
use crate::{model, placement, preempt};

/// One allocation to place on one node.
pub(super) struct NodePlacement {
    /// The node's index in the context's table.
    pub node: u32,
    /// The task group's index in the job.
    pub group: usize,
    /// The allocation's name.
    pub name: String,
    /// The allocation it replaces.
    pub previous: Option<Arc<Allocation>>,
    /// Whether `previous` is stopped in the plan, a stop taken back when the
    /// replacement does not fit.
    pub stop_prev: bool,
}

/// What the placements read beyond the context and the rules.
pub(super) struct PlacementInput<'a> {
    /// The job to place.
    pub job: &'a Arc<Job>,
    /// Its allocations, for the rules' property counts.
    pub allocs: &'a [Arc<Allocation>],
    /// Sysbatch semantics (preemption is configured apart).
    pub sysbatch: bool,
}

/// Places the queued allocations on their nodes and builds them into the plan;
/// a node that does not match the job takes nothing off the queue's count and
/// is no failure. Returns the ids of the new allocations, or why the job's
/// rules do not compile.
pub(super) fn compute_placements(
    ctx: &mut EvalContext<'_>,
    rules: &mut AttemptRules,
    input: PlacementInput<'_>,
    queue: Vec<NodePlacement>,
    annotations: Option<&mut PlanAnnotations>,
    run: &mut EvalRun<'_>,
) -> Result<HashSet<String, ShortKeyBuild>, String> {
    let job_rules = match rules.job.take() {
        Some(r) => r,
        None => match JobRules::new(ctx, input.job, input.allocs) {
            Ok(r) => r,
            Err(e) => return Err(format!("invalid job: {e}")),
        },
    };
    let preempt = match &ctx.config.preemption_config {
        None => !input.sysbatch,
        Some(p) if input.sysbatch => p.sysbatch_scheduler_enabled,
        Some(p) => p.system_scheduler_enabled,
    };
    let mut pass = PlacementPass {
        ctx,
        job_rules,
        groups: &mut rules.groups,
        selector: &mut rules.selector,
        input,
        preempt,
        annotations,
        queued: &mut run.queued,
        failed: &mut run.failed,
        now: run.now,
        placed: HashSet::default(),
    };
    for p in queue {
        pass.place(p)?;
    }
    Ok(pass.placed)
}

/// One attempt's placement pass.
struct PlacementPass<'p, 'c> {
    ctx: &'p mut EvalContext<'c>,
    job_rules: JobRules,
    groups: &'p mut [Option<GroupRules>],
    selector: &'p mut Selector,
    input: PlacementInput<'p>,
    /// Whether placements may evict lower-priority allocations.
    preempt: bool,
    annotations: Option<&'p mut PlanAnnotations>,
    queued: &'p mut BTreeMap<String, i64>,
    failed: &'p mut BTreeMap<String, AllocMetric>,
    now: i64,
    /// Ids of the allocations placed.
    placed: HashSet<String, ShortKeyBuild>,
}

impl PlacementPass<'_, '_> {
    /// Places one allocation on its node, or records why it could not be.
    fn place(&mut self, p: NodePlacement) -> Result<(), String> {
        let job = self.input.job;
        let tg = &job.task_groups[p.group];
        if self.groups[p.group].is_none() {
            match GroupRules::new(self.ctx, job, p.group, tg, true, self.input.allocs) {
                Ok(r) => self.groups[p.group] = Some(r),
                Err(e) => return Err(format!("invalid job: {e}")),
            }
        }
        let Some(group_rules) = self.groups[p.group].as_mut() else {
            return Ok(());
        };
        let opts = SelectOptions {
            penalty_nodes: Vec::new(),
            preempt: self.preempt,
            priority: model::priority(job),
            // System jobs cannot ask for per-alloc volumes (validation refuses them).
            alloc_index: None,
        };
        let (choice, metric) = self.selector.select(
            self.ctx,
            &mut self.job_rules,
            group_rules,
            Source::One(p.node),
            &opts,
        );
        let Some(choice) = choice else {
            self.record_misfit(&p, tg, metric);
            return Ok(());
        };
        let mut alloc = placement::build(
            self.ctx,
            job,
            tg,
            group_rules,
            &choice,
            p.name.clone(),
            metric,
        );
        if let Some(prev) = &p.previous {
            alloc.previous_allocation = prev.id.clone();
        }
        preempt::record_evictions(
            self.ctx,
            &mut alloc,
            &choice.preempted,
            self.annotations.as_deref_mut(),
            &tg.name,
            self.now,
        );
        self.placed.insert(alloc.id.clone());
        self.ctx.place(choice.node, alloc);
        Ok(())
    }

    /// Records an allocation its node did not take. A node that does not match
    /// the job's constraints is no failure: the allocation leaves the queue and
    /// the annotations. One that does not fit is a failure of its group. An
    /// allocation being replaced stays stopped when its node no longer takes
    /// the job, and keeps running when the replacement merely does not fit.
    fn record_misfit(&mut self, p: &NodePlacement, tg: &TaskGroup, mut metric: AllocMetric) {
        if p.stop_prev
            && metric.nodes_filtered == 0
            && let Some(prev) = &p.previous
        {
            self.ctx.pop_stop(prev);
        }
        if metric.nodes_filtered > 0 {
            if let Some(q) = self.queued.get_mut(&tg.name) {
                *q -= 1;
            }
            if let Some(a) = self.annotations.as_mut()
                && let Some(d) = a.desired_tg_updates.get_mut(&tg.name)
            {
                d.place = d.place.saturating_sub(1);
            }
            return;
        }
        match self.failed.get_mut(&tg.name) {
            Some(m) => m.coalesced_failures += 1,
            None => {
                metric.nodes_available = self.ctx.nodes_available();
                self.failed.insert(tg.name.clone(), metric);
            }
        }
    }
}

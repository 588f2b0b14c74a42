//! In-place updates: an allocation of an older job version keeps running where
//! it is, on the new version, when nothing its tasks started with changed and
//! its node still takes the new version of its group.
//!
//! The node is checked the way a placement would be: the selection runs on
//! that node alone with the allocation's own stop staged (so it does not count
//! against itself), which re-runs the job, group and task constraints, the
//! drivers, `distinct_*` and the fit. Failing any of it makes the update
//! destructive.

use std::sync::Arc;

use caravan_proto::{Allocation, Job, NodeStatus, TaskGroup};

use crate::context::EvalContext;
use crate::feasible::node_in_job_scope;
use crate::model;
use crate::rank::{GroupRules, JobRules};
use crate::reconcile::ALLOC_UPDATING;
use crate::select::{SelectOptions, Selector, Source};

/// What an in-place check needs beyond the context, built once per attempt.
pub(crate) struct InPlaceRules<'r> {
    /// Job-level feasibility.
    pub job: &'r mut JobRules,
    /// Per task group of the job (by index), built on first use.
    pub groups: &'r mut [Option<GroupRules>],
    /// The selection state of the attempt.
    pub selector: &'r mut Selector,
    /// Whether the group rules see batch semantics.
    pub batch: bool,
    /// The job's allocations, for the group rules' property counts.
    pub allocs: &'r [Arc<Allocation>],
}

/// Whether `job`'s group `tg` changes the tasks `a` runs; unknown when the
/// allocation's version is no longer kept, which counts as unchanged.
pub(crate) fn tasks_changed(
    ctx: &EvalContext<'_>,
    a: &Allocation,
    job: &Job,
    tg: &TaskGroup,
) -> bool {
    ctx.state
        .job_version(&a.namespace, &a.job_id, a.job_version)
        .is_some_and(|old_job| {
            model::group(&old_job, &tg.name)
                .is_some_and(|old_tg| caravan_model::tasks_updated(&old_job, old_tg, job, tg))
        })
}

/// Updates `a` to `job`'s version of `tg` where it runs, when that is possible:
/// the change is not destructive, the node is ready and in the job's scope,
/// and the group is feasible on it and fits. The update is added to the plan
/// and returned; `None` means the update must be destructive.
pub(crate) fn try_update(
    ctx: &mut EvalContext<'_>,
    rules: &mut InPlaceRules<'_>,
    a: &Arc<Allocation>,
    job: &Job,
    tg: &TaskGroup,
) -> Option<Allocation> {
    let old_job = ctx
        .state
        .job_version(&a.namespace, &a.job_id, a.job_version)?;
    let old_tg = model::group(&old_job, &tg.name)?;
    if caravan_model::tasks_updated(&old_job, old_tg, job, tg) {
        return None;
    }
    let idx = ctx.node_index(&a.node_id)?;
    let node = ctx.table.node(idx);
    if node.status() != NodeStatus::Ready || !node_in_job_scope(job, node) {
        return None;
    }
    let group_index = job.task_groups.iter().position(|g| g.name == tg.name)?;
    if rules.groups.get(group_index)?.is_none() {
        let built = GroupRules::new(ctx, job, group_index, tg, rules.batch, rules.allocs).ok()?;
        rules.groups[group_index] = Some(built);
    }
    let group = rules.groups.get_mut(group_index)?.as_mut()?;
    // The allocation's own resources and its place in distinct_* counts are
    // what the new version takes over, so they must not count against it.
    let staged = !ctx.is_removed(a);
    if staged {
        ctx.stop(a, ALLOC_UPDATING, None, None);
    }
    let opts = SelectOptions {
        penalty_nodes: Vec::new(),
        preempt: false,
        priority: model::priority(job),
        alloc_index: caravan_model::alloc_index(&a.name),
    };
    let (choice, _) = rules
        .selector
        .select(ctx, rules.job, group, Source::One(idx), &opts);
    if staged {
        ctx.pop_stop(a);
    }
    choice?;
    let mut new = (**a).clone();
    new.eval_id = ctx.eval.id.clone();
    new.job_version = job.version;
    new.job_modify_revision = job.job_modify_revision;
    new.modify_time_unix_ns = ctx.now;
    ctx.update_in_place(a, new.clone());
    Some(new)
}

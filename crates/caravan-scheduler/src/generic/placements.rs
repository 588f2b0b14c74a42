//! The generic scheduler's placements (Nomad's `computePlacements`): for each
//! queued placement, the job version and rules it runs with, the selection
//! options, the node, and the allocation built into the plan with its
//! deployment, its link to what it replaces and its evictions.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use caravan_proto::{
    AllocDeploymentStatus, AllocMetric, Allocation, Deployment, Job, JobType, PlanAnnotations,
    ReschedulePolicy, TaskGroup,
};

use crate::attempt::{AttemptRules, JobSnapshot};
use crate::context::{EvalContext, ShortKeyBuild};
use crate::downgrade::{self, StableVersion};
use crate::rank::{GroupRules, JobRules};
use crate::reconcile::Placement;
use crate::select::{SelectOptions, Selector, Source};
use crate::{model, placement, preempt, reschedule};

/// A placement the reconciler asked for.
pub(super) struct QueuedPlacement {
    /// What to place.
    pub placement: Placement,
    /// Whether the allocation it replaces is stopped in the plan, a stop that
    /// is taken back when the placement fails.
    pub stops_previous: bool,
}

/// What the placements read beyond the context and the rules.
pub(super) struct PlacementInput<'a> {
    /// The job and its allocations.
    pub snapshot: &'a JobSnapshot,
    /// Batch semantics for the group rules.
    pub batch: bool,
    /// The time the scheduler was given.
    pub now: i64,
    /// The active deployment new allocations join; canaries are recorded in it.
    pub deployment: Option<Deployment>,
}

/// Places the queued placements in order and builds their allocations into the
/// plan; a group whose placement failed records the failure in `failed` and
/// coalesces its later ones. Returns the ids of the new allocations, or why a
/// group's rules do not compile.
pub(super) fn compute_placements(
    ctx: &mut EvalContext<'_>,
    rules: &mut AttemptRules,
    input: PlacementInput<'_>,
    queue: Vec<QueuedPlacement>,
    annotations: Option<&mut PlanAnnotations>,
    failed: &mut BTreeMap<String, AllocMetric>,
) -> Result<HashSet<String, ShortKeyBuild>, String> {
    let (Some(job), Some(job_rules)) = (&input.snapshot.runnable, rules.job.as_mut()) else {
        return Ok(HashSet::default());
    };
    let preempt = preemption_enabled(ctx, job);
    let mut pass = PlacementPass {
        ctx,
        selector: &mut rules.selector,
        rules: VersionedRules {
            job,
            job_rules,
            groups: &mut rules.groups,
            stable: StableRules::new(),
            allocs: &input.snapshot.allocs,
            batch: input.batch,
        },
        preempt,
        now: input.now,
        deployment: input.deployment,
        canaries_placed: false,
        annotations,
        failed,
        placed: HashSet::default(),
    };
    for queued in queue {
        pass.place(queued)?;
    }
    if pass.canaries_placed {
        pass.ctx.plan.deployment = pass.deployment;
    }
    Ok(pass.placed)
}

/// Whether the job's scheduler type may evict lower-priority allocations.
fn preemption_enabled(ctx: &EvalContext<'_>, job: &Job) -> bool {
    let config = ctx.config.preemption_config.as_ref();
    match model::job_type(job) {
        JobType::Batch => config.is_some_and(|p| p.batch_scheduler_enabled),
        _ => config.is_some_and(|p| p.service_scheduler_enabled),
    }
}

/// One attempt's placement pass.
struct PlacementPass<'p, 'c> {
    ctx: &'p mut EvalContext<'c>,
    selector: &'p mut Selector,
    rules: VersionedRules<'p>,
    /// Whether placements may evict lower-priority allocations.
    preempt: bool,
    now: i64,
    deployment: Option<Deployment>,
    /// A canary joined the deployment, which the plan then carries.
    canaries_placed: bool,
    annotations: Option<&'p mut PlanAnnotations>,
    failed: &'p mut BTreeMap<String, AllocMetric>,
    /// Ids of the allocations placed.
    placed: HashSet<String, ShortKeyBuild>,
}

impl PlacementPass<'_, '_> {
    /// Places one allocation, or records why it could not be.
    fn place(&mut self, queued: QueuedPlacement) -> Result<(), String> {
        let QueuedPlacement {
            placement: p,
            stops_previous,
        } = queued;
        let job = self.rules.job;
        let Some((group_index, tg)) = job
            .task_groups
            .iter()
            .enumerate()
            .find(|(_, g)| g.name == p.group)
        else {
            return Ok(());
        };
        if let Some(m) = self.failed.get_mut(&tg.name) {
            m.coalesced_failures += 1;
            if stops_previous && let Some(prev) = &p.previous {
                self.ctx.pop_stop(prev);
            }
            return Ok(());
        }
        let stable = if p.downgrade {
            downgrade::stable_version(self.ctx.state, job, &tg.name, p.previous.as_deref())
        } else {
            None
        };
        let Some(version) = self
            .rules
            .for_placement(self.ctx, stable.as_ref(), group_index, tg)?
        else {
            return Ok(());
        };
        // The deployment of the older version a replacement runs, if it does.
        let stable_deployment = stable
            .as_ref()
            .filter(|_| !std::ptr::eq(version.job, &**job))
            .map(|s| s.deployment_id.clone());
        let policy = model::reschedule_policy(model::job_type(job), tg);
        let opts = select_options(self.ctx, &p, self.preempt, version.job);
        let (choice, mut metric) = self.selector.select(
            self.ctx,
            version.job_rules,
            version.group_rules,
            Source::Candidates,
            &opts,
        );
        let Some(choice) = choice else {
            // Availability per datacenter is reported with failures only, so
            // placements do not each carry a copy of the map.
            metric.nodes_available = self.ctx.nodes_available();
            if stops_previous && let Some(prev) = &p.previous {
                self.ctx.pop_stop(prev);
            }
            self.failed.insert(tg.name.clone(), metric);
            return Ok(());
        };
        let mut alloc = placement::build(
            self.ctx,
            version.job,
            version.group,
            version.group_rules,
            &choice,
            p.name.clone(),
            metric,
        );
        link_previous(&mut alloc, &p, &policy, self.now);
        self.join_deployment(&mut alloc, &p, stable_deployment, &tg.name);
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

    /// Puts a new allocation in its deployment: that of the older version it
    /// runs, else the active one, where a canary is also recorded.
    fn join_deployment(
        &mut self,
        alloc: &mut Allocation,
        p: &Placement,
        stable_deployment: Option<String>,
        group: &str,
    ) {
        if let Some(id) = stable_deployment {
            // It belongs to the version it runs, not to the canaries' deployment.
            alloc.deployment_id = id;
        } else if let Some(d) = self.deployment.as_mut() {
            alloc.deployment_id = d.id.clone();
            if p.canary {
                alloc.deployment_status = Some(AllocDeploymentStatus {
                    canary: true,
                    ..Default::default()
                });
                d.task_groups
                    .entry(group.to_string())
                    .or_default()
                    .placed_canaries
                    .push(alloc.id.clone());
                self.canaries_placed = true;
            }
        }
    }
}

/// The selection options of one placement (Nomad's `getSelectOptions`): a
/// rescheduled allocation avoids the nodes it failed on, and the job version
/// it runs sets the priority evictions are judged by.
fn select_options(ctx: &EvalContext<'_>, p: &Placement, preempt: bool, job: &Job) -> SelectOptions {
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
    SelectOptions {
        penalty_nodes: penalty,
        preempt,
        priority: model::priority(job),
        alloc_index: caravan_model::alloc_index(&p.name),
    }
}

/// Links a replacement to the allocation it replaces, with the reschedule
/// history when it replaces a failed one.
fn link_previous(alloc: &mut Allocation, p: &Placement, policy: &ReschedulePolicy, now: i64) {
    if let Some(prev) = &p.previous {
        alloc.previous_allocation = prev.id.clone();
        if p.reschedule {
            alloc.reschedule_tracker = Some(Box::new(reschedule::tracker_for_replacement(
                prev, policy, now,
            )));
        }
    }
}

/// Rules of older job versions for non-canary replacements, by (version, group index).
type StableRules = BTreeMap<(u64, usize), (JobRules, GroupRules)>;

/// The job version a placement runs, and the rules it is placed with.
struct VersionRules<'r> {
    job: &'r Job,
    group: &'r TaskGroup,
    job_rules: &'r mut JobRules,
    group_rules: &'r mut GroupRules,
}

/// The rules of the evaluated job version and of the older versions
/// replacements run while canaries are unpromoted.
struct VersionedRules<'p> {
    job: &'p Arc<Job>,
    job_rules: &'p mut JobRules,
    groups: &'p mut [Option<GroupRules>],
    stable: StableRules,
    allocs: &'p [Arc<Allocation>],
    batch: bool,
}

impl VersionedRules<'_> {
    /// The version and rules for a placement in group `group_index` (`tg`):
    /// the older `stable` version when its rules compile, else the current one
    /// (its group's rules built on first use). `Err` when the current group's
    /// rules do not compile.
    fn for_placement<'r>(
        &'r mut self,
        ctx: &mut EvalContext<'_>,
        stable: Option<&'r StableVersion>,
        group_index: usize,
        tg: &'r TaskGroup,
    ) -> Result<Option<VersionRules<'r>>, String> {
        let older = match stable {
            Some(s) => stable_rules_for(
                &mut self.stable,
                ctx,
                s,
                group_index,
                self.batch,
                self.allocs,
            ),
            None => None,
        };
        if let (Some(s), Some((job_rules, group_rules, group))) = (stable, older) {
            return Ok(Some(VersionRules {
                job: &s.job,
                group,
                job_rules,
                group_rules,
            }));
        }
        if self.groups[group_index].is_none() {
            match GroupRules::new(ctx, self.job, group_index, tg, self.batch, self.allocs) {
                Ok(r) => self.groups[group_index] = Some(r),
                Err(e) => return Err(format!("invalid job: {e}")),
            }
        }
        let Some(group_rules) = self.groups[group_index].as_mut() else {
            return Ok(None);
        };
        Ok(Some(VersionRules {
            job: self.job,
            group: tg,
            job_rules: self.job_rules,
            group_rules,
        }))
    }
}

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
    let (job_rules, group_rules) = match cache.entry((stable.job.version, group_index)) {
        std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::btree_map::Entry::Vacant(e) => {
            let job_rules = JobRules::new(ctx, &stable.job, allocs).ok()?;
            let group_rules =
                GroupRules::new(ctx, &stable.job, group_index, tg, batch, allocs).ok()?;
            e.insert((job_rules, group_rules))
        }
    };
    Some((job_rules, group_rules, tg))
}

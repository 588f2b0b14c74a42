//! Preemption: which lower-priority allocations to evict so a placement fits.
//!
//! Only allocations of jobs at least [`PRIORITY_DELTA`] below the placing job are
//! candidates. Candidates are taken lowest priority first, each time the one whose
//! resources best match what is still missing; then any pick that turned out not
//! to be needed is put back, highest priority first. The result is the set that
//! frees enough with the lowest net priority this greedy search finds.
//!
//! A placement that evicts is recorded with [`record_evictions`].

use caravan_model::NomadName;
use std::sync::Arc;

use caravan_proto::{Allocation, EvalStatus, Evaluation, PlanAnnotations};

use crate::context::EvalContext;
use crate::model;
use crate::resources::{self, GroupAsk, NodeUsage};

/// How much lower a job's priority must be for its allocations to be evicted.
pub const PRIORITY_DELTA: i32 = 10;

/// Finds allocations on table node `idx` whose eviction lets `ask` fit, with
/// their net priority; `None` when no such set exists.
pub(crate) fn find(
    ctx: &mut EvalContext<'_>,
    idx: u32,
    ask: &GroupAsk,
    priority: i32,
) -> Option<(Vec<Arc<Allocation>>, f64)> {
    let node_id = ctx.table.node(idx).id.clone();
    let own_job = ctx
        .job
        .as_ref()
        .map(|j| (j.namespace.clone(), j.id.clone()));
    let mut candidates: Vec<(i32, Arc<Allocation>)> = Vec::new();
    for a in ctx.live_allocs_on(&node_id) {
        if own_job
            .as_ref()
            .is_some_and(|(ns, id)| *ns == a.namespace && *id == a.job_id)
        {
            continue;
        }
        let p = ctx.job_priority(&a.namespace, &a.job_id);
        if p <= priority.saturating_sub(PRIORITY_DELTA) {
            candidates.push((p, a));
        }
    }
    if candidates.is_empty() {
        return None;
    }
    ctx.usage(idx);
    ctx.table.ensure_capacity(idx);
    let cap = ctx.table.capacity(idx)?.clone();
    let mut used: NodeUsage = ctx.table.loaded_usage(idx)?.clone();
    candidates.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.id.cmp(&b.1.id)));

    let mut picked: Vec<(i32, Arc<Allocation>)> = Vec::new();
    while resources::fits(&cap, &used, ask).is_err() {
        if candidates.is_empty() {
            return None;
        }
        let lowest = candidates[0].0;
        let need = Need::of(&cap, &used, ask);
        // Among the lowest priority, the allocation closest to what is missing.
        let (pos, _) = candidates
            .iter()
            .enumerate()
            .take_while(|(_, (p, _))| *p == lowest)
            .map(|(i, (_, a))| (i, need.distance(a)))
            .min_by(|x, y| x.1.total_cmp(&y.1))?;
        let (p, a) = candidates.remove(pos);
        used.remove(&a);
        picked.push((p, a));
    }
    // Put back what is not needed, highest priority first.
    picked.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.id.cmp(&b.1.id)));
    let mut i = 0;
    while i < picked.len() {
        let mut trial = used.clone();
        trial.add(&picked[i].1);
        if resources::fits(&cap, &trial, ask).is_ok() {
            used = trial;
            picked.remove(i);
        } else {
            i += 1;
        }
    }
    let net: i64 = picked.iter().map(|(p, _)| i64::from(*p)).sum();
    let mut out: Vec<Arc<Allocation>> = picked.into_iter().map(|(_, a)| a).collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Some((out, net as f64))
}

/// Records the evictions a placement needs: plan preemptions, links from the
/// placement to what it evicts, an evaluation for each job that loses
/// allocations, and the annotations' counts.
pub(crate) fn record_evictions(
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
            let eval = eviction_eval(ctx, e, now);
            ctx.plan.evals.push(eval);
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

/// The evaluation that lets the job of an evicted allocation place it again.
fn eviction_eval(ctx: &mut EvalContext<'_>, evicted: &Allocation, now: i64) -> Evaluation {
    let other = ctx.state.job(&evicted.namespace, &evicted.job_id);
    let id = ctx.rng.uuid();
    Evaluation {
        id,
        namespace: evicted.namespace.clone(),
        priority: other
            .as_ref()
            .map_or(model::DEFAULT_PRIORITY, |j| model::priority(j)),
        r#type: other.as_ref().map_or("service".to_string(), |j| {
            model::job_type(j).nomad_name().to_string()
        }),
        triggered_by: caravan_model::trigger::PREEMPTION.into(),
        job_id: evicted.job_id.clone(),
        status: EvalStatus::Pending as i32,
        snapshot_revision: ctx.state.revision(),
        create_time_unix_ns: now,
        modify_time_unix_ns: now,
        ..Default::default()
    }
}

/// What is still missing, per dimension, as fractions of the ask.
struct Need {
    cpu: f64,
    memory: f64,
    disk: f64,
}

impl Need {
    fn of(cap: &resources::Capacity, used: &NodeUsage, ask: &GroupAsk) -> Self {
        let ask_cpu = ask
            .cpu_mhz
            .saturating_add(u64::from(ask.cores).saturating_mul(cap.mhz_per_core));
        let miss =
            |used: u64, want: u64, have: u64| used.saturating_add(want).saturating_sub(have) as f64;
        Self {
            cpu: miss(used.cpu_mhz, ask_cpu, cap.cpu_mhz),
            memory: miss(used.memory_mb, ask.memory_mb, cap.memory_mb),
            disk: miss(used.disk_mb, ask.disk_mb, cap.disk_mb),
        }
    }

    /// Euclidean distance between what the allocation frees and what is missing,
    /// each dimension relative to the need (or 1 when nothing is missing there).
    fn distance(&self, a: &Allocation) -> f64 {
        let freed = NodeUsage::from_allocs([a]);
        let d = |need: f64, got: u64| {
            let scale = if need > 0.0 { need } else { 1.0 };
            let missing_after = (need - got as f64).max(0.0);
            missing_after / scale
        };
        let (c, m, k) = (
            d(self.cpu, freed.cpu_mhz),
            d(self.memory, freed.memory_mb),
            d(self.disk, freed.disk_mb),
        );
        (c * c + m * m + k * k).sqrt()
    }
}

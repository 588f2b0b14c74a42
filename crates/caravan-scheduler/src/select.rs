//! Choosing a node for one allocation: feasibility, fit, scoring and the limit.
//!
//! Candidates are visited in the shuffled order from where the previous
//! selection stopped. Only the first `limit` fitting candidates are scored (up to
//! three scoring ≤ 0 may be skipped), and the best of them wins. Everything a
//! candidate costs is O(1): class results and fit scores are cached, spread and
//! anti-affinity read incremental counts.

use std::collections::BTreeMap;
use std::sync::Arc;

use caravan_proto::{AllocMetric, Allocation, NodeScoreMeta};

use crate::context::EvalContext;
use crate::preempt;
use crate::property::MISSING;
use crate::rank::spread::{self, EvenState};
use crate::rank::{self, GroupRules, JobRules, MAX_SKIP, SKIP_THRESHOLD};
use crate::resources::{self, Exhausted, NodeUsage};

const SCORER_NAMES: [&str; 6] = [
    "binpack",
    "job-anti-affinity",
    "node-reschedule-penalty",
    "node-affinity",
    "allocation-spread",
    "preemption",
];

/// Where candidates come from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Source {
    /// The context's shuffled candidates, continuing from the last position.
    Candidates,
    /// Exactly one node (system jobs, in-place updates).
    One(u32),
}

/// Per-selection knobs.
#[derive(Debug, Default)]
pub(crate) struct SelectOptions {
    /// Table nodes where the allocation failed before.
    pub penalty_nodes: Vec<u32>,
    /// Whether lower-priority allocations may be evicted.
    pub preempt: bool,
    /// The placing job's priority.
    pub priority: i32,
}

/// A scored candidate.
#[derive(Debug, Clone)]
pub(crate) struct Choice {
    pub node: u32,
    pub score: f64,
    parts: [f64; 6],
    mask: u8,
    pub preempted: Vec<Arc<Allocation>>,
}

impl Choice {
    /// The winner's score breakdown for the allocation's metrics.
    pub fn score_meta(&self, node_id: &str) -> NodeScoreMeta {
        let mut scores = BTreeMap::new();
        for (i, name) in SCORER_NAMES.iter().enumerate() {
            if self.mask & (1 << i) != 0 {
                scores.insert((*name).to_string(), self.parts[i]);
            }
        }
        NodeScoreMeta {
            node_id: node_id.to_string(),
            scores,
            norm_score: self.score,
        }
    }
}

#[derive(Clone, Copy)]
struct FitEntry {
    generation: u32,
    group: u32,
    result: Result<f64, Exhausted>,
}

/// Selection state that lives across the selections of one attempt.
#[derive(Default)]
pub(crate) struct Selector {
    cursor: usize,
    fit_cache: Vec<Option<FitEntry>>,
}

impl Selector {
    /// Picks a node for one allocation of group `g`.
    pub fn select(
        &mut self,
        ctx: &mut EvalContext<'_>,
        job: &mut JobRules,
        g: &mut GroupRules,
        source: Source,
        opts: &SelectOptions,
    ) -> (Option<Choice>, AllocMetric) {
        let mut metric = AllocMetric::default();
        if self.fit_cache.len() < ctx.table.len() {
            self.fit_cache.resize(ctx.table.len(), None);
        }
        let even: Vec<EvenState> = g
            .spreads
            .iter()
            .map(|s| EvenState::of(&ctx.properties[s.counter]))
            .collect();
        let spread_algorithm =
            ctx.config.scheduler_algorithm() == caravan_proto::SchedulerAlgorithm::Spread;
        let mut best: Option<Choice> = None;
        let mut skipped: Vec<Choice> = Vec::new();
        let mut seen = 0usize;
        let limit = match source {
            Source::One(_) => 1,
            Source::Candidates => g.limit.max(1),
        };
        let total = match source {
            Source::One(_) => 1,
            Source::Candidates => ctx.candidates.len(),
        };
        let consider = |c: Choice, best: &mut Option<Choice>| {
            if best.as_ref().is_none_or(|b| c.score > b.score) {
                *best = Some(c);
            }
        };
        for _ in 0..total {
            let idx = match source {
                Source::One(i) => i,
                Source::Candidates => {
                    if self.cursor >= ctx.candidates.len() {
                        self.cursor = 0;
                    }
                    let i = ctx.candidates[self.cursor];
                    self.cursor += 1;
                    i
                }
            };
            if self.fit_cache.len() <= idx as usize {
                self.fit_cache.resize(idx as usize + 1, None);
            }
            metric.nodes_evaluated += 1;
            if !feasible(ctx, job, g, idx, &mut metric) {
                continue;
            }
            let Some(choice) = self.score(ctx, g, idx, opts, &even, spread_algorithm, &mut metric)
            else {
                continue;
            };
            if skipped.len() < MAX_SKIP && choice.score <= SKIP_THRESHOLD {
                skipped.push(choice);
                continue;
            }
            consider(choice, &mut best);
            seen += 1;
            if seen >= limit {
                break;
            }
        }
        for c in skipped {
            if seen >= limit {
                break;
            }
            consider(c, &mut best);
            seen += 1;
        }
        (best, metric)
    }

    #[allow(clippy::too_many_arguments)]
    fn score(
        &mut self,
        ctx: &mut EvalContext<'_>,
        g: &mut GroupRules,
        idx: u32,
        opts: &SelectOptions,
        even: &[EvenState],
        spread_algorithm: bool,
        metric: &mut AllocMetric,
    ) -> Option<Choice> {
        let generation = ctx.table.generation[idx as usize];
        let cached = self.fit_cache[idx as usize]
            .filter(|e| e.generation == generation && e.group == g.index as u32);
        let fit = match cached {
            Some(e) => e.result,
            None => {
                ctx.usage(idx);
                ctx.table.ensure_capacity(idx);
                let (Some(cap), Some(used)) =
                    (ctx.table.capacity(idx), ctx.table.loaded_usage(idx))
                else {
                    return None;
                };
                let r = resources::fits(cap, used, &g.ask)
                    .map(|()| resources::score_fit(cap, used, &g.ask, spread_algorithm));
                self.fit_cache[idx as usize] = Some(FitEntry {
                    generation,
                    group: g.index as u32,
                    result: r,
                });
                r
            }
        };
        let mut parts = [0.0; 6];
        let mut mask = 0u8;
        let mut preempted = Vec::new();
        match fit {
            Ok(s) => parts[0] = s,
            Err(dim) => {
                let freed = if opts.preempt {
                    preempt::find(ctx, idx, &g.ask, opts.priority)
                } else {
                    None
                };
                let Some((evict, net_priority)) = freed else {
                    record_exhausted(ctx, idx, dim, metric);
                    return None;
                };
                let (Some(cap), Some(used)) =
                    (ctx.table.capacity(idx), ctx.table.loaded_usage(idx))
                else {
                    return None;
                };
                let mut after: NodeUsage = used.clone();
                for a in &evict {
                    after.remove(a);
                }
                parts[0] = resources::score_fit(cap, &after, &g.ask, spread_algorithm);
                parts[5] = rank::preemption_score(net_priority);
                mask |= 1 << 5;
                preempted = evict;
            }
        }
        mask |= 1;
        let collisions = ctx.job_count(idx, g.index);
        if collisions > 0 && g.count > 0 {
            parts[1] = -f64::from(collisions + 1) / f64::from(g.count);
            mask |= 1 << 1;
        }
        if opts.penalty_nodes.contains(&idx) {
            parts[2] = -1.0;
            mask |= 1 << 2;
        }
        if !g.affinities.is_empty() {
            let a = if g.affinity_escaped {
                rank::affinity_score(g, ctx.table.node(idx))
            } else {
                let class = ctx.table.class_id(idx) as usize;
                if g.affinity_cache.len() <= class {
                    g.affinity_cache.resize(class + 1, None);
                }
                match g.affinity_cache[class] {
                    Some(v) => v,
                    None => {
                        let v = rank::affinity_score(g, ctx.table.node(idx));
                        g.affinity_cache[class] = Some(v);
                        v
                    }
                }
            };
            if a != 0.0 {
                parts[3] = a;
                mask |= 1 << 3;
            }
        }
        if !g.spreads.is_empty() {
            let mut total = 0.0;
            for (si, spec) in g.spreads.iter().enumerate() {
                let node_id = ctx.table.node(idx).id.clone();
                let v = ctx.property_value(spec.counter, &node_id, Some(idx));
                total += spread::boost(
                    spec,
                    &ctx.properties[spec.counter],
                    even[si],
                    v,
                    g.spread_weight_sum,
                );
            }
            if total != 0.0 {
                parts[4] = total;
                mask |= 1 << 4;
            }
        }
        let n = mask.count_ones() as f64;
        let sum: f64 = (0..6)
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| parts[i])
            .sum();
        Some(Choice {
            node: idx,
            score: sum / n,
            parts,
            mask,
            preempted,
        })
    }
}

fn record_exhausted(ctx: &EvalContext<'_>, idx: u32, dim: Exhausted, metric: &mut AllocMetric) {
    metric.nodes_exhausted += 1;
    let class = &ctx.table.node(idx).node_class;
    if !class.is_empty() {
        bump(&mut metric.class_exhausted, class);
    }
    bump(&mut metric.dimension_exhausted, dim.dimension());
}

fn record_filtered(ctx: &EvalContext<'_>, idx: u32, reason: &str, metric: &mut AllocMetric) {
    metric.nodes_filtered += 1;
    let class = &ctx.table.node(idx).node_class;
    if !class.is_empty() {
        bump(&mut metric.class_filtered, class);
    }
    bump(&mut metric.constraint_filtered, reason);
}

fn bump(map: &mut BTreeMap<String, u32>, key: &str) {
    match map.get_mut(key) {
        Some(v) => *v += 1,
        None => {
            map.insert(key.to_string(), 1);
        }
    }
}

const CLASS_INELIGIBLE: &str = "computed class ineligible";

/// Runs the job- and group-level checks (cached per class) and the plan-dependent ones.
fn feasible(
    ctx: &mut EvalContext<'_>,
    job: &mut JobRules,
    g: &mut GroupRules,
    idx: u32,
    metric: &mut AllocMetric,
) -> bool {
    let class = ctx.table.class_id(idx) as usize;
    let escaped = job.checks.escaped || g.checks.escaped;
    if escaped {
        ctx.eligibility.escaped = true;
    }
    // Job level.
    let job_ok = if job.checks.escaped {
        match job.checks.check_node(ctx.table.node(idx)) {
            Ok(()) => true,
            Err(reason) => {
                let reason = reason.to_string();
                record_filtered(ctx, idx, &reason, metric);
                return false;
            }
        }
    } else {
        if job.class_cache.len() <= class {
            job.class_cache.resize(class + 1, None);
        }
        match job.class_cache[class] {
            Some(true) => true,
            Some(false) => {
                record_filtered(ctx, idx, CLASS_INELIGIBLE, metric);
                return false;
            }
            None => {
                let r = job
                    .checks
                    .check_node(ctx.table.node(idx))
                    .map_err(str::to_string);
                job.class_cache[class] = Some(r.is_ok());
                if let Err(reason) = r {
                    note_class(ctx, class, false);
                    record_filtered(ctx, idx, &reason, metric);
                    return false;
                }
                true
            }
        }
    };
    // Group level.
    let group_ok = if g.checks.escaped {
        match g.checks.check_node(ctx.table.node(idx)) {
            Ok(()) => true,
            Err(reason) => {
                let reason = reason.to_string();
                record_filtered(ctx, idx, &reason, metric);
                return false;
            }
        }
    } else {
        if g.class_cache.len() <= class {
            g.class_cache.resize(class + 1, None);
        }
        match g.class_cache[class] {
            Some(true) => true,
            Some(false) => {
                record_filtered(ctx, idx, CLASS_INELIGIBLE, metric);
                return false;
            }
            None => {
                let r = g
                    .checks
                    .check_node(ctx.table.node(idx))
                    .map_err(str::to_string);
                g.class_cache[class] = Some(r.is_ok());
                note_class(ctx, class, job_ok && r.is_ok());
                if let Err(reason) = r {
                    record_filtered(ctx, idx, &reason, metric);
                    return false;
                }
                true
            }
        }
    };
    if !(job_ok && group_ok) {
        return false;
    }
    // Plan-dependent checks run on every candidate.
    if job.checks.distinct_hosts && ctx.job_count_any(idx) > 0 {
        record_filtered(ctx, idx, "distinct_hosts", metric);
        return false;
    }
    if g.checks.distinct_hosts && ctx.job_count(idx, g.index) > 0 {
        record_filtered(ctx, idx, "distinct_hosts", metric);
        return false;
    }
    for &(pi, limit) in job
        .distinct_properties
        .iter()
        .chain(g.distinct_properties.iter())
    {
        let node_id = ctx.table.node(idx).id.clone();
        let v = ctx.property_value(pi, &node_id, Some(idx));
        if v == MISSING || ctx.properties[pi].count(v) >= limit {
            let reason = format!("distinct_property: {}", ctx.properties[pi].target);
            record_filtered(ctx, idx, &reason, metric);
            return false;
        }
    }
    true
}

fn note_class(ctx: &mut EvalContext<'_>, class: usize, ok: bool) {
    let name = ctx.table.classes[class].clone();
    ctx.eligibility
        .classes
        .entry(name)
        .and_modify(|v| *v |= ok)
        .or_insert(ok);
}

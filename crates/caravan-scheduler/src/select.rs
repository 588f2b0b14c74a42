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

/// `1/n` for the number of scorers that applied; both scoring paths multiply
/// by it so they agree to the last bit.
const INV_COUNT: [f64; 7] = [0.0, 1.0, 0.5, 1.0 / 3.0, 0.25, 0.2, 1.0 / 6.0];

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
    /// The index of the allocation being placed (its name's `[index]`), which a
    /// `per_alloc` host volume's source takes.
    pub alloc_index: Option<u32>,
}

/// What scoring a candidate reads besides the node and the group.
struct Scoring<'s> {
    opts: &'s SelectOptions,
    /// Per spread of the group: its counts' extremes when the selection began.
    even: &'s [EvenState],
    /// Fit is scored with the spread algorithm (emptiest first) instead of binpack.
    spread_algorithm: bool,
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
    /// Picks a node for one allocation of `group`.
    pub fn select(
        &mut self,
        ctx: &mut EvalContext<'_>,
        job: &mut JobRules,
        group: &mut GroupRules,
        source: Source,
        opts: &SelectOptions,
    ) -> (Option<Choice>, AllocMetric) {
        if self.fit_cache.len() < ctx.table.len() {
            self.fit_cache.resize(ctx.table.len(), None);
        }
        let even: Vec<EvenState> = group
            .spreads
            .iter()
            .map(|s| EvenState::of(&ctx.properties[s.counter]))
            .collect();
        let scoring = Scoring {
            opts,
            even: &even,
            spread_algorithm: ctx.config.scheduler_algorithm()
                == caravan_proto::SchedulerAlgorithm::Spread,
        };
        match source {
            Source::One(idx) => {
                let mut metric = AllocMetric {
                    nodes_evaluated: 1,
                    ..Default::default()
                };
                if self.fit_cache.len() <= idx as usize {
                    self.fit_cache.resize(idx as usize + 1, None);
                }
                let reason = match static_feasible(ctx, job, group, idx) {
                    Ok(()) => dynamic_feasible(ctx, job, group, idx, opts).err(),
                    Err(StaticFail::ClassIneligible) => Some(CLASS_INELIGIBLE.to_string()),
                    Err(StaticFail::Label(l)) => Some(l),
                };
                if let Some(reason) = reason {
                    note_filtered(ctx, idx, &reason, &mut metric);
                    return (None, metric);
                }
                let c = self.score(ctx, group, idx, &scoring, &mut metric);
                (c, metric)
            }
            Source::Candidates => self.select_candidates(ctx, job, group, &scoring),
        }
    }

    /// Walks the group's statically feasible candidates from the cursor.
    fn select_candidates(
        &mut self,
        ctx: &mut EvalContext<'_>,
        job: &mut JobRules,
        group: &mut GroupRules,
        scoring: &Scoring<'_>,
    ) -> (Option<Choice>, AllocMetric) {
        let mut metric = AllocMetric::default();
        let n_all = ctx.candidates.len();
        if n_all == 0 {
            return (None, metric);
        }
        let prefilter = match group.prefilter.take() {
            Some(prefilter) => prefilter,
            None => Prefilter::build(ctx, job, group),
        };
        let start_cursor = self.cursor % n_all;
        let len = prefilter.positions.len();
        let start = prefilter
            .positions
            .partition_point(|&p| (p as usize) < start_cursor);
        let mut pick = LimitPick::new(group.limit.max(1));
        let mut last_pos = None;
        let mut limited = false;
        // Rows of nodes whose score parts cannot change until the node does are
        // scored from cached parts; anything else takes the full path.
        let fast = rows_cacheable(job, group, scoring.opts);
        let mut prefilter = prefilter;
        for k in 0..len {
            let slot = if start + k >= len {
                start + k - len
            } else {
                start + k
            };
            let pos = prefilter.positions[slot] as usize;
            let idx = ctx.candidates[pos];
            last_pos = Some(pos);
            let row = prefilter.rows[slot];
            let current = row.generation == ctx.table.generation[idx as usize];
            let score = match row.state {
                RowState::Fits if fast && current => row.score(ctx, group, scoring.even),
                RowState::Exhausted(dim) if fast && current && !scoring.opts.preempt => {
                    record_exhausted(ctx, idx, dim, &mut metric);
                    continue;
                }
                _ => {
                    if let Err(reason) = dynamic_feasible(ctx, job, group, idx, scoring.opts) {
                        note_filtered(ctx, idx, &reason, &mut metric);
                        continue;
                    }
                    let generation = ctx.table.generation[idx as usize];
                    let outcome = self.score(ctx, group, idx, scoring, &mut metric);
                    if fast {
                        prefilter.rows[slot] = HotRow::from_outcome(
                            ctx,
                            group,
                            idx,
                            generation,
                            &outcome,
                            &self.fit_cache,
                        );
                    }
                    match outcome {
                        Some(c) => c.score,
                        None => continue,
                    }
                }
            };
            if pick.offer(Cand { score, idx }) {
                limited = true;
                break;
            }
        }
        let traversed = match (limited, last_pos) {
            (true, Some(p)) => {
                self.cursor = (p + 1) % n_all;
                (p + n_all - start_cursor) % n_all + 1
            }
            _ => n_all,
        };
        metric.nodes_evaluated = traversed as u32;
        prefilter.count_filtered(start_cursor, traversed, &mut metric);
        group.prefilter = Some(prefilter);
        // The winner is scored again in full for its breakdown (and evictions);
        // scoring is deterministic, so it is the same score.
        let choice = match pick.finish() {
            Some(c) => {
                let mut scratch = AllocMetric::default();
                self.score(ctx, group, c.idx, scoring, &mut scratch)
            }
            None => None,
        };
        (choice, metric)
    }

    /// Scores one feasible candidate with every scorer, evicting
    /// lower-priority allocations when it does not fit and that is allowed;
    /// `None` when it does not fit.
    fn score(
        &mut self,
        ctx: &mut EvalContext<'_>,
        group: &mut GroupRules,
        idx: u32,
        scoring: &Scoring<'_>,
        metric: &mut AllocMetric,
    ) -> Option<Choice> {
        let fit = self.fit(ctx, group, idx, scoring.spread_algorithm)?;
        let mut parts = [0.0; 6];
        let mut mask = 0u8;
        let mut preempted = Vec::new();
        match fit {
            Ok(s) => parts[0] = s,
            Err(dim) => {
                let freed = if scoring.opts.preempt {
                    preempt::find(ctx, idx, &group.ask, scoring.opts.priority)
                } else {
                    None
                };
                let Some((evict, net_priority)) = freed else {
                    record_exhausted(ctx, idx, dim, metric);
                    return None;
                };
                parts[0] = fit_after_evictions(ctx, group, idx, &evict, scoring.spread_algorithm)?;
                parts[5] = rank::preemption_score(net_priority);
                mask |= 1 << 5;
                preempted = evict;
            }
        }
        mask |= 1;
        let collisions = ctx.job_count(idx, group.index);
        if collisions > 0 && group.count > 0 {
            parts[1] = -f64::from(collisions + 1) / f64::from(group.count);
            mask |= 1 << 1;
        }
        if scoring.opts.penalty_nodes.contains(&idx) {
            parts[2] = -1.0;
            mask |= 1 << 2;
        }
        if !group.affinities.is_empty() {
            let a = affinity(ctx, group, idx);
            if a != 0.0 {
                parts[3] = a;
                mask |= 1 << 3;
            }
        }
        if !group.spreads.is_empty() {
            let total = spread_boost(ctx, group, idx, scoring.even);
            if total != 0.0 {
                parts[4] = total;
                mask |= 1 << 4;
            }
        }
        let n = mask.count_ones() as usize;
        let sum: f64 = (0..6)
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| parts[i])
            .sum();
        Some(Choice {
            node: idx,
            score: sum * INV_COUNT[n],
            parts,
            mask,
            preempted,
        })
    }

    /// Whether the group's ask fits on the node and its fit score, cached per
    /// node until the node's usage changes; `None` when the node's capacity or
    /// usage is unknown.
    #[inline]
    fn fit(
        &mut self,
        ctx: &mut EvalContext<'_>,
        group: &GroupRules,
        idx: u32,
        spread_algorithm: bool,
    ) -> Option<Result<f64, Exhausted>> {
        let generation = ctx.table.generation[idx as usize];
        let cached = self.fit_cache[idx as usize]
            .filter(|e| e.generation == generation && e.group == group.key);
        if let Some(e) = cached {
            return Some(e.result);
        }
        ctx.usage(idx);
        ctx.table.ensure_capacity(idx);
        let (Some(cap), Some(used)) = (ctx.table.capacity(idx), ctx.table.loaded_usage(idx)) else {
            return None;
        };
        let r = resources::fits(cap, used, &group.ask)
            .map(|()| resources::score_fit(cap, used, &group.ask, spread_algorithm));
        self.fit_cache[idx as usize] = Some(FitEntry {
            generation,
            group: group.key,
            result: r,
        });
        Some(r)
    }
}

/// The fit score of the group's ask on the node once `evict` is gone.
fn fit_after_evictions(
    ctx: &EvalContext<'_>,
    group: &GroupRules,
    idx: u32,
    evict: &[Arc<Allocation>],
    spread_algorithm: bool,
) -> Option<f64> {
    let (Some(cap), Some(used)) = (ctx.table.capacity(idx), ctx.table.loaded_usage(idx)) else {
        return None;
    };
    let mut after: NodeUsage = used.clone();
    for a in evict {
        after.remove(a);
    }
    Some(resources::score_fit(
        cap,
        &after,
        &group.ask,
        spread_algorithm,
    ))
}

/// The node's affinity score for the group, cached per computed class unless
/// an affinity reads a unique attribute.
#[inline]
fn affinity(ctx: &mut EvalContext<'_>, group: &mut GroupRules, idx: u32) -> f64 {
    if group.affinity_escaped {
        return rank::affinity_score(group, ctx.table.node(idx));
    }
    let class = ctx.table.class_id(idx) as usize;
    if group.affinity_cache.len() <= class {
        group.affinity_cache.resize(class + 1, None);
    }
    match group.affinity_cache[class] {
        Some(v) => v,
        None => {
            let v = rank::affinity_score(group, ctx.table.node(idx));
            group.affinity_cache[class] = Some(v);
            v
        }
    }
}

/// The sum of the group's spread boosts for the node.
#[inline]
fn spread_boost(
    ctx: &mut EvalContext<'_>,
    group: &GroupRules,
    idx: u32,
    even: &[EvenState],
) -> f64 {
    let mut total = 0.0;
    for (si, spec) in group.spreads.iter().enumerate() {
        let v = ctx.node_property(spec.counter, idx);
        total += spread::boost(
            spec,
            &ctx.properties[spec.counter],
            even[si],
            v,
            group.spread_weight_sum,
        );
    }
    total
}

/// Whether candidates' score parts may be cached per node: they depend on the
/// node alone (few spreads, no reschedule penalty, no `distinct_*`).
fn rows_cacheable(job: &JobRules, group: &GroupRules, opts: &SelectOptions) -> bool {
    group.spreads.len() <= MAX_FAST_SPREADS
        && opts.penalty_nodes.is_empty()
        && !job.checks.distinct_hosts
        && !group.checks.distinct_hosts
        && job.distinct_properties.is_empty()
        && group.distinct_properties.is_empty()
        && group.checks.per_alloc_volumes.is_empty()
}

/// Counts a node a plan-dependent check filtered out.
fn note_filtered(ctx: &EvalContext<'_>, idx: u32, reason: &str, metric: &mut AllocMetric) {
    metric.nodes_filtered += 1;
    note_class_filtered(ctx, idx, metric);
    bump(&mut metric.constraint_filtered, reason);
}

fn record_exhausted(ctx: &EvalContext<'_>, idx: u32, dim: Exhausted, metric: &mut AllocMetric) {
    metric.nodes_exhausted += 1;
    let class = &ctx.table.node(idx).node_class;
    if !class.is_empty() {
        bump(&mut metric.class_exhausted, class);
    }
    bump(&mut metric.dimension_exhausted, dim.dimension());
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

/// Why a node failed a check that depends only on the node.
pub(crate) enum StaticFail {
    /// Its class was already found ineligible.
    ClassIneligible,
    /// A check failed; the label names it.
    Label(String),
}

/// The job- and group-level checks, cached per computed class unless escaped.
fn static_feasible(
    ctx: &mut EvalContext<'_>,
    job: &mut JobRules,
    group: &mut GroupRules,
    idx: u32,
) -> Result<(), StaticFail> {
    let class = ctx.table.class_id(idx) as usize;
    if job.checks.escaped || group.checks.escaped {
        ctx.eligibility.escaped = true;
    }
    let job_ok = if job.checks.escaped {
        job.checks
            .check_node(ctx.table.node(idx))
            .map_err(|r| StaticFail::Label(r.into_owned()))?;
        true
    } else {
        if job.class_cache.len() <= class {
            job.class_cache.resize(class + 1, None);
        }
        match job.class_cache[class] {
            Some(true) => true,
            Some(false) => return Err(StaticFail::ClassIneligible),
            None => {
                let r = job
                    .checks
                    .check_node(ctx.table.node(idx))
                    .map_err(std::borrow::Cow::into_owned);
                job.class_cache[class] = Some(r.is_ok());
                if let Err(reason) = r {
                    note_class(ctx, class, false);
                    return Err(StaticFail::Label(reason));
                }
                true
            }
        }
    };
    if group.checks.escaped {
        group
            .checks
            .check_node(ctx.table.node(idx))
            .map_err(|r| StaticFail::Label(r.into_owned()))?;
        return Ok(());
    }
    if group.class_cache.len() <= class {
        group.class_cache.resize(class + 1, None);
    }
    match group.class_cache[class] {
        Some(true) => Ok(()),
        Some(false) => Err(StaticFail::ClassIneligible),
        None => {
            let r = group
                .checks
                .check_node(ctx.table.node(idx))
                .map_err(std::borrow::Cow::into_owned);
            group.class_cache[class] = Some(r.is_ok());
            note_class(ctx, class, job_ok && r.is_ok());
            r.map_err(StaticFail::Label)
        }
    }
}

/// The checks that depend on the plan (`distinct_hosts`, `distinct_property`) or on
/// the allocation being placed (`per_alloc` host volumes).
fn dynamic_feasible(
    ctx: &mut EvalContext<'_>,
    job: &JobRules,
    group: &GroupRules,
    idx: u32,
    opts: &SelectOptions,
) -> Result<(), String> {
    group
        .checks
        .check_per_alloc_volumes(ctx.table.node(idx), opts.alloc_index)
        .map_err(str::to_string)?;
    if job.checks.distinct_hosts && ctx.job_count_any(idx) > 0 {
        return Err("distinct_hosts".into());
    }
    if group.checks.distinct_hosts && ctx.job_count(idx, group.index) > 0 {
        return Err("distinct_hosts".into());
    }
    for &(pi, limit) in job
        .distinct_properties
        .iter()
        .chain(group.distinct_properties.iter())
    {
        let v = ctx.node_property(pi, idx);
        if v == MISSING || ctx.properties[pi].count(v) >= limit {
            return Err(format!("distinct_property: {}", ctx.properties[pi].target));
        }
    }
    Ok(())
}

fn note_class_filtered(ctx: &EvalContext<'_>, idx: u32, metric: &mut AllocMetric) {
    let class = &ctx.table.node(idx).node_class;
    if !class.is_empty() {
        bump(&mut metric.class_filtered, class);
    }
}

/// The statically feasible candidates of one group, in candidate order, and why
/// the others failed; computed once per attempt so selections skip them for free.
pub(crate) struct Prefilter {
    positions: Vec<u32>,
    /// Per candidate position: 0 feasible, else 1 + index into `labels`.
    reasons: Vec<u16>,
    labels: Vec<String>,
    /// Per candidate position: index into `classes` of its node class, or `u16::MAX`.
    node_classes: Vec<u16>,
    classes: Vec<String>,
    /// Cached score parts, aligned with `positions`.
    rows: Vec<HotRow>,
    /// Per reason label: how many of the first `p` positions failed with it.
    reason_prefix: Vec<Vec<u32>>,
    /// Per node class: how many of the first `p` positions failed and had it.
    class_prefix: Vec<Vec<u32>>,
}

impl Prefilter {
    fn build(ctx: &mut EvalContext<'_>, job: &mut JobRules, group: &mut GroupRules) -> Self {
        let n = ctx.candidates.len();
        let mut prefilter = Prefilter {
            positions: Vec::with_capacity(n),
            reasons: Vec::with_capacity(n),
            labels: vec![CLASS_INELIGIBLE.to_string()],
            node_classes: Vec::with_capacity(n),
            classes: Vec::new(),
            rows: Vec::new(),
            reason_prefix: Vec::new(),
            class_prefix: Vec::new(),
        };
        for pos in 0..n {
            let idx = ctx.candidates[pos];
            let reason = match static_feasible(ctx, job, group, idx) {
                Ok(()) => {
                    prefilter.positions.push(pos as u32);
                    0
                }
                Err(StaticFail::ClassIneligible) => 1,
                Err(StaticFail::Label(l)) => match prefilter.labels.iter().position(|x| *x == l) {
                    Some(i) => i as u16 + 1,
                    None => {
                        prefilter.labels.push(l);
                        prefilter.labels.len().min(u16::MAX as usize) as u16
                    }
                },
            };
            prefilter.reasons.push(reason);
            let class: &str = if reason == 0 {
                ""
            } else {
                &ctx.table.node(idx).node_class
            };
            let ci = if class.is_empty() {
                u16::MAX
            } else {
                match prefilter.classes.iter().position(|c| c == class) {
                    Some(i) => i as u16,
                    None => {
                        prefilter.classes.push(class.to_string());
                        (prefilter.classes.len() - 1).min(u16::MAX as usize - 1) as u16
                    }
                }
            };
            prefilter.node_classes.push(ci);
        }
        prefilter.rows = vec![HotRow::default(); prefilter.positions.len()];
        prefilter.build_prefixes();
        prefilter
    }

    /// Adds the statically infeasible nodes of a traversed span to the metrics.
    fn count_filtered(&self, start: usize, traversed: usize, metric: &mut AllocMetric) {
        let n = self.reasons.len();
        let span = traversed.min(n);
        if span == 0 {
            return;
        }
        let start = start.min(n);
        // Counts over the cyclic span [start, start + span) from prefix sums.
        let range = |pre: &[u32]| -> u32 {
            let end = start + span;
            if end <= n {
                pre[end] - pre[start]
            } else {
                (pre[n] - pre[start]) + pre[end - n]
            }
        };
        for (r, pre) in self.reason_prefix.iter().enumerate() {
            let c = range(pre);
            if c > 0 {
                metric.nodes_filtered += c;
                *metric
                    .constraint_filtered
                    .entry(self.labels[r].clone())
                    .or_default() += c;
            }
        }
        for (i, pre) in self.class_prefix.iter().enumerate() {
            let c = range(pre);
            if c > 0 {
                *metric
                    .class_filtered
                    .entry(self.classes[i].clone())
                    .or_default() += c;
            }
        }
    }

    fn build_prefixes(&mut self) {
        let n = self.reasons.len();
        self.reason_prefix = vec![vec![0u32; n + 1]; self.labels.len()];
        self.class_prefix = vec![vec![0u32; n + 1]; self.classes.len()];
        for p in 0..n {
            for pre in self.reason_prefix.iter_mut() {
                pre[p + 1] = pre[p];
            }
            for pre in self.class_prefix.iter_mut() {
                pre[p + 1] = pre[p];
            }
            let r = self.reasons[p] as usize;
            if r != 0 {
                self.reason_prefix[r - 1][p + 1] += 1;
                let c = self.node_classes[p];
                if c != u16::MAX {
                    self.class_prefix[c as usize][p + 1] += 1;
                }
            }
        }
    }
}

/// A scored candidate as the limit sees it.
#[derive(Clone, Copy)]
struct Cand {
    score: f64,
    idx: u32,
}

/// Spreads a cached row can carry.
const MAX_FAST_SPREADS: usize = 2;

#[derive(Clone, Copy, Default)]
enum RowState {
    /// Not cached: take the full path.
    #[default]
    Slow,
    /// Fits, with cached parts.
    Fits,
    /// Does not fit.
    Exhausted(Exhausted),
}

/// Cached, node-only score parts of one candidate, valid while the node's
/// generation is unchanged.
#[derive(Clone, Copy, Default)]
struct HotRow {
    generation: u32,
    state: RowState,
    binpack: f64,
    anti_affinity: f64,
    affinity: f64,
    values: [u32; MAX_FAST_SPREADS],
}

impl HotRow {
    /// The candidate's score from its cached parts and the current spread counts.
    #[inline]
    fn score(&self, ctx: &EvalContext<'_>, group: &GroupRules, even: &[EvenState]) -> f64 {
        let mut sum = self.binpack;
        let mut n = 1;
        if self.anti_affinity != 0.0 {
            sum += self.anti_affinity;
            n += 1;
        }
        if self.affinity != 0.0 {
            sum += self.affinity;
            n += 1;
        }
        if !group.spreads.is_empty() {
            let mut total = 0.0;
            for (si, spec) in group.spreads.iter().enumerate() {
                total += spread::boost(
                    spec,
                    &ctx.properties[spec.counter],
                    even[si],
                    self.values[si],
                    group.spread_weight_sum,
                );
            }
            if total != 0.0 {
                sum += total;
                n += 1;
            }
        }
        sum * INV_COUNT[n]
    }

    fn from_outcome(
        ctx: &mut EvalContext<'_>,
        group: &GroupRules,
        idx: u32,
        generation: u32,
        outcome: &Option<Choice>,
        fit_cache: &[Option<FitEntry>],
    ) -> Self {
        let mut row = HotRow {
            generation,
            ..Default::default()
        };
        match outcome {
            Some(c) => {
                // Penalties and evictions depend on more than the node.
                if c.mask & !(1 | 1 << 1 | 1 << 3 | 1 << 4) != 0 {
                    return row;
                }
                row.state = RowState::Fits;
                row.binpack = c.parts[0];
                row.anti_affinity = c.parts[1];
                row.affinity = c.parts[3];
                for (si, spec) in group.spreads.iter().enumerate().take(MAX_FAST_SPREADS) {
                    row.values[si] = ctx.node_property(spec.counter, idx);
                }
            }
            None => {
                if let Some(Some(FitEntry {
                    result: Err(dim), ..
                })) = fit_cache.get(idx as usize)
                {
                    row.state = RowState::Exhausted(*dim);
                }
            }
        }
        row
    }
}

/// The limit: score the first `limit` fitting candidates, skipping up to
/// [`MAX_SKIP`] that score ≤ 0 unless nothing better comes, and keep the best.
struct LimitPick {
    best: Option<Cand>,
    skipped: Vec<Cand>,
    seen: usize,
    limit: usize,
}

impl LimitPick {
    fn new(limit: usize) -> Self {
        Self {
            best: None,
            skipped: Vec::new(),
            seen: 0,
            limit,
        }
    }

    fn consider(&mut self, c: Cand) {
        if self.best.as_ref().is_none_or(|b| c.score > b.score) {
            self.best = Some(c);
        }
    }

    /// Offers a candidate; true once the limit is reached.
    fn offer(&mut self, c: Cand) -> bool {
        if self.skipped.len() < MAX_SKIP && c.score <= SKIP_THRESHOLD {
            self.skipped.push(c);
            return false;
        }
        self.consider(c);
        self.seen += 1;
        self.seen >= self.limit
    }

    fn finish(mut self) -> Option<Cand> {
        for c in std::mem::take(&mut self.skipped) {
            if self.seen >= self.limit {
                break;
            }
            self.consider(c);
            self.seen += 1;
        }
        self.best
    }
}

fn note_class(ctx: &mut EvalContext<'_>, class: usize, ok: bool) {
    let name = ctx.table.classes[class].clone();
    ctx.eligibility
        .classes
        .entry(name)
        .and_modify(|v| *v |= ok)
        .or_insert(ok);
}

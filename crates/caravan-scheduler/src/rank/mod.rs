//! Ranking: how feasible nodes are scored and one is chosen.
//!
//! Scores are binpack (or spread) fit, job anti-affinity, reschedule penalty,
//! node affinity, spread and preemption; a node's final score is the mean of the
//! scorers that applied to it.

pub mod spread;

use std::sync::Arc;

use caravan_proto::{Allocation, Job, TaskGroup};

use crate::context::EvalContext;
use crate::feasible::{self, Checks, CompileError, Compiled};
use crate::resources::GroupAsk;
use spread::SpreadSpec;

/// Candidates scoring at most this may be skipped by the limit.
pub const SKIP_THRESHOLD: f64 = 0.0;
/// How many low scorers the limit may skip.
pub const MAX_SKIP: usize = 3;

/// The job-level part of feasibility.
pub(crate) struct JobRules {
    pub checks: Checks,
    /// Per computed class: job-level checks passed?
    pub class_cache: Vec<Option<bool>>,
    /// `distinct_property` counters at job level with their limits.
    pub distinct_properties: Vec<(usize, u32)>,
}

impl JobRules {
    pub fn new(
        ctx: &mut EvalContext<'_>,
        job: &Job,
        allocs: &[Arc<Allocation>],
    ) -> Result<Self, CompileError> {
        let checks = Checks::for_job(job)?;
        let distinct_properties = checks
            .distinct_properties
            .iter()
            .map(|(k, limit)| (ctx.add_property(&k.l_target, None, allocs), *limit))
            .collect();
        Ok(Self {
            checks,
            class_cache: Vec::new(),
            distinct_properties,
        })
    }
}

/// Everything about one task group that stays fixed for the attempt.
pub(crate) struct GroupRules {
    /// The group's index in the evaluated job (for per-group counts).
    pub index: usize,
    /// Unique among the rules of one attempt: rules of an older job version
    /// share the group index but not the ask, so caches key on this.
    pub key: u32,
    pub count: u32,
    pub ask: GroupAsk,
    pub checks: Checks,
    pub class_cache: Vec<Option<bool>>,
    pub affinities: Vec<(Compiled, f64)>,
    pub affinity_weight_sum: f64,
    pub affinity_escaped: bool,
    pub affinity_cache: Vec<Option<f64>>,
    pub spreads: Vec<SpreadSpec>,
    pub spread_weight_sum: f64,
    pub distinct_properties: Vec<(usize, u32)>,
    pub limit: usize,
    /// Statically feasible candidates, built on the first selection.
    pub prefilter: Option<crate::select::Prefilter>,
}

impl GroupRules {
    pub fn new(
        ctx: &mut EvalContext<'_>,
        job: &Job,
        index: usize,
        tg: &TaskGroup,
        batch: bool,
        allocs: &[Arc<Allocation>],
    ) -> Result<Self, CompileError> {
        let checks = Checks::for_group(tg)?;
        let mut affinities = Vec::new();
        let all_affinities = job
            .affinities
            .iter()
            .chain(tg.affinities.iter())
            .chain(tg.tasks.iter().flat_map(|t| t.affinities.iter()));
        let mut affinity_escaped = false;
        for a in all_affinities {
            let k = Compiled::new(&a.l_target, &a.r_target, &a.operand)?;
            affinity_escaped |= k.unique;
            let w = if a.weight == 0 {
                50.0
            } else {
                f64::from(a.weight)
            };
            affinities.push((k, w));
        }
        let affinity_weight_sum = affinities.iter().map(|(_, w)| w.abs()).sum();
        let count = tg.count.max(0) as u32;
        let mut spreads = Vec::new();
        for s in tg.spreads.iter().chain(job.spreads.iter()) {
            let pi = ctx.add_property(&s.attribute, Some(&tg.name), allocs);
            let spec = SpreadSpec::new(s, count, pi, &mut ctx.properties[pi]);
            spreads.push(spec);
        }
        let spread_weight_sum = spreads.iter().map(|s| s.weight).sum();
        let distinct_properties = checks
            .distinct_properties
            .iter()
            .map(|(k, limit)| {
                (
                    ctx.add_property(&k.l_target, Some(&tg.name), allocs),
                    *limit,
                )
            })
            .collect();
        let n = ctx.candidates.len();
        let mut limit = if batch {
            2
        } else {
            let log = if n > 1 {
                (n as f64).log2().ceil() as usize
            } else {
                1
            };
            log.max(2)
        };
        if feasible::has_preferences(job, tg) {
            limit = (count as usize).max(100);
        }
        Ok(Self {
            index,
            key: ctx.next_rules_key(),
            count,
            ask: GroupAsk::of(tg),
            checks,
            class_cache: Vec::new(),
            affinities,
            affinity_weight_sum,
            affinity_escaped,
            affinity_cache: Vec::new(),
            spreads,
            spread_weight_sum,
            distinct_properties,
            limit,
            prefilter: None,
        })
    }
}

/// The normalised node-affinity score of a node (0 when none match).
pub fn affinity_score(rules: &GroupRules, node: &caravan_proto::Node) -> f64 {
    if rules.affinities.is_empty() || rules.affinity_weight_sum == 0.0 {
        return 0.0;
    }
    let matched: f64 = rules
        .affinities
        .iter()
        .filter(|(k, _)| k.check(node))
        .map(|(_, w)| *w)
        .sum();
    matched / rules.affinity_weight_sum
}

/// Nomad's preemption score: fewer, lower-priority evictions score higher.
pub fn preemption_score(net_priority: f64) -> f64 {
    let rate = 0.0048;
    let origin = 2048.0;
    1.0 / (1.0 + (rate * (net_priority - origin)).exp())
}

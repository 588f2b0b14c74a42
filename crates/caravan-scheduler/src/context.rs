//! The working state of one scheduling attempt: the node table, the plan being
//! built, and per-node usage that follows every change made to the plan.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use caravan_model::AllocExt;
use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, AllocList, Allocation, Evaluation, Job, Node, Plan,
    SchedulerAlgorithm, SchedulerConfiguration,
};

use crate::feasible::compute_node_class;
use crate::model;
use crate::property::PropertyCounts;
use crate::resources::{Capacity, NodeUsage};
use crate::rng::Rng;
use crate::state::State;

/// Which class results are known, for blocked evaluations.
#[derive(Debug, Clone, Default)]
pub struct Eligibility {
    /// Computed class → eligible for the job.
    pub classes: BTreeMap<String, bool>,
    /// A constraint defeated class caching.
    pub escaped: bool,
}

/// Dense per-node data for every node the attempt looks at.
pub(crate) struct NodeTable {
    pub nodes: Vec<Arc<Node>>,
    /// The nodes handed in occupy `0..initial`; later entries were added on demand.
    initial: usize,
    /// Built on the first lookup: `None` when the initial nodes are sorted by id
    /// (binary search), else an index. Lazily, so attempts that never look a
    /// node up by id never read every node's id.
    by_id: std::cell::OnceCell<Option<HashMap<String, u32, ShortKeyBuild>>>,
    extra: HashMap<String, u32, ShortKeyBuild>,
    /// Per node: 1 + index into `cap_store`, or 0 before first use (keeps the
    /// per-node array small; capacities are built only for visited nodes).
    caps: Vec<u32>,
    cap_store: Vec<Capacity>,
    class_ids: Vec<u32>,
    pub classes: Vec<String>,
    class_index: HashMap<String, u32, ShortKeyBuild>,
    usage: Vec<Option<Arc<NodeUsage>>>,
    /// Bumped whenever a node's usage changes, to invalidate cached scores.
    pub generation: Vec<u32>,
    /// The plan changed the node before its usage was loaded.
    dirty: Vec<bool>,
}

impl NodeTable {
    fn new(mut nodes: Vec<Arc<Node>>, scope: Option<&Job>) -> Self {
        // Scope and class in one pass, so each node's memory is visited once.
        let mut class_ids = Vec::with_capacity(nodes.len());
        let mut interner = ClassInterner::default();
        nodes.retain(|node| {
            if scope.is_some_and(|j| !crate::feasible::node_in_job_scope(j, node)) {
                return false;
            }
            class_ids.push(interner.intern(node));
            true
        });
        let n = nodes.len();
        let mut table = Self {
            nodes: Vec::new(),
            initial: n,
            by_id: std::cell::OnceCell::new(),
            extra: HashMap::default(),
            caps: vec![0; n],
            cap_store: Vec::new(),
            class_ids,
            classes: interner.classes,
            class_index: interner.index,
            usage: vec![None; n],
            generation: vec![0; n],
            dirty: vec![false; n],
        };
        table.nodes = nodes;
        table
    }

    fn intern_node_class(&mut self, node: &Node) -> u32 {
        if node.computed_class.is_empty() {
            let c = compute_node_class(node);
            self.intern_class(c)
        } else if let Some(&id) = self.class_index.get(&node.computed_class) {
            id
        } else {
            let c = node.computed_class.clone();
            self.intern_class(c)
        }
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// The table index of a node id, if the node is in the table.
    pub fn find(&self, id: &str) -> Option<u32> {
        let initial = &self.nodes[..self.initial];
        let index = self.by_id.get_or_init(|| {
            if initial.is_sorted_by(|a, b| a.id <= b.id) {
                None
            } else {
                Some(
                    initial
                        .iter()
                        .enumerate()
                        .map(|(i, n)| (n.id.clone(), i as u32))
                        .collect(),
                )
            }
        });
        let found = match index {
            None => initial
                .binary_search_by(|n| n.id.as_str().cmp(id))
                .ok()
                .map(|i| i as u32),
            Some(m) => m.get(id).copied(),
        };
        found.or_else(|| self.extra.get(id).copied())
    }

    fn push(&mut self, node: Arc<Node>) -> u32 {
        let i = self.nodes.len() as u32;
        self.extra.insert(node.id.clone(), i);
        self.nodes.push(node);
        self.caps.push(0);
        self.class_ids.push(u32::MAX);
        self.usage.push(None);
        self.generation.push(0);
        // The plan may already hold changes for a node added late.
        self.dirty.push(true);
        i
    }

    pub fn node(&self, i: u32) -> &Arc<Node> {
        &self.nodes[i as usize]
    }

    /// Computes a node's capacity on first use.
    pub fn ensure_capacity(&mut self, i: u32) {
        if self.caps[i as usize] == 0 {
            self.cap_store.push(Capacity::of(&self.nodes[i as usize]));
            self.caps[i as usize] = self.cap_store.len() as u32;
        }
    }

    /// A node's capacity, once [`Self::ensure_capacity`] ran.
    pub fn capacity(&self, i: u32) -> Option<&Capacity> {
        match self.caps[i as usize] {
            0 => None,
            k => self.cap_store.get(k as usize - 1),
        }
    }

    /// The interned computed class of a node.
    #[inline]
    pub fn class_id(&mut self, i: u32) -> u32 {
        let cur = self.class_ids[i as usize];
        if cur != u32::MAX {
            return cur;
        }
        let node = self.nodes[i as usize].clone();
        let id = self.intern_node_class(&node);
        self.class_ids[i as usize] = id;
        id
    }

    fn intern_class(&mut self, c: String) -> u32 {
        if let Some(&id) = self.class_index.get(&c) {
            return id;
        }
        let id = self.classes.len() as u32;
        self.class_index.insert(c.clone(), id);
        self.classes.push(c);
        id
    }

    pub fn loaded_usage(&self, i: u32) -> Option<&NodeUsage> {
        self.usage[i as usize].as_deref()
    }
}

/// Interns computed classes while the node table is built.
#[derive(Default)]
struct ClassInterner {
    classes: Vec<String>,
    index: HashMap<String, u32, ShortKeyBuild>,
}

impl ClassInterner {
    fn intern(&mut self, node: &Node) -> u32 {
        let computed;
        let class = if node.computed_class.is_empty() {
            computed = compute_node_class(node);
            &computed
        } else {
            &node.computed_class
        };
        if let Some(&id) = self.index.get(class) {
            return id;
        }
        let id = self.classes.len() as u32;
        self.index.insert(class.clone(), id);
        self.classes.push(class.clone());
        id
    }
}

/// A multiply-rotate hash taking eight bytes a step (FxHash's mix) for short
/// keys such as computed classes and alloc ids; SipHash is wasted on them and
/// a byte-at-a-time hash shows up when every node's class is interned.
#[derive(Default)]
pub(crate) struct ShortKeyHasher(u64);

impl ShortKeyHasher {
    const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

    #[inline]
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::SEED);
    }
}

impl std::hash::Hasher for ShortKeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.mix(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.mix(u64::from_le_bytes(w));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.mix(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.mix(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.mix(i);
    }
    fn write_usize(&mut self, i: usize) {
        self.mix(i as u64);
    }
}

pub(crate) type ShortKeyBuild = std::hash::BuildHasherDefault<ShortKeyHasher>;

/// One scheduling attempt's context.
pub(crate) struct EvalContext<'a> {
    pub state: &'a dyn State,
    pub eval: &'a Evaluation,
    pub now: i64,
    pub rng: Rng,
    pub job: Option<Arc<Job>>,
    pub config: SchedulerConfiguration,
    pub plan: Plan,
    pub table: NodeTable,
    /// Table indexes of the nodes placements may go to, in candidate order.
    pub candidates: Vec<u32>,
    pub eligibility: Eligibility,
    /// Full copies of allocations the plan removes, by node id, so lazily loaded
    /// usage can account for them.
    removed: HashMap<String, Vec<Arc<Allocation>>, ShortKeyBuild>,
    /// Shared by every node without allocations, so loading one allocates nothing.
    empty_usage: Arc<NodeUsage>,
    /// Per table node, per task group index: this job's allocations proposed there.
    job_counts: Vec<u32>,
    groups: Vec<String>,
    pub properties: Vec<PropertyCounts>,
    /// Priorities of other jobs, looked up for preemption.
    priorities: HashMap<(String, String), i32>,
    /// Group rules built so far in the attempt.
    rules_built: u32,
}

/// The scheduler configuration a job is placed with: the cluster's, with
/// what the job's node pool sets over it (Nomad's `WithNodePool`).
fn effective_config(state: &dyn State, job: Option<&Job>) -> SchedulerConfiguration {
    let mut config = state.scheduler_config().map(|c| *c).unwrap_or_default();
    let pool = job
        .and_then(|j| state.node_pool(&j.node_pool))
        .and_then(|p| p.scheduler_config);
    if let Some(pool) = pool
        && pool.scheduler_algorithm() != SchedulerAlgorithm::Unspecified
    {
        config.set_scheduler_algorithm(pool.scheduler_algorithm());
    }
    config
}

impl<'a> EvalContext<'a> {
    /// Sets up an attempt over `nodes` (the candidates, sorted by id).
    pub fn new(
        state: &'a dyn State,
        eval: &'a Evaluation,
        job: Option<Arc<Job>>,
        nodes: Vec<Arc<Node>>,
        now: i64,
        attempt: u32,
    ) -> Self {
        let rng = Rng::from_seed_parts(&[
            eval.id.as_bytes(),
            &state.revision().to_be_bytes(),
            &attempt.to_be_bytes(),
        ])
        .clocked(now);
        let config = effective_config(state, job.as_deref());
        let runnable = job.as_deref().filter(|j| !j.stop);
        let table = NodeTable::new(nodes, runnable);
        let candidates = (0..table.len() as u32).collect();
        let groups: Vec<String> = job
            .as_ref()
            .map(|j| j.task_groups.iter().map(|g| g.name.clone()).collect())
            .unwrap_or_default();
        let plan = Plan {
            eval_id: eval.id.clone(),
            priority: eval.priority,
            all_at_once: job.as_ref().is_some_and(|j| j.all_at_once),
            job: job.as_ref().map(|j| (**j).clone()),
            snapshot_revision: state.revision(),
            ..Default::default()
        };
        let job_counts = vec![0; table.len() * groups.len().max(1)];
        Self {
            state,
            eval,
            now,
            rng,
            job,
            config,
            plan,
            table,
            candidates,
            eligibility: Eligibility::default(),
            removed: HashMap::default(),
            empty_usage: Arc::new(NodeUsage::default()),
            job_counts,
            groups,
            properties: Vec::new(),
            priorities: HashMap::new(),
            rules_built: 0,
        }
    }

    /// A key no other group rules of this attempt have.
    pub fn next_rules_key(&mut self) -> u32 {
        self.rules_built += 1;
        self.rules_built
    }

    /// Shuffles the candidates with the eval's seed.
    pub fn shuffle_candidates(&mut self) {
        let mut c = std::mem::take(&mut self.candidates);
        self.rng.shuffle(&mut c);
        self.candidates = c;
    }

    /// Counts the job's existing non-terminal allocations into the per-node tallies.
    pub fn count_existing(&mut self, allocs: &[Arc<Allocation>]) {
        for a in allocs {
            if !a.is_terminal() {
                let node = self.table.find(&a.node_id);
                self.tally(a, true, node);
            }
        }
    }

    /// The name of the evaluated job's group at `index`.
    pub fn group_name(&self, index: usize) -> Option<&str> {
        self.groups.get(index).map(String::as_str)
    }

    fn group_index(&self, name: &str) -> Option<usize> {
        self.groups.iter().position(|g| g == name)
    }

    /// This job's allocations of group `g` proposed on table node `i`.
    pub fn job_count(&self, i: u32, g: usize) -> u32 {
        let n = self.groups.len().max(1);
        self.job_counts
            .get(i as usize * n + g)
            .copied()
            .unwrap_or(0)
    }

    /// This job's allocations of any group proposed on table node `i`.
    pub fn job_count_any(&self, i: u32) -> u32 {
        let n = self.groups.len().max(1);
        let start = i as usize * n;
        self.job_counts
            .get(start..start + n)
            .map_or(0, |s| s.iter().sum())
    }

    fn tally(&mut self, a: &Allocation, up: bool, node: Option<u32>) {
        let Some(job) = &self.job else { return };
        if a.job_id != job.id || a.namespace != job.namespace {
            return;
        }
        if let (Some(i), Some(g)) = (node, self.group_index(&a.task_group)) {
            let n = self.groups.len().max(1);
            let slot = i as usize * n + g;
            if slot >= self.job_counts.len() {
                self.job_counts.resize(slot + 1, 0);
            }
            let c = &mut self.job_counts[slot];
            *c = if up { *c + 1 } else { c.saturating_sub(1) };
        }
        for pi in 0..self.properties.len() {
            if !self.properties[pi].in_scope(&a.task_group) {
                continue;
            }
            let v = self.property_value(pi, &a.node_id, node);
            self.properties[pi].bump(v, up);
        }
    }

    /// The value id of property counter `pi` on a node given by id (and table index).
    pub fn property_value(&mut self, pi: usize, node_id: &str, idx: Option<u32>) -> u32 {
        match idx {
            Some(i) => self.node_property(pi, i),
            None => {
                let Some(node) = self.state.node(node_id) else {
                    return crate::property::MISSING;
                };
                let target = &self.properties[pi].target;
                match crate::feasible::target::resolve(target, &node).map(|v| v.into_owned()) {
                    Some(v) => self.properties[pi].intern(v),
                    None => crate::property::MISSING,
                }
            }
        }
    }

    /// The value id of property counter `pi` on table node `i`.
    #[inline]
    pub fn node_property(&mut self, pi: usize, i: u32) -> u32 {
        if let Some(v) = self.properties[pi].cached(i) {
            return v;
        }
        let value = crate::feasible::target::resolve(
            &self.properties[pi].target,
            &self.table.nodes[i as usize],
        )
        .map(|v| v.into_owned());
        self.properties[pi].set_node_value(i, value)
    }

    /// Adds a property counter and fills it from the job's existing allocations.
    pub fn add_property(
        &mut self,
        target: &str,
        group: Option<&str>,
        allocs: &[Arc<Allocation>],
    ) -> usize {
        if let Some(i) = self
            .properties
            .iter()
            .position(|p| p.target == target && p.group.as_deref() == group)
        {
            return i;
        }
        self.properties
            .push(PropertyCounts::new(target, group, self.table.len()));
        let pi = self.properties.len() - 1;
        let stopped: Vec<String> = self
            .removed
            .values()
            .flatten()
            .map(|a| a.id.clone())
            .collect();
        for a in allocs {
            if a.is_terminal()
                || !self.properties[pi].in_scope(&a.task_group)
                || stopped.contains(&a.id)
            {
                continue;
            }
            let idx = self.table.find(&a.node_id);
            let v = self.property_value(pi, &a.node_id, idx);
            self.properties[pi].bump(v, true);
        }
        let placed: Vec<(String, String)> = self
            .plan
            .node_allocation
            .values()
            .flat_map(|l| l.allocs.iter())
            .map(|a| (a.node_id.clone(), a.task_group.clone()))
            .collect();
        for (node_id, group) in placed {
            if self.properties[pi].in_scope(&group) {
                let idx = self.table.find(&node_id);
                let v = self.property_value(pi, &node_id, idx);
                self.properties[pi].bump(v, true);
            }
        }
        pi
    }

    /// The table index of any node, adding it on demand.
    pub fn node_index(&mut self, id: &str) -> Option<u32> {
        if let Some(i) = self.table.find(id) {
            return Some(i);
        }
        let node = self.state.node(id)?;
        let i = self.table.push(node);
        let n = self.groups.len().max(1);
        self.job_counts.resize(self.table.len() * n, 0);
        Some(i)
    }

    /// The proposed usage of table node `i`: state plus the plan so far.
    pub fn usage(&mut self, i: u32) -> &NodeUsage {
        if self.table.usage[i as usize].is_none() {
            let node = self.table.nodes[i as usize].clone();
            let node_id = node.id.as_str();
            let mut u = match self.state.node_usage(node_id) {
                Some(u) => Arc::new(u),
                None => {
                    let allocs = self.state.allocs_by_node(node_id);
                    if allocs.iter().all(|a| a.is_terminal()) {
                        self.empty_usage.clone()
                    } else {
                        Arc::new(NodeUsage::from_allocs(allocs.iter().map(|a| &**a)))
                    }
                }
            };
            let (removed, placed) = if self.table.dirty[i as usize] {
                (
                    self.removed.get(node_id),
                    self.plan.node_allocation.get(node_id),
                )
            } else {
                (None, None)
            };
            if removed.is_some() || placed.is_some() {
                let m = Arc::make_mut(&mut u);
                for a in removed.into_iter().flatten() {
                    m.remove(a);
                }
                for a in placed.into_iter().flat_map(|l| l.allocs.iter()) {
                    m.add(a);
                }
            }
            self.table.usage[i as usize] = Some(u);
        }
        self.table.usage[i as usize]
            .as_deref()
            .unwrap_or_else(|| unreachable_usage())
    }

    fn adjust_usage(&mut self, node: Option<u32>, a: &Allocation, add: bool) {
        if let Some(i) = node
            && self.table.usage[i as usize].is_none()
        {
            self.table.dirty[i as usize] = true;
        }
        if let Some(i) = node
            && let Some(u) = self.table.usage[i as usize].as_mut()
        {
            let m = Arc::make_mut(u);
            if add {
                m.add(a);
            } else {
                m.remove(a);
            }
            self.table.generation[i as usize] = self.table.generation[i as usize].wrapping_add(1);
        }
    }

    fn remember_removed(&mut self, a: &Arc<Allocation>) -> bool {
        let list = self.removed.entry(a.node_id.clone()).or_default();
        if list.iter().any(|x| x.id == a.id) {
            return false;
        }
        list.push(a.clone());
        true
    }

    /// Whether the plan already stops or evicts an allocation.
    pub fn is_removed(&self, a: &Allocation) -> bool {
        self.removed
            .get(&a.node_id)
            .is_some_and(|l| l.iter().any(|x| x.id == a.id))
    }

    /// Adds a stop of `a` to the plan.
    pub fn stop(
        &mut self,
        a: &Arc<Allocation>,
        description: &str,
        client_status: Option<AllocClientStatus>,
        followup_eval: Option<&str>,
    ) {
        if !self.remember_removed(a) {
            return;
        }
        let mut slim = slim_copy(a, self.now);
        slim.set_desired_status(AllocDesiredStatus::Stop);
        slim.desired_description = description.to_string();
        if let Some(cs) = client_status {
            slim.set_client_status(cs);
        }
        if let Some(f) = followup_eval {
            slim.followup_eval_id = f.to_string();
        }
        self.plan
            .node_update
            .entry(a.node_id.clone())
            .or_default()
            .allocs
            .push(slim);
        if !a.is_terminal() {
            let node = self.table.find(&a.node_id);
            self.adjust_usage(node, a, false);
            self.tally(a, false, node);
        }
    }

    /// Takes back a stop added earlier (its replacement could not be placed).
    pub fn pop_stop(&mut self, a: &Arc<Allocation>) {
        let Some(list) = self.removed.get_mut(&a.node_id) else {
            return;
        };
        let Some(pos) = list.iter().position(|x| x.id == a.id) else {
            return;
        };
        list.remove(pos);
        if let Some(l) = self.plan.node_update.get_mut(&a.node_id) {
            l.allocs.retain(|x| x.id != a.id);
            if l.allocs.is_empty() {
                self.plan.node_update.remove(&a.node_id);
            }
        }
        if !a.is_terminal() {
            let node = self.table.find(&a.node_id);
            self.adjust_usage(node, a, true);
            self.tally(a, true, node);
        }
    }

    /// Adds an eviction of `a` (made room for `by`) to the plan.
    pub fn preempt(&mut self, a: &Arc<Allocation>, by: &str) {
        if !self.remember_removed(a) {
            return;
        }
        let mut slim = slim_copy(a, self.now);
        slim.set_desired_status(AllocDesiredStatus::Evict);
        slim.desired_description = format!("Preempted by alloc ID {by}");
        slim.preempted_by_allocation = by.to_string();
        self.plan
            .node_preemptions
            .entry(a.node_id.clone())
            .or_default()
            .allocs
            .push(slim);
        let node = self.table.find(&a.node_id);
        self.adjust_usage(node, a, false);
        self.tally(a, false, node);
    }

    /// Adds a new allocation to the plan, on table node `node`.
    pub fn place(&mut self, node: u32, a: Allocation) {
        self.adjust_usage(Some(node), &a, true);
        self.tally(&a, true, Some(node));
        push_alloc(&mut self.plan.node_allocation, a);
    }

    /// Adds an in-place update of `old` to the plan.
    pub fn update_in_place(&mut self, old: &Allocation, new: Allocation) {
        let node = self.table.find(&old.node_id);
        self.adjust_usage(node, old, false);
        self.adjust_usage(node, &new, true);
        push_alloc(&mut self.plan.node_allocation, new);
    }

    /// Adds an update that only changes bookkeeping fields (no resources).
    pub fn update_attributes(&mut self, new: Allocation) {
        push_alloc(&mut self.plan.node_allocation, new);
    }

    /// The priority of another job, cached for the attempt.
    pub fn job_priority(&mut self, namespace: &str, job_id: &str) -> i32 {
        let key = (namespace.to_string(), job_id.to_string());
        if let Some(p) = self.priorities.get(&key) {
            return *p;
        }
        let p = self
            .state
            .job(namespace, job_id)
            .map_or(model::DEFAULT_PRIORITY, |j| model::priority(&j));
        self.priorities.insert(key, p);
        p
    }

    /// The non-terminal allocations on a node that the plan keeps.
    pub fn live_allocs_on(&self, node_id: &str) -> Vec<Arc<Allocation>> {
        self.state
            .allocs_by_node(node_id)
            .into_iter()
            .filter(|a| !a.is_terminal() && !self.is_removed(a))
            .collect()
    }

    /// Candidate nodes per datacenter, for the metrics of failed placements.
    pub fn nodes_available(&self) -> BTreeMap<String, u32> {
        let mut m: BTreeMap<String, u32> = BTreeMap::new();
        for &i in &self.candidates {
            let dc = &self.table.node(i).datacenter;
            match m.get_mut(dc) {
                Some(c) => *c += 1,
                None => {
                    m.insert(dc.clone(), 1);
                }
            }
        }
        m
    }

    /// Whether the plan changes nothing.
    pub fn plan_is_noop(&self) -> bool {
        self.plan.node_update.is_empty()
            && self.plan.node_allocation.is_empty()
            && self.plan.node_preemptions.is_empty()
            && self.plan.deployment.is_none()
            && self.plan.deployment_updates.is_empty()
    }
}

fn unreachable_usage() -> &'static NodeUsage {
    static EMPTY: NodeUsage = NodeUsage {
        cpu_mhz: 0,
        memory_mb: 0,
        memory_max_mb: 0,
        disk_mb: 0,
        cores: Vec::new(),
        ports: Vec::new(),
    };
    &EMPTY
}

fn push_alloc(map: &mut BTreeMap<String, AllocList>, a: Allocation) {
    // Looking up first avoids allocating a key for every placement.
    match map.get_mut(&a.node_id) {
        Some(l) => l.allocs.push(a),
        None => {
            map.insert(a.node_id.clone(), AllocList { allocs: vec![a] });
        }
    }
}

/// The fields of an allocation a stop or eviction needs.
fn slim_copy(a: &Allocation, now: i64) -> Allocation {
    Allocation {
        id: a.id.clone(),
        name: a.name.clone(),
        namespace: a.namespace.clone(),
        job_id: a.job_id.clone(),
        job_version: a.job_version,
        task_group: a.task_group.clone(),
        node_id: a.node_id.clone(),
        node_name: a.node_name.clone(),
        eval_id: a.eval_id.clone(),
        deployment_id: a.deployment_id.clone(),
        client_status: a.client_status,
        desired_status: a.desired_status,
        modify_time_unix_ns: now,
        ..Default::default()
    }
}

/// Counts the allocations a plan (or result) places or updates.
pub fn count_allocs(map: &BTreeMap<String, AllocList>) -> usize {
    map.values().map(|l| l.allocs.len()).sum()
}

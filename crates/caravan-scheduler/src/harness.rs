//! An in-memory cluster and a recording planner for tests and benchmarks.
//!
//! The planner verifies and applies plans the way the plan applier does (node
//! ready and eligible, the exact fit of [`resources::allocs_fit`]), can refuse
//! chosen nodes to simulate partial commits, and keeps every plan and
//! evaluation it was handed.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use caravan_model::NodeExt;
use caravan_proto::{
    AllocClientStatus, AllocList, Allocation, Deployment, Evaluation, Job, Node, NodePool,
    NodeStatus, Plan, PlanResult, SchedulerConfiguration, SchedulingEligibility,
};

use crate::error::{PlannerError, SchedulerError};
use crate::planner::{PlanOutcome, Planner};
use crate::resources;
use crate::state::State;

/// The cluster's contents at one revision.
#[derive(Debug, Clone, Default)]
pub struct FixtureState {
    /// Revision of the snapshot.
    pub revision: i64,
    jobs: BTreeMap<(String, String), Arc<Job>>,
    versions: BTreeMap<(String, String, u64), Arc<Job>>,
    nodes: BTreeMap<String, Arc<Node>>,
    allocs: BTreeMap<String, Arc<Allocation>>,
    by_node: HashMap<String, BTreeSet<String>>,
    by_job: HashMap<(String, String), BTreeSet<String>>,
    deployments: BTreeMap<String, Arc<Deployment>>,
    config: Option<Arc<SchedulerConfiguration>>,
    pools: BTreeMap<String, Arc<NodePool>>,
}

impl State for FixtureState {
    fn revision(&self) -> i64 {
        self.revision
    }
    fn job(&self, namespace: &str, job_id: &str) -> Option<Arc<Job>> {
        self.jobs
            .get(&(namespace.to_string(), job_id.to_string()))
            .cloned()
    }
    fn job_version(&self, namespace: &str, job_id: &str, version: u64) -> Option<Arc<Job>> {
        self.versions
            .get(&(namespace.to_string(), job_id.to_string(), version))
            .cloned()
    }
    fn node(&self, node_id: &str) -> Option<Arc<Node>> {
        self.nodes.get(node_id).cloned()
    }
    fn nodes(&self) -> Vec<Arc<Node>> {
        self.nodes.values().cloned().collect()
    }
    fn ready_nodes(&self) -> Vec<Arc<Node>> {
        self.nodes
            .values()
            .filter(|n| n.accepts_placements())
            .cloned()
            .collect()
    }
    fn alloc(&self, alloc_id: &str) -> Option<Arc<Allocation>> {
        self.allocs.get(alloc_id).cloned()
    }
    fn allocs_by_job(&self, namespace: &str, job_id: &str) -> Vec<Arc<Allocation>> {
        self.by_job
            .get(&(namespace.to_string(), job_id.to_string()))
            .into_iter()
            .flatten()
            .filter_map(|id| self.allocs.get(id).cloned())
            .collect()
    }
    fn allocs_by_node(&self, node_id: &str) -> Vec<Arc<Allocation>> {
        self.by_node
            .get(node_id)
            .into_iter()
            .flatten()
            .filter_map(|id| self.allocs.get(id).cloned())
            .collect()
    }
    fn deployments_by_job(&self, namespace: &str, job_id: &str) -> Vec<Arc<Deployment>> {
        self.deployments
            .values()
            .filter(|d| d.namespace == namespace && d.job_id == job_id)
            .cloned()
            .collect()
    }
    fn scheduler_config(&self) -> Option<Arc<SchedulerConfiguration>> {
        self.config.clone()
    }
    fn node_pool(&self, name: &str) -> Option<Arc<NodePool>> {
        self.pools.get(name).cloned()
    }
}

impl FixtureState {
    /// Adds or replaces a node.
    pub fn upsert_node(&mut self, node: Node) {
        self.nodes.insert(node.id.clone(), Arc::new(node));
    }

    /// Adds or replaces a job as given, also as a stored version.
    pub fn upsert_job(&mut self, job: Job) {
        let key = (job.namespace.clone(), job.id.clone());
        self.versions.insert(
            (key.0.clone(), key.1.clone(), job.version),
            Arc::new(job.clone()),
        );
        self.jobs.insert(key, Arc::new(job));
    }

    /// Adds or replaces an allocation.
    pub fn upsert_alloc(&mut self, alloc: Allocation) {
        if let Some(old) = self.allocs.get(&alloc.id)
            && old.node_id != alloc.node_id
            && let Some(s) = self.by_node.get_mut(&old.node_id)
        {
            s.remove(&alloc.id);
        }
        self.by_node
            .entry(alloc.node_id.clone())
            .or_default()
            .insert(alloc.id.clone());
        self.by_job
            .entry((alloc.namespace.clone(), alloc.job_id.clone()))
            .or_default()
            .insert(alloc.id.clone());
        self.allocs.insert(alloc.id.clone(), Arc::new(alloc));
    }

    /// Adds or replaces a deployment.
    pub fn upsert_deployment(&mut self, d: Deployment) {
        self.deployments.insert(d.id.clone(), Arc::new(d));
    }

    /// Sets the scheduler configuration.
    pub fn set_config(&mut self, c: SchedulerConfiguration) {
        self.config = Some(Arc::new(c));
    }

    /// Adds or replaces a node pool stored as an object.
    pub fn upsert_node_pool(&mut self, pool: NodePool) {
        self.pools.insert(pool.name.clone(), Arc::new(pool));
    }

    /// Every allocation, by id.
    pub fn allocs(&self) -> impl Iterator<Item = &Arc<Allocation>> {
        self.allocs.values()
    }

    /// Every deployment, by id.
    pub fn deployments(&self) -> impl Iterator<Item = &Arc<Deployment>> {
        self.deployments.values()
    }
}

/// A test cluster with a planner that applies what it accepts.
#[derive(Debug, Default)]
pub struct Harness {
    /// The current state; plans are applied to it.
    pub state: FixtureState,
    /// The time the scheduler is told it is.
    pub now: i64,
    /// Every plan submitted.
    pub plans: Vec<Plan>,
    /// The result of each plan.
    pub results: Vec<PlanResult>,
    /// Evaluations created (blocked, follow-up, rolling, preemption).
    pub created_evals: Vec<Evaluation>,
    /// Final updates of processed evaluations.
    pub updated_evals: Vec<Evaluation>,
    /// Evaluations put back into the blocked set.
    pub reblocked_evals: Vec<Evaluation>,
    /// Nodes whose part of a plan is refused.
    pub reject_nodes: BTreeSet<String>,
    /// How many more plans `reject_nodes` applies to; `None` means all.
    pub reject_for_plans: Option<usize>,
    /// Accept plans without applying them (benchmarks).
    pub no_apply: bool,
}

impl Harness {
    /// An empty cluster at revision 1.
    pub fn new() -> Self {
        Self {
            state: FixtureState {
                revision: 1,
                ..Default::default()
            },
            now: 1_700_000_000_000_000_000,
            ..Default::default()
        }
    }

    /// A snapshot of the current state.
    pub fn snapshot(&self) -> FixtureState {
        self.state.clone()
    }

    /// Runs the scheduler on `eval` against the current state.
    pub fn process(&mut self, eval: &Evaluation) -> Result<(), SchedulerError> {
        let snap = self.snapshot();
        let now = self.now;
        crate::process(eval, snap, self, now)
    }

    /// The last final update of an evaluation.
    pub fn last_update(&self) -> Option<&Evaluation> {
        self.updated_evals.last()
    }

    fn verify_node(&self, plan: &Plan, node_id: &str) -> Result<(), String> {
        if self.reject_nodes.contains(node_id) && self.reject_for_plans != Some(0) {
            return Err("rejected by the test".into());
        }
        let placing = plan
            .node_allocation
            .get(node_id)
            .map_or(&[][..], |l| &l.allocs[..]);
        if placing.is_empty() {
            return Ok(());
        }
        let Some(node) = self.state.nodes.get(node_id) else {
            return Err("node does not exist".into());
        };
        let marks_unknown = placing.iter().all(|a| {
            a.client_status() == AllocClientStatus::Unknown
                && self
                    .state
                    .allocs
                    .get(&a.id)
                    .is_some_and(|cur| cur.node_id == node_id)
        });
        if node.status() == NodeStatus::Disconnected && marks_unknown {
            return Ok(());
        }
        if node.status() != NodeStatus::Ready {
            return Err("node is not ready for placements".into());
        }
        let only_updates = placing
            .iter()
            .all(|a| self.state.allocs.contains_key(&a.id));
        if (node.scheduling_eligibility() == SchedulingEligibility::Ineligible
            || node.drain_strategy.is_some())
            && !only_updates
        {
            return Err("node is not eligible".into());
        }
        let mut remove: BTreeSet<&str> = BTreeSet::new();
        for m in [
            &plan.node_update,
            &plan.node_preemptions,
            &plan.node_allocation,
        ] {
            for a in m.get(node_id).map_or(&[][..], |l| &l.allocs[..]) {
                remove.insert(&a.id);
            }
        }
        let existing = self.state.allocs_by_node(node_id);
        let kept = existing
            .iter()
            .filter(|a| !remove.contains(a.id.as_str()))
            .map(|a| &**a);
        resources::allocs_fit(node, kept.chain(placing.iter())).map_err(|e| e.to_string())
    }

    fn apply(&mut self, plan: &Plan) -> PlanResult {
        let mut nodes: BTreeSet<&String> = BTreeSet::new();
        nodes.extend(plan.node_update.keys());
        nodes.extend(plan.node_allocation.keys());
        nodes.extend(plan.node_preemptions.keys());
        let mut result = PlanResult::default();
        let mut rejected: Vec<(String, String)> = Vec::new();
        for n in &nodes {
            if let Err(reason) = self.verify_node(plan, n) {
                rejected.push(((*n).clone(), reason));
            }
        }
        if !rejected.is_empty() && plan.all_at_once {
            result.rejected_nodes = rejected.iter().map(|r| r.0.clone()).collect();
            result.rejection_reasons = rejected.into_iter().collect();
            result.refresh_revision = self.state.revision;
            return result;
        }
        let refused: BTreeSet<String> = rejected.iter().map(|r| r.0.clone()).collect();
        let keep = |m: &BTreeMap<String, AllocList>| -> BTreeMap<String, AllocList> {
            m.iter()
                .filter(|(k, _)| !refused.contains(*k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        result.node_update = keep(&plan.node_update);
        result.node_allocation = keep(&plan.node_allocation);
        result.node_preemptions = keep(&plan.node_preemptions);
        result.deployment = plan.deployment.clone();
        result.deployment_updates = plan.deployment_updates.clone();
        result.rejected_nodes = refused.iter().cloned().collect();
        result.rejection_reasons = rejected.into_iter().collect();
        if self.no_apply {
            result.alloc_revision = self.state.revision;
            return result;
        }
        self.state.revision += 1;
        let rev = self.state.revision;
        self.apply_stops(&result, rev);
        self.apply_placements(&result, rev);
        self.apply_deployments(&result, rev);
        self.created_evals.extend(plan.evals.iter().cloned());
        result.alloc_revision = rev;
        if !result.rejected_nodes.is_empty() {
            result.refresh_revision = rev;
        }
        result
    }

    /// Applies the committed stops and evictions.
    fn apply_stops(&mut self, result: &PlanResult, rev: i64) {
        for list in result
            .node_update
            .values()
            .chain(result.node_preemptions.values())
        {
            for stop in &list.allocs {
                if let Some(cur) = self.state.allocs.get(&stop.id) {
                    let mut a = (**cur).clone();
                    a.desired_status = stop.desired_status;
                    a.desired_description = stop.desired_description.clone();
                    if stop.client_status() == AllocClientStatus::Lost {
                        a.client_status = stop.client_status;
                    }
                    if !stop.followup_eval_id.is_empty() {
                        a.followup_eval_id = stop.followup_eval_id.clone();
                    }
                    if !stop.preempted_by_allocation.is_empty() {
                        a.preempted_by_allocation = stop.preempted_by_allocation.clone();
                    }
                    a.modify_revision = rev;
                    self.state.upsert_alloc(a);
                }
            }
        }
    }

    /// Applies the committed placements and in-place updates (which keep what
    /// the client reported), linking replacements to what they replace.
    fn apply_placements(&mut self, result: &PlanResult, rev: i64) {
        for list in result.node_allocation.values() {
            for a in &list.allocs {
                let mut a = a.clone();
                if let Some(cur) = self.state.allocs.get(&a.id) {
                    a.create_revision = cur.create_revision;
                    // The servers override the client only to mark it lost or unknown.
                    if !matches!(
                        a.client_status(),
                        AllocClientStatus::Lost | AllocClientStatus::Unknown
                    ) {
                        a.client_status = cur.client_status;
                        a.client_description = cur.client_description.clone();
                    }
                    a.task_states = cur.task_states.clone();
                } else {
                    a.create_revision = rev;
                }
                a.modify_revision = rev;
                a.alloc_modify_revision = rev;
                if !a.previous_allocation.is_empty()
                    && let Some(prev) = self.state.allocs.get(&a.previous_allocation)
                {
                    let mut p = (**prev).clone();
                    p.next_allocation = a.id.clone();
                    self.state.upsert_alloc(p);
                }
                self.state.upsert_alloc(a);
            }
        }
    }

    /// Applies the committed deployment and deployment status changes.
    fn apply_deployments(&mut self, result: &PlanResult, rev: i64) {
        if let Some(d) = &result.deployment {
            let mut d = d.clone();
            if d.create_revision == 0 {
                d.create_revision = rev;
            }
            d.modify_revision = rev;
            self.state.upsert_deployment(d);
        }
        for u in &result.deployment_updates {
            if let Some(cur) = self.state.deployments.get(&u.deployment_id) {
                let mut d = (**cur).clone();
                d.status = u.status;
                d.status_description = u.status_description.clone();
                d.modify_revision = rev;
                self.state.upsert_deployment(d);
            }
        }
    }
}

impl Planner for Harness {
    type State = FixtureState;

    fn submit_plan(&mut self, plan: Plan) -> Result<PlanOutcome<FixtureState>, PlannerError> {
        let result = self.apply(&plan);
        if let Some(n) = self.reject_for_plans.as_mut() {
            *n = n.saturating_sub(1);
        }
        let partial = !result.rejected_nodes.is_empty();
        self.plans.push(plan);
        self.results.push(result.clone());
        Ok(PlanOutcome {
            result,
            refreshed: partial.then(|| self.snapshot()),
        })
    }

    fn create_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError> {
        self.created_evals.push(eval);
        Ok(())
    }

    fn update_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError> {
        self.updated_evals.push(eval);
        Ok(())
    }

    fn reblock_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError> {
        self.reblocked_evals.push(eval);
        Ok(())
    }
}

/// Marks an allocation's client status (test convenience).
pub fn with_client_status(mut a: Allocation, s: AllocClientStatus) -> Allocation {
    a.set_client_status(s);
    a
}

//! Reading the tables: an immutable [`Snapshot`] at one revision and the
//! accessors the services use on it.

use std::ops::Deref;
use std::sync::{Arc, LazyLock};

use caravan_proto::{
    Allocation, Deployment, Evaluation, Job, Node, NodePool, SchedulerConfiguration,
};
use caravan_store::Revision;

use crate::index::Id;
use crate::tables::{NodeAllocs, Tables};
use crate::usage::NodeUsage;

static NO_USAGE: LazyLock<NodeUsage> = LazyLock::new(NodeUsage::default);

/// A consistent, immutable view of the cache at one revision. Taking one is
/// O(1) and holding one costs only the nodes the cache has rewritten since.
#[derive(Clone, Debug)]
pub struct Snapshot(Arc<Tables>);

/// The allocations of one node and what they hold, from [`Tables::on_node`].
#[derive(Clone, Copy, Debug)]
pub struct OnNode<'a> {
    entry: Option<&'a NodeAllocs>,
    tables: &'a Tables,
}

impl<'a> OnNode<'a> {
    /// What the node's non-terminal allocations hold (empty if none).
    pub fn usage(&self) -> &'a NodeUsage {
        self.entry.map_or(&*NO_USAGE, |entry| &entry.usage)
    }

    /// An allocation, if it is on this node, terminal or not.
    pub fn alloc(&self, alloc_id: &str) -> Option<&'a Arc<Allocation>> {
        let id = Id::from(alloc_id);
        if !self.entry?.ids.contains(&id) {
            return None;
        }
        self.tables.allocs.get(&id).map(|s| &s.0)
    }
}

impl Snapshot {
    /// Freezes `tables` (an O(1) clone of the caller's tables).
    pub fn new(tables: Tables) -> Self {
        Snapshot(Arc::new(tables))
    }
}

impl Deref for Snapshot {
    type Target = Tables;
    fn deref(&self) -> &Tables {
        &self.0
    }
}

impl Tables {
    /// The revision every change up to which is reflected.
    pub fn revision(&self) -> Revision {
        self.revision
    }

    /// The current version of a job.
    pub fn job(&self, namespace: &str, job_id: &str) -> Option<&Arc<Job>> {
        self.jobs.get(namespace, job_id)
    }

    /// Every job, ordered by namespace then id.
    pub fn jobs(&self) -> impl Iterator<Item = &Arc<Job>> + '_ {
        self.jobs.iter().map(|(_, _, job)| job)
    }

    /// The jobs of one namespace, ordered by id.
    pub fn jobs_in<'a>(&'a self, namespace: &str) -> impl Iterator<Item = &'a Arc<Job>> + 'a {
        self.jobs.iter_namespace(namespace).map(|(_, job)| job)
    }

    /// Number of jobs.
    pub fn job_count(&self) -> usize {
        self.jobs.len()
    }

    /// One version of a job.
    pub fn job_version(&self, namespace: &str, job_id: &str, version: u64) -> Option<&Arc<Job>> {
        self.job_versions.get(namespace, job_id)?.get(&version)
    }

    /// Every kept version of a job, oldest first.
    pub fn job_versions<'a>(
        &'a self,
        namespace: &str,
        job_id: &str,
    ) -> impl DoubleEndedIterator<Item = &'a Arc<Job>> + 'a {
        self.job_versions
            .get(namespace, job_id)
            .into_iter()
            .flat_map(|versions| versions.values())
    }

    /// An evaluation.
    pub fn eval(&self, eval_id: &str) -> Option<&Arc<Evaluation>> {
        self.evals.get(&Id::from(eval_id)).map(|s| &s.0)
    }

    /// Every evaluation, ordered by id.
    pub fn evals(&self) -> impl Iterator<Item = &Arc<Evaluation>> + '_ {
        self.evals.values().map(|s| &s.0)
    }

    /// Number of evaluations.
    pub fn eval_count(&self) -> usize {
        self.evals.len()
    }

    /// The evaluations of one job, ordered by id.
    pub fn evals_by_job<'a>(
        &'a self,
        namespace: &str,
        job_id: &str,
    ) -> impl Iterator<Item = &'a Arc<Evaluation>> + 'a {
        self.evals_by_job
            .get(namespace, job_id)
            .into_iter()
            .flat_map(|evals| evals.values())
    }

    /// An allocation.
    pub fn alloc(&self, alloc_id: &str) -> Option<&Arc<Allocation>> {
        self.allocs.get(&Id::from(alloc_id)).map(|s| &s.0)
    }

    /// Every allocation, ordered by id.
    pub fn allocs(&self) -> impl Iterator<Item = &Arc<Allocation>> + '_ {
        self.allocs.values().map(|s| &s.0)
    }

    /// Status keys whose allocation's record the tables do not hold, with
    /// their revisions. A watch delivers a record before any status of it,
    /// so these are statuses left behind: a client's report that landed
    /// just after its allocation was collected.
    pub fn orphan_statuses(&self) -> impl Iterator<Item = (&str, Revision)> + '_ {
        self.orphan_statuses
            .iter()
            .map(|(id, (_, revision))| (id.as_str(), *revision))
    }

    /// Number of allocations.
    pub fn alloc_count(&self) -> usize {
        self.allocs.len()
    }

    /// The allocations placed on a node, terminal ones included, ordered by id.
    pub fn allocs_by_node<'a>(
        &'a self,
        node_id: &str,
    ) -> impl Iterator<Item = &'a Arc<Allocation>> + 'a {
        self.allocs_by_node
            .get(&Id::from(node_id))
            .into_iter()
            .flat_map(|entry| self.resolve(entry.ids.iter()))
    }

    /// The allocations of a job, terminal ones included, ordered by id.
    pub fn allocs_by_job<'a>(
        &'a self,
        namespace: &str,
        job_id: &str,
    ) -> impl Iterator<Item = &'a Arc<Allocation>> + 'a {
        self.allocs_by_job
            .get(namespace, job_id)
            .into_iter()
            .flat_map(|ids| self.resolve(ids.iter()))
    }

    /// The allocations an index names, from the primary table.
    fn resolve<'a>(
        &'a self,
        ids: impl Iterator<Item = &'a Id> + 'a,
    ) -> impl Iterator<Item = &'a Arc<Allocation>> + 'a {
        ids.filter_map(|id| self.allocs.get(id).map(|s| &s.0))
    }

    /// One node's allocations and usage, for looking several of them up
    /// without searching every allocation each time.
    pub fn on_node(&self, node_id: &str) -> OnNode<'_> {
        OnNode {
            entry: self.allocs_by_node.get(&Id::from(node_id)).map(Arc::as_ref),
            tables: self,
        }
    }

    /// What the non-terminal allocations of a node hold (empty if none).
    pub fn node_usage(&self, node_id: &str) -> &NodeUsage {
        self.on_node(node_id).usage()
    }

    /// A client node.
    pub fn node(&self, node_id: &str) -> Option<&Arc<Node>> {
        self.nodes.get(&Id::from(node_id)).map(|s| &s.0)
    }

    /// Every node, ordered by id.
    pub fn nodes(&self) -> impl Iterator<Item = &Arc<Node>> + '_ {
        self.nodes.values().map(|s| &s.0)
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Whether a node's heartbeat key exists (its lease is alive).
    pub fn heartbeat_live(&self, node_id: &str) -> bool {
        self.heartbeats.contains(&Id::from(node_id))
    }

    /// The ids of the nodes whose heartbeat key exists, ordered.
    pub fn live_heartbeats(&self) -> impl Iterator<Item = &Id> + '_ {
        self.heartbeats.iter()
    }

    /// A deployment.
    pub fn deployment(&self, deployment_id: &str) -> Option<&Arc<Deployment>> {
        self.deployments.get(&Id::from(deployment_id)).map(|s| &s.0)
    }

    /// Every deployment, ordered by id.
    pub fn deployments(&self) -> impl Iterator<Item = &Arc<Deployment>> + '_ {
        self.deployments.values().map(|s| &s.0)
    }

    /// The deployments of a job, ordered by id.
    pub fn deployments_by_job<'a>(
        &'a self,
        namespace: &str,
        job_id: &str,
    ) -> impl Iterator<Item = &'a Arc<Deployment>> + 'a {
        self.deployments_by_job
            .get(namespace, job_id)
            .into_iter()
            .flat_map(|deployments| deployments.values())
    }

    /// The scheduler configuration, if one was ever written.
    pub fn scheduler_config(&self) -> Option<&Arc<SchedulerConfiguration>> {
        self.scheduler_config.as_ref()
    }

    /// The node pool called `name`, if it was written as an object (not
    /// the built-in ones, nor one only a node registered into).
    pub fn node_pool(&self, name: &str) -> Option<&Arc<NodePool>> {
        self.node_pools.get(&Id::from(name))
    }
}

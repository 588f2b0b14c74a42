//! The read side: the cluster as the scheduler sees it.

use std::sync::Arc;

use caravan_model::NodeExt;
use caravan_proto::{Allocation, Deployment, Job, Node, NodePool, SchedulerConfiguration};

use crate::resources::NodeUsage;

/// A consistent snapshot of the cluster.
///
/// Collections hand out `Arc`s so a persistent-map snapshot can serve them without
/// copying the messages; ordering must be deterministic (by id) so plans are too.
pub trait State {
    /// The store revision the snapshot is consistent at.
    fn revision(&self) -> i64;
    /// The current version of a job.
    fn job(&self, namespace: &str, job_id: &str) -> Option<Arc<Job>>;
    /// One stored version of a job.
    fn job_version(&self, namespace: &str, job_id: &str, version: u64) -> Option<Arc<Job>>;
    /// A node by id, whatever its status.
    fn node(&self, node_id: &str) -> Option<Arc<Node>>;
    /// Every node, whatever its status, ordered by id.
    fn nodes(&self) -> Vec<Arc<Node>>;
    /// Nodes that accept new placements (ready, eligible, not draining), ordered by id.
    fn ready_nodes(&self) -> Vec<Arc<Node>> {
        self.nodes()
            .into_iter()
            .filter(|n| n.accepts_placements())
            .collect()
    }
    /// An allocation by id.
    fn alloc(&self, alloc_id: &str) -> Option<Arc<Allocation>>;
    /// Every allocation of a job, terminal ones included, ordered by id.
    fn allocs_by_job(&self, namespace: &str, job_id: &str) -> Vec<Arc<Allocation>>;
    /// Every allocation on a node, terminal ones included, ordered by id.
    fn allocs_by_node(&self, node_id: &str) -> Vec<Arc<Allocation>>;
    /// Deployments of a job, any status.
    fn deployments_by_job(&self, namespace: &str, job_id: &str) -> Vec<Arc<Deployment>>;
    /// The newest deployment of a job (highest create revision, then id).
    fn latest_deployment(&self, namespace: &str, job_id: &str) -> Option<Arc<Deployment>> {
        self.deployments_by_job(namespace, job_id)
            .into_iter()
            .max_by(|a, b| {
                (a.create_revision, a.create_time_unix_ns, &a.id).cmp(&(
                    b.create_revision,
                    b.create_time_unix_ns,
                    &b.id,
                ))
            })
    }
    /// The cluster's scheduler configuration; `None` means the defaults.
    fn scheduler_config(&self) -> Option<Arc<SchedulerConfiguration>>;
    /// The node pool called `name`, when it is stored as an object: its
    /// scheduler settings win over the cluster's for the jobs in it.
    fn node_pool(&self, _name: &str) -> Option<Arc<NodePool>> {
        None
    }
    /// Resources held on a node by its non-terminal allocations, if the implementor
    /// keeps them incrementally; `None` makes the scheduler sum `allocs_by_node`.
    fn node_usage(&self, _node_id: &str) -> Option<NodeUsage> {
        None
    }
}

impl<T: State + ?Sized> State for Arc<T> {
    fn revision(&self) -> i64 {
        (**self).revision()
    }
    fn job(&self, namespace: &str, job_id: &str) -> Option<Arc<Job>> {
        (**self).job(namespace, job_id)
    }
    fn job_version(&self, namespace: &str, job_id: &str, version: u64) -> Option<Arc<Job>> {
        (**self).job_version(namespace, job_id, version)
    }
    fn node(&self, node_id: &str) -> Option<Arc<Node>> {
        (**self).node(node_id)
    }
    fn nodes(&self) -> Vec<Arc<Node>> {
        (**self).nodes()
    }
    fn ready_nodes(&self) -> Vec<Arc<Node>> {
        (**self).ready_nodes()
    }
    fn alloc(&self, alloc_id: &str) -> Option<Arc<Allocation>> {
        (**self).alloc(alloc_id)
    }
    fn allocs_by_job(&self, namespace: &str, job_id: &str) -> Vec<Arc<Allocation>> {
        (**self).allocs_by_job(namespace, job_id)
    }
    fn allocs_by_node(&self, node_id: &str) -> Vec<Arc<Allocation>> {
        (**self).allocs_by_node(node_id)
    }
    fn deployments_by_job(&self, namespace: &str, job_id: &str) -> Vec<Arc<Deployment>> {
        (**self).deployments_by_job(namespace, job_id)
    }
    fn latest_deployment(&self, namespace: &str, job_id: &str) -> Option<Arc<Deployment>> {
        (**self).latest_deployment(namespace, job_id)
    }
    fn scheduler_config(&self) -> Option<Arc<SchedulerConfiguration>> {
        (**self).scheduler_config()
    }
    fn node_pool(&self, name: &str) -> Option<Arc<NodePool>> {
        (**self).node_pool(name)
    }
    fn node_usage(&self, node_id: &str) -> Option<NodeUsage> {
        (**self).node_usage(node_id)
    }
}

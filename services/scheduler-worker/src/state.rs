//! The scheduler's [`State`] over a watch-cache [`Snapshot`]: collections
//! come straight from the snapshot's persistent maps, ordered by id, and node
//! usage from the cache's incremental per-node sums.

use std::sync::Arc;

use caravan_proto::{Allocation, Deployment, Job, Node, NodePool, SchedulerConfiguration};
use caravan_scheduler::{NodeUsage, State};
use caravan_state::Snapshot;

/// A consistent snapshot of the cluster as the scheduler reads it.
#[derive(Clone, Debug)]
pub struct SnapshotState(Snapshot);

impl SnapshotState {
    /// Wraps a snapshot.
    pub fn new(snapshot: Snapshot) -> Self {
        SnapshotState(snapshot)
    }

    /// The snapshot underneath.
    pub fn snapshot(&self) -> &Snapshot {
        &self.0
    }
}

impl State for SnapshotState {
    fn revision(&self) -> i64 {
        self.0.revision()
    }

    fn job(&self, namespace: &str, job_id: &str) -> Option<Arc<Job>> {
        self.0.job(namespace, job_id).cloned()
    }

    fn job_version(&self, namespace: &str, job_id: &str, version: u64) -> Option<Arc<Job>> {
        self.0.job_version(namespace, job_id, version).cloned()
    }

    fn node(&self, node_id: &str) -> Option<Arc<Node>> {
        self.0.node(node_id).cloned()
    }

    fn nodes(&self) -> Vec<Arc<Node>> {
        self.0.nodes().cloned().collect()
    }

    fn alloc(&self, alloc_id: &str) -> Option<Arc<Allocation>> {
        self.0.alloc(alloc_id).cloned()
    }

    fn allocs_by_job(&self, namespace: &str, job_id: &str) -> Vec<Arc<Allocation>> {
        self.0.allocs_by_job(namespace, job_id).cloned().collect()
    }

    fn allocs_by_node(&self, node_id: &str) -> Vec<Arc<Allocation>> {
        self.0.allocs_by_node(node_id).cloned().collect()
    }

    fn deployments_by_job(&self, namespace: &str, job_id: &str) -> Vec<Arc<Deployment>> {
        self.0
            .deployments_by_job(namespace, job_id)
            .cloned()
            .collect()
    }

    fn scheduler_config(&self) -> Option<Arc<SchedulerConfiguration>> {
        self.0.scheduler_config().cloned()
    }

    fn node_pool(&self, name: &str) -> Option<Arc<NodePool>> {
        self.0.node_pool(name).cloned()
    }

    fn node_usage(&self, node_id: &str) -> Option<NodeUsage> {
        let u = self.0.node_usage(node_id);
        Some(NodeUsage {
            cpu_mhz: u.cpu_mhz,
            memory_mb: u.memory_mb,
            memory_max_mb: u.memory_max_mb,
            disk_mb: u.disk_mb,
            cores: u.reserved_cores().collect(),
            ports: u.used_ports().into_iter().map(|p| p.port).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use caravan_proto::{
        AllocClientStatus, AllocDesiredStatus, AllocatedPort, AllocatedResources,
        AllocatedSharedResources, AllocatedTaskResources,
    };
    use caravan_state::{Change, Id, Tables};

    use super::*;

    fn alloc(id: &str, node: &str, cpu: u32, port: u32, core: u32) -> Allocation {
        let mut tasks = BTreeMap::new();
        tasks.insert(
            "t".to_string(),
            AllocatedTaskResources {
                cpu_mhz: cpu,
                memory_mb: 128,
                reserved_cores: vec![core],
                ports: vec![AllocatedPort {
                    label: "http".into(),
                    value: port,
                    to: 0,
                    host_ip: "10.0.0.1".into(),
                }],
                ..Default::default()
            },
        );
        Allocation {
            id: id.into(),
            node_id: node.into(),
            namespace: "default".into(),
            job_id: "web".into(),
            desired_status: AllocDesiredStatus::Run as i32,
            client_status: AllocClientStatus::Running as i32,
            allocated_resources: Some(AllocatedResources {
                tasks: tasks.into(),
                shared: Some(AllocatedSharedResources {
                    disk_mb: 50,
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }
    }

    fn state(allocs: &[Allocation], nodes: &[&str]) -> SnapshotState {
        let mut t = Tables::new();
        for n in nodes {
            t.apply(Change::Node {
                id: Id::from(*n),
                node: Some(Arc::new(Node {
                    id: (*n).into(),
                    ..Default::default()
                })),
            });
        }
        for a in allocs {
            t.apply(Change::Alloc {
                id: Id::from(a.id.as_str()),
                alloc: Some(Arc::new(a.clone())),
            });
        }
        t.advance_to(42);
        SnapshotState::new(Snapshot::new(t))
    }

    #[test]
    fn usage_matches_what_the_scheduler_would_sum() {
        let mut done = alloc("c", "n1", 300, 25002, 3);
        done.set_client_status(AllocClientStatus::Complete);
        let allocs = vec![
            alloc("a", "n1", 500, 25000, 1),
            alloc("b", "n1", 700, 25001, 2),
            done,
        ];
        let s = state(&allocs, &["n1"]);
        let incremental = s.node_usage("n1").unwrap();
        let summed = NodeUsage::from_allocs(s.allocs_by_node("n1").iter().map(|a| a.as_ref()));
        assert_eq!(incremental, summed);
        assert_eq!(incremental.cpu_mhz, 1200);
        assert_eq!(incremental.ports, vec![25000, 25001]);
        assert_eq!(s.node_usage("empty").unwrap(), NodeUsage::default());
    }

    #[test]
    fn nodes_come_ordered_by_id_at_the_snapshot_revision() {
        let s = state(&[], &["n3", "n1", "n2"]);
        let ids: Vec<String> = s.nodes().iter().map(|n| n.id.clone()).collect();
        assert_eq!(ids, vec!["n1", "n2", "n3"]);
        assert_eq!(s.revision(), 42);
        assert!(s.node("n2").is_some() && s.node("n4").is_none());
    }

    #[test]
    fn node_pools_written_as_objects_are_seen_by_name() {
        let mut t = Tables::new();
        t.apply(Change::NodePool {
            name: Id::from("gpu"),
            pool: Some(Arc::new(NodePool {
                name: "gpu".into(),
                ..Default::default()
            })),
        });
        let s = SnapshotState::new(Snapshot::new(t));
        assert_eq!(
            s.node_pool("gpu").map(|p| p.name.clone()).as_deref(),
            Some("gpu")
        );
        assert!(s.node_pool("default").is_none());
    }
}

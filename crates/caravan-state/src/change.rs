//! One decoded change of the keyspace: what the watch cache applies.

use std::sync::Arc;

use caravan_proto::{
    AllocStatus, Allocation, Deployment, Evaluation, Job, Node, NodePool, SchedulerConfiguration,
};
use caravan_store::{EventKind, KeyValue, Revision};

use crate::codec::{AllocDetail, decode, decode_alloc};
use crate::error::Result;
use crate::index::Id;
use crate::keyspace::StateKey;
use crate::status_batch::decode_batch;

/// A write or delete of one object, decoded. `None` means deleted. The key,
/// not the message, says which object it is.
#[derive(Clone, Debug)]
pub enum Change {
    /// The current version of a job.
    Job {
        /// Namespace.
        namespace: Id,
        /// Job id.
        id: Id,
        /// The job, or `None` once deleted.
        job: Option<Arc<Job>>,
    },
    /// One version of a job.
    JobVersion {
        /// Namespace.
        namespace: Id,
        /// Job id.
        id: Id,
        /// Job version.
        version: u64,
        /// The job at that version, or `None` once deleted.
        job: Option<Arc<Job>>,
    },
    /// An evaluation.
    Eval {
        /// Eval id.
        id: Id,
        /// The eval, or `None` once deleted.
        eval: Option<Arc<Evaluation>>,
    },
    /// An allocation.
    Alloc {
        /// Alloc id.
        id: Id,
        /// The alloc, or `None` once deleted.
        alloc: Option<Arc<Allocation>>,
    },
    /// The client's part of an allocation (its status key), folded into
    /// the allocation where the tables hold it.
    AllocStatus {
        /// Alloc id.
        id: Id,
        /// The status, or `None` once deleted.
        status: Option<Box<AllocStatus>>,
        /// The status key's mod revision (0 once deleted).
        revision: Revision,
    },
    /// A batch of client statuses of one job's allocations (a
    /// `job_status/` key): each entry is folded into its allocation as a
    /// status key's value is.
    StatusBatch {
        /// The batch's key.
        batch: Arc<StateKey>,
        /// Its entries (allocation id, status, the revision it was first
        /// written at), or `None` once deleted.
        entries: Option<Vec<(Id, Box<AllocStatus>, Revision)>>,
    },
    /// A client node.
    Node {
        /// Node id.
        id: Id,
        /// The node, or `None` once deleted.
        node: Option<Arc<Node>>,
    },
    /// A node's heartbeat key appeared or went away (its lease expired).
    Heartbeat {
        /// Node id.
        node_id: Id,
        /// Whether the key exists.
        live: bool,
    },
    /// A deployment.
    Deployment {
        /// Deployment id.
        id: Id,
        /// The deployment, or `None` once deleted.
        deployment: Option<Arc<Deployment>>,
    },
    /// The scheduler configuration.
    SchedulerConfig(Option<Arc<SchedulerConfiguration>>),
    /// A node pool written as an object (with its scheduler settings).
    NodePool {
        /// The pool's name.
        name: Id,
        /// The pool, or `None` once deleted.
        pool: Option<Arc<NodePool>>,
    },
}

impl Change {
    /// The change a watch event makes, keeping `detail` of an allocation;
    /// `None` for keys the cache does not hold (leader election keys).
    pub fn from_event(
        key: &StateKey,
        kind: EventKind,
        kv: &KeyValue,
        detail: AllocDetail,
    ) -> Result<Option<Change>> {
        match kind {
            EventKind::Put => Change::put(key, kv, detail),
            EventKind::Delete => Ok(Change::delete(key)),
        }
    }

    /// The change of writing `kv` at `key`, keeping `detail` of an
    /// allocation.
    pub fn put(key: &StateKey, kv: &KeyValue, detail: AllocDetail) -> Result<Option<Change>> {
        Ok(Some(match key {
            StateKey::Job { namespace, id } => Change::Job {
                namespace: Id::from(namespace.as_str()),
                id: Id::from(id.as_str()),
                job: Some(Arc::new(decode(kv)?)),
            },
            StateKey::JobVersion {
                namespace,
                id,
                version,
            } => Change::JobVersion {
                namespace: Id::from(namespace.as_str()),
                id: Id::from(id.as_str()),
                version: *version,
                job: Some(Arc::new(decode(kv)?)),
            },
            StateKey::Eval(id) => Change::Eval {
                id: Id::from(id.as_str()),
                eval: Some(Arc::new(decode(kv)?)),
            },
            StateKey::Alloc(id) => Change::Alloc {
                id: Id::from(id.as_str()),
                alloc: Some(Arc::new(decode_alloc(kv, detail)?)),
            },
            StateKey::AllocStatus(id) => Change::AllocStatus {
                id: Id::from(id.as_str()),
                status: Some(Box::new(crate::alloc_status::decode_status(kv)?)),
                revision: kv.mod_revision,
            },
            StateKey::JobStatus { .. } => Change::StatusBatch {
                batch: Arc::new(key.clone()),
                entries: Some(
                    decode_batch(kv)?
                        .into_iter()
                        .map(|e| {
                            (
                                Id::from(e.alloc_id.as_str()),
                                Box::new(e.status),
                                e.revision,
                            )
                        })
                        .collect(),
                ),
            },
            StateKey::Node(id) => Change::Node {
                id: Id::from(id.as_str()),
                node: Some(Arc::new(decode(kv)?)),
            },
            StateKey::Heartbeat(id) => Change::Heartbeat {
                node_id: Id::from(id.as_str()),
                live: true,
            },
            StateKey::Deployment(id) => Change::Deployment {
                id: Id::from(id.as_str()),
                deployment: Some(Arc::new(decode(kv)?)),
            },
            StateKey::SchedulerConfig => Change::SchedulerConfig(Some(Arc::new(decode(kv)?))),
            StateKey::NodePool(name) => {
                let mut pool: NodePool = decode(kv)?;
                pool.name.clone_from(name);
                Change::NodePool {
                    name: Id::from(name.as_str()),
                    pool: Some(Arc::new(pool)),
                }
            }
            StateKey::Leader { .. }
            | StateKey::JobPlan { .. }
            | StateKey::Var { .. }
            | StateKey::Acl(_)
            | StateKey::Namespace(_)
            | StateKey::JobSubmission { .. }
            | StateKey::Service { .. } => {
                return Ok(None);
            }
        }))
    }

    /// The change of deleting `key`.
    pub fn delete(key: &StateKey) -> Option<Change> {
        Some(match key {
            StateKey::Job { namespace, id } => Change::Job {
                namespace: Id::from(namespace.as_str()),
                id: Id::from(id.as_str()),
                job: None,
            },
            StateKey::JobVersion {
                namespace,
                id,
                version,
            } => Change::JobVersion {
                namespace: Id::from(namespace.as_str()),
                id: Id::from(id.as_str()),
                version: *version,
                job: None,
            },
            StateKey::Eval(id) => Change::Eval {
                id: Id::from(id.as_str()),
                eval: None,
            },
            StateKey::Alloc(id) => Change::Alloc {
                id: Id::from(id.as_str()),
                alloc: None,
            },
            StateKey::AllocStatus(id) => Change::AllocStatus {
                id: Id::from(id.as_str()),
                status: None,
                revision: 0,
            },
            StateKey::JobStatus { .. } => Change::StatusBatch {
                batch: Arc::new(key.clone()),
                entries: None,
            },
            StateKey::Node(id) => Change::Node {
                id: Id::from(id.as_str()),
                node: None,
            },
            StateKey::Heartbeat(id) => Change::Heartbeat {
                node_id: Id::from(id.as_str()),
                live: false,
            },
            StateKey::Deployment(id) => Change::Deployment {
                id: Id::from(id.as_str()),
                deployment: None,
            },
            StateKey::SchedulerConfig => Change::SchedulerConfig(None),
            StateKey::NodePool(name) => Change::NodePool {
                name: Id::from(name.as_str()),
                pool: None,
            },
            StateKey::Leader { .. }
            | StateKey::JobPlan { .. }
            | StateKey::Var { .. }
            | StateKey::Acl(_)
            | StateKey::Namespace(_)
            | StateKey::JobSubmission { .. }
            | StateKey::Service { .. } => {
                return None;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use caravan_proto::{NodePoolSchedulerConfig, SchedulerAlgorithm};

    use super::*;
    use crate::codec::encode;
    use crate::keyspace::{Keyspace, Kind};
    use crate::tables::Tables;

    #[test]
    fn node_pools_are_cached_by_name_with_their_scheduler_settings() {
        let keys = Keyspace::new("/t");
        let key = keys.node_pool("gpu");
        let stored = NodePool {
            scheduler_config: Some(NodePoolSchedulerConfig {
                scheduler_algorithm: SchedulerAlgorithm::Spread as i32,
            }),
            ..Default::default()
        };
        let kv = KeyValue {
            key: key.clone(),
            value: encode(&stored),
            create_revision: 4,
            mod_revision: 7,
            version: 2,
            lease: 0,
        };
        let state_key = keys.parse(&key).unwrap();
        let put = Change::from_event(&state_key, EventKind::Put, &kv, AllocDetail::Full);
        let mut tables = Tables::new();
        tables.apply(put.unwrap().unwrap());
        let pool = tables.node_pool("gpu").unwrap();
        assert_eq!(pool.name, "gpu", "the name comes from the key");
        assert_eq!(pool.modify_revision, 7);
        let config = pool.scheduler_config.unwrap_or_default();
        assert_eq!(config.scheduler_algorithm(), SchedulerAlgorithm::Spread);
        assert_eq!(tables.mod_revision_of(&state_key), Some(7));
        assert!(tables.keys().contains(&state_key));
        assert!(Kind::NodePools.cached());

        tables.apply(Change::delete(&state_key).unwrap());
        assert!(tables.node_pool("gpu").is_none());
        assert!(tables.is_empty());
    }
}

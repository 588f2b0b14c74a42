//! One decoded change of the keyspace: what the watch cache applies.

use std::sync::Arc;

use caravan_proto::{Allocation, Deployment, Evaluation, Job, Node, SchedulerConfiguration};
use caravan_store::{EventKind, KeyValue};

use crate::codec::{AllocDetail, decode, decode_alloc};
use crate::error::Result;
use crate::index::Id;
use crate::keyspace::StateKey;

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
            StateKey::Leader { .. }
            | StateKey::JobPlan { .. }
            | StateKey::Var { .. }
            | StateKey::Acl(_)
            | StateKey::Namespace(_)
            | StateKey::NodePool(_)
            | StateKey::JobSubmission { .. } => {
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
            StateKey::Leader { .. }
            | StateKey::JobPlan { .. }
            | StateKey::Var { .. }
            | StateKey::Acl(_)
            | StateKey::Namespace(_)
            | StateKey::NodePool(_)
            | StateKey::JobSubmission { .. } => {
                return None;
            }
        })
    }
}

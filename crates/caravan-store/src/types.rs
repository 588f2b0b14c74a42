//! The values the store hands out and takes in: keys with revisions, ranges,
//! transactions, watch events, leases and election keys.

/// An etcd revision: a cluster-wide, strictly increasing write counter. Caravan
/// uses it as Nomad uses its Raft index.
pub type Revision = i64;

/// A lease identifier.
pub type LeaseId = i64;

/// A key with its value and metadata, as etcd reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyValue {
    /// The full key, prefix included.
    pub key: Vec<u8>,
    /// The value; empty for a delete event.
    pub value: Vec<u8>,
    /// Revision at which the key was created (0 for a delete event).
    pub create_revision: Revision,
    /// Revision of the last write to the key (for a delete event: the delete).
    pub mod_revision: Revision,
    /// Number of writes since creation (0 for a delete event).
    pub version: i64,
    /// Lease the key is attached to, 0 for none.
    pub lease: LeaseId,
}

/// A read of a key range.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Range {
    /// First key (inclusive).
    pub start: Vec<u8>,
    /// End key (exclusive). Empty means the single key `start`.
    pub end: Vec<u8>,
    /// Maximum number of keys returned, 0 for no limit.
    pub limit: i64,
    /// Read at this past revision, 0 for the latest.
    pub revision: Revision,
    /// Return keys and metadata without values.
    pub keys_only: bool,
}

impl Range {
    /// The single key `key`.
    pub fn key(key: impl Into<Vec<u8>>) -> Self {
        Range {
            start: key.into(),
            ..Default::default()
        }
    }

    /// Every key starting with `prefix`.
    pub fn prefix(prefix: impl Into<Vec<u8>>) -> Self {
        let start = prefix.into();
        let end = prefix_end(&start);
        Range {
            start,
            end,
            ..Default::default()
        }
    }

    /// Keys from `start` (inclusive) to `end` (exclusive).
    pub fn between(start: impl Into<Vec<u8>>, end: impl Into<Vec<u8>>) -> Self {
        Range {
            start: start.into(),
            end: end.into(),
            ..Default::default()
        }
    }

    /// Limits the number of keys returned.
    pub fn with_limit(mut self, limit: i64) -> Self {
        self.limit = limit;
        self
    }

    /// Reads at a past revision.
    pub fn at_revision(mut self, revision: Revision) -> Self {
        self.revision = revision;
        self
    }

    /// Omits values.
    pub fn keys_only(mut self) -> Self {
        self.keys_only = true;
        self
    }

    /// Whether `key` falls in this range.
    pub fn contains(&self, key: &[u8]) -> bool {
        if self.end.is_empty() {
            key == self.start.as_slice()
        } else if self.end == [0] {
            key >= self.start.as_slice()
        } else {
            key >= self.start.as_slice() && key < self.end.as_slice()
        }
    }
}

/// The smallest key greater than every key starting with `prefix`, as etcd
/// computes it; `[0]` (meaning "to the end of the keyspace") if there is none.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// The answer to a range read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeResult {
    /// Matching keys in key order.
    pub kvs: Vec<KeyValue>,
    /// The store's revision when the read was served (or the requested one).
    pub revision: Revision,
    /// More keys matched than `limit` allowed.
    pub more: bool,
    /// Total number of matching keys.
    pub count: i64,
}

/// Comparison operator of a transaction compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareOp {
    /// Equal.
    Equal,
    /// Not equal.
    NotEqual,
    /// Less than.
    Less,
    /// Greater than.
    Greater,
}

/// What a compare looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompareTarget {
    /// The key's value.
    Value(Vec<u8>),
    /// The key's mod revision (0 if absent).
    ModRevision(Revision),
    /// The key's create revision (0 if absent).
    CreateRevision(Revision),
    /// The key's version (0 if absent).
    Version(i64),
}

/// A condition of a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compare {
    /// The key compared.
    pub key: Vec<u8>,
    /// The operator.
    pub op: CompareOp,
    /// The field and the value it is compared with.
    pub target: CompareTarget,
}

impl Compare {
    /// The key does not exist.
    pub fn absent(key: impl Into<Vec<u8>>) -> Self {
        Compare {
            key: key.into(),
            op: CompareOp::Equal,
            target: CompareTarget::CreateRevision(0),
        }
    }

    /// The key exists.
    pub fn present(key: impl Into<Vec<u8>>) -> Self {
        Compare {
            key: key.into(),
            op: CompareOp::Greater,
            target: CompareTarget::CreateRevision(0),
        }
    }

    /// The key's value compares with `value`.
    pub fn value(key: impl Into<Vec<u8>>, op: CompareOp, value: impl Into<Vec<u8>>) -> Self {
        Compare {
            key: key.into(),
            op,
            target: CompareTarget::Value(value.into()),
        }
    }

    /// The key's mod revision compares with `revision`.
    pub fn mod_revision(key: impl Into<Vec<u8>>, op: CompareOp, revision: Revision) -> Self {
        Compare {
            key: key.into(),
            op,
            target: CompareTarget::ModRevision(revision),
        }
    }

    /// The key's create revision compares with `revision`.
    pub fn create_revision(key: impl Into<Vec<u8>>, op: CompareOp, revision: Revision) -> Self {
        Compare {
            key: key.into(),
            op,
            target: CompareTarget::CreateRevision(revision),
        }
    }

    /// The key's version compares with `version`.
    pub fn version(key: impl Into<Vec<u8>>, op: CompareOp, version: i64) -> Self {
        Compare {
            key: key.into(),
            op,
            target: CompareTarget::Version(version),
        }
    }
}

/// An operation inside a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Write a key, attached to a lease when `lease` is not 0.
    Put {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
        /// Lease to attach, 0 for none.
        lease: LeaseId,
    },
    /// Delete the keys of a range.
    Delete(Range),
    /// Read a range.
    Get(Range),
}

impl Op {
    /// Writes `value` at `key`.
    pub fn put(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Self {
        Op::Put {
            key: key.into(),
            value: value.into(),
            lease: 0,
        }
    }

    /// Writes `value` at `key`, attached to `lease`.
    pub fn put_with_lease(
        key: impl Into<Vec<u8>>,
        value: impl Into<Vec<u8>>,
        lease: LeaseId,
    ) -> Self {
        Op::Put {
            key: key.into(),
            value: value.into(),
            lease,
        }
    }

    /// Deletes one key.
    pub fn delete(key: impl Into<Vec<u8>>) -> Self {
        Op::Delete(Range::key(key))
    }

    /// Reads one key.
    pub fn get(key: impl Into<Vec<u8>>) -> Self {
        Op::Get(Range::key(key))
    }
}

/// A transaction: if every compare holds, run `success`, else `failure`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Txn {
    /// Conditions, all of which must hold.
    pub compares: Vec<Compare>,
    /// Operations run when the conditions hold.
    pub success: Vec<Op>,
    /// Operations run otherwise.
    pub failure: Vec<Op>,
}

impl Txn {
    /// An empty transaction.
    pub fn new() -> Self {
        Txn::default()
    }

    /// Adds a condition.
    pub fn when(mut self, compare: Compare) -> Self {
        self.compares.push(compare);
        self
    }

    /// Adds an operation run when the conditions hold.
    pub fn and_then(mut self, op: Op) -> Self {
        self.success.push(op);
        self
    }

    /// Adds an operation run when a condition fails.
    pub fn or_else(mut self, op: Op) -> Self {
        self.failure.push(op);
        self
    }
}

/// The answer to one operation of a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpResult {
    /// A put happened.
    Put,
    /// A delete removed this many keys.
    Delete(i64),
    /// A read returned this.
    Get(RangeResult),
}

/// The answer to a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnResult {
    /// Whether the conditions held (and `success` ran).
    pub succeeded: bool,
    /// The store's revision after the transaction; a transaction that wrote
    /// assigns this one revision to all its writes.
    pub revision: Revision,
    /// One answer per operation of the branch that ran.
    pub results: Vec<OpResult>,
}

/// The answer to a delete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeleteResult {
    /// Number of keys removed.
    pub deleted: i64,
    /// The store's revision after the delete.
    pub revision: Revision,
}

/// Kind of a watch event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// The key was written.
    Put,
    /// The key was deleted (explicitly or by lease expiry).
    Delete,
}

/// One change seen by a watch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Put or delete.
    pub kind: EventKind,
    /// The key after the change; for a delete, the key with `mod_revision`
    /// set to the delete's revision and an empty value.
    pub kv: KeyValue,
}

/// Events delivered together. Events of one revision are never split across
/// batches. A batch without events is a progress notification: every change
/// up to `revision` has been delivered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WatchBatch {
    /// The store's revision when the batch was sent. Every change up to it
    /// has been delivered once this batch is (it is never ahead of events
    /// still to come).
    pub revision: Revision,
    /// Changes in revision order.
    pub events: Vec<Event>,
}

/// A granted lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The lease id.
    pub id: LeaseId,
    /// Time to live in seconds, as granted.
    pub ttl_secs: i64,
}

/// The key that makes a campaigner leader of an election.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderKey {
    /// The election name.
    pub name: Vec<u8>,
    /// The campaigner's key under the election name.
    pub key: Vec<u8>,
    /// Create revision of `key`: the fencing token.
    pub create_revision: Revision,
    /// The lease `key` is attached to.
    pub lease: LeaseId,
}

/// An alarm a member of the store raised: while one is active the store
/// refuses some requests (NOSPACE: every write that adds data).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreAlarm {
    /// The member that raised it.
    pub member_id: u64,
    /// What it is, as etcd names it: `NOSPACE` or `CORRUPT`.
    pub kind: String,
}

impl std::fmt::Display for StoreAlarm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} on member {:x}", self.kind, self.member_id)
    }
}

/// One member of the cluster that holds the store (an etcd member; the
/// embedded store is a cluster of one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreMember {
    /// The member's id, unique in its cluster.
    pub id: u64,
    /// The member's name (empty while an added member has not started).
    pub name: String,
    /// Where the other members reach it.
    pub peer_urls: Vec<String>,
    /// Where clients reach it.
    pub client_urls: Vec<String>,
    /// Whether it is the cluster's raft leader.
    pub leader: bool,
    /// Whether it is a learner: it follows the log but does not vote.
    pub learner: bool,
}

/// The current leader of an election.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderInfo {
    /// The leader's key.
    pub key: Vec<u8>,
    /// The value the leader campaigned with (Caravan puts its address there).
    pub value: Vec<u8>,
    /// Create revision of the key.
    pub create_revision: Revision,
    /// The lease of the key.
    pub lease: LeaseId,
}

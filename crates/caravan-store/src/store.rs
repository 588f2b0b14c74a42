//! The `Store` trait: the one way Caravan reads and writes its state.

use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use futures::Stream;

use crate::error::Result;
use crate::types::{
    DeleteResult, KeyValue, LeaderInfo, LeaderKey, Lease, LeaseId, Range, RangeResult, Revision,
    StoreAlarm, StoreMember, Txn, TxnResult, WatchBatch,
};

/// The batches of a watch. After an `Err` (for example
/// [`StoreError::Compacted`](crate::StoreError::Compacted)) the stream ends.
pub type WatchStream = Pin<Box<dyn Stream<Item = Result<WatchBatch>> + Send>>;

/// Asks a running watch for a progress notification.
#[async_trait]
pub trait WatchProgress: Send + Sync {
    /// Requests an empty batch carrying the store's current revision once every
    /// earlier change has been delivered.
    async fn request_progress(&self) -> Result<()>;

    /// Tells the store that its watcher gave this watch up for lagging the
    /// store (silent while the store moves on, as on an etcd member whose
    /// disk froze), so the requests and the watch opened next leave the
    /// member it is on. A store without members has nothing to leave.
    fn abandon(&self, why: &str) {
        let _ = why;
    }
}

/// A watch of a key prefix.
pub struct Watch {
    /// The batches, in revision order.
    pub stream: WatchStream,
    /// Progress requests for this watch.
    pub progress: Arc<dyn WatchProgress>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch").finish_non_exhaustive()
    }
}

/// A linearizable key-value store with revisions, transactions, watches,
/// leases and elections: etcd's model. Implemented by
/// [`EtcdStore`](crate::EtcdStore) and [`MemStore`](crate::MemStore), which
/// behave the same as far as Caravan can observe.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Reads one key.
    async fn get(&self, key: &[u8]) -> Result<Option<KeyValue>> {
        let mut res = self.range(Range::key(key)).await?;
        Ok(res.kvs.pop())
    }

    /// Reads a range of keys.
    async fn range(&self, range: Range) -> Result<RangeResult>;

    /// Writes a key, attached to `lease` unless it is 0. Returns the revision
    /// of the write.
    async fn put(&self, key: &[u8], value: &[u8], lease: LeaseId) -> Result<Revision>;

    /// Deletes the keys of a range.
    async fn delete(&self, range: Range) -> Result<DeleteResult>;

    /// Runs a transaction atomically at one revision.
    async fn txn(&self, txn: Txn) -> Result<TxnResult>;

    /// The store's current revision.
    async fn current_revision(&self) -> Result<Revision>;

    /// Watches every key starting with `prefix`, delivering changes from
    /// `start_revision` on (0 means from the next change). If `start_revision`
    /// is compacted, the first item is [`StoreError::Compacted`](crate::StoreError::Compacted).
    async fn watch(&self, prefix: &[u8], start_revision: Revision) -> Result<Watch>;

    /// Discards history before `revision`; watches and reads at older
    /// revisions fail with `Compacted` afterwards.
    async fn compact(&self, revision: Revision) -> Result<()>;

    /// Grants a lease that expires `ttl_secs` after its last keepalive.
    async fn lease_grant(&self, ttl_secs: i64) -> Result<Lease>;

    /// Renews a lease; returns its TTL in seconds. Fails with `LeaseNotFound`
    /// once the lease has expired or was revoked.
    async fn lease_keep_alive(&self, lease: LeaseId) -> Result<i64>;

    /// Revokes a lease, deleting every key attached to it.
    async fn lease_revoke(&self, lease: LeaseId) -> Result<()>;

    /// Seconds left before the lease expires, or `None` if it no longer exists.
    async fn lease_time_to_live(&self, lease: LeaseId) -> Result<Option<i64>>;

    /// Campaigns in the election `name` with `value`, on `lease`; returns once
    /// this campaigner is the leader. Leadership ends when the lease ends or
    /// the key is resigned.
    async fn campaign(&self, name: &[u8], value: &[u8], lease: LeaseId) -> Result<LeaderKey>;

    /// The current leader of the election `name`, if any.
    async fn leader(&self, name: &[u8]) -> Result<Option<LeaderInfo>>;

    /// Gives up leadership; the next campaigner takes over at once.
    async fn resign(&self, leader: &LeaderKey) -> Result<()>;

    /// The members of the cluster holding the store, ordered by id, with
    /// which one is the raft leader.
    async fn members(&self) -> Result<Vec<StoreMember>>;

    /// The alarms the store's members have raised and not yet disarmed
    /// (etcd's NOSPACE when it reached its quota). The embedded store has
    /// no quota and raises none.
    async fn alarms(&self) -> Result<Vec<StoreAlarm>> {
        Ok(Vec::new())
    }

    /// How many times this client has left a member that failed or did not
    /// answer for the next one. A long-lived request (a campaign) sent
    /// before a change may still wait on the member that was left, and is
    /// worth sending again. Always 0 for a store without members.
    fn failovers(&self) -> u64 {
        0
    }

    /// Another client of the same store with connections of its own, made
    /// when first used (so their tasks run on the runtime that first uses
    /// it, and its requests do not queue behind this client's), but the
    /// same choice of member: a member either of them leaves (it failed,
    /// or a watch found it lagging), both leave. `None` for a store without
    /// connections (the embedded one), which is shared as it is.
    fn with_own_connections(&self) -> Option<std::sync::Arc<dyn Store>> {
        None
    }
}

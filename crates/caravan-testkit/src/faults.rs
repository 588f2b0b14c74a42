//! A store that fails the transactions a test picks, to stand for a store
//! that went away at the worst moment (a crash between two writes, a
//! partition), or whose answer was lost while the write went through later
//! (a timeout at the client of a proposal etcd still commits): everything
//! else passes through to the real store.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use caravan_store::{
    DeleteResult, KeyValue, LeaderInfo, LeaderKey, Lease, LeaseId, Range, RangeResult, Result,
    Revision, Store, StoreError, Txn, TxnResult, Watch,
};

/// What happens to a transaction instead of reaching the store.
pub enum Fault {
    /// It fails with the error and never applies.
    Fail(StoreError),
    /// The caller gets the error at once, and the store applies the
    /// transaction `after` that: an outcome the caller could not know.
    ApplyLate {
        /// What the caller gets.
        error: StoreError,
        /// When the store applies it.
        after: Duration,
    },
    /// A concurrent writer puts `value` at `key` right before the
    /// transaction runs: an interleaving made certain.
    WriteFirst {
        /// The key the other writer writes.
        key: Vec<u8>,
        /// What it writes there.
        value: Vec<u8>,
    },
}

/// Decides, before a transaction reaches the store, whether it meets a
/// fault.
pub type TxnFault = Box<dyn Fn(&Txn) -> Option<Fault> + Send + Sync>;

/// A store whose transactions fail where `fault` says so.
pub struct FaultyStore {
    inner: Arc<dyn Store>,
    fault: TxnFault,
    late_tried: Arc<AtomicUsize>,
}

impl FaultyStore {
    /// Wraps `inner`; `fault` is asked before every transaction.
    pub fn new(inner: Arc<dyn Store>, fault: TxnFault) -> Arc<Self> {
        Arc::new(FaultyStore {
            inner,
            fault,
            late_tried: Arc::default(),
        })
    }

    /// How many late transactions the store has tried to apply so far
    /// (whether their conditions held or not).
    pub fn late_tried(&self) -> usize {
        self.late_tried.load(Ordering::SeqCst)
    }
}

/// Whether `txn` writes `key` when its conditions hold.
pub fn puts(txn: &Txn, key: &[u8]) -> bool {
    txn.success
        .iter()
        .any(|op| matches!(op, caravan_store::Op::Put { key: k, .. } if k == key))
}

/// Whether `txn` writes a key under `prefix` when its conditions hold.
pub fn puts_under(txn: &Txn, prefix: &[u8]) -> bool {
    txn.success
        .iter()
        .any(|op| matches!(op, caravan_store::Op::Put { key, .. } if key.starts_with(prefix)))
}

#[async_trait]
impl Store for FaultyStore {
    async fn range(&self, range: Range) -> Result<RangeResult> {
        self.inner.range(range).await
    }
    async fn get(&self, key: &[u8]) -> Result<Option<KeyValue>> {
        self.inner.get(key).await
    }
    async fn put(&self, key: &[u8], value: &[u8], lease: LeaseId) -> Result<Revision> {
        self.inner.put(key, value, lease).await
    }
    async fn delete(&self, range: Range) -> Result<DeleteResult> {
        self.inner.delete(range).await
    }
    async fn txn(&self, txn: Txn) -> Result<TxnResult> {
        match (self.fault)(&txn) {
            None => self.inner.txn(txn).await,
            Some(Fault::Fail(err)) => Err(err),
            Some(Fault::WriteFirst { key, value }) => {
                self.inner.put(&key, &value, 0).await?;
                self.inner.txn(txn).await
            }
            Some(Fault::ApplyLate { error, after }) => {
                let inner = Arc::clone(&self.inner);
                let tried = Arc::clone(&self.late_tried);
                tokio::spawn(async move {
                    tokio::time::sleep(after).await;
                    if let Err(err) = inner.txn(txn).await {
                        eprintln!("a late transaction failed to apply: {err}");
                    }
                    tried.fetch_add(1, Ordering::SeqCst);
                });
                Err(error)
            }
        }
    }
    async fn current_revision(&self) -> Result<Revision> {
        self.inner.current_revision().await
    }
    async fn watch(&self, prefix: &[u8], start_revision: Revision) -> Result<Watch> {
        self.inner.watch(prefix, start_revision).await
    }
    async fn compact(&self, revision: Revision) -> Result<()> {
        self.inner.compact(revision).await
    }
    async fn lease_grant(&self, ttl_secs: i64) -> Result<Lease> {
        self.inner.lease_grant(ttl_secs).await
    }
    async fn lease_keep_alive(&self, lease: LeaseId) -> Result<i64> {
        self.inner.lease_keep_alive(lease).await
    }
    async fn lease_revoke(&self, lease: LeaseId) -> Result<()> {
        self.inner.lease_revoke(lease).await
    }
    async fn lease_time_to_live(&self, lease: LeaseId) -> Result<Option<i64>> {
        self.inner.lease_time_to_live(lease).await
    }
    async fn campaign(&self, name: &[u8], value: &[u8], lease: LeaseId) -> Result<LeaderKey> {
        self.inner.campaign(name, value, lease).await
    }
    async fn leader(&self, name: &[u8]) -> Result<Option<LeaderInfo>> {
        self.inner.leader(name).await
    }
    async fn resign(&self, leader: &LeaderKey) -> Result<()> {
        self.inner.resign(leader).await
    }
    async fn members(&self) -> Result<Vec<caravan_store::StoreMember>> {
        self.inner.members().await
    }
}

//! Test stores written as a layer over a real store: a layer changes the
//! calls it cares about (range reads, transactions, watches) and every other
//! call reaches the store underneath unchanged.

use std::ops::Deref;
use std::sync::Arc;

use async_trait::async_trait;
use caravan_store::{
    DeleteResult, KeyValue, LeaderInfo, LeaderKey, Lease, LeaseId, Range, RangeResult, Result,
    Revision, Store, StoreAlarm, StoreMember, Txn, TxnResult, Watch,
};

/// What a test store does differently from the store under it. Each hook is
/// handed that store and passes the call through unless overridden.
#[async_trait]
pub trait StoreLayer: Send + Sync + 'static {
    /// A range read.
    async fn range(&self, inner: &Arc<dyn Store>, range: Range) -> Result<RangeResult> {
        inner.range(range).await
    }
    /// A transaction.
    async fn txn(&self, inner: &Arc<dyn Store>, txn: Txn) -> Result<TxnResult> {
        inner.txn(txn).await
    }
    /// A watch.
    async fn watch(
        &self,
        inner: &Arc<dyn Store>,
        prefix: &[u8],
        start_revision: Revision,
    ) -> Result<Watch> {
        inner.watch(prefix, start_revision).await
    }
    /// The store's alarms.
    async fn alarms(&self, inner: &Arc<dyn Store>) -> Result<Vec<StoreAlarm>> {
        inner.alarms().await
    }
}

/// A store: `layer` over `inner`. Derefs to the layer, so a test reaches
/// its controls through the store it handed out.
pub struct Layered<L> {
    inner: Arc<dyn Store>,
    layer: L,
}

impl<L: StoreLayer> Layered<L> {
    /// `layer` over `inner`.
    pub fn wrap(inner: Arc<dyn Store>, layer: L) -> Arc<Self> {
        Arc::new(Layered { inner, layer })
    }

    /// The store underneath.
    pub fn inner(&self) -> &Arc<dyn Store> {
        &self.inner
    }
}

impl<L> Deref for Layered<L> {
    type Target = L;

    fn deref(&self) -> &L {
        &self.layer
    }
}

#[async_trait]
impl<L: StoreLayer> Store for Layered<L> {
    async fn get(&self, key: &[u8]) -> Result<Option<KeyValue>> {
        let mut found = self.layer.range(&self.inner, Range::key(key)).await?;
        Ok(found.kvs.pop())
    }
    async fn range(&self, range: Range) -> Result<RangeResult> {
        self.layer.range(&self.inner, range).await
    }
    async fn put(&self, key: &[u8], value: &[u8], lease: LeaseId) -> Result<Revision> {
        self.inner.put(key, value, lease).await
    }
    async fn delete(&self, range: Range) -> Result<DeleteResult> {
        self.inner.delete(range).await
    }
    async fn txn(&self, txn: Txn) -> Result<TxnResult> {
        self.layer.txn(&self.inner, txn).await
    }
    async fn current_revision(&self) -> Result<Revision> {
        self.inner.current_revision().await
    }
    async fn watch(&self, prefix: &[u8], start_revision: Revision) -> Result<Watch> {
        self.layer.watch(&self.inner, prefix, start_revision).await
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
    async fn members(&self) -> Result<Vec<StoreMember>> {
        self.inner.members().await
    }
    async fn alarms(&self) -> Result<Vec<StoreAlarm>> {
        self.layer.alarms(&self.inner).await
    }
    fn failovers(&self) -> u64 {
        self.inner.failovers()
    }
}

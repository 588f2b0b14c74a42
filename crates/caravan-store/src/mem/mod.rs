//! The embedded store: etcd's model (revisions, transactions, watches, leases,
//! elections) in one process, for `caravan dev` and fast tests.

mod election;
mod keyspace;
mod lease;
mod txn;
mod watch;

#[cfg(test)]
mod tests;

use std::sync::{Arc, Weak};

use async_trait::async_trait;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::error::Result;
use crate::store::{Store, Watch};
use crate::types::{
    DeleteResult, LeaderInfo, LeaderKey, Lease, LeaseId, Op, OpResult, Range, RangeResult,
    Revision, StoreMember, Txn, TxnResult,
};

use self::txn::{Limits, State};

/// How the embedded store behaves where etcd is configurable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemStoreConfig {
    /// Revisions of history kept for watches and reads at past revisions;
    /// older ones are compacted away automatically. 0 keeps everything.
    pub history_revisions: i64,
    /// Most compares, and most operations per branch, in one transaction
    /// (etcd's `--max-txn-ops`).
    pub max_txn_ops: usize,
    /// Most bytes of keys and values in one request (etcd's
    /// `--max-request-bytes`).
    pub max_request_bytes: usize,
    /// Shorter lease TTLs are raised to this, as etcd raises them to its
    /// minimum (2 s with its default election timeout).
    pub min_lease_ttl_secs: i64,
}

impl Default for MemStoreConfig {
    fn default() -> Self {
        MemStoreConfig {
            history_revisions: 20_000,
            max_txn_ops: 10_000,
            max_request_bytes: 32 * 1024 * 1024,
            min_lease_ttl_secs: 2,
        }
    }
}

/// What the store's handles, watches and background task share.
pub(crate) struct Shared {
    state: Mutex<State>,
    /// The latest committed revision, for watches and campaigns to wait on.
    revisions: tokio::sync::watch::Sender<Revision>,
    /// Wakes the lease expiry task when an earlier deadline appears.
    expiry_wakeup: Arc<Notify>,
    expiry_task: Mutex<Option<JoinHandle<()>>>,
}

impl Shared {
    /// Runs `f` under the store's lock, after expiring overdue leases, and
    /// announces the revision it leaves the store at.
    fn with_state<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut state = self.state.lock();
        state.expire(Instant::now());
        let out = f(&mut state);
        let revision = state.kv.revision();
        self.revisions.send_if_modified(|seen| {
            let newer = revision > *seen;
            if newer {
                *seen = revision;
            }
            newer
        });
        out
    }

    /// Starts the lease expiry task if none is running in a live runtime.
    fn ensure_expiry_task(self: &Arc<Self>) {
        let mut slot = self.expiry_task.lock();
        if slot.as_ref().is_some_and(|task| !task.is_finished()) {
            return;
        }
        // Without a runtime, leases still expire lazily on the next call.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let shared = Arc::downgrade(self);
        let wakeup = self.expiry_wakeup.clone();
        *slot = Some(runtime.spawn(expire_leases(shared, wakeup)));
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(task) = self.expiry_task.get_mut().take() {
            task.abort();
        }
    }
}

/// Revokes leases as their deadlines pass, so watchers see the deletes even
/// when nobody calls the store.
async fn expire_leases(shared: Weak<Shared>, wakeup: Arc<Notify>) {
    loop {
        let next = {
            let Some(shared) = shared.upgrade() else {
                return;
            };
            shared.with_state(|state| state.leases.next_deadline())
        };
        match next {
            Some(deadline) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(deadline) => {}
                    _ = wakeup.notified() => {}
                }
            }
            None => wakeup.notified().await,
        }
    }
}

/// The embedded store. Clones share one keyspace.
#[derive(Clone)]
pub struct MemStore {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for MemStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemStore").finish_non_exhaustive()
    }
}

impl Default for MemStore {
    fn default() -> Self {
        MemStore::new()
    }
}

impl MemStore {
    /// An empty store with the default configuration.
    pub fn new() -> Self {
        MemStore::with_config(MemStoreConfig::default())
    }

    /// An empty store with `config`.
    pub fn with_config(config: MemStoreConfig) -> Self {
        let limits = Limits {
            max_txn_ops: config.max_txn_ops,
            max_request_bytes: config.max_request_bytes,
            history_revisions: config.history_revisions.max(0),
        };
        let state = State::new(limits, config.min_lease_ttl_secs);
        let (revisions, _) = tokio::sync::watch::channel(state.kv.revision());
        MemStore {
            shared: Arc::new(Shared {
                state: Mutex::new(state),
                revisions,
                expiry_wakeup: Arc::new(Notify::new()),
                expiry_task: Mutex::new(None),
            }),
        }
    }

    /// The revision of the last compaction (0 before any).
    pub fn compact_revision(&self) -> Revision {
        self.shared.with_state(|state| state.kv.compact_revision())
    }
}

#[async_trait]
impl Store for MemStore {
    async fn range(&self, range: Range) -> Result<RangeResult> {
        self.shared.with_state(|state| state.kv.range(&range))
    }

    async fn put(&self, key: &[u8], value: &[u8], lease: LeaseId) -> Result<Revision> {
        let txn = Txn::new().and_then(Op::put_with_lease(key, value, lease));
        Ok(self.shared.with_state(|state| state.txn(&txn))?.revision)
    }

    async fn delete(&self, range: Range) -> Result<DeleteResult> {
        let txn = Txn::new().and_then(Op::Delete(range));
        let res = self.shared.with_state(|state| state.txn(&txn))?;
        let deleted = match res.results.first() {
            Some(OpResult::Delete(n)) => *n,
            _ => 0,
        };
        Ok(DeleteResult {
            deleted,
            revision: res.revision,
        })
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResult> {
        self.shared.with_state(|state| state.txn(&txn))
    }

    async fn current_revision(&self) -> Result<Revision> {
        Ok(self.shared.with_state(|state| state.kv.revision()))
    }

    async fn watch(&self, prefix: &[u8], start_revision: Revision) -> Result<Watch> {
        Ok(watch::open(self.shared.clone(), prefix, start_revision))
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        self.shared.with_state(|state| state.compact(revision))
    }

    async fn lease_grant(&self, ttl_secs: i64) -> Result<Lease> {
        self.shared.ensure_expiry_task();
        let lease = self
            .shared
            .with_state(|state| state.leases.grant(ttl_secs, Instant::now()))?;
        self.shared.expiry_wakeup.notify_one();
        Ok(lease)
    }

    async fn lease_keep_alive(&self, lease: LeaseId) -> Result<i64> {
        self.shared
            .with_state(|state| state.leases.keep_alive(lease, Instant::now()))
    }

    async fn lease_revoke(&self, lease: LeaseId) -> Result<()> {
        self.shared
            .with_state(|state| state.revoke(lease))
            .map(|_| ())
    }

    async fn lease_time_to_live(&self, lease: LeaseId) -> Result<Option<i64>> {
        Ok(self
            .shared
            .with_state(|state| state.leases.time_to_live(lease, Instant::now())))
    }

    async fn campaign(&self, name: &[u8], value: &[u8], lease: LeaseId) -> Result<LeaderKey> {
        election::campaign(self.shared.clone(), name, value, lease).await
    }

    async fn leader(&self, name: &[u8]) -> Result<Option<LeaderInfo>> {
        Ok(election::leader(&self.shared, name))
    }

    async fn resign(&self, leader: &LeaderKey) -> Result<()> {
        election::resign_key(&self.shared, &leader.key, leader.create_revision);
        Ok(())
    }

    /// The embedded store is a cluster of one member, which leads; it has no
    /// network address.
    async fn members(&self) -> Result<Vec<StoreMember>> {
        Ok(vec![StoreMember {
            id: 1,
            name: "embedded".to_string(),
            peer_urls: Vec::new(),
            client_urls: Vec::new(),
            leader: true,
            learner: false,
        }])
    }
}

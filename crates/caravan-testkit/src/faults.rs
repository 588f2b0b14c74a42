//! A store that fails the transactions a test picks, to stand for a store
//! that went away at the worst moment (a crash between two writes, a
//! partition), or whose answer was lost while the write went through later
//! (a timeout at the client of a proposal etcd still commits): everything
//! else passes through to the real store.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use caravan_store::{Result, Store, StoreError, Txn, TxnResult};

use crate::layered::{Layered, StoreLayer};

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
pub type FaultyStore = Layered<TxnFaults>;

/// The layer of a [`FaultyStore`].
pub struct TxnFaults {
    fault: TxnFault,
    late_tried: Arc<AtomicUsize>,
}

impl FaultyStore {
    /// Wraps `inner`; `fault` is asked before every transaction.
    pub fn new(inner: Arc<dyn Store>, fault: TxnFault) -> Arc<Self> {
        Layered::wrap(
            inner,
            TxnFaults {
                fault,
                late_tried: Arc::default(),
            },
        )
    }
}

impl TxnFaults {
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
impl StoreLayer for TxnFaults {
    async fn txn(&self, inner: &Arc<dyn Store>, txn: Txn) -> Result<TxnResult> {
        match (self.fault)(&txn) {
            None => inner.txn(txn).await,
            Some(Fault::Fail(err)) => Err(err),
            Some(Fault::WriteFirst { key, value }) => {
                inner.put(&key, &value, 0).await?;
                inner.txn(txn).await
            }
            Some(Fault::ApplyLate { error, after }) => {
                let inner = Arc::clone(inner);
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
}

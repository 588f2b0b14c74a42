//! Job writes committed in groups: the registrations that arrive while one
//! transaction commits go together into the next, so a burst of them pays
//! one write, one disk sync and one watch event per watcher for the group
//! instead of one per job. Each write keeps its own guards: a group whose
//! guards do not all hold is run again write by write, so every caller
//! hears exactly the outcome its own transaction would have had.

use std::collections::HashSet;
use std::sync::Arc;

use caravan_store::{Op, Range, Store, StoreError, Txn, TxnResult};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Writes waiting for the committer; beyond this, callers wait to queue.
const QUEUE: usize = 1024;

/// Most bytes of keys and values in one group, under etcd's default
/// `--max-request-bytes` (1.5 MiB); a larger write goes alone.
const MAX_GROUP_BYTES: usize = 1 << 20;

struct Pending {
    txn: Txn,
    respond: oneshot::Sender<Result<TxnResult, StoreError>>,
}

/// The gateway's committer of grouped job writes. Cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct GroupCommit {
    queue: mpsc::Sender<Pending>,
}

impl GroupCommit {
    /// Starts the committer over `store`, with at most `max_ops` compares
    /// and operations per transaction; it stops once `shutdown` fires.
    pub(crate) fn start(
        store: Arc<dyn Store>,
        max_ops: usize,
        shutdown: CancellationToken,
    ) -> Self {
        let (queue, rx) = mpsc::channel(QUEUE);
        tokio::spawn(run(store, rx, max_ops.max(1), shutdown));
        GroupCommit { queue }
    }

    /// Commits `txn` (no failure branch) in the next group; the answer is
    /// the one the store would give `txn` alone, its results its own.
    pub(crate) async fn txn(&self, txn: Txn) -> Result<TxnResult, StoreError> {
        let (respond, answer) = oneshot::channel();
        let gone = || StoreError::Unavailable("the api-gateway is shutting down".into());
        self.queue
            .send(Pending { txn, respond })
            .await
            .map_err(|_| gone())?;
        answer.await.unwrap_or_else(|_| Err(gone()))
    }
}

async fn run(
    store: Arc<dyn Store>,
    mut rx: mpsc::Receiver<Pending>,
    max_ops: usize,
    shutdown: CancellationToken,
) {
    let mut carried: Option<Pending> = None;
    loop {
        let first = match carried.take() {
            Some(p) => p,
            None => tokio::select! {
                p = rx.recv() => match p {
                    Some(p) => p,
                    None => return,
                },
                _ = shutdown.cancelled() => return,
            },
        };
        let mut group = Group::new(first);
        while let Ok(next) = rx.try_recv() {
            if let Err(next) = group.add(next, max_ops) {
                carried = Some(next);
                break;
            }
        }
        group.commit(store.as_ref()).await;
    }
}

/// Writes that can share one transaction: no key in two of them, within
/// the limits of one request.
struct Group {
    members: Vec<Pending>,
    keys: HashSet<Vec<u8>>,
    ops: usize,
    bytes: usize,
    /// A member shares with no other (a failure branch, or a range).
    alone: bool,
}

impl Group {
    fn new(first: Pending) -> Self {
        let mut group = Group {
            members: Vec::new(),
            keys: HashSet::new(),
            ops: 0,
            bytes: 0,
            alone: false,
        };
        let keys = shared_keys(&first.txn);
        group.take(first, keys);
        group
    }

    fn take(&mut self, p: Pending, keys: Option<Vec<Vec<u8>>>) {
        self.ops += size(&p.txn);
        self.bytes += bytes(&p.txn);
        match keys {
            Some(keys) => self.keys.extend(keys),
            None => self.alone = true,
        }
        self.members.push(p);
    }

    /// Adds `p` unless it cannot share the transaction; then it is handed
    /// back to start the next group.
    fn add(&mut self, p: Pending, max_ops: usize) -> Result<(), Pending> {
        if self.alone
            || self.ops + size(&p.txn) > max_ops
            || self.bytes + bytes(&p.txn) > MAX_GROUP_BYTES
        {
            return Err(p);
        }
        match shared_keys(&p.txn) {
            Some(theirs) if !theirs.iter().any(|k| self.keys.contains(k)) => {
                self.take(p, Some(theirs));
                Ok(())
            }
            _ => Err(p),
        }
    }

    async fn commit(self, store: &dyn Store) {
        let mut members = self.members;
        members.retain(|m| !m.respond.is_closed());
        if members.len() <= 1 {
            if let Some(only) = members.pop() {
                let _ = only.respond.send(store.txn(only.txn).await);
            }
            return;
        }
        let mut together = Txn::new();
        for m in &members {
            together.compares.extend(m.txn.compares.iter().cloned());
            together.success.extend(m.txn.success.iter().cloned());
        }
        match store.txn(together).await {
            Ok(result) if result.succeeded => {
                let mut results = result.results.into_iter();
                for m in members {
                    let own = results.by_ref().take(m.txn.success.len()).collect();
                    let _ = m.respond.send(Ok(TxnResult {
                        succeeded: true,
                        revision: result.revision,
                        results: own,
                    }));
                }
            }
            // Some guard did not hold: each write alone learns whether its
            // own do (theirs are disjoint, so the order does not matter).
            Ok(_) => {
                for m in members {
                    let _ = m.respond.send(store.txn(m.txn).await);
                }
            }
            // Whether the group committed is unknown to every member alike.
            Err(err) => {
                for m in members {
                    let _ = m.respond.send(Err(err.clone()));
                }
            }
        }
    }
}

fn size(txn: &Txn) -> usize {
    txn.compares.len() + txn.success.len()
}

fn bytes(txn: &Txn) -> usize {
    let ops: usize = txn
        .success
        .iter()
        .map(|op| match op {
            Op::Put { key, value, .. } => key.len() + value.len(),
            Op::Delete(r) | Op::Get(r) => r.start.len() + r.end.len(),
        })
        .sum();
    ops + txn.compares.iter().map(|c| c.key.len()).sum::<usize>()
}

/// Every key `txn` compares or touches, when it may share a transaction;
/// `None` when it has a failure branch to run, or touches a range, which
/// might hold another member's keys.
fn shared_keys(txn: &Txn) -> Option<Vec<Vec<u8>>> {
    if !txn.failure.is_empty() {
        return None;
    }
    let single = |r: &Range| r.end.is_empty().then(|| r.start.clone());
    let mut out: Vec<Vec<u8>> = txn.compares.iter().map(|c| c.key.clone()).collect();
    for op in &txn.success {
        out.push(match op {
            Op::Put { key, .. } => key.clone(),
            Op::Delete(r) | Op::Get(r) => single(r)?,
        });
    }
    Some(out)
}

#[cfg(test)]
#[path = "group_commit_tests.rs"]
mod tests;

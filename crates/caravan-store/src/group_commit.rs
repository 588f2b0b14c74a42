//! Group commit: transactions submitted while a group is on its way to the
//! store go together into the next, so a burst of small writes (job
//! registrations at the api-gateway, plans at the plan-applier) pays one
//! write, one disk sync, one revision and one watch event per watcher for
//! the group instead of one each.
//!
//! Each transaction keeps its own guards. Transactions share a group only
//! when no key one writes is compared or touched by another (two that only
//! compare the same key, as registrations into one namespace do, may), so the merged
//! transaction's compares see exactly what each would have seen alone and
//! its operations commute: succeeding together is the same as succeeding one
//! after the other. When a compare of the merged transaction fails, each
//! member is sent again alone, and every caller hears exactly the answer its
//! own transaction would have had. A transaction no group can take (a
//! failure branch, a range, or too large: a plan of many placements) goes at
//! once, alone.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::metrics;
use crate::types::{Op, Range, Txn, TxnResult};

/// Transactions waiting for the committer; beyond this, callers wait to
/// queue.
const QUEUE: usize = 1024;

/// Groups on their way to the store at once. The next group forms while
/// one is, from whatever is submitted in the meantime.
const IN_FLIGHT: usize = 1;

/// A group holds at most this many compares and operations, and this many
/// bytes of keys and values (or the store's limits, if lower): many small
/// writes go together, while a large one, already a large transaction, goes
/// alone rather than make one larger still for the store to apply in one
/// step. 1 MiB stays under etcd's default `--max-request-bytes` (1.5 MiB).
const GROUP_MAX_OPS: usize = 1_000;
const GROUP_MAX_BYTES: usize = 1 << 20;

/// How a group reaches the store: a plain transaction, or a leader's fenced
/// one (which adds a compare and a failure read of its own).
pub type Committer<E> = Arc<dyn Fn(Txn) -> BoxFuture<'static, Result<TxnResult, E>> + Send + Sync>;

/// What one store transaction may hold.
#[derive(Clone, Copy, Debug)]
pub struct GroupLimits {
    /// Compares plus operations.
    pub max_ops: usize,
    /// Bytes of keys and values.
    pub max_bytes: usize,
}

struct Pending<E> {
    txn: Txn,
    respond: oneshot::Sender<Result<TxnResult, E>>,
}

/// A group committer; cheap to clone.
pub struct GroupCommit<E> {
    queue: mpsc::Sender<Pending<E>>,
    gone: fn() -> E,
}

impl<E> Clone for GroupCommit<E> {
    fn clone(&self) -> Self {
        GroupCommit {
            queue: self.queue.clone(),
            gone: self.gone,
        }
    }
}

impl<E> std::fmt::Debug for GroupCommit<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit").finish_non_exhaustive()
    }
}

impl<E: Clone + Send + 'static> GroupCommit<E> {
    /// Starts a committer named `name` (its metric's label) that sends
    /// through `commit` within `limits`. It takes no more once `stop` fires
    /// or every handle is dropped, and what still waits is answered
    /// `gone()`; the returned task ends once the groups under way are
    /// answered.
    pub fn start(
        name: &'static str,
        commit: Committer<E>,
        limits: GroupLimits,
        stop: CancellationToken,
        gone: fn() -> E,
    ) -> (Self, JoinHandle<()>) {
        let (queue, rx) = mpsc::channel(QUEUE);
        let task = tokio::spawn(run(name, commit, limits, rx, stop, gone));
        (GroupCommit { queue, gone }, task)
    }

    /// Commits `txn` alone or in a group; the answer is the one the store
    /// would give `txn` alone, its results its own.
    pub async fn txn(&self, txn: Txn) -> Result<TxnResult, E> {
        let (respond, answer) = oneshot::channel();
        self.queue
            .send(Pending { txn, respond })
            .await
            .map_err(|_| (self.gone)())?;
        answer.await.unwrap_or_else(|_| Err((self.gone)()))
    }
}

async fn run<E: Clone + Send + 'static>(
    name: &'static str,
    commit: Committer<E>,
    limits: GroupLimits,
    mut rx: mpsc::Receiver<Pending<E>>,
    stop: CancellationToken,
    gone: fn() -> E,
) {
    let room = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut sending = JoinSet::new();
    let mut queued: VecDeque<(Pending<E>, Vec<Touch>)> = VecDeque::new();
    let mut open = true;
    // A transaction no group can take goes at once, on its own.
    let route = |p: Pending<E>,
                 queued: &mut VecDeque<(Pending<E>, Vec<Touch>)>,
                 sending: &mut JoinSet<()>| match shareable(&p.txn, limits) {
        Some(keys) => queued.push_back((p, keys)),
        None => {
            let group = Group::of(p, Vec::new());
            sending.spawn(group.send(name, commit.clone()));
        }
    };
    while open || !queued.is_empty() {
        if queued.is_empty() {
            tokio::select! {
                p = rx.recv() => match p {
                    Some(p) => route(p, &mut queued, &mut sending),
                    None => open = false,
                },
                _ = stop.cancelled() => break,
            }
            continue;
        }
        // Room for one more group; what arrives meanwhile joins the queue.
        let permit = loop {
            tokio::select! {
                biased;
                _ = stop.cancelled() => break None,
                permit = room.clone().acquire_owned() => break permit.ok(),
                p = rx.recv(), if open => match p {
                    Some(p) => route(p, &mut queued, &mut sending),
                    None => open = false,
                },
            }
        };
        let Some(permit) = permit else { break };
        while let Ok(p) = rx.try_recv() {
            route(p, &mut queued, &mut sending);
        }
        let Some((first, keys)) = queued.pop_front() else {
            continue;
        };
        let mut group = Group::of(first, keys);
        let mut left = VecDeque::new();
        while let Some((p, keys)) = queued.pop_front() {
            if group.admits(&p.txn, &keys, limits) {
                group.push(p, keys);
            } else {
                left.push_back((p, keys));
            }
        }
        queued = left;
        let commit = commit.clone();
        sending.spawn(async move {
            group.send(name, commit).await;
            drop(permit);
        });
        while sending.try_join_next().is_some() {}
    }
    rx.close();
    for (p, _) in queued {
        let _ = p.respond.send(Err(gone()));
    }
    while let Ok(p) = rx.try_recv() {
        let _ = p.respond.send(Err(gone()));
    }
    while sending.join_next().await.is_some() {}
}

/// Transactions that go to the store as one.
struct Group<E> {
    members: Vec<Pending<E>>,
    /// Every key a member compares (and does not write).
    compared: HashSet<Vec<u8>>,
    /// Every key a member writes.
    written: HashSet<Vec<u8>>,
    ops: usize,
    bytes: usize,
}

impl<E: Clone + Send + 'static> Group<E> {
    fn of(first: Pending<E>, keys: Vec<Touch>) -> Self {
        let mut group = Group {
            members: Vec::new(),
            compared: HashSet::new(),
            written: HashSet::new(),
            ops: 0,
            bytes: 0,
        };
        group.push(first, keys);
        group
    }

    fn push(&mut self, p: Pending<E>, keys: Vec<Touch>) {
        self.ops += size(&p.txn);
        self.bytes += bytes(&p.txn);
        for touch in keys {
            if touch.written {
                self.written.insert(touch.key);
            } else {
                self.compared.insert(touch.key);
            }
        }
        self.members.push(p);
    }

    /// Whether a shareable `txn` touching `keys` may join: no key one of
    /// them writes is compared or written by the other (a key both only
    /// compare is fine: neither changes it), and the whole within the
    /// group's caps.
    fn admits(&self, txn: &Txn, keys: &[Touch], limits: GroupLimits) -> bool {
        let (max_ops, max_bytes) = caps(limits);
        self.ops + size(txn) <= max_ops
            && self.bytes + bytes(txn) <= max_bytes
            && !keys.iter().any(|t| {
                self.written.contains(&t.key) || (t.written && self.compared.contains(&t.key))
            })
    }

    async fn send(self, name: &'static str, commit: Committer<E>) {
        let mut members = self.members;
        // A caller that gave up is owed no answer, nor a write.
        members.retain(|m| !m.respond.is_closed());
        metrics::txn_group(name, members.len());
        if members.len() <= 1 {
            if let Some(only) = members.pop() {
                let _ = only.respond.send(commit(only.txn).await);
            }
            return;
        }
        let mut together = Txn::new();
        for m in &members {
            together.compares.extend(m.txn.compares.iter().cloned());
            together.success.extend(m.txn.success.iter().cloned());
        }
        match commit(together).await {
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
            // Some guard did not hold: each alone learns whether its own do
            // (theirs are disjoint, so the order does not matter).
            Ok(_) => {
                let alone = members.into_iter().map(|m| {
                    let commit = commit.clone();
                    async move {
                        let _ = m.respond.send(commit(m.txn).await);
                    }
                });
                futures::future::join_all(alone).await;
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

/// The most compares plus operations (one spared for a fence's compare)
/// and bytes of one group.
fn caps(limits: GroupLimits) -> (usize, usize) {
    (
        limits.max_ops.min(GROUP_MAX_OPS).saturating_sub(1),
        limits.max_bytes.min(GROUP_MAX_BYTES),
    )
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

/// Every key `txn` compares or touches, when it may share a transaction:
/// no failure branch to run, no range (which might hold another member's
/// keys), and within a group's caps on its own. `None` sends it alone.
fn shareable(txn: &Txn, limits: GroupLimits) -> Option<Vec<Touch>> {
    let (max_ops, max_bytes) = caps(limits);
    if !txn.failure.is_empty() || size(txn) > max_ops || bytes(txn) > max_bytes {
        return None;
    }
    let single = |r: &Range| r.end.is_empty().then(|| r.start.clone());
    let mut out: Vec<Touch> = txn
        .compares
        .iter()
        .map(|c| Touch {
            key: c.key.clone(),
            written: false,
        })
        .collect();
    for op in &txn.success {
        out.push(match op {
            Op::Put { key, .. } => Touch {
                key: key.clone(),
                written: true,
            },
            Op::Delete(r) => Touch {
                key: single(r)?,
                written: true,
            },
            Op::Get(r) => Touch {
                key: single(r)?,
                written: false,
            },
        });
    }
    Some(out)
}

/// A key a transaction compares or reads (`written: false`) or writes.
#[derive(Debug, Clone)]
struct Touch {
    key: Vec<u8>,
    written: bool,
}

#[cfg(test)]
#[path = "group_commit/tests.rs"]
mod tests;

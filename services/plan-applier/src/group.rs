//! Group commit: the fenced transactions of plans committing at the same
//! time go to the store as one transaction, so a burst of small plans costs
//! the store (and every watcher of it) one write, one revision and one watch
//! event per group instead of one per plan.
//!
//! A transaction waits only while a group is already on its way ([`IN_FLIGHT`]);
//! whatever arrived meanwhile goes next, together. A transaction too large
//! for any group (a plan of many placements) goes at once, alone. Transactions are
//! merged only when no key of one is compared or written by another, so the
//! merged transaction's compares see exactly what each would have seen
//! alone, and its writes commute: succeeding together is the same as
//! succeeding one after the other. When a compare of the merged transaction
//! fails, each member is sent again alone, so each gets the answer it would
//! have had on its own.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use caravan_store::{Leadership, LeadershipError, Op, OpResult, Txn, TxnResult};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::task::JoinSet;

use crate::metrics;

/// Groups on their way to the store at once. The next group forms while
/// one is, from whatever is submitted in the meantime: with one, a burst of
/// plans goes in as few transactions as the store's round trip allows.
pub(crate) const IN_FLIGHT: usize = 1;

/// A group grows to at most this many writes and bytes (or the store's
/// limits, if lower): many small plans go together, while a large plan,
/// already a large transaction, goes alone rather than make one larger
/// still for the store to apply in one step.
const GROUP_MAX_OPS: usize = 1_000;
const GROUP_MAX_BYTES: usize = 1024 * 1024;

/// A transaction's answer, or why there is none.
type Answer = Result<TxnResult, LeadershipError>;

/// The limits of one store transaction.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Compares, and operations of a branch, per transaction.
    pub(crate) max_ops: usize,
    /// Bytes of keys and values written per transaction.
    pub(crate) max_bytes: usize,
}

/// Submits fenced transactions of one leadership term; clones share the
/// term's group committer.
#[derive(Clone, Debug)]
pub(crate) struct TxnGroup {
    tx: mpsc::UnboundedSender<Submitted>,
}

#[derive(Debug)]
struct Submitted {
    txn: Txn,
    reply: oneshot::Sender<Answer>,
}

impl TxnGroup {
    /// Starts the group committer of a term; it ends once every handle is
    /// dropped and the groups under way are answered.
    pub(crate) fn start(
        leadership: Arc<Leadership>,
        limits: Limits,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(run(leadership, limits, rx));
        (TxnGroup { tx }, task)
    }

    /// Commits `txn` fenced by the term's leadership, alone or with others.
    pub(crate) async fn txn(&self, txn: Txn) -> Answer {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Submitted { txn, reply })
            .map_err(|_| LeadershipError::Lost("the term's commits have stopped".into()))?;
        answer
            .await
            .unwrap_or_else(|_| Err(LeadershipError::Lost("the group commit was dropped".into())))
    }
}

async fn run(
    leadership: Arc<Leadership>,
    limits: Limits,
    mut rx: mpsc::UnboundedReceiver<Submitted>,
) {
    let room = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut sending = JoinSet::new();
    let mut queued: VecDeque<Submitted> = VecDeque::new();
    let mut open = true;
    // A transaction no group can take goes at once, on its own.
    let route = |s: Submitted, queued: &mut VecDeque<Submitted>, sending: &mut JoinSet<()>| {
        if Group::takes(&s.txn, limits) {
            queued.push_back(s);
        } else {
            let leadership = leadership.clone();
            sending.spawn(async move { Group::new(s).send(&leadership).await });
        }
    };
    while open || !queued.is_empty() {
        if queued.is_empty() {
            match rx.recv().await {
                Some(s) => route(s, &mut queued, &mut sending),
                None => open = false,
            }
            continue;
        }
        // Room for one more group; what arrives meanwhile joins the queue.
        let permit = loop {
            tokio::select! {
                biased;
                permit = room.clone().acquire_owned() => break permit,
                s = rx.recv(), if open => match s {
                    Some(s) => route(s, &mut queued, &mut sending),
                    None => open = false,
                },
            }
        };
        let Ok(permit) = permit else { break };
        while let Ok(s) = rx.try_recv() {
            route(s, &mut queued, &mut sending);
        }
        let Some(first) = queued.pop_front() else {
            continue;
        };
        let mut group = Group::new(first);
        let mut left = VecDeque::new();
        while let Some(s) = queued.pop_front() {
            if group.admits(&s.txn, limits) {
                group.push(s);
            } else {
                left.push_back(s);
            }
        }
        queued = left;
        let leadership = leadership.clone();
        sending.spawn(async move {
            group.send(&leadership).await;
            drop(permit);
        });
        while sending.try_join_next().is_some() {}
    }
    while sending.join_next().await.is_some() {}
}

/// Transactions that go to the store as one.
#[derive(Debug)]
struct Group {
    members: Vec<Submitted>,
    /// Every key compared or written by a member.
    keys: HashSet<Vec<u8>>,
    compares: usize,
    ops: usize,
    bytes: usize,
}

impl Group {
    fn new(first: Submitted) -> Self {
        let mut group = Group {
            members: Vec::new(),
            keys: HashSet::new(),
            compares: 0,
            ops: 0,
            bytes: 0,
        };
        group.push(first);
        group
    }

    fn push(&mut self, s: Submitted) {
        self.keys.extend(keys(&s.txn).map(<[u8]>::to_vec));
        self.compares += s.txn.compares.len();
        self.ops += s.txn.success.len();
        self.bytes += written_bytes(&s.txn);
        self.members.push(s);
    }

    /// Whether `txn` may join: it writes only puts, has no failure branch,
    /// shares no key with the group, and the whole stays within `limits`
    /// and the group's own caps (with a compare and a read to spare for the
    /// fence).
    fn admits(&self, txn: &Txn, limits: Limits) -> bool {
        let (max_ops, max_bytes) = caps(limits);
        Self::takes(txn, limits)
            && self.members.iter().all(|m| Self::takes(&m.txn, limits))
            && self.compares + txn.compares.len() < max_ops
            && self.ops + txn.success.len() < max_ops
            && self.bytes + written_bytes(txn) <= max_bytes
            && keys(txn).all(|k| !self.keys.contains(k))
    }

    /// Whether any group could take `txn`: only puts, no failure branch,
    /// and within a group's caps on its own. Others go alone, at once.
    fn takes(txn: &Txn, limits: Limits) -> bool {
        let (max_ops, max_bytes) = caps(limits);
        txn.failure.is_empty()
            && txn.success.iter().all(|op| matches!(op, Op::Put { .. }))
            && txn.compares.len() < max_ops
            && txn.success.len() < max_ops
            && written_bytes(txn) <= max_bytes
    }

    async fn send(self, leadership: &Leadership) {
        metrics::txn_group(self.members.len());
        if self.members.len() == 1 {
            for m in self.members {
                let _ = m.reply.send(leadership.fenced_txn(m.txn).await);
            }
            return;
        }
        let mut merged = Txn::new();
        for m in &self.members {
            merged.compares.extend(m.txn.compares.iter().cloned());
            merged.success.extend(m.txn.success.iter().cloned());
        }
        match leadership.fenced_txn(merged).await {
            Ok(res) if res.succeeded => {
                let mut results = res.results.into_iter();
                for m in self.members {
                    let mine: Vec<OpResult> = results.by_ref().take(m.txn.success.len()).collect();
                    let _ = m.reply.send(Ok(TxnResult {
                        succeeded: true,
                        revision: res.revision,
                        results: mine,
                    }));
                }
            }
            // A member's compare failed: each alone says whose.
            Ok(_) => {
                let alone = self.members.into_iter().map(|m| async move {
                    let _ = m.reply.send(leadership.fenced_txn(m.txn).await);
                });
                futures::future::join_all(alone).await;
            }
            Err(err) => {
                for m in self.members {
                    let _ = m.reply.send(Err(err.clone()));
                }
            }
        }
    }
}

/// The most writes (and compares) and bytes of one group.
fn caps(limits: Limits) -> (usize, usize) {
    (
        limits.max_ops.min(GROUP_MAX_OPS),
        limits.max_bytes.min(GROUP_MAX_BYTES),
    )
}

/// Every key a transaction compares or writes.
fn keys(txn: &Txn) -> impl Iterator<Item = &[u8]> {
    let compared = txn.compares.iter().map(|c| c.key.as_slice());
    let written = txn.success.iter().map(|op| match op {
        Op::Put { key, .. } => key.as_slice(),
        Op::Delete(r) | Op::Get(r) => r.start.as_slice(),
    });
    compared.chain(written)
}

/// Bytes of keys and values a transaction writes.
fn written_bytes(txn: &Txn) -> usize {
    txn.success
        .iter()
        .map(|op| match op {
            Op::Put { key, value, .. } => key.len() + value.len(),
            Op::Delete(r) | Op::Get(r) => r.start.len() + r.end.len(),
        })
        .sum()
}

#[cfg(test)]
#[path = "group/tests.rs"]
mod tests;

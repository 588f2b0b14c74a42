//! The broker's writes to the store, every one fenced by its leadership and
//! guarded by the mod revision of what it rewrites, so a deposed leader or a
//! stale copy never commits. Batches split when a guard fails, so one eval
//! that changed does not hold the others back.

use std::sync::Arc;

use caravan_proto::{Allocation, Evaluation, Job, Node};
use caravan_state::{Keyspace, StateObject, decode, encode};
use caravan_store::{Compare, CompareOp, Leadership, Op, Revision, Store, Txn, TxnResult};

use crate::error::BrokerError;
use crate::evals::{for_store, node_for_store};

/// An eval to write and the mod revision it must still have (0: it must
/// not exist yet).
#[derive(Clone, Debug)]
pub struct GuardedEval {
    /// The eval as it should be stored.
    pub eval: Evaluation,
    /// The mod revision the writer based it on, 0 for a new eval.
    pub expect: Revision,
}

impl GuardedEval {
    /// A rewrite of `eval`, guarded by the revision it was read at.
    pub fn rewrite(eval: Evaluation, read_at: Revision) -> Self {
        GuardedEval {
            eval,
            expect: read_at,
        }
    }

    /// A new eval.
    pub fn create(eval: Evaluation) -> Self {
        GuardedEval { eval, expect: 0 }
    }
}

/// What a batch of guarded writes did.
#[derive(Clone, Debug, Default)]
pub struct BatchOutcome {
    /// Ids of the evals written.
    pub written: Vec<String>,
    /// Ids of the evals whose guard failed: they changed (or exist) already.
    pub conflicted: Vec<String>,
}

/// Writes that must commit together, each under its guard: a unit of a
/// batch that may share a transaction with other units.
#[derive(Clone, Debug, Default)]
pub struct GuardedUnit {
    /// What must still hold.
    pub guards: Vec<Compare>,
    /// What to write.
    pub ops: Vec<Op>,
}

impl GuardedUnit {
    /// Adds a write guarded by `guard`.
    pub fn push(&mut self, guard: Compare, op: Op) {
        self.guards.push(guard);
        self.ops.push(op);
    }

    /// The transaction slots the unit takes: etcd limits compares and
    /// operations separately.
    pub fn size(&self) -> usize {
        self.guards.len().max(self.ops.len())
    }

    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// Writes of one leadership term.
pub struct EvalWriter {
    leadership: Arc<Leadership>,
    store: Arc<dyn Store>,
    keyspace: Keyspace,
    max_txn_ops: usize,
}

impl EvalWriter {
    /// A writer fenced by `leadership`, with transactions of at most
    /// `max_txn_ops` operations.
    pub fn new(
        leadership: Arc<Leadership>,
        store: Arc<dyn Store>,
        keyspace: Keyspace,
        max_txn_ops: usize,
    ) -> Self {
        EvalWriter {
            leadership,
            store,
            keyspace,
            max_txn_ops: max_txn_ops.max(4),
        }
    }

    /// The most guarded writes a unit may hold to fit one transaction next
    /// to the leadership fence.
    pub fn unit_limit(&self) -> usize {
        self.max_txn_ops - 1
    }

    /// The keys the writer works in.
    pub fn keyspace(&self) -> &Keyspace {
        &self.keyspace
    }

    /// The store it writes to.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Runs a transaction only while leading.
    pub async fn txn(&self, txn: Txn) -> Result<TxnResult, BrokerError> {
        Ok(self.leadership.fenced_txn(txn).await?)
    }

    fn guard(&self, write: &GuardedEval) -> Compare {
        let key = self.keyspace.eval(&write.eval.id);
        if write.expect == 0 {
            Compare::absent(key)
        } else {
            Compare::mod_revision(key, CompareOp::Equal, write.expect)
        }
    }

    fn put(&self, eval: &Evaluation) -> Op {
        Op::put(self.keyspace.eval(&eval.id), for_store(eval))
    }

    /// Writes evals, each under its guard, in as few transactions as the
    /// operation limit allows.
    pub async fn put_evals(&self, writes: Vec<GuardedEval>) -> Result<BatchOutcome, BrokerError> {
        let mut outcome = BatchOutcome::default();
        // The fence is one more compare.
        let chunk = self.max_txn_ops - 1;
        for batch in writes.chunks(chunk) {
            let mut txn = Txn::new();
            for w in batch {
                txn = txn.when(self.guard(w)).and_then(self.put(&w.eval));
            }
            if self.txn(txn).await?.succeeded {
                outcome
                    .written
                    .extend(batch.iter().map(|w| w.eval.id.clone()));
                continue;
            }
            for w in batch {
                let txn = Txn::new().when(self.guard(w)).and_then(self.put(&w.eval));
                if self.txn(txn).await?.succeeded {
                    outcome.written.push(w.eval.id.clone());
                } else {
                    outcome.conflicted.push(w.eval.id.clone());
                }
            }
        }
        Ok(outcome)
    }

    /// Writes one eval under its guard; returns the commit revision, or
    /// `None` when the guard failed.
    pub async fn put_eval(&self, write: &GuardedEval) -> Result<Option<Revision>, BrokerError> {
        let txn = Txn::new()
            .when(self.guard(write))
            .and_then(self.put(&write.eval));
        let res = self.txn(txn).await?;
        Ok(res.succeeded.then_some(res.revision))
    }

    /// Marks an eval failed and creates its follow-up in one transaction;
    /// `false` when the failed eval changed meanwhile.
    pub async fn fail_with_follow_up(
        &self,
        failed: &GuardedEval,
        follow_up: &Evaluation,
    ) -> Result<bool, BrokerError> {
        let follow = GuardedEval::create(follow_up.clone());
        let txn = Txn::new()
            .when(self.guard(failed))
            .when(self.guard(&follow))
            .and_then(self.put(&failed.eval))
            .and_then(self.put(follow_up));
        Ok(self.txn(txn).await?.succeeded)
    }

    /// How many evals fit the transaction that marks a node down, next to
    /// the fence, the node's two guards and its write.
    pub fn node_down_room(&self) -> usize {
        self.max_txn_ops.saturating_sub(3)
    }

    /// Marks a node down, guarded by the mod revision it was read at and by
    /// its heartbeat still being gone, with `evals` (at most
    /// [`Self::node_down_room`]) for its jobs; a node that owes more carries
    /// a pending fan-out. Returns `false` when the node changed or came
    /// back, in which case nothing was written.
    pub async fn node_down(&self, node: &Node, evals: &[Evaluation]) -> Result<bool, BrokerError> {
        let mut txn = Txn::new()
            .when(Compare::mod_revision(
                self.keyspace.node(&node.id),
                CompareOp::Equal,
                node.modify_revision,
            ))
            .when(Compare::absent(self.keyspace.heartbeat(&node.id)))
            .and_then(Op::put(self.keyspace.node(&node.id), node_for_store(node)));
        for e in evals {
            txn = txn
                .when(self.guard(&GuardedEval::create(e.clone())))
                .and_then(self.put(e));
        }
        Ok(self.txn(txn).await?.succeeded)
    }

    /// Rewrites a node read at `node.modify_revision`; `false` when it
    /// changed since.
    pub async fn rewrite_node(&self, node: &Node) -> Result<bool, BrokerError> {
        let key = self.keyspace.node(&node.id);
        let txn = Txn::new()
            .when(Compare::mod_revision(
                key.clone(),
                CompareOp::Equal,
                node.modify_revision,
            ))
            .and_then(Op::put(key, node_for_store(node)));
        Ok(self.txn(txn).await?.succeeded)
    }

    /// Writes units in as few transactions as the operation limit allows,
    /// keeping each unit whole; when a transaction's guards fail, its units
    /// are tried one by one so one changed object holds back only its own
    /// unit. Returns, per unit, whether it committed, and the newest commit
    /// revision.
    pub async fn write_units(
        &self,
        units: &[GuardedUnit],
    ) -> Result<(Vec<bool>, Revision), BrokerError> {
        let limit = self.unit_limit();
        let mut done = vec![false; units.len()];
        let mut newest = 0;
        let mut start = 0;
        while start < units.len() {
            let mut end = start;
            let mut size = 0;
            while end < units.len() && (end == start || size + units[end].size() <= limit) {
                size += units[end].size();
                end += 1;
            }
            let batch = &units[start..end];
            let res = self.txn(unit_txn(batch)).await?;
            if res.succeeded {
                newest = newest.max(res.revision);
                done[start..end].iter_mut().for_each(|d| *d = true);
            } else if batch.len() > 1 {
                for (i, unit) in batch.iter().enumerate() {
                    let res = self.txn(unit_txn(std::slice::from_ref(unit))).await?;
                    if res.succeeded {
                        newest = newest.max(res.revision);
                        done[start + i] = true;
                    }
                }
            }
            start = end;
        }
        Ok((done, newest))
    }

    /// Launches a periodic child: the child job, its first version and its
    /// eval, guarded by the parent being as read and the child not existing
    /// yet, so a launch is never made twice. Returns the transaction's
    /// outcome (on failure its revision is the store's current one).
    pub async fn launch_child(
        &self,
        parent: &Job,
        child: &Job,
        eval: &Evaluation,
    ) -> Result<TxnResult, BrokerError> {
        let ks = &self.keyspace;
        let job_key = ks.job(&child.namespace, &child.id);
        let version_key = ks.job_version(&child.namespace, &child.id, child.version);
        let bytes = encode(child);
        let txn = Txn::new()
            .when(Compare::mod_revision(
                ks.job(&parent.namespace, &parent.id),
                CompareOp::Equal,
                parent.modify_revision,
            ))
            .when(Compare::absent(job_key.clone()))
            .when(self.guard(&GuardedEval::create(eval.clone())))
            .and_then(Op::put(job_key, bytes.clone()))
            .and_then(Op::put(version_key, bytes))
            .and_then(self.put(eval));
        self.txn(txn).await
    }

    /// The store's current revision.
    pub async fn current_revision(&self) -> Result<Revision, BrokerError> {
        Ok(self.store.current_revision().await?)
    }

    /// Reads a job from the store (not the cache).
    pub async fn read_job(
        &self,
        namespace: &str,
        job_id: &str,
    ) -> Result<Option<Job>, BrokerError> {
        self.read(&self.keyspace.job(namespace, job_id)).await
    }

    /// Reads an eval from the store (not the cache): the base of a rewrite.
    pub async fn read_eval(&self, eval_id: &str) -> Result<Option<Evaluation>, BrokerError> {
        self.read(&self.keyspace.eval(eval_id)).await
    }

    /// Reads an alloc from the store, whole and folded from its record and
    /// status (the cache keeps it lean): the base of a rewrite.
    pub async fn read_alloc(&self, alloc_id: &str) -> Result<Option<Allocation>, BrokerError> {
        Ok(caravan_state::read_alloc(self.store.as_ref(), &self.keyspace, alloc_id).await?)
    }

    async fn read<T: StateObject>(&self, key: &[u8]) -> Result<Option<T>, BrokerError> {
        match self.store.get(key).await? {
            Some(kv) => Ok(Some(decode(&kv)?)),
            None => Ok(None),
        }
    }
}

fn unit_txn(units: &[GuardedUnit]) -> Txn {
    let mut txn = Txn::new();
    for unit in units {
        for guard in &unit.guards {
            txn = txn.when(guard.clone());
        }
        for op in &unit.ops {
            txn = txn.and_then(op.clone());
        }
    }
    txn
}

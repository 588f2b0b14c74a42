//! The broker's writes to the store, every one fenced by its leadership and
//! guarded by the mod revision of what it rewrites, so a deposed leader or a
//! stale copy never commits. Batches split when a guard fails, so one eval
//! that changed does not hold the others back.

use std::sync::Arc;

use caravan_proto::{Evaluation, Node};
use caravan_state::{Keyspace, decode};
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

    /// Marks a node down, guarded by the mod revision it was read at and by
    /// its heartbeat still being gone, with as many of the evals for its
    /// jobs as fit one transaction. Returns the evals left for the caller
    /// to create, or `None` when the node changed or came back, in which
    /// case nothing was written.
    pub async fn node_down(
        &self,
        node: &Node,
        mut evals: Vec<Evaluation>,
    ) -> Result<Option<Vec<Evaluation>>, BrokerError> {
        let rest = evals.split_off(evals.len().min(self.max_txn_ops.saturating_sub(3)));
        let mut txn = Txn::new()
            .when(Compare::mod_revision(
                self.keyspace.node(&node.id),
                CompareOp::Equal,
                node.modify_revision,
            ))
            .when(Compare::absent(self.keyspace.heartbeat(&node.id)))
            .and_then(Op::put(self.keyspace.node(&node.id), node_for_store(node)));
        for e in &evals {
            txn = txn
                .when(self.guard(&GuardedEval::create(e.clone())))
                .and_then(self.put(e));
        }
        Ok(self.txn(txn).await?.succeeded.then_some(rest))
    }

    /// Reads an eval from the store (not the cache): the base of a rewrite.
    pub async fn read_eval(&self, eval_id: &str) -> Result<Option<Evaluation>, BrokerError> {
        match self.store.get(&self.keyspace.eval(eval_id)).await? {
            Some(kv) => Ok(Some(decode(&kv)?)),
            None => Ok(None),
        }
    }
}

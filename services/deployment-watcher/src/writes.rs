//! The watcher's writes, every one fenced by its leadership and guarded by
//! the mod revision of what it rewrites, so a deposed leader or a stale copy
//! never commits: deployment updates with their evaluation, failure with an
//! auto-revert registration, success with the version marked stable, and
//! allocation health set by hand.

use std::sync::Arc;

use caravan_proto::{Allocation, Deployment, Evaluation, Job};
use caravan_state::{
    Keyspace, RegisterTxn, StateObject, decode, encode, follow_status, read_alloc,
};
use caravan_store::{Compare, CompareOp, Leadership, Op, Range, Revision, Store, Txn, TxnResult};

use crate::error::WatcherError;

/// What a guarded write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    /// Written at this revision.
    Done(Revision),
    /// A guard failed: something changed meanwhile. The store was at this
    /// revision, which the cache must reach before the write is retried.
    Conflict(Revision),
}

impl Commit {
    fn of(res: &TxnResult) -> Self {
        if res.succeeded {
            Commit::Done(res.revision)
        } else {
            Commit::Conflict(res.revision)
        }
    }
}

/// Writes of one leadership term.
pub struct DeploymentWriter {
    leadership: Arc<Leadership>,
    store: Arc<dyn Store>,
    keyspace: Keyspace,
}

/// The stored copy of a deployment, cleared of what is filled on read.
fn for_store(d: &Deployment) -> Vec<u8> {
    let mut d = d.clone();
    d.create_revision = 0;
    d.modify_revision = 0;
    encode(&d)
}

impl DeploymentWriter {
    /// A writer fenced by `leadership`.
    pub fn new(leadership: Arc<Leadership>, store: Arc<dyn Store>, keyspace: Keyspace) -> Self {
        DeploymentWriter {
            leadership,
            store,
            keyspace,
        }
    }

    /// The keyspace written to.
    pub fn keyspace(&self) -> &Keyspace {
        &self.keyspace
    }

    /// Runs a transaction only while leading.
    pub async fn txn(&self, txn: Txn) -> Result<TxnResult, WatcherError> {
        Ok(self.leadership.fenced_txn(txn).await?)
    }

    /// The compare and put of a deployment read at `read_at`.
    fn deployment_ops(&self, d: &Deployment, read_at: Revision) -> (Compare, Op) {
        let key = self.keyspace.deployment(&d.id);
        (
            Compare::mod_revision(key.clone(), CompareOp::Equal, read_at),
            Op::put(key, for_store(d)),
        )
    }

    fn eval_ops(&self, eval: &Evaluation) -> (Compare, Op) {
        let key = self.keyspace.eval(&eval.id);
        (Compare::absent(key.clone()), Op::put(key, encode(eval)))
    }

    /// Writes `d` (read at `read_at`) and, if given, creates `eval` in the
    /// same transaction.
    pub async fn put_deployment(
        &self,
        d: &Deployment,
        read_at: Revision,
        eval: Option<&Evaluation>,
    ) -> Result<Commit, WatcherError> {
        let (guard, put) = self.deployment_ops(d, read_at);
        let mut txn = Txn::new().when(guard).and_then(put);
        if let Some(e) = eval {
            let (absent, put) = self.eval_ops(e);
            txn = txn.when(absent).and_then(put);
        }
        let res = self.txn(txn).await?;
        Ok(Commit::of(&res))
    }

    /// Creates an evaluation on its own.
    pub async fn create_eval(&self, eval: &Evaluation) -> Result<Commit, WatcherError> {
        let (absent, put) = self.eval_ops(eval);
        let res = self.txn(Txn::new().when(absent).and_then(put)).await?;
        Ok(Commit::of(&res))
    }

    /// Marks `d` failed (already set in `d`), rolling its job back with
    /// `revert` when given, and creates `eval`, all in one transaction.
    pub async fn fail(
        &self,
        d: &Deployment,
        read_at: Revision,
        revert: Option<RegisterTxn>,
        eval: &Evaluation,
    ) -> Result<Commit, WatcherError> {
        let (guard, put) = self.deployment_ops(d, read_at);
        let (absent, put_eval) = self.eval_ops(eval);
        let mut txn = match revert {
            Some(register) => register.txn,
            None => Txn::new(),
        };
        txn = txn
            .when(guard)
            .when(absent)
            .and_then(put)
            .and_then(put_eval);
        let res = self.txn(txn).await?;
        Ok(Commit::of(&res))
    }

    /// Marks `d` successful (already set in `d`) and its job version stable
    /// in one transaction.
    pub async fn succeed(&self, d: &Deployment, read_at: Revision) -> Result<Commit, WatcherError> {
        let (guard, put) = self.deployment_ops(d, read_at);
        let mut txn = Txn::new().when(guard).and_then(put);
        if let Some((compares, ops)) = self
            .stability_ops(&d.namespace, &d.job_id, d.job_version)
            .await?
        {
            txn.compares.extend(compares);
            txn.success.extend(ops);
        }
        let res = self.txn(txn).await?;
        Ok(Commit::of(&res))
    }

    /// Marks a job version stable (and the job, when that version is the
    /// current one); `Done(0)` when there was nothing to mark.
    pub async fn mark_stable(
        &self,
        namespace: &str,
        job_id: &str,
        version: u64,
    ) -> Result<Commit, WatcherError> {
        let Some((compares, ops)) = self.stability_ops(namespace, job_id, version).await? else {
            return Ok(Commit::Done(0));
        };
        let mut txn = Txn::new();
        txn.compares = compares;
        txn.success = ops;
        let res = self.txn(txn).await?;
        Ok(Commit::of(&res))
    }

    /// The compares and puts that mark `version` of a job stable, from the
    /// store's values; `None` when it is stable already or gone.
    async fn stability_ops(
        &self,
        namespace: &str,
        job_id: &str,
        version: u64,
    ) -> Result<Option<(Vec<Compare>, Vec<Op>)>, WatcherError> {
        let version_key = self.keyspace.job_version(namespace, job_id, version);
        let Some(mut at) = self.read::<Job>(&version_key).await? else {
            return Ok(None);
        };
        let job_key = self.keyspace.job(namespace, job_id);
        let current = self.read::<Job>(&job_key).await?;
        let current = current.filter(|j| j.version == version && !j.stable);
        if at.stable && current.is_none() {
            return Ok(None);
        }
        let mut compares = vec![Compare::mod_revision(
            version_key.clone(),
            CompareOp::Equal,
            at.modify_revision,
        )];
        at.stable = true;
        let mut ops = vec![Op::put(version_key, encode(&at))];
        if let Some(mut job) = current {
            compares.push(Compare::mod_revision(
                job_key.clone(),
                CompareOp::Equal,
                job.modify_revision,
            ));
            job.stable = true;
            ops.push(Op::put(job_key, encode(&job)));
        }
        Ok(Some((compares, ops)))
    }

    /// Writes allocations (each the change of one read from the store,
    /// `(as read, as written)`) with `eval`, in one transaction; an
    /// allocation's status key too where the write changes what its client
    /// reported.
    pub async fn put_allocs(
        &self,
        allocs: &[(Allocation, Allocation)],
        eval: &Evaluation,
    ) -> Result<Commit, WatcherError> {
        let (absent, put_eval) = self.eval_ops(eval);
        let mut txn = Txn::new().when(absent).and_then(put_eval);
        for (read, a) in allocs {
            let key = self.keyspace.alloc(&a.id);
            let mut stored = a.clone();
            stored.create_revision = 0;
            stored.modify_revision = 0;
            txn = txn
                .when(Compare::mod_revision(
                    key.clone(),
                    CompareOp::Equal,
                    read.modify_revision,
                ))
                .and_then(Op::put(key, encode(&stored)));
            if let Some((compare, put)) = follow_status(&self.keyspace, read, a) {
                txn = txn.when(compare).and_then(put);
            }
        }
        let res = self.txn(txn).await?;
        Ok(Commit::of(&res))
    }

    /// Reads one allocation from the store (not the cache), folded from its
    /// record and status: the base of a rewrite.
    pub async fn read_alloc(&self, alloc_id: &str) -> Result<Option<Allocation>, WatcherError> {
        Ok(read_alloc(self.store.as_ref(), &self.keyspace, alloc_id).await?)
    }

    /// Reads one object from the store (not the cache): the base of a
    /// rewrite.
    pub async fn read<T: StateObject>(&self, key: &[u8]) -> Result<Option<T>, WatcherError> {
        match self.store.get(key).await? {
            Some(kv) => Ok(Some(decode(&kv)?)),
            None => Ok(None),
        }
    }

    /// The store's current revision.
    pub async fn current_revision(&self) -> Result<Revision, WatcherError> {
        Ok(self.store.current_revision().await?)
    }

    /// Reads a deployment from the store.
    pub async fn read_deployment(&self, id: &str) -> Result<Option<Deployment>, WatcherError> {
        self.read(&self.keyspace.deployment(id)).await
    }

    /// The (version, stable) pairs of a job's kept versions, from the store.
    pub async fn read_versions(
        &self,
        namespace: &str,
        job_id: &str,
    ) -> Result<Vec<(u64, bool)>, WatcherError> {
        let res = self
            .store
            .range(Range::prefix(
                self.keyspace.job_versions_of(namespace, job_id),
            ))
            .await?;
        let mut out = Vec::with_capacity(res.kvs.len());
        for kv in &res.kvs {
            let job: Job = decode(kv)?;
            out.push((job.version, job.stable));
        }
        Ok(out)
    }
}

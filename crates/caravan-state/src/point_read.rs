//! Reading allocations from the store by id: each record with its status
//! key and its job's status batches, at one revision, for answers and
//! rewrites that need what a cache leaves out (docs/state-layout.md,
//! "Allocation status").

use std::collections::HashMap;

use caravan_proto::Allocation;
use caravan_store::{KeyValue, Op, OpResult, Range, Store, Txn};

use crate::alloc_status::fold_with;
use crate::codec::{AllocDetail, decode_alloc};
use crate::error::Result;
use crate::keyspace::Keyspace;
use crate::status_batch::{BatchEntry, decode_batch};

/// Reads allocations `ids` from the store, each folded from its two keys
/// at one revision, in transactions of at most `max_ops` gets; `None` for
/// an allocation without a record. The stored values, for answers and
/// rewrites that need what a cache leaves out.
pub async fn read_allocs(
    store: &dyn Store,
    keys: &Keyspace,
    ids: &[&str],
    max_ops: usize,
) -> Result<Vec<Option<Allocation>>> {
    let mut out = Vec::with_capacity(ids.len());
    for stored in read_alloc_values(store, keys, ids, max_ops).await? {
        out.push(match stored {
            Some(stored) => Some(stored.fold(AllocDetail::Full)?),
            None => None,
        });
    }
    Ok(out)
}

/// Reads one allocation from the store, folded (see [`read_allocs`]).
pub async fn read_alloc(
    store: &dyn Store,
    keys: &Keyspace,
    alloc_id: &str,
) -> Result<Option<Allocation>> {
    Ok(read_allocs(store, keys, &[alloc_id], 3)
        .await?
        .pop()
        .flatten())
}

/// One allocation as stored, undecoded: its record, its `alloc_status/`
/// key and its entries in its job's status batches, read at one revision.
#[derive(Clone, Debug)]
pub struct StoredAlloc {
    /// The `allocs/` value.
    pub record: KeyValue,
    /// The `alloc_status/` value, if any.
    pub status: Option<KeyValue>,
    /// The allocation's entries in its job's `job_status/` batches.
    pub entries: Vec<BatchEntry>,
}

impl StoredAlloc {
    /// The allocation, folded, keeping `detail` of it.
    pub fn fold(&self, detail: AllocDetail) -> Result<Allocation> {
        fold_with(&self.record, self.status.as_ref(), &self.entries, detail)
    }
}

/// The stored values of allocations `ids`, as [`read_allocs`] reads them:
/// first their records, to learn their jobs, then in transactions of at
/// most `max_ops` operations each allocation's record and status key again
/// with its job's status batches, so each is read at one revision. `None`
/// for an allocation without a record.
pub async fn read_alloc_values(
    store: &dyn Store,
    keys: &Keyspace,
    ids: &[&str],
    max_ops: usize,
) -> Result<Vec<Option<StoredAlloc>>> {
    let max_ops = max_ops.max(3);
    // The jobs first: a status batch is found through its job. A record
    // that does not decode is read again all the same, without batches:
    // its reader meets the error.
    let mut jobs: Vec<Option<JobOf>> = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(max_ops) {
        let txn = chunk
            .iter()
            .fold(Txn::new(), |txn, id| txn.and_then(Op::get(keys.alloc(id))));
        for result in store.txn(txn).await?.results {
            let record = match result {
                OpResult::Get(range) => range.kvs.into_iter().next(),
                _ => None,
            };
            jobs.push(record.map(|kv| {
                decode_alloc(&kv, AllocDetail::Scheduling)
                    .ok()
                    .map(|a| (a.namespace, a.job_id))
            }));
        }
    }
    read_with_jobs(store, keys, ids, &jobs, max_ops).await
}

/// [`read_alloc_values`] of allocations whose jobs the caller knows
/// (`allocs`: id, namespace, job id), in one transaction per `max_ops`
/// operations instead of two. `None` for an allocation without a record.
pub async fn read_alloc_values_of_jobs(
    store: &dyn Store,
    keys: &Keyspace,
    allocs: &[(&str, &str, &str)],
    max_ops: usize,
) -> Result<Vec<Option<StoredAlloc>>> {
    let ids: Vec<&str> = allocs.iter().map(|(id, _, _)| *id).collect();
    let jobs: Vec<Option<JobOf>> = allocs
        .iter()
        .map(|(_, ns, job)| Some(Some(((*ns).to_owned(), (*job).to_owned()))))
        .collect();
    read_with_jobs(store, keys, &ids, &jobs, max_ops.max(3)).await
}

/// An allocation's (namespace, job id), `None` when its record did not
/// decode.
type JobOf = Option<(String, String)>;

/// Reads allocations `ids` with their jobs' status batches; `jobs[i]` is
/// `None` for an allocation known to have no record.
async fn read_with_jobs(
    store: &dyn Store,
    keys: &Keyspace,
    ids: &[&str],
    jobs: &[Option<JobOf>],
    max_ops: usize,
) -> Result<Vec<Option<StoredAlloc>>> {
    let mut out: Vec<Option<StoredAlloc>> = vec![None; ids.len()];
    let mut at = 0;
    while at < ids.len() {
        // Two gets per allocation and one range per job not yet in the txn.
        let mut txn = Txn::new();
        let mut ops = 0;
        let mut in_txn: Vec<usize> = Vec::new();
        let mut ranged: Vec<(String, String)> = Vec::new();
        while at < ids.len() {
            let job = jobs[at].as_ref();
            let new_job = job.and_then(Option::as_ref).filter(|j| !ranged.contains(j));
            let need = 2 + usize::from(new_job.is_some());
            if ops > 0 && ops + need > max_ops {
                break;
            }
            if let Some((ns, job)) = new_job {
                ranged.push((ns.clone(), job.clone()));
            }
            if job.is_some() {
                txn = txn
                    .and_then(Op::get(keys.alloc(ids[at])))
                    .and_then(Op::get(keys.alloc_status(ids[at])));
                in_txn.push(at);
                ops += need;
            }
            at += 1;
        }
        for (ns, job) in &ranged {
            txn = txn.and_then(Op::Get(Range::prefix(keys.job_status_of(ns, job))));
        }
        if in_txn.is_empty() {
            continue;
        }
        let mut results = store
            .txn(txn)
            .await?
            .results
            .into_iter()
            .map(|op| match op {
                OpResult::Get(range) => range.kvs,
                _ => Vec::new(),
            });
        let mut read: Vec<(KeyValue, Option<KeyValue>)> = Vec::with_capacity(in_txn.len());
        let mut found = Vec::with_capacity(in_txn.len());
        for &i in &in_txn {
            let record = results.next().unwrap_or_default().into_iter().next();
            let status = results.next().unwrap_or_default().into_iter().next();
            if let Some(record) = record {
                read.push((record, status));
                found.push(i);
            }
        }
        let mut entries: HashMap<String, Vec<BatchEntry>> = HashMap::new();
        for batch in results.flatten() {
            // One batch that does not decode hides none of the others (the
            // watch cache skips it too).
            let Ok(read) = decode_batch(&batch) else {
                tracing::warn!(key = %String::from_utf8_lossy(&batch.key), "skipping a status batch that does not decode");
                continue;
            };
            for e in read {
                entries.entry(e.alloc_id.clone()).or_default().push(e);
            }
        }
        for (i, (record, status)) in found.into_iter().zip(read) {
            out[i] = Some(StoredAlloc {
                record,
                status,
                entries: entries.remove(ids[i]).unwrap_or_default(),
            });
        }
    }
    Ok(out)
}

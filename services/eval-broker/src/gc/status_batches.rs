//! Freeing client status batches (`job_status/<ns>/<job>/<batch>`,
//! docs/state-layout.md, "Status batches"). Gateways write a new batch key
//! for every write of client reports and never rewrite one, so a job's
//! batches pile up, most of their entries superseded by later reports or
//! left by allocations collected since. Each sweep of the collector frees
//! the batches of every job that has [`FREE_FROM`] or more: the entries
//! still chosen move, with the revisions they were first written at, into
//! one new batch, in the same fenced transaction that deletes the batches
//! they came from. Moving keeps what every allocation folds to, and
//! publishes no event; this leader is the only deleter of batches, so a
//! batch is never freed while another is being built from it.
//!
//! The sweep reads keys only to count each job's batches, then reads and
//! decodes the batches of the jobs it frees. An entry is dead when a later
//! entry of its allocation outranks it, or when the allocation is gone from
//! a view at least as new as the read: a client reports only an allocation
//! placed before, and a collected allocation never comes back.

use std::collections::{BTreeMap, HashMap};

use caravan_state::status_batch::{BatchEntry, decode_batch, encode_batch, new_batch_name, rank};
use caravan_state::{Keyspace, Kind, StateKey, Tables};
use caravan_store::{Compare, CompareOp, KeyValue, Op, Range, Revision};

use crate::error::BrokerError;
use crate::gc::registrations::CATCH_UP;
use crate::term::LeaderTerm;
use crate::writes::GuardedUnit;

/// A job with this many batches has them freed: all but its fullest, and
/// any batch most of whose entries are dead, merge into one. A job
/// therefore keeps at most [`FREE_FROM`] − 1 batches between sweeps, and
/// two after one.
pub const FREE_FROM: usize = 4;

/// Most entries one freeing transaction moves (about 90 bytes each; etcd
/// refuses requests beyond 1.5 MiB by default).
const MOVE_MAX: usize = 4096;

/// Keys read per range request.
const PAGE: i64 = 1000;

/// One stored batch of a job, decoded.
#[derive(Clone, Debug)]
pub struct StoredBatch {
    /// Its key.
    pub key: Vec<u8>,
    /// Its mod revision (a batch key is written once).
    pub mod_revision: Revision,
    /// Its entries.
    pub entries: Vec<BatchEntry>,
}

impl StoredBatch {
    /// Decodes a batch read from the store.
    pub fn read(kv: &KeyValue) -> Result<Self, BrokerError> {
        Ok(StoredBatch {
            key: kv.key.clone(),
            mod_revision: kv.mod_revision,
            entries: decode_batch(kv)?,
        })
    }
}

/// One freeing transaction of a job: the batches it deletes, each as read,
/// and the entries it moves into a new batch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Free {
    /// The batches deleted: key and the mod revision they were read at.
    pub freed: Vec<(Vec<u8>, Revision)>,
    /// The chosen entries of the freed batches, with their revisions.
    pub moved: Vec<BatchEntry>,
}

impl Free {
    /// The guarded writes: each freed batch deleted if still as read, and
    /// the moved entries put at `new_key`.
    pub fn unit(&self, new_key: Vec<u8>) -> GuardedUnit {
        let mut unit = GuardedUnit::default();
        for (key, revision) in &self.freed {
            unit.push(
                Compare::mod_revision(key.clone(), CompareOp::Equal, *revision),
                Op::delete(key.clone()),
            );
        }
        if !self.moved.is_empty() {
            let entries = self
                .moved
                .iter()
                .map(|e| (e.alloc_id.as_str(), &e.status, e.revision));
            unit.ops.push(Op::put(new_key, encode_batch(entries)));
        }
        unit
    }
}

/// What to free of one job's `batches`, judged on `tables`, a view at
/// least as new as every batch; each transaction deletes at
/// most `max_freed` batches. Nothing while the job has fewer than
/// [`FREE_FROM`].
pub fn plan(tables: &Tables, batches: &[StoredBatch], max_freed: usize) -> Vec<Free> {
    if batches.len() < FREE_FROM {
        return Vec::new();
    }
    // Each allocation's chosen entry among all the job's batches.
    let mut best: HashMap<&str, ((bool, Revision), usize, usize)> = HashMap::new();
    for (b, batch) in batches.iter().enumerate() {
        for (e, entry) in batch.entries.iter().enumerate() {
            let at = rank(entry.status.client_status(), entry.revision);
            let held = best.entry(&entry.alloc_id).or_insert((at, b, e));
            if at > held.0 {
                *held = (at, b, e);
            }
        }
    }
    let live: Vec<Vec<&BatchEntry>> = batches
        .iter()
        .enumerate()
        .map(|(b, batch)| {
            batch
                .entries
                .iter()
                .enumerate()
                .filter(|(e, entry)| {
                    best.get(entry.alloc_id.as_str())
                        .is_some_and(|(_, bb, be)| (*bb, *be) == (b, *e))
                        && tables.alloc(&entry.alloc_id).is_some()
                })
                .map(|(_, entry)| entry)
                .collect()
        })
        .collect();
    // All but the fullest batch, and that one too when most of it is dead.
    let fullest = (0..batches.len())
        .max_by_key(|b| (live[*b].len(), batches[*b].mod_revision))
        .unwrap_or(0);
    let mostly_dead = |b: usize| live[b].len() * 2 <= batches[b].entries.len();
    let mut freed: Vec<usize> = (0..batches.len())
        .filter(|b| *b != fullest || mostly_dead(*b))
        .collect();
    freed.sort_by_key(|b| batches[*b].mod_revision);
    let mut out: Vec<Free> = Vec::new();
    let mut current = Free::default();
    for b in freed {
        let full = current.freed.len() >= max_freed.max(1)
            || current.moved.len() + live[b].len() > MOVE_MAX;
        if full && !current.freed.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        current
            .freed
            .push((batches[b].key.clone(), batches[b].mod_revision));
        current.moved.extend(live[b].iter().map(|e| (*e).clone()));
    }
    if !current.freed.is_empty() {
        out.push(current);
    }
    out
}

/// Frees the batches of every job with [`FREE_FROM`] or more; returns how
/// many batches went. The caller holds the term's GC turn.
pub async fn free(term: &LeaderTerm) -> Result<u64, BrokerError> {
    let writer = &term.writer;
    let ks = writer.keyspace();
    let store = writer.store();
    let prefix = ks.prefix_of(Kind::JobStatus);
    let (keys, read_at) = caravan_store::read_prefix_keys(store.as_ref(), &prefix, PAGE).await?;
    let crowded = crowded_jobs(ks, &keys);
    if crowded.is_empty() {
        return Ok(0);
    }
    // The view must hold every allocation a batch read now names.
    let revision = writer.current_revision().await?.max(read_at);
    term.informer.wait_for_revision(revision, CATCH_UP).await?;
    let snapshot = term.informer.snapshot();
    // Guards and deletes take one slot each; the new batch's put one more.
    let max_freed = writer.unit_limit().saturating_sub(1);
    let mut count = 0;
    for (namespace, job_id) in crowded {
        let read = store
            .range(Range::prefix(ks.job_status_of(&namespace, &job_id)))
            .await?;
        // A batch newer than the view may name an allocation the view does
        // not hold yet: it is left for a later sweep, and judging without
        // it only ever keeps an entry it would have superseded.
        let batches = match read
            .kvs
            .iter()
            .filter(|kv| kv.mod_revision <= snapshot.revision())
            .map(StoredBatch::read)
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(batches) => batches,
            // A batch this build cannot read is left whole, with its job's
            // others: the rest of the sweep goes on.
            Err(err) => {
                tracing::warn!(%err, namespace, job = job_id, "a status batch could not be read; the job's batches stay");
                continue;
            }
        };
        for free in plan(&snapshot, &batches, max_freed) {
            let new_key = ks.job_status(&namespace, &job_id, &new_batch_name());
            let (ok, _) = writer.write_units(&[free.unit(new_key)]).await?;
            if ok.first().copied().unwrap_or(false) {
                count += free.freed.len() as u64;
            }
        }
    }
    Ok(count)
}

/// The jobs among `keys` (keys of batches) with [`FREE_FROM`] batches or
/// more.
fn crowded_jobs(ks: &Keyspace, keys: &[KeyValue]) -> Vec<(String, String)> {
    let mut per_job: BTreeMap<(String, String), usize> = BTreeMap::new();
    for kv in keys {
        if let Ok(StateKey::JobStatus { namespace, id, .. }) = ks.parse(&kv.key) {
            *per_job.entry((namespace, id)).or_default() += 1;
        }
    }
    per_job
        .into_iter()
        .filter(|(_, n)| *n >= FREE_FROM)
        .map(|(job, _)| job)
        .collect()
}

#[cfg(test)]
mod tests;

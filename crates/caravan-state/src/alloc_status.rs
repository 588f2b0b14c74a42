//! The client's part of an allocation, stored apart from the servers'
//! record: the servers' marks at `alloc_status/<id>`, clients' reports in
//! their job's status batches (see [`crate::status_batch`]), and the one
//! fold every reader uses to put them together (docs/state-layout.md,
//! "Allocation status").
//!
//! A node's report writes a small status value, not the whole allocation.
//! The fold is a pure function of the keys' current values, whatever order
//! their writes arrive in or how often: the status that outranks the others
//! is the allocation's, and the record's copies of the client's fields are
//! what the servers last wrote. A server that changes a client field writes
//! the status key together with the record ([`follow_status`]), guarded by
//! [`status_guard`]; a client's report goes to a batch and compares the
//! status key alone, with the same guard, so a report is never made over a
//! mark the servers set since it was checked. The record is not compared: etcd
//! reads a compared key's whole value, and comparing the record on every
//! report cost about a fifth more CPU per placement across the pipeline
//! (docs/benchmarks.md).

use std::collections::HashMap;

use caravan_proto::{AllocDeploymentStatus, AllocStatus, Allocation};
use caravan_store::{Compare, CompareOp, KeyValue, Op, Revision};
use prost::Message;

use crate::codec::{AllocDetail, decode_alloc};
use crate::error::{Result, StateError};
use crate::keyspace::{Keyspace, StateKey};
use crate::known_strings::{pack_status, unpack_status};
use crate::relative_times::{pack_times, unpack_times};
use crate::status_batch::{BatchEntry, decode_batch, highest};

/// The client's part of `alloc`, as its status key stores it.
pub fn client_part(alloc: &Allocation) -> AllocStatus {
    let deployment = alloc.deployment_status.as_ref();
    AllocStatus {
        client_status: alloc.client_status,
        client_description: alloc.client_description.clone(),
        task_states: alloc.task_states.clone(),
        running_since_unix_ns: alloc.running_since_unix_ns,
        deployment_healthy: deployment.and_then(|d| d.healthy),
        deployment_timestamp_unix_ns: deployment.map_or(0, |d| d.timestamp_unix_ns),
        modify_time_unix_ns: alloc.modify_time_unix_ns,
        client_description_code: 0,
        times_relative: false,
    }
}

/// Whether the client's parts of `a` and `b` differ in what a server may
/// set (its status and description, task states, deployment health). The
/// modify time is left out: every server write stamps it, and the status's
/// stands where one exists.
pub fn client_part_differs(a: &Allocation, b: &Allocation) -> bool {
    let health = |x: &Allocation| {
        x.deployment_status
            .as_ref()
            .map(|d| (d.healthy, d.timestamp_unix_ns))
    };
    a.client_status != b.client_status
        || a.client_description != b.client_description
        || a.task_states != b.task_states
        || a.running_since_unix_ns != b.running_since_unix_ns
        || health(a).unwrap_or_default() != health(b).unwrap_or_default()
}

/// Lays `status` over `alloc`: the client's fields become the status's
/// (its task states are the whole set: a writer carries the ones before
/// into a report without any). The canary flag stays the record's; a
/// deployment status left with nothing set is none. The result depends
/// only on the record's own fields and the status, never on an earlier
/// status laid over the same copy.
pub fn overlay(alloc: &mut Allocation, status: &AllocStatus) {
    alloc.client_status = status.client_status;
    alloc
        .client_description
        .clone_from(&status.client_description);
    alloc.task_states.clone_from(&status.task_states);
    alloc.running_since_unix_ns = status.running_since_unix_ns;
    alloc.modify_time_unix_ns = status.modify_time_unix_ns;
    let d = alloc
        .deployment_status
        .get_or_insert_with(AllocDeploymentStatus::default);
    d.healthy = status.deployment_healthy;
    d.timestamp_unix_ns = status.deployment_timestamp_unix_ns;
    if *d == AllocDeploymentStatus::default() {
        alloc.deployment_status = None;
    }
}

/// [`overlay`], and the status key's `revision` with it: an allocation
/// folded with the status written at `revision`.
pub fn lay_status(alloc: &mut Allocation, status: &AllocStatus, revision: Revision) {
    overlay(alloc, status);
    alloc.client_modify_revision = revision;
}

/// Lays the client's part of `from` (an allocation already folded) over
/// `record`, a newer record of the same allocation, keeping `from`'s status
/// revision: what a cache does when a record changes under a status.
pub fn carry_client_part(record: &mut Allocation, from: &Allocation) {
    if from.client_modify_revision != 0 {
        lay_status(record, &client_part(from), from.client_modify_revision);
    }
}

/// Decodes a stored status.
pub fn decode_status(kv: &KeyValue) -> Result<AllocStatus> {
    let mut status =
        AllocStatus::decode(kv.value.as_slice()).map_err(|source| StateError::Decode {
            key: String::from_utf8_lossy(&kv.key).into_owned(),
            source,
        })?;
    unpack_stored_status(&mut status);
    Ok(status)
}

/// `status` as the store keeps it (its known strings packed, see
/// [`crate::known_strings`], and its times relative, see
/// [`crate::relative_times`]).
pub(crate) fn pack_stored_status(mut status: AllocStatus) -> AllocStatus {
    pack_status(&mut status);
    pack_times(&mut status);
    status
}

/// Reverses [`pack_stored_status`].
pub(crate) fn unpack_stored_status(status: &mut AllocStatus) {
    unpack_status(status);
    unpack_times(status);
}

/// An allocation as stored: its record (`record`, a stored `allocs/` value)
/// folded with its status (`status`, the stored `alloc_status/` value, if
/// any), keeping `detail` of it.
pub fn fold(
    record: &KeyValue,
    status: Option<&KeyValue>,
    detail: AllocDetail,
) -> Result<Allocation> {
    fold_with(record, status, &[], detail)
}

/// [`fold`], with the allocation's statuses from its job's batches
/// (`entries`, read at the same revision) among those it chooses from
/// (see [`crate::status_batch`]).
pub fn fold_with(
    record: &KeyValue,
    status: Option<&KeyValue>,
    entries: &[BatchEntry],
    detail: AllocDetail,
) -> Result<Allocation> {
    let mut alloc = decode_alloc(record, detail)?;
    let own = match status {
        Some(kv) => Some((decode_status(kv)?, kv.mod_revision)),
        None => None,
    };
    let candidates = own
        .iter()
        .map(|(s, rev)| (s, *rev))
        .chain(entries.iter().map(|e| (&e.status, e.revision)));
    if let Some((s, rev)) = highest(candidates, |(s, rev)| (s.client_status(), *rev)) {
        lay_status(&mut alloc, s, rev);
    }
    Ok(alloc)
}

/// Allocations listed as their records (`records`, `allocs/` values under
/// `keys`) and statuses (`statuses`: `alloc_status/` values and
/// `job_status/` batches, read at the same revision), folded, keeping
/// `detail`; a status without its record is left out.
pub fn fold_listed(
    keys: &Keyspace,
    records: &[KeyValue],
    statuses: &[KeyValue],
    detail: AllocDetail,
) -> Result<Vec<Allocation>> {
    let mut by_id = HashMap::with_capacity(statuses.len());
    let mut entries: HashMap<String, Vec<BatchEntry>> = HashMap::new();
    for kv in statuses {
        match keys.parse(&kv.key)? {
            StateKey::AllocStatus(id) => {
                by_id.insert(id, kv);
            }
            StateKey::JobStatus { .. } => {
                for e in decode_batch(kv)? {
                    entries.entry(e.alloc_id.clone()).or_default().push(e);
                }
            }
            _ => {}
        }
    }
    records
        .iter()
        .map(|kv| match keys.parse(&kv.key)? {
            StateKey::Alloc(id) => fold_with(
                kv,
                by_id.get(&id).copied(),
                entries.get(&id).map_or(&[][..], Vec::as_slice),
                detail,
            ),
            _ => fold(kv, None, detail),
        })
        .collect()
}

/// The compare and write a server's write of `next` over `before` (the
/// allocation as read, folded) adds for the status key: none when `next`
/// leaves the client's part as it was. Written even where no client has
/// reported yet, so a second server's mark racing this one conflicts on
/// the status key and is read again.
pub fn follow_status(
    keys: &Keyspace,
    before: &Allocation,
    next: &Allocation,
) -> Option<(Compare, Op)> {
    client_part_differs(before, next).then(|| {
        (
            status_guard(keys, before),
            Op::put(
                keys.alloc_status(&before.id),
                encode_status(client_part(next)),
            ),
        )
    })
}

/// The compare that holds while the status key of `before` (an allocation
/// as read, folded) is as the read found it: its mod revision is at most
/// the newest revision the read folded, the record's or the chosen
/// status's. A status key is written only with its record (or was the
/// chosen status when a client wrote it), so every value a read saw is
/// within that bound and every later write is beyond it; a missing key
/// (mod revision 0) always is. Equality with the chosen status's revision
/// would not do: a status from a batch may be chosen over a newer status
/// key (a finished allocation under a later "unknown" mark), and such a
/// guard would fail on every re-read.
pub fn status_guard(keys: &Keyspace, before: &Allocation) -> Compare {
    let seen = before.modify_revision.max(before.client_modify_revision);
    Compare::mod_revision(keys.alloc_status(&before.id), CompareOp::Less, seen + 1)
}

/// The bytes the store keeps for `status` (see [`pack_stored_status`]).
pub fn encode_status(status: AllocStatus) -> Vec<u8> {
    pack_stored_status(status).encode_to_vec()
}

#[cfg(test)]
mod tests;

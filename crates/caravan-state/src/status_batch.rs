//! Client statuses of one job's allocations stored together, at
//! `job_status/<ns>/<job>/<batch>` (docs/state-layout.md, "Allocation
//! status"), and the one rule every reader uses to choose among an
//! allocation's statuses.
//!
//! An allocation may have several statuses stored at once: its
//! `alloc_status/<id>` key (the servers' marks, and every client report of
//! a writer that writes no batches) and entries in any number of its job's
//! batches. Each status has a revision: its key's for the `alloc_status/`
//! key, the revision its entry was first written at for a batch entry. The
//! allocation's status is the one that [`outranks`] every other: a status
//! in which its client is done (complete, failed, lost) over one in which
//! it is not, then the newest. A finished allocation therefore never runs
//! again whatever order statuses are written or read in (the rule a writer
//! checks before it writes, `may_report`, held by the fold itself), and the
//! choice depends on the set of statuses alone, never on the order a reader
//! meets them.
//!
//! A batch key is written once and never rewritten. A writer that frees a
//! batch moves the entries still chosen into another batch (keeping their
//! revisions) in the same transaction as it deletes the batch, so deleting
//! a batch never changes what any allocation folds to.

use caravan_model::AllocClientStatusExt;
use caravan_proto::{AllocClientStatus, AllocStatus, StatusBatch, StatusEntry};
use caravan_store::{KeyValue, Revision};
use prost::Message;
use uuid::Uuid;

use crate::alloc_status::{pack_stored_status, unpack_stored_status};
use crate::error::{Result, StateError};
use crate::packed_ids::canonical;

/// One allocation's status read from a batch.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchEntry {
    /// The allocation's id.
    pub alloc_id: String,
    /// Its status, as a client reported it.
    pub status: AllocStatus,
    /// The revision the status was first written at.
    pub revision: Revision,
}

/// Where a status stands against the others of its allocation: higher
/// outranks lower (see the module's doc).
pub fn rank(client_status: AllocClientStatus, revision: Revision) -> (bool, Revision) {
    (client_status.is_terminal(), revision)
}

/// Whether a status `(client_status, revision)` outranks `held`, the rank
/// of the status an allocation holds (`None`: it holds none).
pub fn outranks(
    client_status: AllocClientStatus,
    revision: Revision,
    held: Option<(bool, Revision)>,
) -> bool {
    held.is_none_or(|held| rank(client_status, revision) > held)
}

/// The status among `candidates` that outranks every other (the first of
/// equals), `of` giving each one's client status and revision.
pub fn highest<T>(
    candidates: impl IntoIterator<Item = T>,
    of: impl Fn(&T) -> (AllocClientStatus, Revision),
) -> Option<T> {
    candidates.into_iter().reduce(|best, c| {
        let (status, revision) = of(&c);
        let (held, held_revision) = of(&best);
        if outranks(status, revision, Some(rank(held, held_revision))) {
            c
        } else {
            best
        }
    })
}

/// A new batch's name, never used before: a batch key is written once.
pub fn new_batch_name() -> String {
    Uuid::new_v4().simple().to_string()
}

/// The stored bytes of a batch of `entries`: (allocation id, its status,
/// the revision it was first written at, 0 for the batch's own).
pub fn encode_batch<'a>(
    entries: impl IntoIterator<Item = (&'a str, &'a AllocStatus, Revision)>,
) -> Vec<u8> {
    let entries = entries
        .into_iter()
        .map(|(id, status, revision)| {
            let (alloc_id, alloc_id_text) = match canonical(id) {
                Some(bytes) => (bytes.to_vec(), String::new()),
                None => (Vec::new(), id.to_owned()),
            };
            StatusEntry {
                alloc_id,
                alloc_id_text,
                status: Some(pack_stored_status(status.clone())),
                revision,
            }
        })
        .collect();
    StatusBatch { entries }.encode_to_vec()
}

/// The entries of a stored batch, each with the revision it was first
/// written at (the batch key's own for those written with it).
pub fn decode_batch(kv: &KeyValue) -> Result<Vec<BatchEntry>> {
    let err = |why: &str| StateError::key(&kv.key, why.to_owned());
    let batch = StatusBatch::decode(kv.value.as_slice()).map_err(|source| StateError::Decode {
        key: String::from_utf8_lossy(&kv.key).into_owned(),
        source,
    })?;
    batch
        .entries
        .into_iter()
        .map(|e| {
            let alloc_id = match <[u8; 16]>::try_from(e.alloc_id.as_slice()) {
                Ok(bytes) => Uuid::from_bytes(bytes).hyphenated().to_string(),
                Err(_) if e.alloc_id.is_empty() && !e.alloc_id_text.is_empty() => e.alloc_id_text,
                Err(_) => return Err(err("a status entry without an allocation id")),
            };
            let mut status = e
                .status
                .ok_or_else(|| err("a status entry without a status"))?;
            unpack_stored_status(&mut status);
            let revision = if e.revision > 0 {
                e.revision
            } else {
                kv.mod_revision
            };
            Ok(BatchEntry {
                alloc_id,
                status,
                revision,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use caravan_proto::TaskState;

    use super::*;

    fn running(at: i64) -> AllocStatus {
        let mut s = AllocStatus {
            client_description: "Tasks are running".into(),
            modify_time_unix_ns: at,
            running_since_unix_ns: at - 5,
            ..Default::default()
        };
        s.set_client_status(AllocClientStatus::Running);
        s.task_states.insert(
            "web".into(),
            TaskState {
                state: "running".into(),
                started_at_unix_ns: at - 5,
                ..Default::default()
            },
        );
        s
    }

    #[test]
    fn a_batch_reads_back_every_entry_with_its_revision() {
        let uuid = "0b5e3c6e-58f4-4c1a-9d0e-5d2f3b1a7c90";
        let a = running(1_700_000_000_000_000_000);
        let b = running(1_700_000_000_500_000_000);
        let stored = encode_batch([(uuid, &a, 0), ("not-a-uuid", &b, 41)]);
        let kv = KeyValue {
            key: b"/t/job_status/default/web/b1".to_vec(),
            value: stored.clone(),
            create_revision: 57,
            mod_revision: 57,
            version: 1,
            lease: 0,
        };
        let read = decode_batch(&kv).unwrap();
        assert_eq!(
            read,
            vec![
                BatchEntry {
                    alloc_id: uuid.into(),
                    status: a,
                    revision: 57,
                },
                BatchEntry {
                    alloc_id: "not-a-uuid".into(),
                    status: b,
                    revision: 41,
                },
            ]
        );
        // A canonical id takes 16 bytes, and the status is packed as an
        // `alloc_status/` value is.
        let raw = StatusBatch::decode(stored.as_slice()).unwrap();
        assert_eq!(raw.entries[0].alloc_id.len(), 16);
        assert!(raw.entries[0].alloc_id_text.is_empty());
        assert!(
            raw.entries[0]
                .status
                .as_ref()
                .unwrap()
                .client_description
                .is_empty()
        );
    }

    #[test]
    fn an_entry_without_an_id_or_status_is_an_error_naming_the_key() {
        let bad = StatusBatch {
            entries: vec![StatusEntry {
                status: Some(AllocStatus::default()),
                ..Default::default()
            }],
        };
        let kv = KeyValue {
            key: b"/t/job_status/default/web/b1".to_vec(),
            value: bad.encode_to_vec(),
            create_revision: 3,
            mod_revision: 3,
            version: 1,
            lease: 0,
        };
        let err = decode_batch(&kv).unwrap_err().to_string();
        assert!(err.contains("job_status/default/web/b1"), "{err}");
    }

    #[test]
    fn a_finished_status_outranks_any_unfinished_one_then_the_newest_wins() {
        use AllocClientStatus::*;
        assert!(outranks(Running, 3, None));
        assert!(outranks(Running, 5, Some(rank(Running, 4))));
        assert!(!outranks(Running, 4, Some(rank(Running, 4))));
        assert!(!outranks(Running, 9, Some(rank(Complete, 4))));
        assert!(outranks(Failed, 2, Some(rank(Running, 4))));
        assert!(outranks(Complete, 6, Some(rank(Lost, 5))));
        assert!(!outranks(Complete, 4, Some(rank(Lost, 5))));
        assert!(!outranks(Unknown, 9, Some(rank(Lost, 5))));
    }
}

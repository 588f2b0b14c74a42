//! The embedded store's multi-version keyspace: every key's versions, the
//! global revision, compaction, and the log of events watches replay.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Bound;

use crate::error::{Result, StoreError};
use crate::types::{Event, EventKind, KeyValue, LeaseId, Range, RangeResult, Revision};

/// One version of a key: its value at a revision, or its deletion.
#[derive(Clone, Debug)]
enum Version {
    Live(KeyValue),
    Tombstone(Revision),
}

impl Version {
    fn revision(&self) -> Revision {
        match self {
            Version::Live(kv) => kv.mod_revision,
            Version::Tombstone(rev) => *rev,
        }
    }

    fn live(&self) -> Option<&KeyValue> {
        match self {
            Version::Live(kv) => Some(kv),
            Version::Tombstone(_) => None,
        }
    }
}

/// The events of one revision, in the order the transaction made them.
#[derive(Debug)]
struct RevisionEvents {
    revision: Revision,
    events: Vec<Event>,
}

/// What a watch gets from [`KeySpace::events_since`].
#[derive(Debug)]
pub(super) struct EventsSince {
    /// Matching events, whole revisions only.
    pub events: Vec<Event>,
    /// The first revision not yet looked at.
    pub next: Revision,
}

/// Keys with their history, as etcd's MVCC store keeps them.
#[derive(Debug)]
pub(super) struct KeySpace {
    keys: BTreeMap<Vec<u8>, Vec<Version>>,
    revision: Revision,
    compact_revision: Revision,
    /// One entry per revision from `compact_revision` (or the first write) on:
    /// every revision has at least one event, so entries are contiguous.
    log: VecDeque<RevisionEvents>,
    /// Events of the write transaction in progress, at `revision + 1`.
    pending: Vec<Event>,
}

impl KeySpace {
    /// An empty keyspace at revision 1, as a fresh etcd starts.
    pub fn new() -> Self {
        KeySpace {
            keys: BTreeMap::new(),
            revision: 1,
            compact_revision: 0,
            log: VecDeque::new(),
            pending: Vec::new(),
        }
    }

    /// The revision of the last committed write.
    pub fn revision(&self) -> Revision {
        self.revision
    }

    /// The revision of the last compaction (0 before any).
    pub fn compact_revision(&self) -> Revision {
        self.compact_revision
    }

    /// Checks that `revision` (0 for the latest) can be read.
    pub fn check_readable(&self, revision: Revision) -> Result<()> {
        if revision > self.revision {
            return Err(StoreError::FutureRevision {
                requested: revision,
                current: self.revision,
            });
        }
        if revision > 0 && revision < self.compact_revision {
            return Err(StoreError::Compacted {
                requested: revision,
                compact_revision: self.compact_revision,
            });
        }
        Ok(())
    }

    /// Reads a range. Inside a write transaction that already wrote, the
    /// latest state includes its writes, as in etcd.
    pub fn range(&self, range: &Range) -> Result<RangeResult> {
        if range.start.is_empty() {
            return Err(StoreError::InvalidArgument("key is not provided".into()));
        }
        self.check_readable(range.revision)?;
        let at = if range.revision > 0 {
            range.revision
        } else if self.pending.is_empty() {
            self.revision
        } else {
            self.revision + 1
        };
        let limit = usize::try_from(range.limit).unwrap_or(0);
        let mut kvs = Vec::new();
        let mut count: i64 = 0;
        for (_, versions) in self.keys_in(range) {
            let Some(kv) = visible_at(versions, at) else {
                continue;
            };
            count += 1;
            if limit == 0 || kvs.len() < limit {
                let mut kv = kv.clone();
                if range.keys_only {
                    kv.value = Vec::new();
                }
                kvs.push(kv);
            }
        }
        Ok(RangeResult {
            more: (kvs.len() as i64) < count,
            kvs,
            revision: self.revision,
            count,
        })
    }

    /// The live keys of a range at the latest state, for deletes and checks.
    pub fn live_keys(&self, range: &Range) -> Vec<KeyValue> {
        self.keys_in(range)
            .filter_map(|(_, versions)| versions.last().and_then(Version::live).cloned())
            .collect()
    }

    /// The live version of one key.
    pub fn get(&self, key: &[u8]) -> Option<&KeyValue> {
        self.keys
            .get(key)
            .and_then(|versions| versions.last())
            .and_then(Version::live)
    }

    fn keys_in<'a>(
        &'a self,
        range: &'a Range,
    ) -> Box<dyn Iterator<Item = (&'a Vec<u8>, &'a Vec<Version>)> + 'a> {
        if range.end.is_empty() {
            return Box::new(self.keys.get_key_value(range.start.as_slice()).into_iter());
        }
        let start = Bound::Included(range.start.as_slice());
        if range.end == [0] {
            return Box::new(self.keys.range::<[u8], _>((start, Bound::Unbounded)));
        }
        if range.end.as_slice() <= range.start.as_slice() {
            return Box::new(std::iter::empty());
        }
        Box::new(
            self.keys
                .range::<[u8], _>((start, Bound::Excluded(range.end.as_slice()))),
        )
    }

    /// Writes a key at the pending revision; returns the lease it was attached
    /// to before (0 if none or absent).
    pub fn put(&mut self, key: &[u8], value: &[u8], lease: LeaseId) -> LeaseId {
        let rev = self.revision + 1;
        let versions = self.keys.entry(key.to_vec()).or_default();
        let (create_revision, version, old_lease) = match versions.last().and_then(Version::live) {
            Some(kv) => (kv.create_revision, kv.version + 1, kv.lease),
            None => (rev, 1, 0),
        };
        let kv = KeyValue {
            key: key.to_vec(),
            value: value.to_vec(),
            create_revision,
            mod_revision: rev,
            version,
            lease,
        };
        self.pending.push(Event {
            kind: EventKind::Put,
            kv: kv.clone(),
        });
        versions.push(Version::Live(kv));
        old_lease
    }

    /// Deletes the live keys of a range at the pending revision; returns what
    /// was deleted, in key order.
    pub fn delete(&mut self, range: &Range) -> Vec<KeyValue> {
        let rev = self.revision + 1;
        let doomed = self.live_keys(range);
        for kv in &doomed {
            if let Some(versions) = self.keys.get_mut(&kv.key) {
                versions.push(Version::Tombstone(rev));
            }
            self.pending.push(Event {
                kind: EventKind::Delete,
                kv: KeyValue {
                    key: kv.key.clone(),
                    value: Vec::new(),
                    create_revision: 0,
                    mod_revision: rev,
                    version: 0,
                    lease: 0,
                },
            });
        }
        doomed
    }

    /// Ends the write transaction in progress: if it changed anything, its
    /// changes become the next revision. Returns the store's revision.
    pub fn commit(&mut self) -> Revision {
        if !self.pending.is_empty() {
            self.revision += 1;
            self.log.push_back(RevisionEvents {
                revision: self.revision,
                events: std::mem::take(&mut self.pending),
            });
        }
        self.revision
    }

    /// Discards history before `revision`: reads and watches at older
    /// revisions fail with `Compacted` afterwards.
    pub fn compact(&mut self, revision: Revision) -> Result<()> {
        if revision <= self.compact_revision {
            return Err(StoreError::Compacted {
                requested: revision,
                compact_revision: self.compact_revision,
            });
        }
        if revision > self.revision {
            return Err(StoreError::FutureRevision {
                requested: revision,
                current: self.revision,
            });
        }
        // Only keys written in the dropped revisions can have versions to
        // prune: every other key was pruned by an earlier compaction.
        let mut touched = BTreeSet::new();
        while self.log.front().is_some_and(|e| e.revision < revision) {
            if let Some(entry) = self.log.pop_front() {
                touched.extend(entry.events.into_iter().map(|e| e.kv.key));
            }
        }
        for key in touched {
            let Some(versions) = self.keys.get_mut(&key) else {
                continue;
            };
            // Keep the version visible at `revision` and everything after.
            let keep_from = versions
                .iter()
                .rposition(|v| v.revision() <= revision)
                .unwrap_or(0);
            versions.drain(..keep_from);
            if versions
                .first()
                .is_some_and(|v| v.revision() <= revision && v.live().is_none())
            {
                versions.remove(0);
            }
            if versions.is_empty() {
                self.keys.remove(&key);
            }
        }
        self.compact_revision = revision;
        Ok(())
    }

    /// Events of keys in `range` from revision `from` on, whole revisions
    /// only, stopping once `max_events` are gathered.
    pub fn events_since(
        &self,
        from: Revision,
        range: &Range,
        max_events: usize,
    ) -> Result<EventsSince> {
        if from < self.compact_revision {
            return Err(StoreError::Compacted {
                requested: from,
                compact_revision: self.compact_revision,
            });
        }
        let mut events = Vec::new();
        let skip = self.log.front().map_or(0, |front| {
            usize::try_from(from - front.revision).unwrap_or(0)
        });
        for entry in self.log.iter().skip(skip) {
            events.extend(
                entry
                    .events
                    .iter()
                    .filter(|e| range.contains(&e.kv.key))
                    .cloned(),
            );
            if events.len() >= max_events && entry.revision < self.revision {
                return Ok(EventsSince {
                    events,
                    next: entry.revision + 1,
                });
            }
        }
        Ok(EventsSince {
            events,
            next: from.max(self.revision + 1),
        })
    }
}

/// The live value of a key as of revision `at`.
fn visible_at(versions: &[Version], at: Revision) -> Option<&KeyValue> {
    let idx = versions.partition_point(|v| v.revision() <= at);
    idx.checked_sub(1)
        .and_then(|i| versions.get(i))
        .and_then(Version::live)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(ks: &mut KeySpace, key: &str, value: &str) -> Revision {
        ks.put(key.as_bytes(), value.as_bytes(), 0);
        ks.commit()
    }

    #[test]
    fn compaction_keeps_the_state_at_the_compaction_revision() {
        let mut ks = KeySpace::new();
        let r1 = put(&mut ks, "a", "1");
        let r2 = put(&mut ks, "a", "2");
        ks.delete(&Range::key("b"));
        assert_eq!(ks.commit(), r2, "a delete of nothing is no revision");
        put(&mut ks, "b", "x");
        ks.delete(&Range::key("b"));
        let r4 = ks.commit();
        let r5 = put(&mut ks, "a", "3");
        ks.compact(r4).unwrap();
        assert!(matches!(
            ks.range(&Range::key("a").at_revision(r1)),
            Err(StoreError::Compacted { .. })
        ));
        let at_r4 = ks.range(&Range::key("a").at_revision(r4)).unwrap();
        assert_eq!(at_r4.kvs[0].value, b"2");
        assert!(!ks.keys.contains_key(b"b".as_slice()), "tombstone pruned");
        let now = ks.range(&Range::key("a")).unwrap();
        assert_eq!(now.kvs[0].mod_revision, r5);
        assert_eq!(now.kvs[0].version, 3);
    }

    #[test]
    fn events_since_never_splits_a_revision() {
        let mut ks = KeySpace::new();
        ks.put(b"k1", b"v", 0);
        ks.put(b"k2", b"v", 0);
        let r1 = ks.commit();
        let r2 = put(&mut ks, "k3", "v");
        let got = ks.events_since(r1, &Range::prefix("k"), 1).unwrap();
        assert_eq!(got.events.len(), 2);
        assert_eq!(got.next, r1 + 1);
        let rest = ks.events_since(got.next, &Range::prefix("k"), 1).unwrap();
        assert_eq!(rest.events.len(), 1);
        assert_eq!(rest.next, r2 + 1);
        let none = ks.events_since(rest.next, &Range::prefix("k"), 1).unwrap();
        assert!(none.events.is_empty());
        assert_eq!(none.next, r2 + 1);
    }
}

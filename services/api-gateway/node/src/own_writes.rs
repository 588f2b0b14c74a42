//! The status writer's own last writes, kept until the watch cache shows
//! them. A batch rewrites the newest copy of each allocation the gateway
//! knows (the cache's, with the metrics the cache keeps as stored) instead
//! of reading the store first; without these, a node's second report of an
//! allocation, sent before the cache has applied the first, would be
//! compared against the cache's older copy and conflict.

use std::collections::HashMap;

use caravan_state::{Snapshot, StoredAlloc, StoredMetrics};
use caravan_store::Revision;
use parking_lot::Mutex;

use crate::updates::Current;

/// Allocations as the writer last wrote them, by id.
#[derive(Debug, Default)]
pub(crate) struct OwnWrites {
    written: Mutex<HashMap<String, StoredAlloc>>,
}

impl OwnWrites {
    /// Records what a batch wrote at `revision`.
    pub(crate) fn record(&self, written: Vec<StoredAlloc>, revision: Revision) {
        let mut own = self.written.lock();
        for mut stored in written {
            // Just built by the batch, so not shared: no copy is made.
            std::sync::Arc::make_mut(&mut stored.alloc).modify_revision = revision;
            own.insert(stored.alloc.id.clone(), stored);
        }
    }

    /// Forgets the writes a cache at `revision` already shows.
    pub(crate) fn forget_seen(&self, revision: Revision) {
        self.written
            .lock()
            .retain(|_, s| s.alloc.modify_revision > revision);
    }

    /// The newest copy known of each allocation of `current`, in its order:
    /// the cache's or the writer's own, whichever is later; `None` for an
    /// update without an allocation (left alone, as the store's answer
    /// would leave it). `None` in all when an allocation is known to
    /// neither on the node it was checked against, or the cache's copy is
    /// the newest and `metrics` has no bytes of its revision: the store
    /// decides then.
    pub(crate) fn newest(
        &self,
        snap: &Snapshot,
        metrics: &StoredMetrics,
        current: &Current,
    ) -> Option<Vec<Option<StoredAlloc>>> {
        let own = self.written.lock();
        let mut out = Vec::with_capacity(current.len());
        for (update, checked) in current {
            let Some(checked) = checked else {
                out.push(None);
                continue;
            };
            let cached = snap
                .alloc(&update.alloc_id)
                .filter(|a| a.node_id == checked.node_id);
            let written = own
                .get(&update.alloc_id)
                .filter(|s| s.alloc.node_id == checked.node_id);
            let newest = match (cached, written) {
                (Some(c), Some(w)) if w.alloc.modify_revision > c.modify_revision => w.clone(),
                (Some(c), _) => StoredAlloc::with_metrics(
                    std::sync::Arc::clone(c),
                    metrics.at(&update.alloc_id, c.modify_revision)?,
                ),
                (None, Some(w)) => w.clone(),
                (None, None) => return None,
            };
            out.push(Some(newest));
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use caravan_proto::{AllocUpdate, Allocation};
    use caravan_state::{Change, Id, Tables};

    use super::*;

    fn alloc(id: &str, node: &str, revision: Revision) -> Allocation {
        Allocation {
            id: id.into(),
            node_id: node.into(),
            modify_revision: revision,
            ..Default::default()
        }
    }

    fn cache_of(allocs: &[Allocation]) -> Snapshot {
        let mut tables = Tables::new();
        for a in allocs {
            tables.apply(Change::Alloc {
                id: Id::from(a.id.as_str()),
                alloc: Some(Arc::new(a.clone())),
            });
        }
        Snapshot::new(tables)
    }

    fn current(ids: &[&str], node: &str) -> Current {
        ids.iter()
            .map(|id| {
                let u = AllocUpdate {
                    alloc_id: (*id).into(),
                    ..Default::default()
                };
                (u, Some(Arc::new(alloc(id, node, 1))))
            })
            .collect()
    }

    #[test]
    fn the_newest_copy_wins_and_a_shown_write_is_forgotten() {
        let own = OwnWrites::default();
        let metrics = StoredMetrics::default();
        metrics.put("a", 5, b"ma");
        metrics.put("b", 5, b"mb");
        let snap = cache_of(&[alloc("a", "n1", 5), alloc("b", "n1", 5)]);
        let from_cache = own.newest(&snap, &metrics, &current(&["a", "b"], "n1"));
        let from_cache = from_cache.expect("both known");
        assert_eq!(from_cache[0].as_ref().unwrap().alloc.modify_revision, 5);

        // The writer wrote `a` at 9; the cache still shows 5.
        let written = from_cache[0]
            .as_ref()
            .unwrap()
            .replaced(alloc("a", "n1", 5));
        own.record(vec![written], 9);
        let next = own
            .newest(&snap, &metrics, &current(&["a", "b"], "n1"))
            .unwrap();
        assert_eq!(next[0].as_ref().unwrap().alloc.modify_revision, 9);
        assert_eq!(next[1].as_ref().unwrap().alloc.modify_revision, 5);
        own.forget_seen(8);
        assert_eq!(own.written.lock().len(), 1, "not shown yet");
        own.forget_seen(9);
        assert!(own.written.lock().is_empty());
    }

    #[test]
    fn the_store_decides_what_the_gateway_cannot() {
        let own = OwnWrites::default();
        let metrics = StoredMetrics::default();
        metrics.put("a", 4, b"ma");
        let snap = cache_of(&[alloc("a", "n1", 5)]);
        // No metrics bytes of the cached revision.
        assert!(
            own.newest(&snap, &metrics, &current(&["a"], "n1"))
                .is_none()
        );
        metrics.put("a", 5, b"ma");
        assert!(
            own.newest(&snap, &metrics, &current(&["a"], "n1"))
                .is_some()
        );
        // Unknown, or known on another node.
        assert!(
            own.newest(&snap, &metrics, &current(&["x"], "n1"))
                .is_none()
        );
        assert!(
            own.newest(&snap, &metrics, &current(&["a"], "n2"))
                .is_none()
        );
        // An update without an allocation is left alone.
        let mut none = current(&["a"], "n1");
        none[0].1 = None;
        assert_eq!(own.newest(&snap, &metrics, &none), Some(vec![None]));
    }
}

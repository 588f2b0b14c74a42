//! The status writer's own last writes, kept until the watch cache shows
//! them. A batch rewrites the newest copy of each allocation the gateway
//! knows (the cache's, with the metrics the cache keeps as stored) instead
//! of reading the store first; without these, a node's second report of an
//! allocation, sent before the cache has applied the first, would be
//! compared against the cache's older copy and conflict.

use std::collections::HashMap;
use std::sync::Arc;

use caravan_proto::Allocation;
use caravan_state::Snapshot;
use caravan_store::Revision;
use parking_lot::Mutex;

use crate::updates::{Current, Written};

/// The statuses the writer last wrote, each with the allocation it was
/// checked against and the revision it was written at, by allocation id.
/// The allocation as a reader folds it is built only when a batch needs it
/// before the cache shows the write.
#[derive(Debug, Default)]
pub(crate) struct OwnWrites {
    written: Mutex<HashMap<String, (Written, Revision)>>,
}

impl OwnWrites {
    /// Records what a batch wrote at `revision`.
    pub(crate) fn record(&self, written: Vec<Written>, revision: Revision) {
        let mut own = self.written.lock();
        for w in written {
            own.insert(w.base.id.clone(), (w, revision));
        }
    }

    /// Forgets the writes a cache at `revision` already shows.
    pub(crate) fn forget_seen(&self, revision: Revision) {
        self.written.lock().retain(|_, (_, at)| *at > revision);
    }

    /// The newest copy known of each allocation of `current`, in its order:
    /// the cache's, with the writer's own status laid over it where that is
    /// later; `None` for an update without an allocation (left alone, as the
    /// store's answer would leave it). `None` in all when an allocation is
    /// known to neither on the node it was checked against: the store
    /// decides then.
    pub(crate) fn newest(
        &self,
        snap: &Snapshot,
        current: &Current,
    ) -> Option<Vec<Option<Arc<Allocation>>>> {
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
                .filter(|(w, _)| w.base.node_id == checked.node_id);
            let newest = match (cached, written) {
                (Some(c), Some((w, at))) if *at > c.client_modify_revision => {
                    if w.base.modify_revision >= c.modify_revision {
                        Arc::new(w.folded(*at))
                    } else {
                        // The servers rewrote the record since: theirs, with
                        // the status written after the cache's.
                        let mut next = Allocation::clone(c);
                        caravan_state::lay_status(&mut next, &w.status, *at);
                        Arc::new(next)
                    }
                }
                (Some(c), _) => Arc::clone(c),
                (None, Some((w, at))) => Arc::new(w.folded(*at)),
                (None, None) => return None,
            };
            out.push(Some(newest));
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use caravan_proto::{AllocStatus, AllocUpdate};
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
        let snap = cache_of(&[alloc("a", "n1", 5), alloc("b", "n1", 5)]);
        let from_cache = own.newest(&snap, &current(&["a", "b"], "n1"));
        let from_cache = from_cache.expect("both known");
        assert_eq!(from_cache[0].as_ref().unwrap().client_modify_revision, 0);

        // The writer wrote `a`'s status at 9; the cache does not show it.
        let running = Written {
            base: Arc::new(alloc("a", "n1", 5)),
            status: AllocStatus {
                client_description: "running".into(),
                ..Default::default()
            },
        };
        own.record(vec![running], 9);
        let next = own.newest(&snap, &current(&["a", "b"], "n1")).unwrap();
        let a = next[0].as_ref().unwrap();
        assert_eq!((a.modify_revision, a.client_modify_revision), (5, 9));
        assert_eq!(a.client_description, "running");
        assert_eq!(next[1].as_ref().unwrap().client_modify_revision, 0);

        // The servers rewrote the record at 10 meanwhile: theirs, with the
        // writer's status.
        let mut stopped = alloc("a", "n1", 10);
        stopped.desired_description = "stopped".into();
        let snap = cache_of(&[stopped]);
        let next = own.newest(&snap, &current(&["a"], "n1")).unwrap();
        let a = next[0].as_ref().unwrap();
        assert_eq!((a.modify_revision, a.client_modify_revision), (10, 9));
        assert_eq!(
            (
                a.desired_description.as_str(),
                a.client_description.as_str()
            ),
            ("stopped", "running")
        );
        own.forget_seen(8);
        assert_eq!(own.written.lock().len(), 1, "not shown yet");
        own.forget_seen(9);
        assert!(own.written.lock().is_empty());
    }

    #[test]
    fn the_store_decides_what_the_gateway_cannot() {
        let own = OwnWrites::default();
        let snap = cache_of(&[alloc("a", "n1", 5)]);
        assert!(own.newest(&snap, &current(&["a"], "n1")).is_some());
        // Unknown, or known on another node.
        assert!(own.newest(&snap, &current(&["x"], "n1")).is_none());
        assert!(own.newest(&snap, &current(&["a"], "n2")).is_none());
        // An update without an allocation is left alone.
        let mut none = current(&["a"], "n1");
        none[0].1 = None;
        assert_eq!(own.newest(&snap, &none), Some(vec![None]));
    }
}

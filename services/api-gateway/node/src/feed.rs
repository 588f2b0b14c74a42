//! Which allocations of which nodes changed: one task per gateway diffs
//! consecutive cache snapshots (a diff costs the size of the change) and
//! hands each changed allocation id to the streams of the nodes it left or
//! joined, so a stream looks at what changed, never at its node's whole set,
//! and thousands of streams cost nothing while their nodes are quiet.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};

use caravan_state::{Id, Informer, Snapshot};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Passes between sweeps of subscriptions nobody holds any more.
const SWEEP_EVERY: u64 = 64;

/// One stream's view of its node: the ids of allocations that changed since
/// it last took them.
#[derive(Debug, Default)]
pub struct NodeChanges {
    changed: Mutex<HashSet<Id>>,
    notify: Notify,
}

impl NodeChanges {
    /// Waits until some allocation of the node changed, then returns the ids
    /// that did (at least one).
    pub async fn next(&self) -> HashSet<Id> {
        loop {
            let notified = self.notify.notified();
            let taken = std::mem::take(&mut *self.changed.lock());
            if !taken.is_empty() {
                return taken;
            }
            notified.await;
        }
    }

    /// Forgets what changed so far (the caller is about to read the whole set).
    pub fn clear(&self) {
        self.changed.lock().clear();
    }

    fn push(&self, id: &Id) {
        let fresh = self.changed.lock().insert(id.clone());
        if fresh {
            self.notify.notify_one();
        }
    }
}

/// Per-node change feeds of allocation sets.
#[derive(Debug, Default)]
pub struct NodeAllocFeed {
    nodes: Mutex<HashMap<String, Vec<Weak<NodeChanges>>>>,
}

impl NodeAllocFeed {
    /// A subscription that collects the ids of `node_id`'s allocations as
    /// they change, from now on; dropping it ends the subscription.
    pub fn subscribe(&self, node_id: &str) -> Arc<NodeChanges> {
        let sub = Arc::new(NodeChanges::default());
        self.nodes
            .lock()
            .entry(node_id.to_string())
            .or_default()
            .push(Arc::downgrade(&sub));
        sub
    }

    /// Tells the subscriptions of every node an allocation left or joined
    /// between `older` and `newer` which allocation it was.
    fn publish(&self, older: &Snapshot, newer: &Snapshot) {
        let nodes = self.nodes.lock();
        if nodes.is_empty() {
            return;
        }
        for change in newer.alloc_changes_since(older) {
            let (old, new) = (change.old(), change.new());
            let id = match (old, new) {
                (_, Some(a)) | (Some(a), None) => Id::from(a.id.as_str()),
                (None, None) => continue,
            };
            let old_node = old.map(|a| a.node_id.as_str());
            let new_node = new.map(|a| a.node_id.as_str());
            for node in [old_node, new_node.filter(|n| Some(*n) != old_node)]
                .into_iter()
                .flatten()
            {
                for sub in nodes.get(node).into_iter().flatten() {
                    if let Some(sub) = sub.upgrade() {
                        sub.push(&id);
                    }
                }
            }
        }
    }

    fn sweep(&self) {
        self.nodes.lock().retain(|_, subs| {
            subs.retain(|s| s.strong_count() > 0);
            !subs.is_empty()
        });
    }

    /// Follows `cache` until `shutdown`, publishing every change.
    pub async fn run(self: Arc<Self>, cache: Arc<Informer>, shutdown: CancellationToken) {
        let mut revisions = cache.subscribe();
        let mut prev = cache.snapshot();
        let mut passes: u64 = 0;
        loop {
            tokio::select! {
                changed = revisions.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
                _ = shutdown.cancelled() => return,
            }
            let next = cache.snapshot();
            self.publish(&prev, &next);
            prev = next;
            passes += 1;
            if passes.is_multiple_of(SWEEP_EVERY) {
                self.sweep();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use caravan_proto::Allocation;
    use caravan_state::{Change, Tables};
    use caravan_store::Revision;

    use super::*;

    fn with_alloc(tables: &mut Tables, id: &str, node: &str, revision: Revision) {
        tables.apply(Change::Alloc {
            id: id.into(),
            alloc: Some(Arc::new(Allocation {
                id: id.into(),
                node_id: node.into(),
                modify_revision: revision,
                ..Default::default()
            })),
        });
        tables.advance_to(revision);
    }

    fn pending(sub: &NodeChanges) -> Vec<String> {
        let mut ids: Vec<String> = sub.changed.lock().iter().map(|i| i.to_string()).collect();
        ids.sort();
        ids
    }

    #[test]
    fn only_touched_nodes_hear_of_a_change() {
        let feed = NodeAllocFeed::default();
        let n1 = feed.subscribe("n1");
        let n2 = feed.subscribe("n2");
        let mut tables = Tables::new();
        with_alloc(&mut tables, "a1", "n1", 5);
        let before = Snapshot::new(tables.clone());
        with_alloc(&mut tables, "a2", "n2", 6);
        let after = Snapshot::new(tables.clone());
        feed.publish(&before, &after);
        assert!(pending(&n1).is_empty());
        assert_eq!(pending(&n2), vec!["a2"]);
        // A move is news to both nodes.
        with_alloc(&mut tables, "a1", "n2", 7);
        feed.publish(&after, &Snapshot::new(tables));
        assert_eq!(pending(&n1), vec!["a1"]);
        assert_eq!(pending(&n2), vec!["a1", "a2"]);
        drop(n1);
        feed.sweep();
        assert_eq!(feed.nodes.lock().len(), 1);
    }

    #[tokio::test]
    async fn a_stream_takes_what_gathered_while_it_was_busy() {
        let feed = NodeAllocFeed::default();
        let sub = feed.subscribe("n1");
        let mut tables = Tables::new();
        let empty = Snapshot::new(tables.clone());
        with_alloc(&mut tables, "a1", "n1", 5);
        with_alloc(&mut tables, "a2", "n1", 6);
        feed.publish(&empty, &Snapshot::new(tables));
        let mut got: Vec<String> = sub.next().await.iter().map(|i| i.to_string()).collect();
        got.sort();
        assert_eq!(got, vec!["a1", "a2"]);
        assert!(pending(&sub).is_empty());
    }
}

//! Which nodes' allocations changed: one task per gateway diffs consecutive
//! cache snapshots (a diff costs the size of the change) and wakes only the
//! allocation streams of the nodes it touched, so thousands of streams cost
//! nothing while their nodes are quiet.

use std::collections::HashMap;
use std::sync::Arc;

use caravan_state::{Informer, Snapshot};
use caravan_store::Revision;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Passes between sweeps of senders nobody listens to any more.
const SWEEP_EVERY: u64 = 64;

/// Per-node change signals of allocation sets.
#[derive(Debug, Default)]
pub struct NodeAllocFeed {
    nodes: Mutex<HashMap<String, watch::Sender<Revision>>>,
}

impl NodeAllocFeed {
    /// A receiver that changes whenever `node_id`'s allocations change.
    pub fn subscribe(&self, node_id: &str) -> watch::Receiver<Revision> {
        let mut nodes = self.nodes.lock();
        match nodes.get(node_id) {
            Some(tx) => tx.subscribe(),
            None => {
                let (tx, rx) = watch::channel(0);
                nodes.insert(node_id.to_string(), tx);
                rx
            }
        }
    }

    /// Tells the streams of every node whose allocations differ between
    /// `older` and `newer`.
    fn publish(&self, older: &Snapshot, newer: &Snapshot) {
        let nodes = self.nodes.lock();
        if nodes.is_empty() {
            return;
        }
        for change in newer.alloc_changes_since(older) {
            for alloc in [change.old(), change.new()].into_iter().flatten() {
                if let Some(tx) = nodes.get(&alloc.node_id) {
                    tx.send_replace(newer.revision());
                }
            }
        }
    }

    fn sweep(&self) {
        self.nodes.lock().retain(|_, tx| tx.receiver_count() > 0);
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

    #[test]
    fn only_touched_nodes_are_woken() {
        let feed = NodeAllocFeed::default();
        let n1 = feed.subscribe("n1");
        let mut n2 = feed.subscribe("n2");
        let mut tables = Tables::new();
        with_alloc(&mut tables, "a1", "n1", 5);
        let before = Snapshot::new(tables.clone());
        with_alloc(&mut tables, "a2", "n2", 6);
        let after = Snapshot::new(tables);
        feed.publish(&before, &after);
        assert!(!n1.has_changed().unwrap());
        assert!(n2.has_changed().unwrap());
        assert_eq!(*n2.borrow_and_update(), 6);
        drop(n1);
        feed.sweep();
        assert_eq!(feed.nodes.lock().len(), 1);
    }
}

//! The applier's view of the newest state: its watch cache plus an overlay of
//! the plans it committed (or is committing) that the cache has not seen yet.
//!
//! Verification must never trust a cache that lags behind the applier's own
//! commits, or two plans committed back to back could over-commit a node.
//! Each committed plan leaves an [`OverlayLayer`] with what it wrote; a layer
//! is dropped once the cache reaches its commit revision. The plan being
//! committed while the next one is verified leaves an in-flight layer (no
//! revision yet), the optimistic view of pipelining.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use caravan_model::AllocExt;
use caravan_proto::{Allocation, Deployment, Evaluation, Node};
use caravan_state::{NodeUsage, Snapshot};
use caravan_store::Revision;

/// What one plan wrote (or is writing): the allocations and deployments as
/// they are after it.
#[derive(Debug, Default)]
pub(crate) struct OverlayLayer {
    /// The plan's place in the applier's commit order.
    pub(crate) seq: u64,
    /// The revision of its last commit; `None` while in flight.
    pub(crate) revision: Option<Revision>,
    pub(crate) allocs: HashMap<String, Arc<Allocation>>,
    pub(crate) by_node: HashMap<String, Vec<String>>,
    pub(crate) deployments: HashMap<String, Arc<Deployment>>,
}

impl OverlayLayer {
    /// An empty layer for plan `seq`.
    pub(crate) fn new(seq: u64) -> Self {
        OverlayLayer {
            seq,
            ..Default::default()
        }
    }

    /// Records an allocation as the plan leaves it.
    pub(crate) fn put_alloc(&mut self, alloc: Arc<Allocation>) {
        if !self.allocs.contains_key(&alloc.id) {
            self.by_node
                .entry(alloc.node_id.clone())
                .or_default()
                .push(alloc.id.clone());
        }
        self.allocs.insert(alloc.id.clone(), alloc);
    }

    /// Records a deployment as the plan leaves it.
    pub(crate) fn put_deployment(&mut self, deployment: Arc<Deployment>) {
        self.deployments.insert(deployment.id.clone(), deployment);
    }

    /// Nodes where the plan leaves allocations terminal (stops, evictions).
    pub(crate) fn freed_nodes(&self) -> HashSet<String> {
        self.allocs
            .values()
            .filter(|a| a.is_terminal())
            .map(|a| a.node_id.clone())
            .collect()
    }

    fn is_empty(&self) -> bool {
        self.allocs.is_empty() && self.deployments.is_empty()
    }
}

/// The layers not yet visible in the cache, in commit order.
#[derive(Debug, Default)]
pub(crate) struct Overlay {
    layers: Vec<Arc<OverlayLayer>>,
}

impl Overlay {
    /// Adds the optimistic layer of a plan whose commit starts now.
    pub(crate) fn push_in_flight(&mut self, layer: OverlayLayer) {
        self.layers.push(Arc::new(layer));
    }

    /// Replaces plan `seq`'s layer by what its commit really wrote (which
    /// carries revisions); an empty layer is removed.
    pub(crate) fn settle(&mut self, seq: u64, written: OverlayLayer) {
        self.layers.retain(|l| l.seq != seq);
        if !written.is_empty() {
            self.layers.push(Arc::new(written));
            self.layers.sort_by_key(|l| l.seq);
        }
    }

    /// Drops the layers the cache has caught up with.
    pub(crate) fn prune(&mut self, cache_revision: Revision) {
        self.layers
            .retain(|l| l.revision.is_none_or(|r| r > cache_revision));
    }

    /// Number of layers held (in flight or not yet seen by the cache).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.layers.len()
    }

    /// The state to verify against: `snapshot` with the layers it lacks.
    pub(crate) fn view(&mut self, snapshot: Snapshot) -> View {
        self.prune(snapshot.revision());
        View {
            snapshot,
            layers: self.layers.clone(),
        }
    }
}

/// A snapshot of the cache with the overlay's layers on top.
#[derive(Clone, Debug)]
pub(crate) struct View {
    snapshot: Snapshot,
    /// Oldest first.
    layers: Vec<Arc<OverlayLayer>>,
}

impl View {
    /// A view without overlay (tests, or when nothing is pending).
    #[cfg(test)]
    pub(crate) fn of(snapshot: Snapshot) -> Self {
        View {
            snapshot,
            layers: Vec::new(),
        }
    }

    /// The newest revision the view reflects: the cache's, or a later commit
    /// of a layer.
    pub(crate) fn revision(&self) -> Revision {
        self.layers
            .iter()
            .filter_map(|l| l.revision)
            .fold(self.snapshot.revision(), Revision::max)
    }

    /// The revision of the cache snapshot under the layers.
    pub(crate) fn snapshot_revision(&self) -> Revision {
        self.snapshot.revision()
    }

    /// Whether a plan's commit is still in flight under this view.
    #[cfg(test)]
    pub(crate) fn has_in_flight(&self) -> bool {
        self.layers.iter().any(|l| l.revision.is_none())
    }

    /// A node.
    pub(crate) fn node(&self, node_id: &str) -> Option<&Arc<Node>> {
        self.snapshot.node(node_id)
    }

    /// An evaluation (the overlay holds none: plans only create them).
    pub(crate) fn eval(&self, eval_id: &str) -> Option<&Arc<Evaluation>> {
        self.snapshot.eval(eval_id)
    }

    /// An allocation as the newest layer that wrote it left it.
    pub(crate) fn alloc(&self, alloc_id: &str) -> Option<Arc<Allocation>> {
        self.layers
            .iter()
            .rev()
            .find_map(|l| l.allocs.get(alloc_id).cloned())
            .or_else(|| self.snapshot.alloc(alloc_id).cloned())
    }

    /// A deployment as the newest layer that wrote it left it.
    pub(crate) fn deployment(&self, deployment_id: &str) -> Option<Arc<Deployment>> {
        self.layers
            .iter()
            .rev()
            .find_map(|l| l.deployments.get(deployment_id).cloned())
            .or_else(|| self.snapshot.deployment(deployment_id).cloned())
    }

    /// What the non-terminal allocations on a node hold, each in its newest
    /// form: the cache's running sum, corrected for the allocations the
    /// layers wrote there. Each is looked up in the layers that list it on
    /// the node, not in every layer (an allocation never changes node:
    /// verification refuses a move), so the cost follows what the layers
    /// hold on the node, not the number of layers times that.
    pub(crate) fn node_usage(&self, node_id: &str) -> NodeUsage {
        let mut newest: BTreeMap<&str, &Arc<Allocation>> = BTreeMap::new();
        for layer in &self.layers {
            for id in layer.by_node.get(node_id).into_iter().flatten() {
                if let Some(a) = layer.allocs.get(id) {
                    newest.insert(id, a);
                }
            }
        }
        let cached = self.snapshot.on_node(node_id);
        let mut usage = cached.usage().clone();
        for (id, newest) in newest {
            if let Some(cached) = cached.alloc(id) {
                usage.sub_alloc(cached);
            }
            usage.add_alloc(newest);
        }
        usage
    }

    /// Every allocation on a node, terminal ones included, each in its
    /// newest form.
    pub(crate) fn allocs_on_node(&self, node_id: &str) -> Vec<Arc<Allocation>> {
        let mut overlaid: BTreeSet<&str> = BTreeSet::new();
        for layer in &self.layers {
            if let Some(ids) = layer.by_node.get(node_id) {
                overlaid.extend(ids.iter().map(String::as_str));
            }
        }
        let mut out: Vec<Arc<Allocation>> = self
            .snapshot
            .allocs_by_node(node_id)
            .filter(|a| !overlaid.contains(a.id.as_str()))
            .cloned()
            .collect();
        out.extend(overlaid.iter().filter_map(|id| self.alloc(id)));
        out
    }

    /// The revision of the last server-side change to any allocation of a
    /// job, in the cache or in a committed layer. In-flight layers have no
    /// revision yet; the applier settles them before checking freshness.
    pub(crate) fn job_revision(&self, namespace: &str, job_id: &str) -> Revision {
        let cached = self
            .snapshot
            .allocs_by_job(namespace, job_id)
            .map(|a| a.alloc_modify_revision)
            .max()
            .unwrap_or(0);
        self.layers
            .iter()
            .flat_map(|l| l.allocs.values())
            .filter(|a| a.namespace == namespace && a.job_id == job_id)
            .map(|a| a.alloc_modify_revision)
            .fold(cached, Revision::max)
    }
}

#[cfg(test)]
mod tests {
    use caravan_proto::AllocDesiredStatus;
    use caravan_state::{Change, Id, Tables};

    use super::*;

    fn alloc(id: &str, node: &str, rev: Revision) -> Allocation {
        Allocation {
            id: id.into(),
            node_id: node.into(),
            namespace: "default".into(),
            job_id: "web".into(),
            desired_status: AllocDesiredStatus::Run as i32,
            alloc_modify_revision: rev,
            modify_revision: rev,
            ..Default::default()
        }
    }

    fn snapshot(revision: Revision, allocs: Vec<Allocation>) -> Snapshot {
        let mut t = Tables::new();
        for a in allocs {
            t.apply(Change::Alloc {
                id: Id::from(a.id.as_str()),
                alloc: Some(Arc::new(a)),
            });
        }
        t.advance_to(revision);
        Snapshot::new(t)
    }

    fn layer(seq: u64, revision: Option<Revision>, allocs: Vec<Allocation>) -> OverlayLayer {
        let mut l = OverlayLayer::new(seq);
        l.revision = revision;
        for a in allocs {
            l.put_alloc(Arc::new(a));
        }
        l
    }

    #[test]
    fn layers_show_through_until_the_cache_catches_up() {
        let mut overlay = Overlay::default();
        overlay.push_in_flight(layer(1, None, vec![alloc("b", "n1", 0)]));
        overlay.settle(1, layer(1, Some(12), vec![alloc("b", "n1", 12)]));
        let view = overlay.view(snapshot(10, vec![alloc("a", "n1", 5)]));
        assert_eq!(view.revision(), 12);
        let ids: Vec<String> = view
            .allocs_on_node("n1")
            .iter()
            .map(|a| a.id.clone())
            .collect();
        assert_eq!(ids, vec!["a", "b"]);
        assert_eq!(view.job_revision("default", "web"), 12);
        assert_eq!(overlay.len(), 1);

        // The cache reaches the commit: the layer is dropped.
        let view = overlay.view(snapshot(
            12,
            vec![alloc("a", "n1", 5), alloc("b", "n1", 12)],
        ));
        assert_eq!(overlay.len(), 0);
        assert_eq!(view.allocs_on_node("n1").len(), 2);
        assert_eq!(view.job_revision("default", "web"), 12);
    }

    #[test]
    fn the_newest_layer_wins() {
        let mut overlay = Overlay::default();
        overlay.settle(1, layer(1, Some(11), vec![alloc("a", "n1", 11)]));
        let mut stopped = alloc("a", "n1", 13);
        stopped.set_desired_status(AllocDesiredStatus::Stop);
        overlay.settle(2, layer(2, Some(13), vec![stopped]));
        let view = overlay.view(snapshot(10, vec![alloc("a", "n1", 4)]));
        let a = view.alloc("a").unwrap();
        assert_eq!(a.desired_status(), AllocDesiredStatus::Stop);
        assert_eq!(view.allocs_on_node("n1").len(), 1);
        // Half caught up: only the second layer remains.
        let _ = overlay.view(snapshot(11, vec![]));
        assert_eq!(overlay.len(), 1);
    }

    #[test]
    fn in_flight_layers_are_kept_and_discarded_on_failure() {
        let mut overlay = Overlay::default();
        overlay.push_in_flight(layer(3, None, vec![alloc("x", "n2", 0)]));
        let view = overlay.view(snapshot(100, vec![]));
        assert!(view.has_in_flight());
        assert_eq!(view.allocs_on_node("n2").len(), 1);
        assert_eq!(view.revision(), 100);
        overlay.settle(3, OverlayLayer::new(3));
        assert_eq!(overlay.len(), 0);
    }
}

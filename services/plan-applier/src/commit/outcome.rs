//! What a plan's commit did: the nodes it committed and refused, the
//! revisions it wrote at, and what it wrote, for the overlay.

use std::collections::{BTreeMap, HashSet};

use caravan_store::Revision;

use super::changes::Part;
use super::writes::{Settled, Stored};
use crate::error::ApplierError;
use crate::overlay::OverlayLayer;

/// The outcome of committing a plan's accepted part.
#[derive(Debug, Default)]
pub(crate) struct CommitOutcome {
    /// Nodes whose part was committed.
    pub(crate) committed: Vec<String>,
    /// Whether the plan-wide part (deployment, evals) was committed.
    pub(crate) global_committed: bool,
    /// Nodes refused while committing, with why.
    pub(crate) refused: BTreeMap<String, String>,
    /// The revision of the last transaction that wrote; 0 if none did.
    pub(crate) revision: Revision,
    /// What was written, with revisions, for the overlay.
    pub(crate) layer: OverlayLayer,
    /// Evictions dropped because their allocation was already terminal.
    pub(crate) skipped_evictions: HashSet<String>,
    /// The revision the plan's eval completion was written at; 0 if it was
    /// not.
    pub(crate) eval_revision: Revision,
    /// Why the commit stopped early, if it did.
    pub(crate) error: Option<ApplierError>,
    /// A revision the worker must refresh to beyond what was written: a
    /// plan of the same job committed there, after this plan's snapshot.
    pub(crate) refresh: Revision,
}

impl CommitOutcome {
    /// Refuses the node of every part in `parts` for `reason`.
    pub(super) fn refuse<'a>(&mut self, parts: impl IntoIterator<Item = &'a Part>, reason: &str) {
        for node in parts.into_iter().filter_map(|p| p.node.as_ref()) {
            self.refused.insert(node.clone(), reason.to_string());
        }
    }

    /// Records `parts` as committed and, when a transaction wrote them at
    /// `revision`, what it wrote.
    pub(super) fn record(
        &mut self,
        parts: Vec<Part>,
        written: Vec<Settled>,
        revision: Option<Revision>,
    ) {
        for part in parts {
            match part.node {
                Some(node) => self.committed.push(node),
                None => self.global_committed = true,
            }
        }
        let Some(rev) = revision else {
            return;
        };
        self.layer.revision = Some(self.layer.revision.map_or(rev, |r| r.max(rev)));
        for w in written {
            match w.value {
                Stored::Alloc(a) => self.layer.put_alloc(a),
                Stored::Deployment(d) => self.layer.put_deployment(d),
                Stored::Eval => {}
            }
        }
    }
}

//! What a plan changes: its accepted part as changes per object, grouped
//! into parts that commit together or not at all (one per node, one for the
//! plan as a whole), each sized for the transaction budget. Pure: computed
//! from the plan and the view it was verified on.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use caravan_model::AllocExt;
use caravan_proto::{AllocList, Allocation, Evaluation, Plan};
use caravan_store::Revision;
use prost::Message;

use crate::mutation::{Change, StopSpec, Target, server_client_status};
use crate::overlay::View;

/// Bytes a key and the txn framing add to a value, roughly.
const KEY_OVERHEAD: usize = 160;
/// Bytes of an allocation's status value, roughly (its task states can be
/// more; the byte budget has room to spare).
const STATUS_BYTES: usize = 512;

/// The changes of one node (or, with `node` unset, of the plan as a whole:
/// deployment and evals), committed together or not at all.
#[derive(Debug, Default)]
pub(crate) struct Part {
    pub(crate) node: Option<String>,
    pub(crate) changes: Vec<(Target, Change)>,
    /// Compares and writes it takes in a transaction.
    pub(super) ops: usize,
    /// Bytes it takes in a transaction, roughly.
    pub(super) bytes: usize,
}

impl Part {
    fn of_node(node: &str) -> Self {
        Part {
            node: Some(node.to_string()),
            ..Default::default()
        }
    }

    fn push(&mut self, target: Target, change: Change, bytes: usize) {
        // A compare and a put per object.
        self.ops += 2;
        self.bytes += bytes + KEY_OVERHEAD;
        self.changes.push((target, change));
    }

    /// Room for the status key of `alloc` beside its record, when the
    /// plan sets a client status (lost, unknown) of an allocation: its
    /// status key is written too (`caravan_state::follow_status`).
    fn follow_status(&mut self, planned: &Allocation, current: Option<&Allocation>) {
        if server_client_status(planned.client_status) && current.is_some() {
            self.ops += 2;
            self.bytes += STATUS_BYTES + KEY_OVERHEAD;
        }
    }
}

/// A plan's accepted part as changes, ready to commit.
#[derive(Debug, Default)]
pub(crate) struct Changes {
    pub(crate) global: Part,
    pub(crate) nodes: Vec<Part>,
    /// Evictions dropped because their allocation is already terminal or gone.
    pub(crate) skipped_evictions: HashSet<String>,
    /// The plan's eval as it ends if everything above commits.
    pub(crate) completion: Option<Completion>,
}

/// The plan's own eval, completed: written in the plan's last transaction
/// when no part of the plan was refused, and only while the eval is still
/// at the revision it was delivered at, so a write by the broker or by a
/// later delivery is never overwritten. Left out otherwise; the worker then
/// writes the eval through the broker.
#[derive(Debug, Clone)]
pub(crate) struct Completion {
    /// The eval as it should be stored (revisions cleared).
    pub(super) eval: Box<Evaluation>,
    /// The mod revision the eval must still have.
    pub(super) expect: Revision,
}

impl Completion {
    /// The completion a plan carries, if any.
    pub(crate) fn of(plan: &Plan) -> Option<Completion> {
        let e = plan.eval_completion.as_ref()?;
        let mut eval = Box::new(e.clone());
        eval.create_revision = 0;
        eval.modify_revision = 0;
        Some(Completion {
            eval,
            expect: e.modify_revision,
        })
    }

    /// The object it writes.
    pub(super) fn target(&self) -> Target {
        Target::Eval(self.eval.id.clone())
    }

    /// Room it takes in a transaction: a compare and a put.
    pub(super) fn ops(&self) -> usize {
        2
    }

    /// Bytes it takes in a transaction.
    pub(super) fn bytes(&self) -> usize {
        self.eval.encoded_len() + KEY_OVERHEAD
    }
}

impl Changes {
    /// Every object the changes write.
    pub(crate) fn targets(&self) -> HashSet<Target> {
        self.parts()
            .flat_map(|p| p.changes.iter().map(|(t, _)| t.clone()))
            .collect()
    }

    /// The plan-wide part, then every node's.
    pub(super) fn parts(&self) -> impl Iterator<Item = &Part> {
        std::iter::once(&self.global).chain(&self.nodes)
    }

    /// The existing allocations the changes rewrite (update, stop, evict or
    /// link): their values are read from the store before the commit, as
    /// the cache keeps only a lean copy of each.
    pub(super) fn rewritten_allocs(&self) -> BTreeSet<Target> {
        self.parts()
            .flat_map(|p| &p.changes)
            .filter(|(t, c)| matches!(t, Target::Alloc(_)) && !matches!(c, Change::Place(_)))
            .map(|(t, _)| t.clone())
            .collect()
    }

    /// Adds `extra` bytes to every part that writes one of its targets: the
    /// stored values outweigh the cached copies the parts were sized by.
    pub(super) fn grow(&mut self, extra: &HashMap<Target, usize>) {
        if extra.is_empty() {
            return;
        }
        for part in std::iter::once(&mut self.global).chain(&mut self.nodes) {
            let more: usize = part.changes.iter().filter_map(|(t, _)| extra.get(t)).sum();
            part.bytes += more;
        }
    }
}

/// Turns the accepted nodes of `plan` into changes, reading what exists
/// from `view`.
pub(crate) fn plan_changes(plan: &Plan, accepted: &[String], view: &View) -> Changes {
    let mut out = Changes {
        global: plan_wide_part(plan),
        ..Default::default()
    };
    for node in accepted {
        let part = node_part(plan, node, view, &mut out.skipped_evictions);
        out.nodes.push(part);
    }
    out
}

/// The plan-wide part: the plan's deployment, the status updates of
/// deployments, and the evals the plan creates.
fn plan_wide_part(plan: &Plan) -> Part {
    let mut part = Part::default();
    if let Some(d) = &plan.deployment {
        part.push(
            Target::Deployment(d.id.clone()),
            Change::Deployment(Box::new(d.clone())),
            d.encoded_len(),
        );
    }
    for u in &plan.deployment_updates {
        part.push(
            Target::Deployment(u.deployment_id.clone()),
            Change::DeploymentStatus(u.clone()),
            256,
        );
    }
    for e in &plan.evals {
        part.push(
            Target::Eval(e.id.clone()),
            Change::CreateEval(Box::new(e.clone())),
            e.encoded_len(),
        );
    }
    part
}

/// The part of one accepted node: its placements and in-place updates, the
/// placements they add to deployments, its stops and its evictions. An
/// eviction of an allocation already terminal or gone is left out and noted
/// in `skipped`.
fn node_part(plan: &Plan, node: &str, view: &View, skipped: &mut HashSet<String>) -> Part {
    let mut part = Part::of_node(node);
    let placed = push_allocations(&mut part, allocs(plan.node_allocation.get(node)), view);
    for ((deployment, group), count) in placed {
        part.push(
            Target::Deployment(deployment),
            Change::Placed { group, count },
            512,
        );
    }
    for a in allocs(plan.node_update.get(node)) {
        let current = view.alloc(&a.id);
        let size = current.as_ref().map_or(1024, |c| c.encoded_len());
        part.push(
            Target::Alloc(a.id.clone()),
            Change::Stop(StopSpec::stop(a)),
            size,
        );
        part.follow_status(a, current.as_deref());
    }
    for a in allocs(plan.node_preemptions.get(node)) {
        match view.alloc(&a.id) {
            Some(cur) if !cur.is_terminal() => part.push(
                Target::Alloc(a.id.clone()),
                Change::Stop(StopSpec::evict(a)),
                cur.encoded_len(),
            ),
            _ => {
                skipped.insert(a.id.clone());
            }
        }
    }
    part
}

/// The allocations of a plan's per-node list, if it has one.
fn allocs(list: Option<&AllocList>) -> impl Iterator<Item = &Allocation> {
    list.into_iter().flat_map(|l| &l.allocs)
}

/// Adds placements (each new one with the link from the allocation it
/// replaces) and in-place updates to `part`; returns how many allocations
/// each deployment's task groups gained.
fn push_allocations<'a>(
    part: &mut Part,
    allocs: impl Iterator<Item = &'a Allocation>,
    view: &View,
) -> BTreeMap<(String, String), i32> {
    let mut placed: BTreeMap<(String, String), i32> = BTreeMap::new();
    for a in allocs {
        let size = a.encoded_len();
        let joins_deployment = match view.alloc(&a.id) {
            Some(current) => {
                part.push(
                    Target::Alloc(a.id.clone()),
                    Change::Update(Box::new(a.clone())),
                    size,
                );
                part.follow_status(a, Some(&current));
                // An update that moves an allocation into a deployment (one
                // updated in place for the deployment's version) is one of
                // its placements.
                !a.deployment_id.is_empty() && a.deployment_id != current.deployment_id
            }
            None => {
                part.push(
                    Target::Alloc(a.id.clone()),
                    Change::Place(Box::new(a.clone())),
                    size,
                );
                if !a.previous_allocation.is_empty() {
                    let prev = view.alloc(&a.previous_allocation);
                    part.push(
                        Target::Alloc(a.previous_allocation.clone()),
                        Change::LinkNext(a.id.clone()),
                        prev.map_or(size, |p| p.encoded_len()),
                    );
                }
                !a.deployment_id.is_empty()
            }
        };
        if joins_deployment {
            *placed
                .entry((a.deployment_id.clone(), a.task_group.clone()))
                .or_default() += 1;
        }
    }
    placed
}

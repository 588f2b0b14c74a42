//! What a plan's commit writes: per object, the value its changes make of
//! the object's current value, and the revision the object's key must still
//! be at for the write to hold. Pure: given the current values (from the
//! view, or as read from the store after a conflict) it decides every key,
//! value and guard without touching a store; `txn` turns the writes into the
//! fenced transaction that carries them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use caravan_proto::{Allocation, Deployment, Evaluation};
use caravan_state::{Keyspace, encode, follow_status};
use caravan_store::Revision;
use caravan_store::{Compare, Op};

use super::changes::{Changes, Completion, Part};
use crate::mutation::{Change, Target, apply_alloc, apply_deployment, apply_eval};
use crate::overlay::{OverlayLayer, View};

/// An object's stored value as a commit compares it.
#[derive(Clone, Debug)]
pub(super) enum Stored {
    Alloc(Arc<Allocation>),
    Deployment(Arc<Deployment>),
    Eval,
}

impl Stored {
    /// The allocation it holds, if it is one.
    fn alloc(&self) -> Option<&Allocation> {
        match self {
            Stored::Alloc(a) => Some(a),
            _ => None,
        }
    }

    /// The deployment it holds, if it is one.
    fn deployment(&self) -> Option<&Deployment> {
        match self {
            Stored::Deployment(d) => Some(d),
            _ => None,
        }
    }
}

/// An object's current value and mod revision; `None` when it does not exist.
pub(super) type Current = Option<(Stored, Revision)>;

/// The current value and mod revision of every object a commit touches:
/// first from the view, after a conflict from the store.
#[derive(Debug, Default)]
pub(crate) struct Currents {
    known: HashMap<Target, Current>,
}

impl Currents {
    /// The current value of `target`, from `view` unless already known.
    pub(super) fn get(&mut self, target: &Target, view: &View) -> Current {
        self.known
            .entry(target.clone())
            .or_insert_with(|| match target {
                Target::Alloc(id) => view.alloc(id).map(|a| {
                    let rev = a.modify_revision;
                    (Stored::Alloc(a), rev)
                }),
                Target::Deployment(id) => view.deployment(id).map(|d| {
                    let rev = d.modify_revision;
                    (Stored::Deployment(d), rev)
                }),
                Target::Eval(id) => view.eval(id).map(|e| (Stored::Eval, e.modify_revision)),
            })
            .clone()
    }

    /// The (namespace, job id) of allocation `id`, if its value is known.
    pub(super) fn job_of(&self, id: &str) -> Option<(String, String)> {
        match self.known.get(&Target::Alloc(id.to_owned()))? {
            Some((Stored::Alloc(a), _)) => Some((a.namespace.clone(), a.job_id.clone())),
            _ => None,
        }
    }

    /// Records the current value of `target`.
    pub(super) fn set(&mut self, target: Target, current: Current) {
        self.known.insert(target, current);
    }
}

impl Extend<(Target, Current)> for Currents {
    fn extend<I: IntoIterator<Item = (Target, Current)>>(&mut self, fresh: I) {
        self.known.extend(fresh);
    }
}

/// What a write requires of its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Expect {
    /// The key does not exist.
    Absent,
    /// The key is still at this mod revision.
    Revision(Revision),
}

/// The new value of one object.
#[derive(Clone, Debug)]
pub(super) enum Value {
    Alloc(Box<Allocation>),
    Deployment(Box<Deployment>),
    Eval(Box<Evaluation>),
}

impl Value {
    /// The value as stored.
    pub(super) fn encode(&self) -> Vec<u8> {
        match self {
            Value::Alloc(a) => encode(a.as_ref()),
            Value::Deployment(d) => encode(d.as_ref()),
            Value::Eval(e) => encode(e.as_ref()),
        }
    }
}

/// One object a commit writes.
#[derive(Clone, Debug)]
pub(super) struct Write {
    pub(super) target: Target,
    pub(super) key: Vec<u8>,
    pub(super) value: Value,
    /// What the key must still be for the write to hold.
    pub(super) expect: Expect,
    /// The compare and put of an allocation's status key, when the write
    /// changes a client field of an allocation whose client reported one.
    pub(super) follow: Option<(Compare, Op)>,
}

/// A part that cannot be applied any more.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Refusal {
    /// Its index among the parts written.
    pub(super) part: usize,
    pub(super) reason: String,
}

/// The writes of `parts` given the current values in `currents` (taken
/// from `view` where not known yet): per object, the value its changes make
/// of the current one, guarded by the current one's revision (or by the
/// key's absence), objects the changes leave as they are left out. `Err`
/// names a part that cannot be applied any more.
pub(super) fn writes(
    view: &View,
    keyspace: &Keyspace,
    now: i64,
    parts: &[Part],
    currents: &mut Currents,
) -> Result<Vec<Write>, Refusal> {
    let mut out = Vec::new();
    for (target, changes) in by_target(parts) {
        let current = currents.get(target, view);
        if let Some(write) = write_of(target, &changes, current, keyspace, now)? {
            out.push(write);
        }
    }
    Ok(out)
}

/// The changes of `parts` per object, in order, each with its part's index.
fn by_target(parts: &[Part]) -> BTreeMap<&Target, Vec<(usize, &Change)>> {
    let mut grouped: BTreeMap<&Target, Vec<(usize, &Change)>> = BTreeMap::new();
    for (i, part) in parts.iter().enumerate() {
        for (target, change) in &part.changes {
            grouped.entry(target).or_default().push((i, change));
        }
    }
    grouped
}

/// The write `changes` make of `target` at `current`; `None` when they
/// leave it as it is.
fn write_of(
    target: &Target,
    changes: &[(usize, &Change)],
    current: Current,
    keyspace: &Keyspace,
    now: i64,
) -> Result<Option<Write>, Refusal> {
    let refs: Vec<&Change> = changes.iter().map(|(_, c)| *c).collect();
    let refused = |reason| Refusal {
        part: culprit(changes),
        reason,
    };
    let stored = current.as_ref().map(|(stored, _)| stored);
    let value = match target {
        Target::Alloc(_) => apply_alloc(stored.and_then(Stored::alloc), &refs, now)
            .map_err(refused)?
            .map(|a| Value::Alloc(Box::new(a))),
        Target::Deployment(_) => apply_deployment(stored.and_then(Stored::deployment), &refs, now)
            .map_err(refused)?
            .map(|d| Value::Deployment(Box::new(d))),
        Target::Eval(_) => {
            apply_eval(current.is_some(), &refs, now).map(|e| Value::Eval(Box::new(e)))
        }
    };
    // An eval the plan creates is written only where none exists.
    let expect = match (target, &current) {
        (Target::Eval(_), _) | (_, None) => Expect::Absent,
        (_, Some((_, rev))) => Expect::Revision(*rev),
    };
    let follow = match (stored.and_then(Stored::alloc), &value) {
        (Some(before), Some(Value::Alloc(after))) => follow_status(keyspace, before, after),
        _ => None,
    };
    Ok(value.map(|value| Write {
        target: target.clone(),
        key: key_of(keyspace, target),
        value,
        expect,
        follow,
    }))
}

/// The key `target` is stored at.
pub(super) fn key_of(keyspace: &Keyspace, target: &Target) -> Vec<u8> {
    match target {
        Target::Alloc(id) => keyspace.alloc(id),
        Target::Deployment(id) => keyspace.deployment(id),
        Target::Eval(id) => keyspace.eval(id),
    }
}

/// The part a refused object's changes are blamed on: only a placement or
/// an update can fail, and each comes from one node.
fn culprit(changes: &[(usize, &Change)]) -> usize {
    changes
        .iter()
        .find(|(_, c)| matches!(c, Change::Place(_) | Change::Update(_)))
        .map_or(0, |(i, _)| *i)
}

/// The write completing the plan's eval, stamped at `now` and guarded by
/// the revision it was delivered at; `None` once the eval has changed since.
pub(super) fn completion_write(
    completion: &Completion,
    currents: &mut Currents,
    view: &View,
    keyspace: &Keyspace,
    now: i64,
) -> Option<Write> {
    match currents.get(&completion.target(), view) {
        Some((Stored::Eval, rev)) if rev == completion.expect => {}
        _ => return None,
    }
    let mut eval = (*completion.eval).clone();
    eval.modify_time_unix_ns = now;
    Some(Write {
        target: completion.target(),
        key: keyspace.eval(&eval.id),
        value: Value::Eval(Box::new(eval)),
        expect: Expect::Revision(completion.expect),
        follow: None,
    })
}

/// What a committed write left stored, as a read at its revision would
/// return it: shared by the commit's later batches and the overlay.
pub(super) struct Settled {
    pub(super) target: Target,
    pub(super) value: Stored,
    pub(super) revision: Revision,
}

impl Settled {
    /// The object's current value from now on.
    pub(super) fn current(&self) -> Current {
        Some((self.value.clone(), self.revision))
    }
}

impl Write {
    /// The write as stored once committed at `rev`.
    pub(super) fn settle(self, rev: Revision) -> Settled {
        let followed = self.follow.is_some();
        let value = match self.value {
            Value::Alloc(mut a) => {
                settle_alloc(&mut a, rev);
                if followed {
                    a.client_modify_revision = rev;
                }
                Stored::Alloc(Arc::new(*a))
            }
            Value::Deployment(mut d) => {
                d.modify_revision = rev;
                if d.create_revision == 0 {
                    d.create_revision = rev;
                }
                Stored::Deployment(Arc::new(*d))
            }
            Value::Eval(_) => Stored::Eval,
        };
        Settled {
            target: self.target,
            value,
            revision: rev,
        }
    }
}

/// Fills an allocation written at `rev` as a read would.
fn settle_alloc(a: &mut Allocation, rev: Revision) {
    a.modify_revision = rev;
    if a.alloc_modify_revision == 0 {
        a.alloc_modify_revision = rev;
    }
}

/// What a plan writes if its commit succeeds, computed from `view`: the
/// optimistic layer the next plan is verified against meanwhile.
pub(crate) fn optimistic_layer(changes: &Changes, view: &View, seq: u64, now: i64) -> OverlayLayer {
    let mut grouped: BTreeMap<&Target, Vec<&Change>> = BTreeMap::new();
    for part in changes.parts() {
        for (target, change) in &part.changes {
            grouped.entry(target).or_default().push(change);
        }
    }
    let mut layer = OverlayLayer::new(seq);
    for (target, changes) in grouped {
        match target {
            Target::Alloc(id) => {
                if let Ok(Some(a)) = apply_alloc(view.alloc(id).as_deref(), &changes, now) {
                    layer.put_alloc(Arc::new(a));
                }
            }
            Target::Deployment(id) => {
                if let Ok(Some(d)) = apply_deployment(view.deployment(id).as_deref(), &changes, now)
                {
                    layer.put_deployment(Arc::new(d));
                }
            }
            Target::Eval(_) => {}
        }
    }
    layer
}

#[cfg(test)]
mod tests;

//! What changed between two snapshots of one cache, for services that react
//! to changes (the eval-broker's queues, node-down detection). Persistent
//! maps share the parts both snapshots hold, so a diff skips them and costs
//! about the size of the change, not of the tables.

use std::sync::Arc;

use caravan_proto::{Allocation, Deployment, Evaluation, Node};
use imbl::ordmap::DiffItem;
use imbl::ordset::DiffItem as SetDiffItem;

use crate::index::{Id, Shared};
use crate::tables::Tables;

/// One object that differs between an older and a newer snapshot.
#[derive(Clone, Copy, Debug)]
pub enum ObjectChange<'a, T> {
    /// Only the newer snapshot holds it.
    Added(&'a Arc<T>),
    /// Both hold it, with different values.
    Updated {
        /// The value in the older snapshot.
        old: &'a Arc<T>,
        /// The value in the newer snapshot.
        new: &'a Arc<T>,
    },
    /// Only the older snapshot holds it.
    Removed(&'a Arc<T>),
}

impl<'a, T> ObjectChange<'a, T> {
    /// The value before the change, if the object existed.
    pub fn old(&self) -> Option<&'a Arc<T>> {
        match *self {
            ObjectChange::Added(_) => None,
            ObjectChange::Updated { old, .. } | ObjectChange::Removed(old) => Some(old),
        }
    }

    /// The value after the change, if the object still exists.
    // Pairs with `old()`; services already call it, so the name stays.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(&self) -> Option<&'a Arc<T>> {
        match *self {
            ObjectChange::Removed(_) => None,
            ObjectChange::Added(new) | ObjectChange::Updated { new, .. } => Some(new),
        }
    }
}

fn object_change<'a, T>(item: DiffItem<'a, 'a, Id, Shared<T>>) -> ObjectChange<'a, T> {
    match item {
        DiffItem::Add(_, new) => ObjectChange::Added(&new.0),
        DiffItem::Update {
            old: (_, old),
            new: (_, new),
        } => ObjectChange::Updated {
            old: &old.0,
            new: &new.0,
        },
        DiffItem::Remove(_, old) => ObjectChange::Removed(&old.0),
    }
}

impl Tables {
    /// The evaluations that differ from `older`, ordered by id.
    pub fn eval_changes_since<'a>(
        &'a self,
        older: &'a Tables,
    ) -> impl Iterator<Item = ObjectChange<'a, Evaluation>> + 'a {
        older.evals.diff(&self.evals).map(object_change)
    }

    /// The allocations that differ from `older`, ordered by id.
    pub fn alloc_changes_since<'a>(
        &'a self,
        older: &'a Tables,
    ) -> impl Iterator<Item = ObjectChange<'a, Allocation>> + 'a {
        older.allocs.diff(&self.allocs).map(object_change)
    }

    /// The nodes that differ from `older`, ordered by id.
    pub fn node_changes_since<'a>(
        &'a self,
        older: &'a Tables,
    ) -> impl Iterator<Item = ObjectChange<'a, Node>> + 'a {
        older.nodes.diff(&self.nodes).map(object_change)
    }

    /// The deployments that differ from `older`, ordered by id.
    pub fn deployment_changes_since<'a>(
        &'a self,
        older: &'a Tables,
    ) -> impl Iterator<Item = ObjectChange<'a, Deployment>> + 'a {
        older.deployments.diff(&self.deployments).map(object_change)
    }

    /// The nodes whose heartbeat key appeared (`true`) or went away
    /// (`false`) since `older`, ordered by node id.
    pub fn heartbeat_changes_since<'a>(
        &'a self,
        older: &'a Tables,
    ) -> impl Iterator<Item = (&'a Id, bool)> + 'a {
        older
            .heartbeats
            .diff(&self.heartbeats)
            .map(|item| match item {
                SetDiffItem::Add(id) => (id, true),
                SetDiffItem::Remove(id) => (id, false),
            })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use caravan_store::KeyValue;

    use super::*;
    use crate::change::Change;
    use crate::codec::encode;
    use crate::keyspace::StateKey;

    fn put<T: crate::StateObject>(tables: &mut Tables, key: StateKey, msg: &T, rev: i64) {
        let kv = KeyValue {
            key: Vec::new(),
            value: encode(msg),
            create_revision: rev,
            mod_revision: rev,
            version: 1,
            lease: 0,
        };
        tables.apply_all(Change::put(&key, &kv, crate::AllocDetail::Full).unwrap());
        tables.advance_to(rev);
    }

    fn eval(id: &str, status: i32) -> Evaluation {
        Evaluation {
            id: id.into(),
            namespace: "default".into(),
            job_id: "web".into(),
            status,
            ..Default::default()
        }
    }

    #[test]
    fn diffs_name_added_updated_and_removed_objects() {
        let mut older = Tables::new();
        put(&mut older, StateKey::Eval("e1".into()), &eval("e1", 1), 1);
        put(&mut older, StateKey::Eval("e2".into()), &eval("e2", 1), 2);
        put(
            &mut older,
            StateKey::Heartbeat("n1".into()),
            &Node::default(),
            3,
        );
        let mut newer = older.clone();
        put(&mut newer, StateKey::Eval("e2".into()), &eval("e2", 3), 4);
        put(&mut newer, StateKey::Eval("e3".into()), &eval("e3", 1), 5);
        newer.apply_all(Change::delete(&StateKey::Eval("e1".into())));
        newer.apply_all(Change::delete(&StateKey::Heartbeat("n1".into())));
        put(
            &mut newer,
            StateKey::Heartbeat("n2".into()),
            &Node::default(),
            6,
        );

        let changes: Vec<_> = newer
            .eval_changes_since(&older)
            .map(|c| {
                (
                    c.old().map(|e| (e.id.clone(), e.status)),
                    c.new().map(|e| (e.id.clone(), e.status)),
                )
            })
            .collect();
        assert_eq!(
            changes,
            vec![
                (Some(("e1".to_string(), 1)), None),
                (Some(("e2".to_string(), 1)), Some(("e2".to_string(), 3))),
                (None, Some(("e3".to_string(), 1))),
            ]
        );
        let beats: Vec<_> = newer
            .heartbeat_changes_since(&older)
            .map(|(id, live)| (id.to_string(), live))
            .collect();
        assert_eq!(
            beats,
            vec![("n1".to_string(), false), ("n2".to_string(), true)]
        );
        assert_eq!(newer.eval_changes_since(&newer).count(), 0);
        assert_eq!(newer.node_changes_since(&older).count(), 0);
        assert_eq!(newer.alloc_changes_since(&older).count(), 0);
        assert_eq!(newer.deployment_changes_since(&older).count(), 0);
    }

    fn alloc(id: &str, job_version: u64) -> Allocation {
        Allocation {
            id: id.into(),
            namespace: "default".into(),
            job_id: "web".into(),
            job_version,
            ..Default::default()
        }
    }

    /// A persistent map's diff skips the subtrees both snapshots share; an
    /// object that sits just past a shared run must still be reported. One
    /// change to any one of thousands of objects, and a run of random
    /// changes, each yield exactly what changed.
    #[test]
    fn a_change_to_any_one_of_many_objects_is_seen() {
        const N: usize = 3_000;
        let id = |i: usize| format!("a{i:05}");
        let mut base = Tables::new();
        for i in 0..N {
            put(
                &mut base,
                StateKey::Alloc(id(i)),
                &alloc(&id(i), 1),
                1 + i as i64,
            );
        }
        let mut missed = Vec::new();
        for i in 0..N {
            let mut newer = base.clone();
            put(
                &mut newer,
                StateKey::Alloc(id(i)),
                &alloc(&id(i), 2),
                10_000,
            );
            let seen: Vec<String> = newer
                .alloc_changes_since(&base)
                .filter_map(|c| c.new().map(|a| a.id.clone()))
                .collect();
            if seen != vec![id(i)] {
                missed.push(i);
            }
        }
        assert!(
            missed.is_empty(),
            "{} of {N} single updates misreported, first {:?}",
            missed.len(),
            missed.first()
        );

        let mut current = base;
        let mut x: u64 = 7;
        for round in 0..1_000i64 {
            let older = current.clone();
            let mut changed = BTreeSet::new();
            for _ in 0..1 + x % 4 {
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let i = (x >> 33) as usize % (N + 500);
                put(
                    &mut current,
                    StateKey::Alloc(id(i)),
                    &alloc(&id(i), 3 + round as u64),
                    20_000 + round,
                );
                changed.insert(id(i));
            }
            let seen: BTreeSet<String> = current
                .alloc_changes_since(&older)
                .filter_map(|c| c.new().map(|a| a.id.clone()))
                .collect();
            assert_eq!(seen, changed, "round {round}");
        }
    }
}

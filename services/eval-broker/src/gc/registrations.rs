//! The sweep of service registrations: an instance whose allocation is
//! gone, stopped or done, or whose node is down, is deleted. Clients and
//! the gateway remove an allocation's registrations when it stops; this
//! sweep is what removes them when a node dies (its allocations are lost
//! without a word from it) or a process died between two writes. It runs
//! on its own interval (`gc.registrations_interval_ms`, 10 s), far shorter
//! than the full collection's, as it reads only the registrations' prefix
//! and judges them on the watch cache: a ghost instance, which callers
//! would keep sending requests to, lives no longer than one such sweep.
//!
//! The sweep reads keys only: an instance's ID
//! (`_nomad-task-<alloc id>-<workload>-<service>-<port>`, checked by the
//! gateway on every registration) names its allocation, so no value is
//! read or decoded; at C1M a sweep of a million instances moves their keys
//! and not their bodies.

use std::time::Duration;

use std::sync::Arc;

use caravan_model::AllocExt;
use caravan_proto::{AllocClientStatus, Allocation, NodeStatus, ServiceRegistration};
use caravan_state::{Kind, Tables, decode};
use caravan_store::{Compare, CompareOp, Op, Revision};

use crate::error::BrokerError;
use crate::term::LeaderTerm;
use crate::writes::{EvalWriter, GuardedUnit};

/// How long a sweep waits for its cache to reach the store's revision.
pub(crate) const CATCH_UP: Duration = Duration::from_secs(10);

/// Keys read per range request.
const PAGE: i64 = 1000;

/// How every instance ID Caravan's clients register begins.
const ID_PREFIX: &str = "_nomad-task-";

/// One stored registration: its key, whose it is and its mod revision.
#[derive(Clone, Debug)]
pub struct Stored {
    /// The registration's key.
    pub key: Vec<u8>,
    /// The alloc it was registered for.
    pub owner: Owner,
    /// The mod revision it was read at.
    pub modify_revision: Revision,
}

/// The alloc of a registration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// Read from the registration's value.
    Alloc(String),
    /// What follows `_nomad-task-` in its ID: the alloc's ID, a dash, and
    /// the rest. The alloc is the one whose ID ends at one of the dashes
    /// (an alloc ID is a UUID, which is no other ID's dash-ended prefix).
    IdTail(String),
}

impl Owner {
    /// The owner's alloc in `tables`, if it is there.
    fn alloc<'t>(&self, tables: &'t Tables) -> Option<&'t Arc<Allocation>> {
        match self {
            Owner::Alloc(id) => tables.alloc(id),
            Owner::IdTail(tail) => tail
                .match_indices('-')
                .find_map(|(at, _)| tables.alloc(&tail[..at])),
        }
    }
}

/// Every stored registration, read at one revision, and that revision:
/// keys only, each value read only for an ID that does not name its alloc.
pub async fn read_all(writer: &EvalWriter) -> Result<(Vec<Stored>, Revision), BrokerError> {
    let prefix = writer.keyspace().prefix_of(Kind::Services);
    let store = writer.store();
    let (kvs, revision) = caravan_store::read_prefix_keys(store.as_ref(), &prefix, PAGE).await?;
    let mut stored = Vec::with_capacity(kvs.len());
    for kv in &kvs {
        let owner = match id_tail(&kv.key) {
            Some(tail) => Owner::IdTail(tail),
            None => match store.get(&kv.key).await? {
                Some(full) => Owner::Alloc(decode::<ServiceRegistration>(&full)?.alloc_id),
                None => continue,
            },
        };
        stored.push(Stored {
            key: kv.key.clone(),
            owner,
            modify_revision: kv.mod_revision,
        });
    }
    Ok((stored, revision))
}

/// What follows `_nomad-task-` in the ID that ends `key`.
fn id_tail(key: &[u8]) -> Option<String> {
    let id = key.rsplit(|b| *b == b'/').next()?;
    let id = std::str::from_utf8(id).ok()?;
    id.strip_prefix(ID_PREFIX)
        .filter(|tail| tail.contains('-'))
        .map(str::to_owned)
}

/// Whether a registration of `owner` names no live instance in `tables`
/// (a view at least as new as the registrations were read at): its alloc
/// is gone, told to stop, or finished, or its node is down (its allocs are
/// lost, whether or not the scheduler has said so yet). An alloc whose
/// node is only disconnected (`unknown`) keeps its instances, as it may
/// come back.
pub fn orphaned(tables: &Tables, owner: &Owner) -> bool {
    let Some(alloc) = owner.alloc(tables) else {
        return true;
    };
    if tables
        .node(&alloc.node_id)
        .is_some_and(|n| n.status() == NodeStatus::Down)
    {
        return true;
    }
    if alloc.client_status() == AllocClientStatus::Unknown {
        return false;
    }
    alloc.is_terminal()
}

/// The guarded deletes of the orphans among `stored`, each compared on the
/// mod revision it was judged at, so an instance registered again since
/// stays.
pub fn deletes(tables: &Tables, stored: &[Stored]) -> Vec<GuardedUnit> {
    stored
        .iter()
        .filter(|s| orphaned(tables, &s.owner))
        .map(|s| {
            let mut unit = GuardedUnit::default();
            unit.push(
                Compare::mod_revision(s.key.clone(), CompareOp::Equal, s.modify_revision),
                Op::delete(s.key.clone()),
            );
            unit
        })
        .collect()
}

/// Reads every registration, judges it on a view of the cluster at least
/// as new (an alloc is placed before anything registers for it, so the
/// view holds every alloc a registration read here names) and deletes the
/// orphans; returns how many went. The caller holds the term's GC turn.
pub async fn collect(term: &LeaderTerm) -> Result<u64, BrokerError> {
    let (stored, read_at) = read_all(&term.writer).await?;
    if stored.is_empty() {
        return Ok(0);
    }
    let revision = term.writer.current_revision().await?.max(read_at);
    term.informer.wait_for_revision(revision, CATCH_UP).await?;
    let orphans = deletes(&term.informer.snapshot(), &stored);
    if orphans.is_empty() {
        return Ok(0);
    }
    let (ok, _) = term.writer.write_units(&orphans).await?;
    Ok(ok.iter().filter(|done| **done).count() as u64)
}

#[cfg(test)]
mod tests {
    use caravan_proto::{AllocDesiredStatus, Allocation};

    use super::*;
    use crate::testing::{World, node};

    fn alloc(id: &str, desired: AllocDesiredStatus, client: AllocClientStatus) -> Allocation {
        let mut a = Allocation {
            id: id.into(),
            node_id: "n1".into(),
            ..Default::default()
        };
        a.set_desired_status(desired);
        a.set_client_status(client);
        a
    }

    #[test]
    fn only_instances_of_live_or_disconnected_allocs_stay() {
        use AllocClientStatus as C;
        use AllocDesiredStatus as D;
        let mut world = World::new();
        for a in [
            alloc("running", D::Run, C::Running),
            alloc("pending", D::Run, C::Pending),
            alloc("away", D::Run, C::Unknown),
            alloc("stopping", D::Stop, C::Running),
            alloc("done", D::Run, C::Complete),
            alloc("failed", D::Run, C::Failed),
            alloc("lost", D::Run, C::Lost),
        ] {
            world.alloc(a);
        }
        let tables = &world.tables;
        let stored: Vec<Stored> = [
            "running", "pending", "away", "stopping", "done", "failed", "lost", "gone",
        ]
        .iter()
        .enumerate()
        .map(|(i, id)| Stored {
            key: format!("services/default/web/{id}").into_bytes(),
            owner: Owner::Alloc((*id).to_string()),
            modify_revision: i64::try_from(i).unwrap() + 10,
        })
        .collect();
        let doomed: Vec<String> = deletes(tables, &stored)
            .iter()
            .map(|u| match &u.ops[0] {
                Op::Delete(range) => String::from_utf8(range.start.clone()).unwrap(),
                other => panic!("a delete, not {other:?}"),
            })
            .collect();
        assert_eq!(
            doomed,
            [
                "services/default/web/stopping",
                "services/default/web/done",
                "services/default/web/failed",
                "services/default/web/lost",
                "services/default/web/gone",
            ]
        );
        let guard = &deletes(tables, &stored)[0].guards[0];
        assert_eq!(
            *guard,
            Compare::mod_revision(
                b"services/default/web/stopping".to_vec(),
                CompareOp::Equal,
                13
            )
        );
        world.node(node("n1", NodeStatus::Down, 0));
        assert_eq!(
            deletes(&world.tables, &stored).len(),
            stored.len(),
            "every instance on a node that is down goes, disconnected or not"
        );
    }

    #[test]
    fn an_instance_id_names_its_alloc_without_its_value() {
        let uuid = "8d2f0b6e-3c1a-4e5b-9f7d-2a6c4b8e1f03";
        let key = format!("prefix/services/default/web/_nomad-task-{uuid}-group-web-web-http");
        let tail = id_tail(key.as_bytes()).expect("a client's instance ID");
        assert_eq!(tail, format!("{uuid}-group-web-web-http"));
        assert_eq!(id_tail(b"prefix/services/default/web/custom-id"), None);

        let mut world = World::new();
        world.alloc(alloc(
            uuid,
            AllocDesiredStatus::Run,
            AllocClientStatus::Running,
        ));
        let owner = Owner::IdTail(tail);
        assert_eq!(
            owner.alloc(&world.tables).map(|a| a.id.as_str()),
            Some(uuid)
        );
        assert!(!orphaned(&world.tables, &owner));
        let other = Owner::IdTail("0b1e2c3d-0000-4000-8000-000000000000-web-web-http".into());
        assert!(orphaned(&world.tables, &other), "no alloc of that ID: gone");
    }
}

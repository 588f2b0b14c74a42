//! The service instances a client status update carries: checked before
//! anything is read, merged across the reports of one allocation that share
//! a batch, and written (filled from the stored allocation) in the status
//! update's own transaction, so registering an instance costs no write of
//! its own and no read of the registry.

use std::collections::{BTreeMap, BTreeSet};

use caravan_model::{AllocClientStatusExt, AllocExt};
use caravan_proto::{AllocClientStatus, AllocUpdate, Allocation, ServiceRegistration};
use caravan_state::{Keyspace, Snapshot, encode};
use caravan_store::Op;

use caravan_gateway_core::error::{GatewayError, Result};

/// The prefix every instance id of allocation `alloc_id` starts with.
fn id_prefix(alloc_id: &str) -> String {
    format!("_nomad-task-{alloc_id}-")
}

/// Where an instance is stored within its namespace: service name and id.
type Slot = (String, String);

fn slot(reg: &ServiceRegistration) -> Slot {
    (reg.service_name.clone(), reg.id.clone())
}

/// Checks the registrations and deregistrations of `updates[i]`: each names
/// a service and an id of the update's own allocation (so a node, which may
/// report only its own allocations, may touch only their instances), with
/// no `/`, and each instance appears once.
pub(crate) fn validate(i: usize, update: &AllocUpdate) -> Result<()> {
    let prefix = id_prefix(&update.alloc_id);
    let mut seen: BTreeSet<Slot> = BTreeSet::new();
    let lists = [
        ("registered", &update.registered),
        ("deregistered", &update.deregistered),
    ];
    for (list, regs) in lists {
        for (j, reg) in regs.iter().enumerate() {
            let field = |name: &str| format!("updates[{i}].{list}[{j}].{name}");
            for (name, value) in [("service_name", &reg.service_name), ("id", &reg.id)] {
                if value.is_empty() {
                    return Err(GatewayError::field(field(name), "missing"));
                }
                if value.contains('/') {
                    return Err(GatewayError::field(
                        field(name),
                        format!("{value:?} may not contain '/'"),
                    ));
                }
            }
            if list == "registered" && reg.alloc_id != update.alloc_id {
                return Err(GatewayError::field(
                    field("alloc_id"),
                    format!(
                        "{:?} is not the update's allocation {:?}",
                        reg.alloc_id, update.alloc_id
                    ),
                ));
            }
            if !reg.id.starts_with(&prefix) {
                return Err(GatewayError::field(
                    field("id"),
                    format!("{:?} does not start with {prefix:?}", reg.id),
                ));
            }
            if !seen.insert(slot(reg)) {
                return Err(GatewayError::field(
                    field("id"),
                    format!(
                        "instance {:?} of {:?} is named twice in the update",
                        reg.id, reg.service_name
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Folds the instances of `earlier`, a report of the same allocation that
/// `later` replaces in a batch, into `later`: the union of both, the later
/// word winning per instance (a later deregistration cancels an earlier
/// registration and the other way round).
pub(crate) fn fold_into(earlier: AllocUpdate, later: &mut AllocUpdate) {
    let mut registered: BTreeMap<Slot, ServiceRegistration> = BTreeMap::new();
    let mut deregistered: BTreeMap<Slot, ServiceRegistration> = BTreeMap::new();
    let words = [
        (earlier.registered, earlier.deregistered),
        (
            std::mem::take(&mut later.registered),
            std::mem::take(&mut later.deregistered),
        ),
    ];
    for (reg, dereg) in words {
        for r in reg {
            deregistered.remove(&slot(&r));
            registered.insert(slot(&r), r);
        }
        for d in dereg {
            registered.remove(&slot(&d));
            deregistered.insert(slot(&d), d);
        }
    }
    later.registered = registered.into_values().collect();
    later.deregistered = deregistered.into_values().collect();
}

/// The writes of `update`'s instances for `alloc` as stored (`next` is its
/// client status with the update applied, `None` when the report itself is
/// dropped): each
/// deregistered key deleted; each registration put at its key, filled from
/// the allocation, unless the allocation is finished or told to stop (an
/// instance of it would only be a ghost for the sweep to remove).
pub(crate) fn ops(
    keys: &Keyspace,
    snap: &Snapshot,
    alloc: &Allocation,
    next: Option<AllocClientStatus>,
    update: &AllocUpdate,
) -> Vec<Op> {
    let mut ops: Vec<Op> = update
        .deregistered
        .iter()
        .map(|d| Op::delete(keys.service(&alloc.namespace, &d.service_name, &d.id)))
        .collect();
    let live = next.is_some_and(|n| !alloc.is_terminal() && !n.is_terminal());
    if !live || update.registered.is_empty() {
        return ops;
    }
    let datacenter = snap
        .node(&alloc.node_id)
        .map(|n| n.datacenter.clone())
        .unwrap_or_default();
    for reg in &update.registered {
        let stored = ServiceRegistration {
            namespace: alloc.namespace.clone(),
            job_id: alloc.job_id.clone(),
            node_id: alloc.node_id.clone(),
            alloc_id: alloc.id.clone(),
            datacenter: if reg.datacenter.is_empty() {
                datacenter.clone()
            } else {
                reg.datacenter.clone()
            },
            create_revision: 0,
            modify_revision: 0,
            ..reg.clone()
        };
        ops.push(Op::put(
            keys.service(&alloc.namespace, &reg.service_name, &reg.id),
            encode(&stored),
        ));
    }
    ops
}

/// How many operations `update` adds to a transaction beyond its
/// allocation's own.
pub(crate) fn extra_ops(update: &AllocUpdate) -> usize {
    update.registered.len() + update.deregistered.len()
}

#[cfg(test)]
mod tests {
    use caravan_proto::{AllocClientStatus, AllocDesiredStatus, Node};
    use caravan_state::{Change, Tables};

    use super::*;

    fn instance(alloc: &str, service: &str, port: i32) -> ServiceRegistration {
        ServiceRegistration {
            id: format!("_nomad-task-{alloc}-web-{service}-http"),
            service_name: service.into(),
            alloc_id: alloc.into(),
            address: "10.0.0.7".into(),
            port,
            tags: vec!["v1".into()],
            ..Default::default()
        }
    }

    fn update(registered: Vec<ServiceRegistration>) -> AllocUpdate {
        let mut u = AllocUpdate {
            alloc_id: "a1".into(),
            registered,
            ..Default::default()
        };
        u.set_client_status(AllocClientStatus::Running);
        u
    }

    fn field_of(err: GatewayError) -> String {
        match err {
            GatewayError::InvalidField { field, .. } => field,
            other => panic!("not a field error: {other}"),
        }
    }

    #[test]
    fn registrations_of_another_alloc_or_malformed_are_refused_by_field() {
        assert!(validate(0, &update(vec![instance("a1", "web", 80)])).is_ok());
        let stranger = update(vec![instance("a1", "web", 80), instance("a2", "db", 1)]);
        assert_eq!(
            field_of(validate(3, &stranger).unwrap_err()),
            "updates[3].registered[1].alloc_id"
        );
        let mut borrowed = instance("a1", "web", 80);
        borrowed.id = "_nomad-task-a2-web-web-http".into();
        assert_eq!(
            field_of(validate(0, &update(vec![borrowed])).unwrap_err()),
            "updates[0].registered[0].id"
        );
        let mut slash = instance("a1", "web", 80);
        slash.service_name = "a/b".into();
        assert_eq!(
            field_of(validate(0, &update(vec![slash])).unwrap_err()),
            "updates[0].registered[0].service_name"
        );
        let mut empty = instance("a1", "web", 80);
        empty.id.clear();
        assert_eq!(
            field_of(validate(0, &update(vec![empty])).unwrap_err()),
            "updates[0].registered[0].id"
        );
        let mut both = update(vec![instance("a1", "web", 80)]);
        both.deregistered = vec![instance("a1", "web", 80)];
        assert_eq!(
            field_of(validate(0, &both).unwrap_err()),
            "updates[0].deregistered[0].id",
            "one transaction may not name a key twice"
        );
        let mut foreign_delete = update(Vec::new());
        foreign_delete.deregistered = vec![instance("a2", "web", 80)];
        assert_eq!(
            field_of(validate(0, &foreign_delete).unwrap_err()),
            "updates[0].deregistered[0].id"
        );
    }

    #[test]
    fn merged_reports_keep_every_instance_and_the_later_word() {
        let mut earlier = update(vec![instance("a1", "web", 80), instance("a1", "api", 81)]);
        earlier.deregistered = vec![instance("a1", "old", 1)];
        let mut later = update(vec![instance("a1", "web", 8080), instance("a1", "old", 2)]);
        later.deregistered = vec![instance("a1", "api", 0)];
        fold_into(earlier, &mut later);
        let registered: Vec<(&str, i32)> = later
            .registered
            .iter()
            .map(|r| (r.service_name.as_str(), r.port))
            .collect();
        assert_eq!(registered, [("old", 2), ("web", 8080)]);
        let deregistered: Vec<&str> = later
            .deregistered
            .iter()
            .map(|r| r.service_name.as_str())
            .collect();
        assert_eq!(deregistered, ["api"]);

        // A registration after a deregistration brings the instance back.
        let mut gone = update(Vec::new());
        gone.deregistered = vec![instance("a1", "web", 80)];
        let mut back = update(vec![instance("a1", "web", 80)]);
        fold_into(gone, &mut back);
        assert_eq!(back.registered.len(), 1);
        assert!(back.deregistered.is_empty());
    }

    fn stored_alloc(client: AllocClientStatus, desired: AllocDesiredStatus) -> Allocation {
        let mut a = Allocation {
            id: "a1".into(),
            namespace: "prod".into(),
            job_id: "shop".into(),
            node_id: "n1".into(),
            ..Default::default()
        };
        a.set_client_status(client);
        a.set_desired_status(desired);
        a
    }

    #[test]
    fn registrations_are_filled_from_the_allocation_and_skipped_once_it_is_done() {
        let keys = Keyspace::new("/t");
        let mut tables = Tables::new();
        tables.apply(Change::Node {
            id: "n1".into(),
            node: Some(std::sync::Arc::new(Node {
                id: "n1".into(),
                datacenter: "dc2".into(),
                ..Default::default()
            })),
        });
        let snap = Snapshot::new(tables);
        let mut forged = instance("a1", "web", 80);
        forged.namespace = "other".into();
        forged.job_id = "not-mine".into();
        forged.modify_revision = 99;
        let mut u = update(vec![forged]);
        u.deregistered = vec![instance("a1", "old", 1)];
        let alloc = stored_alloc(AllocClientStatus::Pending, AllocDesiredStatus::Run);
        let ops = ops(&keys, &snap, &alloc, Some(alloc.client_status()), &u);
        assert_eq!(ops.len(), 2);
        assert_eq!(
            ops[0],
            Op::delete(keys.service("prod", "old", "_nomad-task-a1-web-old-http"))
        );
        let Op::Put { key, value, .. } = &ops[1] else {
            panic!("a put, not {:?}", ops[1]);
        };
        assert_eq!(
            *key,
            keys.service("prod", "web", "_nomad-task-a1-web-web-http")
        );
        let written: ServiceRegistration = prost::Message::decode(value.as_slice()).unwrap();
        assert_eq!(written.namespace, "prod");
        assert_eq!(written.job_id, "shop");
        assert_eq!(written.node_id, "n1");
        assert_eq!(written.datacenter, "dc2");
        assert_eq!(written.modify_revision, 0);
        assert_eq!(written.port, 80);

        for (client, desired) in [
            (AllocClientStatus::Running, AllocDesiredStatus::Stop),
            (AllocClientStatus::Complete, AllocDesiredStatus::Run),
        ] {
            let done = stored_alloc(client, desired);
            let ops = super::ops(&keys, &snap, &done, Some(done.client_status()), &u);
            assert_eq!(ops.len(), 1, "{client:?}/{desired:?}: only the delete");
            assert!(matches!(ops[0], Op::Delete(_)));
        }
        // A report that finishes the allocation registers nothing either.
        let mut complete = alloc.clone();
        complete.set_client_status(AllocClientStatus::Complete);
        assert_eq!(
            super::ops(&keys, &snap, &alloc, Some(complete.client_status()), &u).len(),
            1
        );
        // A dropped report still deletes.
        assert_eq!(super::ops(&keys, &snap, &alloc, None, &u).len(), 1);
    }
}

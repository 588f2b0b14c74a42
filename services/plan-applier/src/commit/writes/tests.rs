//! What a plan writes, decided without a store: keys, values and the
//! revisions each write is guarded by.

use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, Deployment, EvalStatus, Evaluation, Plan,
};
use caravan_state::{Keyspace, encode};
use caravan_store::{Compare, CompareOp, Op};

use super::*;
use crate::commit::changes::plan_changes;
use crate::commit::txn::txn_of;
use crate::fixtures::{alloc, node, place, plan, snapshot, snapshot_with_evals, stop};
use crate::verify::plan_nodes;

const NOW: i64 = 1_000;

/// The writes of every part of `p` on `view`, with fresh currents.
fn plan_writes(p: &Plan, view: &View) -> Result<Vec<Write>, Refusal> {
    let changes = plan_changes(p, &plan_nodes(p), view);
    let parts: Vec<Part> = std::iter::once(changes.global)
        .filter(|g| !g.changes.is_empty())
        .chain(changes.nodes)
        .collect();
    writes(
        view,
        &Keyspace::new("/t"),
        NOW,
        &parts,
        &mut Currents::default(),
    )
}

fn alloc_value(w: &Write) -> &Allocation {
    match &w.value {
        Value::Alloc(a) => a,
        other => panic!("not an allocation: {other:?}"),
    }
}

/// `old` running on n1 as the view shows it, stored at revision 7.
fn view_with_old() -> View {
    let mut old = alloc("old", "n1", 100, 64);
    old.modify_revision = 7;
    View::of(snapshot(7, &[node("n1")], &[old]))
}

#[test]
fn a_placement_and_a_stop_write_two_keys_guarded_by_what_the_view_shows() {
    let view = view_with_old();
    let mut p = plan(7);
    stop(&mut p, "n1", "old");
    let mut new = alloc("new", "n1", 100, 64);
    new.previous_allocation = "old".into();
    new.client_status = 0;
    place(&mut p, new);
    let writes = plan_writes(&p, &view).unwrap();
    let ks = Keyspace::new("/t");
    let keys: Vec<(&[u8], Expect)> = writes.iter().map(|w| (&w.key[..], w.expect)).collect();
    assert_eq!(
        keys,
        vec![
            (&ks.alloc("new")[..], Expect::Absent),
            (&ks.alloc("old")[..], Expect::Revision(7)),
        ],
        "the new allocation must not exist yet, the old one must be as seen"
    );
    let placed = alloc_value(&writes[0]);
    assert_eq!(placed.client_status(), AllocClientStatus::Pending);
    assert_eq!(placed.desired_status(), AllocDesiredStatus::Run);
    assert_eq!(placed.create_time_unix_ns, NOW);
    assert_eq!(placed.alloc_modify_revision, 0, "resolved on commit");
    // The stop and the link to the replacement merge into one write.
    let stopped = alloc_value(&writes[1]);
    assert_eq!(stopped.desired_status(), AllocDesiredStatus::Stop);
    assert_eq!(stopped.desired_description, "alloc not needed");
    assert_eq!(stopped.next_allocation, "new");
    assert_eq!(stopped.modify_time_unix_ns, NOW);
}

#[test]
fn the_transaction_compares_every_key_it_puts() {
    let view = view_with_old();
    let mut p = plan(7);
    stop(&mut p, "n1", "old");
    place(&mut p, alloc("new", "n1", 100, 64));
    let writes = plan_writes(&p, &view).unwrap();
    let ks = Keyspace::new("/t");
    let txn = txn_of(&writes);
    assert_eq!(
        txn.compares,
        vec![
            Compare::absent(ks.alloc("new")),
            Compare::mod_revision(ks.alloc("old"), CompareOp::Equal, 7),
        ]
    );
    assert_eq!(
        txn.success,
        vec![
            Op::put(ks.alloc("new"), encode(alloc_value(&writes[0]))),
            Op::put(ks.alloc("old"), encode(alloc_value(&writes[1]))),
        ]
    );
}

#[test]
fn a_fresh_value_after_a_conflict_replaces_the_view_and_keeps_the_client_status() {
    let view = view_with_old();
    let mut p = plan(7);
    stop(&mut p, "n1", "old");
    let changes = plan_changes(&p, &plan_nodes(&p), &view);
    // The client reported completion at revision 9, after the view.
    let mut done = alloc("old", "n1", 100, 64);
    done.set_client_status(AllocClientStatus::Complete);
    let mut currents = Currents::default();
    let target = Target::Alloc("old".into());
    currents.set(target, Some((Stored::Alloc(Arc::new(done)), 9)));
    let ks = Keyspace::new("/t");
    let writes = writes(&view, &ks, NOW, &changes.nodes, &mut currents).unwrap();
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].expect, Expect::Revision(9));
    let stopped = alloc_value(&writes[0]);
    assert_eq!(stopped.desired_status(), AllocDesiredStatus::Stop);
    assert_eq!(stopped.client_status(), AllocClientStatus::Complete);
}

#[test]
fn a_placement_that_exists_refuses_its_own_part() {
    let mut dup = alloc("dup", "n2", 100, 64);
    dup.modify_revision = 3;
    let view = View::of(snapshot(3, &[node("n1"), node("n2")], &[]));
    let mut p = plan(3);
    place(&mut p, alloc("fresh", "n1", 100, 64));
    place(&mut p, alloc("dup", "n2", 100, 64));
    let changes = plan_changes(&p, &plan_nodes(&p), &view);
    let mut currents = Currents::default();
    // Read from the store: committed by an earlier attempt.
    currents.set(
        Target::Alloc("dup".into()),
        Some((Stored::Alloc(Arc::new(dup)), 3)),
    );
    let ks = Keyspace::new("/t");
    let refusal = writes(&view, &ks, NOW, &changes.nodes, &mut currents).unwrap_err();
    assert_eq!(changes.nodes[refusal.part].node.as_deref(), Some("n2"));
    assert_eq!(refusal.reason, "allocation dup already exists (on node n2)");
}

#[test]
fn a_created_eval_is_written_only_where_none_exists() {
    let existing = Evaluation {
        id: "known".into(),
        modify_revision: 4,
        ..Default::default()
    };
    let view = View::of(snapshot_with_evals(4, &[], &[], &[existing]));
    let mut p = plan(4);
    for id in ["known", "next"] {
        p.evals.push(Evaluation {
            id: id.into(),
            ..Default::default()
        });
    }
    let writes = plan_writes(&p, &view).unwrap();
    assert_eq!(writes.len(), 1, "the existing eval is left alone");
    assert_eq!(writes[0].key, Keyspace::new("/t").eval("next"));
    assert_eq!(writes[0].expect, Expect::Absent);
    let Value::Eval(e) = &writes[0].value else {
        panic!("not an eval: {:?}", writes[0].value);
    };
    assert_eq!((e.create_time_unix_ns, e.modify_time_unix_ns), (NOW, NOW));
}

#[test]
fn a_placement_into_a_deployment_counts_on_the_stored_deployment() {
    let view = View::of(snapshot(5, &[node("n1")], &[]));
    let mut p = plan(5);
    let mut a = alloc("a", "n1", 100, 64);
    a.deployment_id = "d1".into();
    place(&mut p, a);
    let changes = plan_changes(&p, &plan_nodes(&p), &view);
    let stored = Deployment {
        id: "d1".into(),
        modify_revision: 2,
        ..Default::default()
    };
    let mut currents = Currents::default();
    currents.set(
        Target::Deployment("d1".into()),
        Some((Stored::Deployment(Arc::new(stored)), 2)),
    );
    let ks = Keyspace::new("/t");
    let writes = writes(&view, &ks, NOW, &changes.nodes, &mut currents).unwrap();
    let deployment = writes
        .iter()
        .find(|w| w.key == ks.deployment("d1"))
        .expect("the deployment is written");
    assert_eq!(deployment.expect, Expect::Revision(2));
    let Value::Deployment(d) = &deployment.value else {
        panic!("not a deployment: {:?}", deployment.value);
    };
    assert_eq!(d.task_groups["web"].placed_allocs, 1);
}

fn delivered() -> Evaluation {
    Evaluation {
        id: "e1".into(),
        status: EvalStatus::Complete as i32,
        modify_revision: 6,
        ..Default::default()
    }
}

#[test]
fn a_completion_is_written_only_while_the_eval_is_as_delivered() {
    let mut p = plan(6);
    p.eval_completion = Some(delivered());
    let completion = Completion::of(&p).unwrap();
    let ks = Keyspace::new("/t");
    let as_delivered = View::of(snapshot_with_evals(6, &[], &[], &[delivered()]));
    let write = completion_write(
        &completion,
        &mut Currents::default(),
        &as_delivered,
        &ks,
        NOW,
    )
    .expect("written");
    assert_eq!(write.key, ks.eval("e1"));
    assert_eq!(write.expect, Expect::Revision(6));
    let Value::Eval(e) = &write.value else {
        panic!("not an eval: {:?}", write.value);
    };
    assert_eq!(e.status(), EvalStatus::Complete);
    assert_eq!(e.modify_time_unix_ns, NOW);
    assert_eq!(e.modify_revision, 0, "revisions cleared");
    let mut moved = delivered();
    moved.modify_revision = 8;
    let since = View::of(snapshot_with_evals(8, &[], &[], &[moved]));
    assert!(completion_write(&completion, &mut Currents::default(), &since, &ks, NOW).is_none());
}

#[test]
fn a_settled_write_reads_as_stored_at_its_revision() {
    let view = View::of(snapshot(1, &[node("n1")], &[]));
    let mut p = plan(1);
    place(&mut p, alloc("a", "n1", 100, 64));
    let write = plan_writes(&p, &view).unwrap().remove(0);
    let settled = write.settle(12);
    assert_eq!(settled.target, Target::Alloc("a".into()));
    match settled.current() {
        Some((Stored::Alloc(a), 12)) => {
            assert_eq!(a.modify_revision, 12);
            assert_eq!(a.alloc_modify_revision, 12);
        }
        other => panic!("not settled at 12: {other:?}"),
    }
}

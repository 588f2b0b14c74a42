use caravan_proto::{AllocClientStatus, AllocStatus, Allocation};
use caravan_state::status_batch::highest;

use super::*;
use crate::testing::World;

fn entry(id: &str, status: AllocClientStatus, revision: Revision) -> BatchEntry {
    let mut s = AllocStatus::default();
    s.set_client_status(status);
    BatchEntry {
        alloc_id: id.into(),
        status: s,
        revision,
    }
}

fn batch(name: &str, mod_revision: Revision, entries: Vec<BatchEntry>) -> StoredBatch {
    StoredBatch {
        key: name.as_bytes().to_vec(),
        mod_revision,
        entries,
    }
}

fn world(ids: &[&str]) -> World {
    let mut w = World::new();
    for id in ids {
        w.alloc(Allocation {
            id: (*id).into(),
            namespace: "default".into(),
            job_id: "web".into(),
            node_id: "n1".into(),
            ..Default::default()
        });
    }
    w
}

/// Each allocation's chosen entry among `batches`, by the readers' rule.
fn chosen(batches: &[StoredBatch], id: &str) -> Option<(AllocClientStatus, Revision)> {
    let all = batches
        .iter()
        .flat_map(|b| &b.entries)
        .filter(|e| e.alloc_id == id);
    highest(all, |e| (e.status.client_status(), e.revision))
        .map(|e| (e.status.client_status(), e.revision))
}

fn four_batches() -> Vec<StoredBatch> {
    use AllocClientStatus as C;
    vec![
        batch(
            "b1",
            10,
            vec![entry("a", C::Pending, 10), entry("b", C::Pending, 10)],
        ),
        batch(
            "b2",
            20,
            vec![entry("a", C::Running, 20), entry("b", C::Running, 20)],
        ),
        batch("b3", 30, vec![entry("c", C::Running, 30)]),
        // A late "running" of b loses to nothing newer; d was collected.
        batch(
            "b4",
            40,
            vec![entry("a", C::Complete, 40), entry("d", C::Running, 40)],
        ),
    ]
}

#[test]
fn a_job_with_few_batches_keeps_them() {
    let w = world(&["a", "b", "c"]);
    let batches = four_batches();
    assert!(plan(&w.tables, &batches[..FREE_FROM - 1], 100).is_empty());
}

#[test]
fn freeing_moves_each_chosen_entry_with_its_revision_and_drops_the_dead() {
    use AllocClientStatus as C;
    let w = world(&["a", "b", "c"]);
    let batches = four_batches();
    let frees = plan(&w.tables, &batches, 100);
    assert_eq!(frees.len(), 1);
    let free = &frees[0];
    // The fullest (b4, one live entry of two) is mostly dead: all go.
    let freed: Vec<&[u8]> = free.freed.iter().map(|(k, _)| k.as_slice()).collect();
    assert_eq!(freed, [&b"b1"[..], b"b2", b"b3", b"b4"]);
    assert_eq!(
        free.moved,
        vec![
            entry("b", C::Running, 20),
            entry("c", C::Running, 30),
            entry("a", C::Complete, 40)
        ]
    );
    // What every allocation still held folds to the same status.
    let after = [batch("new", 50, free.moved.clone())];
    for id in ["a", "b", "c"] {
        assert_eq!(chosen(&batches, id), chosen(&after, id), "{id}");
    }
    assert_eq!(
        chosen(&after, "d"),
        None,
        "a collected allocation's entry went"
    );
}

#[test]
fn the_fullest_batch_stays_while_mostly_live_and_transactions_stay_small() {
    use AllocClientStatus as C;
    let w = world(&["a", "b", "c", "d", "e"]);
    let big = (0..5)
        .map(|i| entry(["a", "b", "c", "d", "e"][i], C::Running, 10))
        .collect();
    let mut batches = vec![batch("big", 10, big)];
    for (i, name) in ["s1", "s2", "s3", "s4"].iter().enumerate() {
        let rev = 20 + i as Revision;
        batches.push(batch(name, rev, vec![entry("e", C::Running, rev)]));
    }
    let frees = plan(&w.tables, &batches, 2);
    let freed: Vec<Vec<&[u8]>> = frees
        .iter()
        .map(|f| f.freed.iter().map(|(k, _)| k.as_slice()).collect())
        .collect();
    assert_eq!(
        freed,
        vec![vec![&b"s1"[..], b"s2"], vec![&b"s3"[..], b"s4"]]
    );
    // Only the newest report of e is chosen; the others were superseded.
    assert!(frees[0].moved.is_empty());
    assert_eq!(frees[1].moved, vec![entry("e", C::Running, 23)]);
    let unit = frees[1].unit(b"new".to_vec());
    assert_eq!(unit.guards.len(), 2);
    assert_eq!(unit.ops.len(), 3, "two deletes and the new batch");
    assert!(
        frees[0].unit(b"new".to_vec()).ops.len() == 2,
        "nothing to move, no new batch"
    );
}

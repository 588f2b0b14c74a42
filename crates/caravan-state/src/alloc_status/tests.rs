use std::sync::Arc;

use caravan_proto::{AllocClientStatus, AllocDesiredStatus, AllocStatus, Allocation, TaskState};
use caravan_store::KeyValue;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

use super::*;
use crate::change::Change;
use crate::index::Id;
use crate::keyspace::StateKey;
use crate::tables::Tables;

const KEYS: &str = "/t";

fn kv(key: Vec<u8>, value: Vec<u8>, rev: i64) -> KeyValue {
    KeyValue {
        key,
        value,
        create_revision: 1,
        mod_revision: rev,
        version: 1,
        lease: 0,
    }
}

fn record(id: &str, desired: AllocDesiredStatus, canary: bool) -> Allocation {
    let mut a = Allocation {
        id: id.into(),
        namespace: "default".into(),
        job_id: "web".into(),
        node_id: "n1".into(),
        deployment_status: canary.then(|| AllocDeploymentStatus {
            canary: true,
            ..Default::default()
        }),
        ..Default::default()
    };
    a.set_desired_status(desired);
    a.set_client_status(AllocClientStatus::Pending);
    a
}

fn status(client: AllocClientStatus, healthy: Option<bool>, at: i64, task: bool) -> AllocStatus {
    let mut s = AllocStatus {
        client_description: format!("{client:?} at {at}"),
        deployment_healthy: healthy,
        deployment_timestamp_unix_ns: healthy.map_or(0, |_| at),
        modify_time_unix_ns: at,
        running_since_unix_ns: at / 2,
        ..Default::default()
    };
    s.set_client_status(client);
    if task {
        s.task_states.insert(
            "web".into(),
            TaskState {
                state: format!("{client:?}"),
                started_at_unix_ns: at / 2,
                ..Default::default()
            },
        );
    }
    s
}

#[test]
fn a_record_without_status_folds_to_itself() {
    let keys = Keyspace::new(KEYS);
    let a = record("a", AllocDesiredStatus::Run, false);
    let folded = fold(
        &kv(keys.alloc("a"), a.encode_to_vec(), 7),
        None,
        AllocDetail::Full,
    )
    .unwrap();
    assert_eq!(folded.client_status(), AllocClientStatus::Pending);
    assert_eq!(
        (folded.modify_revision, folded.client_modify_revision),
        (7, 0)
    );
}

#[test]
fn the_status_wins_where_it_exists_and_the_canary_flag_stays_the_records() {
    let keys = Keyspace::new(KEYS);
    let a = record("a", AllocDesiredStatus::Run, true);
    let s = status(AllocClientStatus::Running, Some(true), 50, true);
    let folded = fold(
        &kv(keys.alloc("a"), a.encode_to_vec(), 9),
        Some(&kv(keys.alloc_status("a"), s.encode_to_vec(), 8)),
        AllocDetail::Full,
    )
    .unwrap();
    assert_eq!(folded.client_status(), AllocClientStatus::Running);
    assert_eq!(folded.task_states["web"].state, "Running");
    let d = folded.deployment_status.unwrap();
    assert_eq!(
        (d.healthy, d.timestamp_unix_ns, d.canary),
        (Some(true), 50, true)
    );
    // The record's revision is what writes of the record compare.
    assert_eq!(
        (folded.modify_revision, folded.client_modify_revision),
        (9, 8)
    );
    assert_eq!(client_part(&folded), s);
}

/// A running allocation's status as a client reports it: one task, its
/// three events milliseconds apart, the report a little later.
fn reported_running() -> AllocStatus {
    let now = 1_795_849_817_989_526_586;
    let started = now - 180_000_000;
    let event = |kind: &str, message: &str, at: i64| caravan_proto::TaskEvent {
        r#type: kind.into(),
        message: message.into(),
        time_unix_ns: at,
        ..Default::default()
    };
    let mut s = AllocStatus {
        client_description: "Tasks are running".into(),
        running_since_unix_ns: started,
        modify_time_unix_ns: now,
        ..Default::default()
    };
    s.set_client_status(AllocClientStatus::Running);
    s.task_states.insert(
        "web".into(),
        TaskState {
            state: "running".into(),
            started_at_unix_ns: started,
            events: vec![
                event("Received", "Task received by client", started - 4_000_000),
                event("Task Setup", "Building Task Directory", started - 2_500_000),
                event("Started", "Task started by client", started),
            ],
            ..Default::default()
        },
    );
    s
}

#[test]
fn a_reported_status_is_stored_in_a_third_of_its_bytes_and_read_back_whole() {
    let keys = Keyspace::new(KEYS);
    let written = reported_running();
    let stored = encode_status(written.clone());
    let read = decode_status(&kv(keys.alloc_status("a"), stored.clone(), 3)).unwrap();
    assert_eq!(read, written);
    // As written 212 bytes; its known strings by number 93; its times
    // relative to the report's too, 70.
    let plain = written.encode_to_vec().len();
    let mut strings_only = written.clone();
    crate::known_strings::pack_status(&mut strings_only);
    let strings_only = strings_only.encode_to_vec().len();
    assert!(
        stored.len() * 3 <= plain && stored.len() + 20 <= strings_only,
        "{} bytes stored against {plain} written, {strings_only} with known strings packed",
        stored.len()
    );
    // The fold and a cache's change see the same allocation.
    let a = record("a", AllocDesiredStatus::Run, false);
    let folded = fold(
        &kv(keys.alloc("a"), a.encode_to_vec(), 2),
        Some(&kv(keys.alloc_status("a"), stored, 3)),
        AllocDetail::Full,
    )
    .unwrap();
    assert_eq!(client_part(&folded), written);
}

#[test]
fn the_fold_depends_on_the_record_and_the_status_alone() {
    let plain = record("a", AllocDesiredStatus::Run, false);
    let mut twice = plain.clone();
    overlay(
        &mut twice,
        &status(AllocClientStatus::Running, Some(true), 10, true),
    );
    let last = status(AllocClientStatus::Complete, None, 20, false);
    overlay(&mut twice, &last);
    let mut once = plain.clone();
    overlay(&mut once, &last);
    assert_eq!(twice, once);
    assert!(once.deployment_status.is_none());
    assert_eq!(client_part(&once), last);
}

#[test]
fn a_server_write_follows_the_status_only_where_it_changed_the_clients_part() {
    let keys = Keyspace::new(KEYS);
    let mut before = record("a", AllocDesiredStatus::Run, false);
    let mut stopped = before.clone();
    stopped.set_desired_status(AllocDesiredStatus::Stop);
    let mut lost = stopped.clone();
    lost.set_client_status(AllocClientStatus::Lost);
    // No status key yet: written, compared absent.
    let (compare, _) = follow_status(&keys, &before, &lost).unwrap();
    assert_eq!(
        compare,
        Compare::mod_revision(keys.alloc_status("a"), CompareOp::Equal, 0)
    );
    before.client_modify_revision = 12;
    assert!(follow_status(&keys, &before, &stopped).is_none());
    let (compare, _) = follow_status(&keys, &before, &lost).unwrap();
    assert_eq!(
        compare,
        Compare::mod_revision(keys.alloc_status("a"), CompareOp::Equal, 12)
    );
}

/// One write of a store history: a record, a status, or both in one
/// transaction (a server changing a client field), at one revision.
#[derive(Clone, Debug)]
struct Write {
    rev: i64,
    record: Option<Allocation>,
    status: Option<AllocStatus>,
}

/// A random history of allocation `id`: a placement, then client reports
/// and server writes (some of them changing the client's part too).
fn history(rng: &mut Pcg64, id: &str, rev: &mut i64) -> Vec<Write> {
    let mut out = Vec::new();
    let mut desired = AllocDesiredStatus::Run;
    *rev += 1;
    out.push(Write {
        rev: *rev,
        record: Some(record(id, desired, rng.random_bool(0.3))),
        status: None,
    });
    let canary = out[0].record.as_ref().unwrap().deployment_status.is_some();
    for _ in 0..rng.random_range(0..12) {
        *rev += 1;
        let client = [
            AllocClientStatus::Running,
            AllocClientStatus::Complete,
            AllocClientStatus::Failed,
        ][rng.random_range(0..3)];
        let report = status(
            client,
            [None, Some(true), Some(false)][rng.random_range(0..3)],
            *rev * 10,
            rng.random_bool(0.7),
        );
        let write = match rng.random_range(0..3) {
            0 => Write {
                rev: *rev,
                record: None,
                status: Some(report),
            },
            1 => {
                desired = AllocDesiredStatus::Stop;
                Write {
                    rev: *rev,
                    record: Some(record(id, desired, canary)),
                    status: None,
                }
            }
            _ => {
                // A server marking it lost writes the status too.
                let mut lost = record(id, AllocDesiredStatus::Stop, canary);
                lost.set_client_status(AllocClientStatus::Lost);
                let mut s = client_part(&lost);
                s.modify_time_unix_ns = *rev * 10;
                Write {
                    rev: *rev,
                    record: Some(lost),
                    status: Some(s),
                }
            }
        };
        out.push(write);
    }
    out
}

fn record_change(keys: &Keyspace, a: &Allocation, rev: i64) -> Change {
    let kv = kv(keys.alloc(&a.id), a.encode_to_vec(), rev);
    Change::put(&StateKey::Alloc(a.id.clone()), &kv, AllocDetail::Full)
        .unwrap()
        .unwrap()
}

fn status_change(id: &str, s: &AllocStatus, rev: i64) -> Change {
    Change::AllocStatus {
        id: Id::from(id),
        status: Some(Box::new(s.clone())),
        revision: rev,
    }
}

/// What a reader of the store finds at the end of `writes`: the last
/// record folded with the last status.
fn expected(keys: &Keyspace, writes: &[Write]) -> Allocation {
    let last_record = writes
        .iter()
        .rev()
        .find_map(|w| w.record.as_ref().map(|r| (r, w.rev)));
    let last_status = writes
        .iter()
        .rev()
        .find_map(|w| w.status.as_ref().map(|s| (s, w.rev)));
    let (r, rrev) = last_record.unwrap();
    let rkv = kv(keys.alloc(&r.id), r.encode_to_vec(), rrev);
    let skv = last_status.map(|(s, rev)| kv(keys.alloc_status(&r.id), s.encode_to_vec(), rev));
    fold(&rkv, skv.as_ref(), AllocDetail::Full).unwrap()
}

/// Any interleaving of an allocation's record and status events (each
/// key's records in the order a watch gives them), with status events
/// delivered again at random, before their record or long after, folds to
/// what a reader of the two keys finds.
#[test]
fn any_interleaving_or_duplication_of_statuses_folds_to_the_same_allocation() {
    let keys = Keyspace::new(KEYS);
    let mut rng = Pcg64::seed_from_u64(46);
    for round in 0..400 {
        let mut rev = 0;
        let ids: Vec<String> = (0..3).map(|i| format!("a{i}")).collect();
        let histories: Vec<Vec<Write>> = ids
            .iter()
            .map(|id| history(&mut rng, id, &mut rev))
            .collect();
        // Per allocation: its record events in order, and its status
        // events in any order, some twice.
        let mut queues: Vec<(Vec<Change>, Vec<Change>)> = Vec::new();
        for (id, writes) in ids.iter().zip(&histories) {
            let records: Vec<Change> = writes
                .iter()
                .filter_map(|w| w.record.as_ref().map(|r| record_change(&keys, r, w.rev)))
                .collect();
            let mut statuses: Vec<Change> = writes
                .iter()
                .filter_map(|w| w.status.as_ref().map(|s| status_change(id, s, w.rev)))
                .collect();
            let copies: Vec<Change> = statuses
                .iter()
                .filter(|_| rng.random_bool(0.3))
                .cloned()
                .collect();
            statuses.extend(copies);
            for i in (1..statuses.len()).rev() {
                statuses.swap(i, rng.random_range(0..=i));
            }
            queues.push((records, statuses));
        }
        let mut tables = Tables::new();
        let mut cursors = vec![(0usize, 0usize); queues.len()];
        loop {
            let open: Vec<usize> = (0..queues.len())
                .filter(|&i| cursors[i].0 < queues[i].0.len() || cursors[i].1 < queues[i].1.len())
                .collect();
            if open.is_empty() {
                break;
            }
            let i = open[rng.random_range(0..open.len())];
            let (records, statuses) = &queues[i];
            let (r, s) = &mut cursors[i];
            let take_record = *s >= statuses.len() || (*r < records.len() && rng.random_bool(0.5));
            if take_record {
                tables.apply(records[*r].clone());
                *r += 1;
            } else {
                tables.apply(statuses[*s].clone());
                *s += 1;
            }
        }
        for (id, writes) in ids.iter().zip(&histories) {
            let held = tables.allocs.get(&Id::from(id.as_str())).unwrap();
            assert_eq!(
                *held.0,
                expected(&keys, writes),
                "round {round}, allocation {id}: {writes:#?}"
            );
        }
        assert!(tables.orphan_statuses.is_empty(), "round {round}");
    }
}

#[test]
fn a_status_before_its_record_waits_for_it_and_goes_with_a_delete() {
    let keys = Keyspace::new(KEYS);
    let mut tables = Tables::new();
    let s = status(AllocClientStatus::Running, None, 30, false);
    tables.apply(status_change("a", &s, 3));
    assert!(tables.allocs.is_empty());
    tables.apply(record_change(
        &keys,
        &record("a", AllocDesiredStatus::Run, false),
        2,
    ));
    let held = Arc::clone(&tables.allocs.get(&Id::from("a")).unwrap().0);
    assert_eq!(held.client_status(), AllocClientStatus::Running);
    assert_eq!(held.client_modify_revision, 3);
    // A status left behind by a record's delete never comes back.
    tables.apply(status_change("b", &s, 5));
    tables.apply(Change::delete(&StateKey::Alloc("b".into())).unwrap());
    assert!(tables.orphan_statuses.is_empty());
}

#[test]
fn a_scheduling_cache_keeps_task_states_only_of_finished_allocations() {
    let keys = Keyspace::new(KEYS);
    let mut tables = Tables::with_detail(AllocDetail::Scheduling);
    tables.apply(record_change(
        &keys,
        &record("a", AllocDesiredStatus::Run, false),
        2,
    ));
    tables.apply(status_change(
        "a",
        &status(AllocClientStatus::Running, None, 30, true),
        3,
    ));
    let held = |t: &Tables| Arc::clone(&t.allocs.get(&Id::from("a")).unwrap().0);
    assert!(held(&tables).task_states.is_empty());
    // Asked to stop while it runs: the servers' record carries the task
    // states they read, which a lean copy keeps from then on.
    let mut stop = record("a", AllocDesiredStatus::Stop, false);
    overlay(
        &mut stop,
        &status(AllocClientStatus::Running, None, 30, true),
    );
    tables.apply(record_change(&keys, &stop, 4));
    assert_eq!(held(&tables).task_states["web"].state, "Running");
    assert_eq!(held(&tables).client_modify_revision, 3);
    tables.apply(status_change(
        "a",
        &status(AllocClientStatus::Failed, None, 40, true),
        5,
    ));
    assert_eq!(held(&tables).task_states["web"].state, "Failed");
    assert_eq!(held(&tables).client_status(), AllocClientStatus::Failed);
}

use std::sync::Arc;

use caravan_proto::{AllocClientStatus, AllocDesiredStatus, AllocStatus, Allocation, TaskState};
use caravan_store::KeyValue;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

use caravan_model::AllocClientStatusExt;

use super::*;
use crate::change::Change;
use crate::index::Id;
use crate::keyspace::StateKey;
use crate::status_batch::{outranks, rank};
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
    before.modify_revision = 10;
    // No status key yet: written, guarded by what the read saw (a missing
    // key's mod revision is 0).
    let (compare, _) = follow_status(&keys, &before, &lost).unwrap();
    assert_eq!(
        compare,
        Compare::mod_revision(keys.alloc_status("a"), CompareOp::Less, 11)
    );
    before.client_modify_revision = 12;
    assert!(follow_status(&keys, &before, &stopped).is_none());
    let (compare, _) = follow_status(&keys, &before, &lost).unwrap();
    assert_eq!(
        compare,
        Compare::mod_revision(keys.alloc_status("a"), CompareOp::Less, 13)
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
    // Writers never take a finished allocation back (`may_report`; the
    // servers mark only unfinished ones lost): once a status is finished,
    // so is every later one.
    let mut finished = false;
    for _ in 0..rng.random_range(0..12) {
        *rev += 1;
        let choices = if finished {
            &[AllocClientStatus::Complete, AllocClientStatus::Failed][..]
        } else {
            &[
                AllocClientStatus::Running,
                AllocClientStatus::Complete,
                AllocClientStatus::Failed,
            ][..]
        };
        let client = choices[rng.random_range(0..choices.len())];
        let report = status(
            client,
            [None, Some(true), Some(false)][rng.random_range(0..3)],
            *rev * 10,
            rng.random_bool(0.7),
        );
        let kind = match rng.random_range(0..3) {
            2 if finished => 0,
            k => k,
        };
        let write = match kind {
            0 => {
                finished |= client.is_terminal();
                Write {
                    rev: *rev,
                    record: None,
                    status: Some(report),
                }
            }
            1 => {
                desired = AllocDesiredStatus::Stop;
                Write {
                    rev: *rev,
                    record: Some(record(id, desired, canary)),
                    status: None,
                }
            }
            _ => {
                finished = true;
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

/// A batch of the model store in the test below: its name, revision and
/// entries (allocation, status, the revision it was first written at).
#[derive(Clone, Debug)]
struct ModelBatch {
    name: String,
    rev: i64,
    entries: Vec<(String, AllocStatus, i64)>,
}

fn batch_kv(keys: &Keyspace, b: &ModelBatch) -> KeyValue {
    let stored = crate::status_batch::encode_batch(
        b.entries
            .iter()
            .map(|(id, s, origin)| (id.as_str(), s, if *origin == b.rev { 0 } else { *origin })),
    );
    KeyValue {
        create_revision: b.rev,
        ..kv(keys.job_status("default", "web", &b.name), stored, b.rev)
    }
}

fn batch_key(b: &ModelBatch) -> StateKey {
    StateKey::JobStatus {
        namespace: "default".into(),
        id: "web".into(),
        batch: b.name.clone(),
    }
}

/// The status `id` folds to in the model store: its status key's and its
/// batch entries', by the one rule.
fn chosen(
    id: &str,
    status_key: &std::collections::HashMap<String, (AllocStatus, i64)>,
    batches: &[ModelBatch],
) -> Option<(AllocStatus, i64)> {
    let mut best: Option<(AllocStatus, i64)> = status_key.get(id).cloned();
    for (_, s, rev) in batches
        .iter()
        .flat_map(|b| &b.entries)
        .filter(|(a, _, _)| a == id)
    {
        let held = best.as_ref().map(|(b, r)| rank(b.client_status(), *r));
        if outranks(s.client_status(), *rev, held) {
            best = Some((s.clone(), *rev));
        }
    }
    best
}

/// Client statuses written to status batches as well as to status keys,
/// batches freed by moving what is still chosen into a new batch, and every
/// event delivered in any order that keeps each key's own (and any put
/// again, as a re-list does): the tables fold each allocation to what a
/// reader of the store finds at the end.
#[test]
fn any_interleaving_or_duplication_of_status_entries_folds_to_the_same_allocation() {
    use std::collections::HashMap;
    let keys = Keyspace::new(KEYS);
    let mut rng = Pcg64::seed_from_u64(4646);
    for round in 0..400 {
        let mut rev = 0;
        let ids: Vec<String> = (0..3).map(|i| format!("a{i}")).collect();
        let mut writes: Vec<(String, Write)> = Vec::new();
        for id in &ids {
            for mut w in history(&mut rng, id, &mut rev) {
                // Room between writes for the revisions of batch moves.
                w.rev *= 10;
                writes.push((id.clone(), w));
            }
        }
        writes.sort_by_key(|(_, w)| w.rev);
        // Each chain is one key's events, in that key's order.
        let mut chains: Vec<Vec<Change>> = Vec::new();
        let mut record_chains: HashMap<String, usize> = HashMap::new();
        let mut batch_chains: HashMap<String, usize> = HashMap::new();
        let mut status_key: HashMap<String, (AllocStatus, i64)> = HashMap::new();
        let mut last_record: HashMap<String, (Allocation, i64)> = HashMap::new();
        let mut live: Vec<ModelBatch> = Vec::new();
        for (id, w) in &writes {
            if let Some(r) = &w.record {
                let chain = *record_chains.entry(id.clone()).or_insert_with(|| {
                    chains.push(Vec::new());
                    chains.len() - 1
                });
                chains[chain].push(record_change(&keys, r, w.rev));
                last_record.insert(id.clone(), (r.clone(), w.rev));
            }
            if let Some(s) = &w.status {
                // A server's mark goes to the status key; a client's report
                // to the key or to a batch of its own.
                if w.record.is_some() || rng.random_bool(0.4) {
                    for _ in 0..1 + usize::from(rng.random_bool(0.3)) {
                        chains.push(vec![status_change(id, s, w.rev)]);
                    }
                    status_key.insert(id.clone(), (s.clone(), w.rev));
                } else {
                    let b = ModelBatch {
                        name: format!("b{}", w.rev),
                        rev: w.rev,
                        entries: vec![(id.clone(), s.clone(), w.rev)],
                    };
                    let put = Change::put(&batch_key(&b), &batch_kv(&keys, &b), AllocDetail::Full)
                        .unwrap()
                        .unwrap();
                    let mut chain = vec![put.clone()];
                    if rng.random_bool(0.3) {
                        chain.push(put);
                    }
                    chains.push(chain);
                    batch_chains.insert(b.name.clone(), chains.len() - 1);
                    live.push(b);
                }
            }
            // Now and then a late report of an allocation running lands in
            // a batch (a gateway that held it while the allocation finished
            // through another): it must not take a finished one back.
            if rng.random_bool(0.15) {
                let late = ModelBatch {
                    name: format!("l{}", w.rev + 3),
                    rev: w.rev + 3,
                    entries: vec![(
                        id.clone(),
                        status(AllocClientStatus::Running, None, w.rev + 3, true),
                        w.rev + 3,
                    )],
                };
                let put = Change::put(
                    &batch_key(&late),
                    &batch_kv(&keys, &late),
                    AllocDetail::Full,
                )
                .unwrap()
                .unwrap();
                chains.push(vec![put]);
                batch_chains.insert(late.name.clone(), chains.len() - 1);
                live.push(late);
            }
            // Now and then a writer frees some batches, moving what is
            // still chosen from them into one new batch.
            if !live.is_empty() && rng.random_bool(0.25) {
                let at = w.rev + 5;
                let mut freed = Vec::new();
                let mut kept = Vec::new();
                for b in std::mem::take(&mut live) {
                    if rng.random_bool(0.5) {
                        freed.push(b);
                    } else {
                        kept.push(b);
                    }
                }
                let mut all: Vec<ModelBatch> = kept.clone();
                all.extend(freed.iter().cloned());
                let mut moved = ModelBatch {
                    name: format!("c{at}"),
                    rev: at,
                    entries: Vec::new(),
                };
                for (id, s, origin) in freed.iter().flat_map(|b| &b.entries) {
                    if chosen(id, &status_key, &all).is_some_and(|(_, r)| r == *origin) {
                        moved.entries.push((id.clone(), s.clone(), *origin));
                    }
                }
                if !moved.entries.is_empty() {
                    let put = Change::put(
                        &batch_key(&moved),
                        &batch_kv(&keys, &moved),
                        AllocDetail::Full,
                    )
                    .unwrap()
                    .unwrap();
                    chains.push(vec![put]);
                    batch_chains.insert(moved.name.clone(), chains.len() - 1);
                    kept.push(moved);
                }
                for b in &freed {
                    let chain = batch_chains[&b.name];
                    chains[chain].push(Change::delete(&batch_key(b)).unwrap());
                }
                live = kept;
            }
        }
        let mut tables = Tables::new();
        let mut cursors = vec![0usize; chains.len()];
        loop {
            let open: Vec<usize> = (0..chains.len())
                .filter(|&i| cursors[i] < chains[i].len())
                .collect();
            if open.is_empty() {
                break;
            }
            let i = open[rng.random_range(0..open.len())];
            tables.apply(chains[i][cursors[i]].clone());
            cursors[i] += 1;
        }
        for id in &ids {
            let (r, rrev) = &last_record[id];
            let rkv = kv(keys.alloc(id), r.encode_to_vec(), *rrev);
            let skv = status_key
                .get(id)
                .map(|(s, rev)| kv(keys.alloc_status(id), encode_status(s.clone()), *rev));
            let entries: Vec<BatchEntry> = live
                .iter()
                .flat_map(|b| crate::status_batch::decode_batch(&batch_kv(&keys, b)).unwrap())
                .filter(|e| e.alloc_id == *id)
                .collect();
            let want = fold_with(&rkv, skv.as_ref(), &entries, AllocDetail::Full).unwrap();
            let held = tables.allocs.get(&Id::from(id.as_str())).unwrap();
            assert_eq!(*held.0, want, "round {round}, allocation {id}");
        }
        assert!(tables.orphan_statuses.is_empty(), "round {round}");
        assert!(tables.orphan_entries.is_empty(), "round {round}");
    }
}

#[test]
fn an_entry_of_a_collected_allocation_waits_aside_and_goes_with_its_batch() {
    let keys = Keyspace::new(KEYS);
    let mut tables = Tables::new();
    let b = ModelBatch {
        name: "b9".into(),
        rev: 9,
        entries: vec![(
            "gone".into(),
            status(AllocClientStatus::Running, None, 90, true),
            9,
        )],
    };
    tables.apply(
        Change::put(&batch_key(&b), &batch_kv(&keys, &b), AllocDetail::Full)
            .unwrap()
            .unwrap(),
    );
    assert!(tables.allocs.is_empty());
    assert_eq!(tables.orphan_entries.len(), 1);
    assert!(
        tables.keys().contains(&batch_key(&b)),
        "a re-list that no longer finds the batch drops it"
    );
    tables.apply(Change::delete(&batch_key(&b)).unwrap());
    assert!(tables.orphan_entries.is_empty());
}

/// A point read of allocations of many jobs keeps every transaction within
/// the store's limit of operations, counting each job's range of batches.
#[tokio::test]
async fn point_reads_stay_within_the_stores_limit_of_operations() {
    use caravan_store::{MemStore, MemStoreConfig, Store};
    let keys = Keyspace::new(KEYS);
    let store = MemStore::with_config(MemStoreConfig {
        max_txn_ops: 8,
        ..Default::default()
    });
    let mut ids = Vec::new();
    for i in 0..5 {
        let id = format!("a{i}");
        let mut r = record(&id, AllocDesiredStatus::Run, false);
        r.job_id = format!("web-{i}");
        store
            .put(&keys.alloc(&id), &crate::codec::encode(&r), 0)
            .await
            .unwrap();
        let done = status(AllocClientStatus::Complete, None, 10, false);
        store
            .put(
                &keys.job_status("default", &r.job_id, "b1"),
                &crate::status_batch::encode_batch([(id.as_str(), &done, 0)]),
                0,
            )
            .await
            .unwrap();
        ids.push(id);
    }
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    for max_ops in [1, 3, 4, 8] {
        let read = crate::read_allocs(&store, &keys, &ids, max_ops)
            .await
            .unwrap();
        assert!(
            read.iter()
                .all(|a| a.as_ref().unwrap().client_status() == AllocClientStatus::Complete),
            "max_ops {max_ops}: {read:?}"
        );
    }
}

/// The guard of an allocation read holds while its status key stays as
/// the read found it, even where a batch entry is chosen over a newer
/// status key (a finished allocation under a later, stale "unknown" mark
/// of the servers), and fails once the key is written again.
#[tokio::test]
async fn a_status_guard_holds_until_the_status_key_is_written_again() {
    use caravan_store::{MemStore, Store, Txn};
    let keys = Keyspace::new(KEYS);
    let store = MemStore::default();
    let r = record("a", AllocDesiredStatus::Run, false);
    store
        .put(&keys.alloc("a"), &crate::codec::encode(&r), 0)
        .await
        .unwrap();
    let done = status(AllocClientStatus::Complete, None, 10, false);
    let finished_at = store
        .put(
            &keys.job_status("default", "web", "b1"),
            &crate::status_batch::encode_batch([("a", &done, 0)]),
            0,
        )
        .await
        .unwrap();
    // A server's mark, checked before the batch was seen: with the record.
    let unknown = status(AllocClientStatus::Unknown, None, 11, false);
    let marked = store
        .txn(
            Txn::new()
                .and_then(Op::put(keys.alloc("a"), crate::codec::encode(&r)))
                .and_then(Op::put(keys.alloc_status("a"), encode_status(unknown))),
        )
        .await
        .unwrap()
        .revision;
    let read = crate::read_alloc(&store, &keys, "a")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.client_status(), AllocClientStatus::Complete);
    assert_eq!(read.client_modify_revision, finished_at);
    assert!(finished_at < marked);
    let guarded = |read: &Allocation| Txn::new().when(status_guard(&keys, read));
    assert!(store.txn(guarded(&read)).await.unwrap().succeeded);
    // An equality guard on the chosen status would never hold again.
    let equal = Compare::mod_revision(keys.alloc_status("a"), CompareOp::Equal, finished_at);
    assert!(!store.txn(Txn::new().when(equal)).await.unwrap().succeeded);
    // Another mark: the guard of the earlier read fails, a new read's holds.
    let lost = status(AllocClientStatus::Lost, None, 12, false);
    store
        .txn(
            Txn::new()
                .and_then(Op::put(keys.alloc("a"), crate::codec::encode(&r)))
                .and_then(Op::put(keys.alloc_status("a"), encode_status(lost))),
        )
        .await
        .unwrap();
    assert!(!store.txn(guarded(&read)).await.unwrap().succeeded);
    let again = crate::read_alloc(&store, &keys, "a")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.client_status(), AllocClientStatus::Lost);
    assert!(store.txn(guarded(&again)).await.unwrap().succeeded);
}

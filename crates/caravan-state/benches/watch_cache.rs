//! The watch cache at scale: 1,000,000 allocations over 5,000 nodes and
//! 1,000 jobs. Prints memory per alloc and load rate, then measures with
//! criterion the rate of applying watch events (decode + apply, the
//! informer's hot path) and the time to take a snapshot.
//!
//! `cargo bench -p caravan-state --bench watch_cache`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use caravan_proto::{
    AllocClientStatus, AllocDeploymentStatus, AllocDesiredStatus, AllocMetric, AllocatedPort,
    AllocatedResources, AllocatedSharedResources, AllocatedTaskResources, Allocation,
    NodeScoreMeta, TaskEvent, TaskState,
};
use caravan_state::{AllocDetail, Change, Keyspace, Snapshot, Tables, decode_alloc, encode};
use caravan_store::{Event, EventKind, KeyValue};
use criterion::{Criterion, Throughput};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

/// Allocations loaded, unless `CARAVAN_BENCH_ALLOCS` says otherwise (for
/// quick runs; the recorded numbers use the default).
const ALLOCS: usize = 1_000_000;
const NODES: usize = 5_000;
const JOBS: usize = 1_000;
/// Allocs whose life cycle the event pool replays.
const CYCLED: usize = 20_000;
/// Allocs decoded alone to tell the messages' memory from the tables'.
const SAMPLE: usize = 100_000;
const BATCH: usize = 1_000;

fn uuid(rng: &mut Pcg64) -> String {
    uuid::Builder::from_random_bytes(rng.random())
        .into_uuid()
        .to_string()
}

fn port(label: &str, value: u32, to: u32) -> AllocatedPort {
    AllocatedPort {
        label: label.into(),
        value,
        to,
        host_ip: "10.1.2.3".into(),
    }
}

fn task_event(kind: &str, at: i64, message: &str) -> TaskEvent {
    TaskEvent {
        r#type: kind.into(),
        time_unix_ns: at,
        message: message.into(),
        ..Default::default()
    }
}

/// An allocation shaped like a running service alloc of a Nomad cluster:
/// one task with cpu, memory and two ports, a group port, three task events
/// and the placement metrics the scheduler leaves.
fn realistic_alloc(rng: &mut Pcg64, nodes: &[String], jobs: &[String]) -> Allocation {
    let job = &jobs[rng.random_range(0..jobs.len())];
    let node_ix = rng.random_range(0..nodes.len());
    let now = 1_700_000_000_000_000_000 + rng.random_range(0..1_000_000_000_000i64);
    let mut res = AllocatedResources::default();
    res.tasks.insert(
        "server".into(),
        AllocatedTaskResources {
            cpu_mhz: [100, 250, 500, 1000][rng.random_range(0..4)],
            memory_mb: [128, 256, 512, 1024][rng.random_range(0..4)],
            memory_max_mb: 0,
            reserved_cores: vec![],
            ports: vec![
                port("http", rng.random_range(20000..32000), 8080),
                port("metrics", rng.random_range(20000..32000), 9090),
            ],
            devices: vec![],
        },
    );
    res.shared = Some(AllocatedSharedResources {
        disk_mb: 300,
        ports: vec![port("admin", rng.random_range(20000..32000), 0)],
        networks: vec![],
    });
    let mut task_states = std::collections::BTreeMap::new();
    task_states.insert(
        "server".into(),
        TaskState {
            state: "running".into(),
            started_at_unix_ns: now + 2_000_000_000,
            events: vec![
                task_event("Received", now, "Task received by client"),
                task_event("Task Setup", now + 1_000_000, "Building Task Directory"),
                task_event("Started", now + 2_000_000_000, "Task started by client"),
            ],
            ..Default::default()
        },
    );
    let mut scores = std::collections::BTreeMap::new();
    scores.insert("binpack".into(), rng.random::<f64>());
    scores.insert("job-anti-affinity".into(), 0.0);
    let mut available = std::collections::BTreeMap::new();
    available.insert("dc1".into(), NODES as u32);
    Allocation {
        id: uuid(rng),
        name: format!("{job}.server[{}]", rng.random_range(0..1000)),
        namespace: "default".into(),
        job_id: job.clone(),
        job_version: 3,
        task_group: "server".into(),
        node_id: nodes[node_ix].clone(),
        node_name: format!("node-{node_ix:05}"),
        eval_id: uuid(rng),
        deployment_id: uuid(rng),
        deployment_status: Some(AllocDeploymentStatus {
            healthy: Some(true),
            timestamp_unix_ns: now + 12_000_000_000,
            canary: false,
        }),
        desired_status: AllocDesiredStatus::Run as i32,
        client_status: AllocClientStatus::Running as i32,
        task_states: task_states.into(),
        allocated_resources: Some(res),
        metrics: Some(Box::new(AllocMetric {
            nodes_evaluated: 12,
            nodes_available: available,
            score_meta: vec![NodeScoreMeta {
                node_id: nodes[node_ix].clone(),
                scores,
                norm_score: 0.6,
            }],
            allocation_time_ns: 120_000,
            ..Default::default()
        })),
        create_time_unix_ns: now,
        modify_time_unix_ns: now + 12_000_000_000,
        job_modify_revision: 42,
        ..Default::default()
    }
}

fn event(ks: &Keyspace, kind: EventKind, a: &Allocation, revision: i64) -> Event {
    Event {
        kind,
        kv: KeyValue {
            key: ks.alloc(&a.id),
            value: match kind {
                EventKind::Put => encode(a),
                EventKind::Delete => Vec::new(),
            },
            create_revision: revision,
            mod_revision: revision,
            version: 1,
            lease: 0,
        },
    }
}

/// How much of each allocation the cache keeps: `CARAVAN_BENCH_DETAIL=
/// scheduling` measures the lean copy the workers, broker, plan applier and
/// deployment-watcher keep, `without-metrics` the gateway's; anything else
/// the full copy.
fn detail() -> AllocDetail {
    match std::env::var("CARAVAN_BENCH_DETAIL").as_deref() {
        Ok("scheduling") => AllocDetail::Scheduling,
        Ok("without-metrics") => AllocDetail::WithoutMetrics,
        _ => AllocDetail::Full,
    }
}

/// Decodes and applies one event, as the informer does.
fn apply(ks: &Keyspace, tables: &mut Tables, e: &Event) {
    let key = ks.parse(&e.kv.key).expect("bench keys parse");
    let change = Change::from_event(&key, e.kind, &e.kv, detail()).expect("bench values decode");
    tables.apply_all(change);
    tables.advance_to(e.kv.mod_revision);
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// Loads the cache with `ALLOCS` allocations the way a list does (encoded
/// values decoded one by one), reporting memory and load rate.
fn load(ks: &Keyspace, rng: &mut Pcg64, allocs: usize) -> Tables {
    let nodes: Vec<String> = (0..NODES).map(|_| uuid(rng)).collect();
    let jobs: Vec<String> = (0..JOBS).map(|i| format!("service-{i:04}")).collect();
    let before = rss_bytes();
    let messages: Vec<Arc<Allocation>> = (0..SAMPLE)
        .map(|_| {
            let a = realistic_alloc(rng, &nodes, &jobs);
            Arc::new(decode_alloc(&event(ks, EventKind::Put, &a, 1).kv, detail()).expect("decodes"))
        })
        .collect();
    let after = rss_bytes();
    println!(
        "decoded messages alone: {:.0} bytes/alloc (RSS over {SAMPLE})",
        (after - before) as f64 / SAMPLE as f64
    );
    drop(messages);
    let before = rss_bytes();
    let mut tables = Tables::new();
    let mut encoded_bytes = 0usize;
    let mut applying = Duration::ZERO;
    for i in 0..allocs {
        let a = realistic_alloc(rng, &nodes, &jobs);
        let e = event(ks, EventKind::Put, &a, i as i64 + 1);
        encoded_bytes += e.kv.value.len();
        let t = Instant::now();
        apply(ks, &mut tables, &e);
        applying += t.elapsed();
    }
    let after = rss_bytes();
    println!(
        "loaded {allocs} allocs on {NODES} nodes, {JOBS} jobs: {:.0} allocs/s decode+apply, \
         {:.0} encoded bytes/alloc, RSS +{:.0} MiB = {:.0} bytes/alloc",
        allocs as f64 / applying.as_secs_f64(),
        encoded_bytes as f64 / allocs as f64,
        after.saturating_sub(before) as f64 / (1 << 20) as f64,
        after.saturating_sub(before) as f64 / allocs as f64,
    );
    tables
}

/// The `CYCLED` allocs the replayed events rewrite, spread over the table.
fn cycled(tables: &Tables) -> Vec<Arc<Allocation>> {
    let step = (tables.alloc_count() / CYCLED).max(1);
    tables
        .allocs()
        .step_by(step)
        .take(CYCLED)
        .cloned()
        .collect()
}

/// A cycle of events that leaves the tables as it found them, so criterion
/// can replay it forever: for each of `CYCLED` allocs, a client status
/// update in place, a stop (usage freed), a delete, a new placement, a move
/// to another node and a move back. Interleaved across allocs in chunks so
/// consecutive events touch unrelated keys, as a real watch does.
fn event_pool(ks: &Keyspace, tables: &Tables, rng: &mut Pcg64) -> Vec<Event> {
    let originals = cycled(tables);
    let node_ids: Vec<String> = tables
        .allocs()
        .take(64)
        .map(|a| a.node_id.clone())
        .collect();
    let mut pool = Vec::with_capacity(CYCLED * 6);
    let mut rev = tables.revision();
    for chunk in originals.chunks(BATCH / 6) {
        for phase in 0..6 {
            for a in chunk {
                rev += 1;
                let mut b = Allocation::clone(a);
                let e = match phase {
                    0 => {
                        b.client_description = "Tasks are running".into();
                        event(ks, EventKind::Put, &b, rev)
                    }
                    1 => {
                        b.desired_status = AllocDesiredStatus::Stop as i32;
                        event(ks, EventKind::Put, &b, rev)
                    }
                    2 => event(ks, EventKind::Delete, &b, rev),
                    3 => event(ks, EventKind::Put, &b, rev),
                    4 => {
                        b.node_id = node_ids[rng.random_range(0..node_ids.len())].clone();
                        event(ks, EventKind::Put, &b, rev)
                    }
                    _ => event(ks, EventKind::Put, &b, rev),
                };
                pool.push(e);
            }
        }
    }
    pool
}

/// Client status updates in place, the most common event at scale (an
/// allocation is placed once, then reported running and healthy): two
/// rewrites of each of `CYCLED` allocs, same node and job, interleaved
/// across allocs.
fn status_pool(ks: &Keyspace, tables: &Tables) -> Vec<Event> {
    let originals = cycled(tables);
    let mut rev = tables.revision();
    let mut pool = Vec::with_capacity(CYCLED * 2);
    for report in ["Tasks are running", "Deployment healthy"] {
        for a in &originals {
            rev += 1;
            let mut b = Allocation::clone(a);
            b.client_description = report.into();
            pool.push(event(ks, EventKind::Put, &b, rev));
        }
    }
    pool
}

fn main() {
    let mut criterion = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(10))
        .configure_from_args();
    let ks = Keyspace::default();
    let mut rng = Pcg64::seed_from_u64(0x0ca2_a7a2);
    let allocs = std::env::var("CARAVAN_BENCH_ALLOCS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(ALLOCS);
    let mut tables = load(&ks, &mut rng, allocs);
    let pool = event_pool(&ks, &tables, &mut rng);
    let decoded: Vec<(Change, i64)> = pool
        .iter()
        .filter_map(|e| {
            let key = ks.parse(&e.kv.key).ok()?;
            Some((
                Change::from_event(&key, e.kind, &e.kv, detail()).ok()??,
                e.kv.mod_revision,
            ))
        })
        .collect();

    let mut group = criterion.benchmark_group("watch_cache_1m_allocs");
    group.throughput(Throughput::Elements(BATCH as u64));
    let mut at = 0;
    group.bench_function("decode_and_apply_1000_events", |b| {
        b.iter(|| {
            for i in at..at + BATCH {
                apply(&ks, &mut tables, &pool[i % pool.len()]);
            }
            at = (at + BATCH) % pool.len();
        })
    });
    let mut held = Snapshot::new(tables.clone());
    group.bench_function("decode_and_apply_1000_events_snapshot_per_batch", |b| {
        b.iter(|| {
            // A worker holds a snapshot while the cache moves on: every
            // batch then copies the paths it touches.
            held = Snapshot::new(tables.clone());
            for i in at..at + BATCH {
                apply(&ks, &mut tables, &pool[i % pool.len()]);
            }
            at = (at + BATCH) % pool.len();
        })
    });
    let statuses = status_pool(&ks, &tables);
    let mut at_status = 0;
    group.bench_function("status_updates_in_place_1000_snapshot_per_batch", |b| {
        b.iter(|| {
            held = Snapshot::new(tables.clone());
            for i in at_status..at_status + BATCH {
                apply(&ks, &mut tables, &statuses[i % statuses.len()]);
            }
            at_status = (at_status + BATCH) % statuses.len();
        })
    });
    group.bench_function("apply_only_1000_decoded_events", |b| {
        b.iter(|| {
            for i in at..at + BATCH {
                let (change, rev) = &decoded[i % decoded.len()];
                tables.apply(change.clone());
                tables.advance_to(*rev);
            }
            at = (at + BATCH) % decoded.len();
        })
    });
    group.throughput(Throughput::Elements(1));
    let one = &pool[0];
    group.bench_function("decode_one_alloc", |b| {
        b.iter(|| {
            let key = ks.parse(&one.kv.key).expect("parses");
            black_box(Change::from_event(&key, one.kind, &one.kv, detail()).expect("decodes"))
        })
    });
    group.bench_function("snapshot", |b| {
        b.iter(|| black_box(Snapshot::new(tables.clone())))
    });
    group.finish();
    drop(held);
    criterion.final_summary();
}

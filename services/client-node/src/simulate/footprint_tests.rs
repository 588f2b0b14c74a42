//! What a simulated node keeps per running allocation, counted on the heap
//! of the test's own thread (the runtime is single-threaded, so every
//! runner's allocations land there).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, AllocatedResources, AllocatedSharedResources,
    AllocatedTaskResources, Allocation, Job, JobType, Node, NodeAllocations, Resources, SmallMap,
    Task, TaskGroup,
};
use tokio_util::sync::CancellationToken;

use crate::alloc_runner::NodeContext;
use crate::driver::{Drivers, string_value};
use crate::node_allocs::NodeAllocs;
use crate::status_reporter::StatusSink;

/// Allocations the measure is spread over.
const ALLOCS: usize = 2_000;

/// The e2e bench's job: one group of one mock task that runs for an hour.
fn bench_job() -> Job {
    let mut config = prost_types::Struct::default();
    config.fields.insert("run_for".into(), string_value("1h"));
    let mut job = Job {
        id: "bench-00001".into(),
        name: "bench-00001".into(),
        namespace: "default".into(),
        datacenters: vec!["dc1".into()],
        task_groups: vec![TaskGroup {
            name: "g".into(),
            count: ALLOCS as i32,
            tasks: vec![Task {
                name: "t".into(),
                driver: "mock".into(),
                config: Some(config),
                resources: Some(Resources {
                    cpu_mhz: 100,
                    memory_mb: 64,
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    job.set_type(JobType::Service);
    job
}

/// Alloc `index` of `job` as the gateway sends it (no placement metrics).
fn placed(job: &Job, index: usize) -> Allocation {
    let mut a = Allocation {
        id: uuid::Uuid::new_v4().to_string(),
        name: format!("{}.g[{index}]", job.id),
        namespace: job.namespace.clone(),
        job_id: job.id.clone(),
        task_group: "g".into(),
        node_id: uuid::Uuid::new_v4().to_string(),
        node_name: "sim-17".into(),
        eval_id: uuid::Uuid::new_v4().to_string(),
        allocated_resources: Some(AllocatedResources {
            tasks: SmallMap::from([(
                "t".to_string(),
                AllocatedTaskResources {
                    cpu_mhz: 100,
                    memory_mb: 64,
                    ..Default::default()
                },
            )]),
            shared: Some(AllocatedSharedResources {
                disk_mb: 300,
                ..Default::default()
            }),
        }),
        create_time_unix_ns: 1,
        modify_time_unix_ns: 1,
        create_revision: 7,
        modify_revision: 7,
        alloc_modify_revision: 7,
        job_modify_revision: 3,
        ..Default::default()
    };
    a.set_desired_status(AllocDesiredStatus::Run);
    a.set_client_status(AllocClientStatus::Pending);
    a
}

#[test]
fn a_running_simulated_alloc_keeps_few_bytes() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let shutdown = CancellationToken::new();
    let ctx = Arc::new(NodeContext {
        node: Arc::new(Node::default()),
        drivers: Drivers::simulated(),
        data_dir: None,
        state: None,
        sink: StatusSink::new(ALLOCS),
        shutdown: shutdown.clone(),
        stop_on_shutdown: false,
        max_kill_timeout: Duration::from_secs(30),
        jobs: Default::default(),
        live: Default::default(),
        simulated: true,
        contact: Default::default(),
        api: None,
        hook_config: Default::default(),
    });
    let mut allocs = NodeAllocs::new(ctx.clone(), BTreeMap::new());
    let job = bench_job();
    let mut statuses: HashMap<String, AllocClientStatus> = HashMap::with_capacity(ALLOCS);
    let held = allocation_counter::measure(|| {
        rt.block_on(async {
            // Built here, as the node decodes them from its stream.
            let set: Vec<Allocation> = (0..ALLOCS).map(|i| placed(&job, i)).collect();
            allocs.apply(NodeAllocations {
                allocs: set,
                jobs: vec![job],
                revision: 7,
                full: true,
                ..Default::default()
            });
            // Every alloc reports running (the sink holds the newest
            // report of each until it is sent; this takes them).
            while statuses.len() < ALLOCS
                || statuses.values().any(|s| *s != AllocClientStatus::Running)
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let sent = ctx.sink.take();
                allocation_counter::opt_out(|| {
                    for u in &sent {
                        statuses.insert(u.alloc_id.clone(), u.client_status());
                    }
                });
            }
        });
    });
    let per_alloc = held.bytes_current / ALLOCS as i64;
    eprintln!(
        "a running simulated alloc holds {per_alloc} B in {} heap blocks",
        held.count_current / ALLOCS as i64
    );
    // About 1.9 KB measured (the allocation and task states kept encoded
    // while parked), with room for noise.
    assert!(
        per_alloc <= 2_400,
        "{per_alloc} B held per running simulated alloc"
    );
    shutdown.cancel();
    rt.block_on(allocs.join_all());
}

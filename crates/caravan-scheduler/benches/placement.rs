//! Placement throughput in Nomad's scheduler benchmark shape: nodes in 3
//! datacenters and 25 racks (`meta.rack`), one job whose `set_contains_any`
//! constraint half of the racks satisfy, `process()` timed with a planner that
//! accepts every plan.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use caravan_proto::{
    Constraint, DriverInfo, EvalStatus, Evaluation, Job, JobType, Node, NodeResources, NodeStatus,
    Plan, PlanResult, Resources, SchedulingEligibility, Spread, Task, TaskGroup,
};
use caravan_scheduler::harness::FixtureState;
use caravan_scheduler::{PlanOutcome, Planner, PlannerError, compute_node_class, process};
use criterion::{Criterion, Throughput, criterion_group};

const RACKS: usize = 25;

fn nodes(n: usize) -> Vec<Node> {
    (0..n)
        .map(|i| {
            let mut node = Node {
                id: format!("{i:08x}-0000-4000-8000-000000000000"),
                name: format!("node-{i}"),
                datacenter: format!("dc{}", i % 3 + 1),
                status: NodeStatus::Ready as i32,
                scheduling_eligibility: SchedulingEligibility::Eligible as i32,
                resources: Some(NodeResources {
                    cpu_mhz: 4000,
                    memory_mb: 8192,
                    disk_mb: 100 * 1024,
                    ..Default::default()
                }),
                ..Default::default()
            };
            node.attributes.insert("kernel.name".into(), "linux".into());
            node.attributes
                .insert("unique.hostname".into(), node.name.clone());
            node.meta.insert("rack".into(), format!("r{}", i % RACKS));
            node.drivers.insert(
                "exec".into(),
                DriverInfo {
                    detected: true,
                    healthy: true,
                    ..Default::default()
                },
            );
            node.computed_class = compute_node_class(&node);
            node
        })
        .collect()
}

fn job(ty: JobType, count: i32, spread: bool) -> Job {
    let half: Vec<String> = (0..RACKS).step_by(2).map(|r| format!("r{r}")).collect();
    Job {
        id: "bench".into(),
        name: "bench".into(),
        namespace: "default".into(),
        r#type: ty as i32,
        priority: 50,
        datacenters: vec!["dc1".into(), "dc2".into(), "dc3".into()],
        constraints: vec![Constraint {
            l_target: "${meta.rack}".into(),
            r_target: half.join(","),
            operand: "set_contains_any".into(),
        }],
        spreads: if spread {
            vec![Spread {
                attribute: "${meta.rack}".into(),
                weight: 100,
                targets: vec![],
            }]
        } else {
            vec![]
        },
        task_groups: vec![TaskGroup {
            name: "web".into(),
            count,
            tasks: vec![Task {
                name: "server".into(),
                driver: "exec".into(),
                resources: Some(Resources {
                    cpu_mhz: 100,
                    memory_mb: 100,
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Accepts every plan as is and remembers how many allocations it placed.
#[derive(Default)]
struct AcceptAll {
    placed: usize,
}

impl Planner for AcceptAll {
    type State = Arc<FixtureState>;

    fn submit_plan(&mut self, plan: Plan) -> Result<PlanOutcome<Self::State>, PlannerError> {
        self.placed = plan.node_allocation.values().map(|l| l.allocs.len()).sum();
        Ok(PlanOutcome {
            result: PlanResult {
                node_allocation: plan.node_allocation,
                node_update: plan.node_update,
                alloc_revision: 2,
                ..Default::default()
            },
            refreshed: None,
        })
    }
    fn create_eval(&mut self, _: Evaluation) -> Result<(), PlannerError> {
        Ok(())
    }
    fn update_eval(&mut self, _: Evaluation) -> Result<(), PlannerError> {
        Ok(())
    }
    fn reblock_eval(&mut self, _: Evaluation) -> Result<(), PlannerError> {
        Ok(())
    }
}

fn scenario(node_count: usize, job: Job) -> (Arc<FixtureState>, Evaluation, usize) {
    let mut state = FixtureState::default();
    state.revision = 1;
    for n in nodes(node_count) {
        state.upsert_node(n);
    }
    let eval = Evaluation {
        id: "6d5b9b3c-2f0e-4d7a-9d8c-bench0000001".into(),
        namespace: "default".into(),
        priority: 50,
        r#type: match job.r#type() {
            JobType::System => "system".into(),
            _ => "service".into(),
        },
        triggered_by: "job-register".into(),
        job_id: job.id.clone(),
        status: EvalStatus::Pending as i32,
        ..Default::default()
    };
    state.upsert_job(job);
    let state = Arc::new(state);
    let mut p = AcceptAll::default();
    let _ = process(&eval, state.clone(), &mut p, 0);
    (state, eval, p.placed)
}

fn cases() -> [(&'static str, usize, Job); 5] {
    [
        (
            "service/5000-nodes/no-spread",
            5_000,
            job(JobType::Service, 1_000, false),
        ),
        (
            "service/5000-nodes/rack-spread",
            5_000,
            job(JobType::Service, 1_000, true),
        ),
        (
            "service/10000-nodes/no-spread",
            10_000,
            job(JobType::Service, 1_000, false),
        ),
        (
            "service/10000-nodes/rack-spread",
            10_000,
            job(JobType::Service, 1_000, true),
        ),
        ("system/10000-nodes", 10_000, job(JobType::System, 1, false)),
    ]
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("process");
    g.sample_size(20);
    for (name, n, job) in cases() {
        let (state, eval, placed) = scenario(n, job);
        assert!(placed > 0, "{name} placed nothing");
        g.throughput(Throughput::Elements(placed as u64));
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut p = AcceptAll::default();
                let r = process(black_box(&eval), state.clone(), &mut p, 0);
                black_box((r.is_ok(), p.placed))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);

/// CPU time this thread has run, from the scheduler's own accounting, so a
/// shared machine's waiting time is not counted.
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// `PLACEMENT_CPU=1 cargo bench --bench placement`: placements per second of
/// CPU time, for each case (`PLACEMENT_CASE=<substring>` picks cases, e.g. to
/// profile one).
fn cpu_report() {
    let only = std::env::var("PLACEMENT_CASE").unwrap_or_default();
    for (name, n, job) in cases() {
        if !name.contains(only.as_str()) {
            continue;
        }
        let (state, eval, placed) = scenario(n, job);
        // The fastest of several batches: on a shared machine other work only
        // ever adds time (cache pressure included), never removes it.
        let (batches, runs) = (12u32, 5u32);
        let mut best = f64::MAX;
        let w0 = std::time::Instant::now();
        for _ in 0..batches {
            let Some(t0) = thread_cpu_ns() else {
                println!("{name}: no schedstat on this system");
                return;
            };
            for _ in 0..runs {
                let mut p = AcceptAll::default();
                let _ = black_box(process(&eval, state.clone(), &mut p, 0));
            }
            let cpu = thread_cpu_ns().unwrap_or(t0) - t0;
            best = best.min(cpu as f64 / f64::from(runs));
        }
        let wall = w0.elapsed().as_nanos() as f64 / f64::from(batches * runs);
        println!(
            "{name}: {placed} placements, {:.2} ms CPU per process() (best batch), {:.0} placements/s of CPU; mean wall {:.2} ms ({:.0}/s)",
            best / 1e6,
            placed as f64 * 1e9 / best,
            wall / 1e6,
            placed as f64 * 1e9 / wall,
        );
    }
}

fn main() {
    if std::env::var_os("PLACEMENT_CPU").is_some() {
        cpu_report();
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}

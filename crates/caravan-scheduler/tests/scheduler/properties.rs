//! Properties of every plan, over random clusters and jobs: whatever the
//! nodes (sizes, racks, existing allocations, one going down) and the jobs
//! (service, batch, system; counts, sizes, constraints, spreads,
//! `distinct_hosts`; scaled between rounds), the scheduler's plans never
//! over-commit a node, never give two live allocations one name, and never put
//! two allocations of a `distinct_hosts` job or group on one node.
//!
//! Each case is seeded by its number; a failure names the seed, and
//! `CARAVAN_PROPERTY_SEED=<seed>` replays that case alone.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};

use crate::common::{alloc, constraint, eval, node, reclass};
use caravan_model::AllocExt;
use caravan_proto::{
    Allocation, Constraint, Job, JobType, Node, NodeStatus, Resources, Spread, Task, TaskGroup,
};
use caravan_scheduler::NodeUsage;
use caravan_scheduler::harness::Harness;
use caravan_scheduler::rng::Rng;

/// Cases per run: enough to meet every shape of job, quick in a debug build.
const CASES: u64 = 300;

/// What one case asks of the cluster.
struct Case {
    rng: Rng,
    h: Harness,
    jobs: Vec<Job>,
    evals: usize,
}

impl Case {
    fn new(seed: u64) -> Case {
        let mut rng = Rng::from_seed_parts(&[b"scheduler-properties", &seed.to_le_bytes()]);
        let mut h = Harness::new();
        let nodes = 1 + rng.below(10);
        for i in 0..nodes {
            h.state.upsert_node(random_node(&mut rng, i));
        }
        Case {
            rng,
            h,
            jobs: Vec::new(),
            evals: 0,
        }
    }

    /// Fills some nodes part-way with allocations of a job that is not evaluated.
    fn add_existing_allocs(&mut self) {
        let old = crate::common::service("old", 0);
        self.h.state.upsert_job(old.clone());
        let nodes: Vec<Node> = self.nodes();
        let mut index = 0;
        for n in nodes {
            let wanted = self.rng.below(4);
            for _ in 0..wanted {
                let a = alloc(&format!("old-{index}"), &old, index, &n.id);
                let mut on_node = self.live_on(&n.id);
                on_node.push(a.clone());
                if caravan_scheduler::resources::allocs_fit(&n, on_node.iter()).is_ok() {
                    self.h.state.upsert_alloc(a);
                    index += 1;
                }
            }
        }
    }

    fn nodes(&self) -> Vec<Node> {
        use caravan_scheduler::State;
        self.h.state.nodes().iter().map(|n| (**n).clone()).collect()
    }

    fn live_on(&self, node_id: &str) -> Vec<Allocation> {
        self.h
            .state
            .allocs()
            .filter(|a| a.node_id == node_id && a.is_live())
            .map(|a| (**a).clone())
            .collect()
    }

    /// Registers a job and runs the scheduler on its eval.
    fn register(&mut self, job: Job, trigger: &str) {
        self.h.state.upsert_job(job.clone());
        match self.jobs.iter_mut().find(|j| j.id == job.id) {
            Some(j) => *j = job.clone(),
            None => self.jobs.push(job.clone()),
        }
        self.evaluate(&job, trigger);
    }

    fn evaluate(&mut self, job: &Job, trigger: &str) {
        self.evals += 1;
        let e = eval(&format!("e{}", self.evals), job, trigger);
        // A scheduler error (say, a job no node can run) is an outcome like
        // any other here; the properties hold whatever it decided.
        let _ = self.h.process(&e);
    }

    /// Every property, against the state the applied plans left.
    fn check(&self, seed: u64) {
        for (i, result) in self.h.results.iter().enumerate() {
            assert!(
                result.rejected_nodes.is_empty(),
                "seed {seed}: plan {i} asked for more than nodes {:?} hold: {:?}",
                result.rejected_nodes,
                result.rejection_reasons
            );
        }
        let live: Vec<&Allocation> = self
            .h
            .state
            .allocs()
            .filter(|a| a.is_live())
            .map(|a| &**a)
            .collect();
        for n in self.nodes() {
            let on_node: Vec<&Allocation> =
                live.iter().copied().filter(|a| a.node_id == n.id).collect();
            let used = NodeUsage::from_allocs(on_node.iter().copied());
            let cap = n.resources.clone().unwrap_or_default();
            assert!(
                used.cpu_mhz <= cap.cpu_mhz
                    && used.memory_mb <= cap.memory_mb
                    && used.disk_mb <= cap.disk_mb,
                "seed {seed}: node {} over-committed: {used:?} of {cap:?}",
                n.id
            );
            caravan_scheduler::resources::allocs_fit(&n, on_node.iter().copied())
                .unwrap_or_else(|e| panic!("seed {seed}: node {} over-committed: {e}", n.id));
        }
        // A system job's allocations are all `<job>.<group>[0]`, one per node,
        // as in Nomad; every other name is unique.
        let system: BTreeSet<&str> = self
            .jobs
            .iter()
            .filter(|j| j.r#type() == JobType::System)
            .map(|j| j.id.as_str())
            .collect();
        let mut names = BTreeSet::new();
        for a in &live {
            let node = if system.contains(a.job_id.as_str()) {
                a.node_id.as_str()
            } else {
                ""
            };
            assert!(
                names.insert((&a.namespace, &a.name, node)),
                "seed {seed}: two live allocations named {}",
                a.name
            );
        }
        for job in &self.jobs {
            let of_job = live.iter().filter(|a| a.job_id == job.id);
            let mut per_node: BTreeMap<(&str, &str), usize> = BTreeMap::new();
            let mut per_job_node: BTreeMap<&str, usize> = BTreeMap::new();
            for a in of_job {
                *per_node.entry((&a.node_id, &a.task_group)).or_default() += 1;
                *per_job_node.entry(&a.node_id).or_default() += 1;
            }
            if distinct_hosts(&job.constraints) {
                assert!(
                    per_job_node.values().all(|&c| c <= 1),
                    "seed {seed}: job {} has distinct_hosts but shares a node: {per_job_node:?}",
                    job.id
                );
            }
            for tg in &job.task_groups {
                let once = distinct_hosts(&tg.constraints) || job.r#type() == JobType::System;
                if once {
                    for ((node, group), c) in &per_node {
                        assert!(
                            *group != tg.name || *c <= 1,
                            "seed {seed}: {} group {} has {c} allocations on {node}",
                            job.id,
                            tg.name
                        );
                    }
                }
            }
        }
    }
}

fn distinct_hosts(constraints: &[Constraint]) -> bool {
    constraints.iter().any(|c| c.operand == "distinct_hosts")
}

/// A ready node of random size in one of two datacenters and three racks.
fn random_node(rng: &mut Rng, i: usize) -> Node {
    let dc = ["dc1", "dc2"][rng.below(2)];
    let cpu = 1000 + 500 * rng.below(15) as u64;
    let mem = 1024 + 512 * rng.below(30) as u64;
    let mut n = node(&format!("n{i}"), dc, cpu, mem);
    n.meta.insert("rack".into(), format!("r{}", rng.below(3)));
    reclass(n)
}

/// A job of `ty` with one to three groups of random counts, sizes and rules.
fn random_job(rng: &mut Rng, id: &str, ty: JobType) -> Job {
    let mut job = crate::common::job(id, ty, 1);
    let groups = 1 + rng.below(3);
    job.task_groups = (0..groups).map(|g| random_group(rng, g)).collect();
    if rng.below(4) == 0 {
        job.constraints
            .push(constraint("", "distinct_hosts", "true"));
    }
    if rng.below(5) == 0 {
        job.constraints
            .push(constraint("${node.datacenter}", "=", "dc1"));
    }
    if rng.below(3) == 0 {
        job.spreads.push(Spread {
            attribute: "${meta.rack}".into(),
            weight: 50,
            targets: Vec::new(),
        });
    }
    job
}

fn random_group(rng: &mut Rng, g: usize) -> TaskGroup {
    let mut tg = TaskGroup {
        name: format!("g{g}"),
        count: i32::try_from(rng.below(9)).unwrap(),
        tasks: vec![Task {
            name: "server".into(),
            driver: "exec".into(),
            resources: Some(Resources {
                cpu_mhz: 100 + 100 * u32::try_from(rng.below(20)).unwrap(),
                memory_mb: 64 + 64 * u32::try_from(rng.below(40)).unwrap(),
                ..Default::default()
            }),
            ..Default::default()
        }],
        ..Default::default()
    };
    if rng.below(4) == 0 {
        tg.constraints
            .push(constraint("", "distinct_hosts", "true"));
    }
    if rng.below(4) == 0 {
        tg.spreads.push(Spread {
            attribute: "${node.datacenter}".into(),
            weight: 100,
            targets: Vec::new(),
        });
    }
    tg
}

/// Runs one case; returns how many allocations its plans placed.
fn run_case(seed: u64) -> usize {
    let mut c = Case::new(seed);
    if c.rng.below(2) == 0 {
        c.add_existing_allocs();
    }
    let jobs = 1 + c.rng.below(4);
    for j in 0..jobs {
        let ty = [JobType::Service, JobType::Batch, JobType::System][c.rng.below(3)];
        let job = random_job(&mut c.rng, &format!("j{j}"), ty);
        c.register(job, "job-register");
        c.check(seed);
    }
    // Second round: rescale some jobs, and maybe lose a node.
    for j in 0..c.jobs.len() {
        if c.rng.below(2) == 0 {
            let mut job = c.jobs[j].clone();
            for tg in &mut job.task_groups {
                tg.count = i32::try_from(c.rng.below(9)).unwrap();
            }
            job.version += 1;
            job.job_modify_revision += 1;
            c.register(job, "job-register");
            c.check(seed);
        }
    }
    if c.rng.below(3) == 0 {
        let nodes = c.nodes();
        let mut down = nodes[c.rng.below(nodes.len())].clone();
        down.status = NodeStatus::Down as i32;
        c.h.state.upsert_node(down);
        for job in c.jobs.clone() {
            c.evaluate(&job, "node-update");
            c.check(seed);
        }
    }
    c.h.results
        .iter()
        .flat_map(|r| r.node_allocation.values())
        .map(|l| l.allocs.len())
        .sum()
}

#[test]
fn plans_never_over_commit_nor_repeat_names() {
    if let Some(seed) = std::env::var("CARAVAN_PROPERTY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        run_case(seed);
        return;
    }
    let placed: usize = (0..CASES).map(run_case).sum();
    // The properties are only worth something if the cases place plenty.
    assert!(placed > 10 * CASES as usize, "only {placed} placements");
}

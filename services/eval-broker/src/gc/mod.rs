//! Garbage collection: which terminal evals and allocs, dead jobs, down
//! nodes and terminal deployments are old enough to go, by Nomad's rules,
//! never taking what a live object still names. A pure function of a
//! snapshot, cutoffs and a clock; the [`collector`] deletes what it picks.

pub mod collector;
pub mod registrations;
pub mod status_batches;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use caravan_model::{
    AllocExt, DeploymentStatusExt, EvalStatusExt, JobExt, JobTypeExt, job_finished,
};
use caravan_proto::{AllocClientStatus, Allocation, Deployment, Evaluation, Job, Node, NodeStatus};
use caravan_state::Tables;

use crate::config::GcConfig;

/// The newest last-change time (Unix ns) at which each kind of object is
/// old enough to collect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcCutoffs {
    /// Evals other than batch.
    pub eval: i64,
    /// Batch evals.
    pub batch_eval: i64,
    /// Jobs (by their last submission).
    pub job: i64,
    /// Down nodes (by their last status change).
    pub node: i64,
    /// Deployments.
    pub deployment: i64,
}

fn ms_to_ns(ms: u64) -> i64 {
    i64::try_from(ms)
        .unwrap_or(i64::MAX)
        .saturating_mul(1_000_000)
}

impl GcCutoffs {
    /// The cutoffs of a sweep at `now_ns` with the configured thresholds.
    pub fn at(now_ns: i64, gc: &GcConfig) -> Self {
        let before = |ms| now_ns.saturating_sub(ms_to_ns(ms));
        GcCutoffs {
            eval: before(gc.eval_threshold_ms),
            batch_eval: before(gc.batch_eval_threshold_ms),
            job: before(gc.job_threshold_ms),
            node: before(gc.node_threshold_ms),
            deployment: before(gc.deployment_threshold_ms),
        }
    }

    /// A forced sweep (`system gc`): every terminal object is old enough.
    pub fn forced() -> Self {
        GcCutoffs {
            eval: i64::MAX,
            batch_eval: i64::MAX,
            job: i64::MAX,
            node: i64::MAX,
            deployment: i64::MAX,
        }
    }
}

/// One object to delete, as it was judged (its mod revision guards the
/// delete).
#[derive(Clone, Debug)]
pub enum Doomed {
    /// An evaluation.
    Eval(Arc<Evaluation>),
    /// An allocation.
    Alloc(Arc<Allocation>),
    /// A job: its current version and every kept version.
    Job(Arc<Job>),
    /// A client node.
    Node(Arc<Node>),
    /// A deployment.
    Deployment(Arc<Deployment>),
    /// A client's status key whose allocation is gone (a report that
    /// landed just after the allocation was collected), at its revision.
    OrphanStatus(String, i64),
}

/// Objects that go together, after the units named in `after` went.
#[derive(Clone, Debug, Default)]
pub struct GcUnit {
    /// What to delete; a job comes last, after what belonged to it.
    pub objects: Vec<Doomed>,
    /// Indexes of earlier units that must have gone first (a parent job
    /// waits for its children).
    pub after: Vec<usize>,
}

/// How many objects of each kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcCounts {
    /// Evaluations.
    pub evals: u64,
    /// Allocations.
    pub allocs: u64,
    /// Jobs.
    pub jobs: u64,
    /// Nodes.
    pub nodes: u64,
    /// Deployments.
    pub deployments: u64,
    /// Service registrations of allocations no longer live.
    pub registrations: u64,
    /// Client status batches freed.
    pub status_batches: u64,
}

impl GcCounts {
    /// Counts the objects of a unit.
    pub fn add(&mut self, unit: &GcUnit) {
        for o in &unit.objects {
            match o {
                Doomed::Eval(_) => self.evals += 1,
                Doomed::Alloc(_) | Doomed::OrphanStatus(..) => self.allocs += 1,
                Doomed::Job(_) => self.jobs += 1,
                Doomed::Node(_) => self.nodes += 1,
                Doomed::Deployment(_) => self.deployments += 1,
            }
        }
    }

    /// Whether nothing is counted.
    pub fn is_empty(&self) -> bool {
        *self == GcCounts::default()
    }
}

/// Whether a job is dead for garbage collection: nothing of it runs or
/// waits ([`caravan_model::job_finished`]).
pub fn job_dead(snap: &Tables, job: &Job) -> bool {
    job_finished(
        job,
        snap.allocs_by_job(&job.namespace, &job.id).map(Arc::as_ref),
        snap.evals_by_job(&job.namespace, &job.id).map(Arc::as_ref),
    )
}

/// Whether a job may be collected once old enough (Nomad's `gc` index):
/// templates only when stopped; other jobs when dead and either stopped or
/// batch-like, which finish on their own.
pub fn job_collectable(snap: &Tables, job: &Job) -> bool {
    if job.is_template() {
        return job.stop;
    }
    if !job_dead(snap, job) {
        return false;
    }
    job.stop || job.r#type().runs_to_completion()
}

/// What one sweep knows about the live objects.
struct Live {
    /// Evals a non-terminal eval or alloc names.
    evals: BTreeSet<String>,
    /// Allocs a non-terminal alloc names as its predecessor.
    allocs: BTreeSet<String>,
    /// Deployments a non-terminal alloc belongs to.
    deployments: BTreeSet<String>,
}

impl Live {
    fn of(snap: &Tables) -> Self {
        let mut live = Live {
            evals: BTreeSet::new(),
            allocs: BTreeSet::new(),
            deployments: BTreeSet::new(),
        };
        for e in snap.evals().filter(|e| !e.status().is_terminal()) {
            for id in [&e.previous_eval, &e.next_eval, &e.blocked_eval] {
                if !id.is_empty() {
                    live.evals.insert(id.clone());
                }
            }
        }
        for a in snap.allocs().filter(|a| !a.is_terminal()) {
            for id in [&a.eval_id, &a.followup_eval_id] {
                if !id.is_empty() {
                    live.evals.insert(id.clone());
                }
            }
            if !a.previous_allocation.is_empty() {
                live.allocs.insert(a.previous_allocation.clone());
            }
            if !a.deployment_id.is_empty() {
                live.deployments.insert(a.deployment_id.clone());
            }
        }
        live
    }
}

/// The sweep's view: the snapshot, its cutoffs, the clock, and indexes
/// built once.
struct Sweep<'a> {
    snap: &'a Tables,
    cut: GcCutoffs,
    now_ns: i64,
    live: Live,
    allocs_by_eval: BTreeMap<&'a str, Vec<&'a Arc<Allocation>>>,
    dead: BTreeMap<(&'a str, &'a str), bool>,
}

impl<'a> Sweep<'a> {
    fn new(snap: &'a Tables, cut: GcCutoffs, now_ns: i64) -> Self {
        let mut allocs_by_eval: BTreeMap<&str, Vec<&Arc<Allocation>>> = BTreeMap::new();
        for a in snap.allocs() {
            allocs_by_eval
                .entry(a.eval_id.as_str())
                .or_default()
                .push(a);
        }
        Sweep {
            snap,
            cut,
            now_ns,
            live: Live::of(snap),
            allocs_by_eval,
            dead: BTreeMap::new(),
        }
    }

    fn job(&self, namespace: &str, job_id: &str) -> Option<&'a Arc<Job>> {
        self.snap.job(namespace, job_id)
    }

    fn is_dead(&mut self, job: &'a Job) -> bool {
        let snap = self.snap;
        *self
            .dead
            .entry((job.namespace.as_str(), job.id.as_str()))
            .or_insert_with(|| job_dead(snap, job))
    }

    /// Nomad's `allocGCEligible`, plus: an alloc a live alloc names as its
    /// predecessor stays.
    fn alloc_eligible(&mut self, a: &Allocation, job: Option<&'a Job>, cutoff: i64) -> bool {
        if !a.is_terminal() || a.modify_time_unix_ns > cutoff {
            return false;
        }
        if a.client_status() == AllocClientStatus::Running || self.live.allocs.contains(&a.id) {
            return false;
        }
        let Some(job) = job else { return true };
        if job.stop || self.is_dead(job) {
            return true;
        }
        if !a.is_reschedule_candidate() {
            return true;
        }
        let policy = job
            .task_groups
            .iter()
            .find(|tg| tg.name == a.task_group)
            .and_then(|tg| tg.reschedule_policy.as_ref());
        let Some(policy) = policy else { return true };
        if !policy.unlimited && policy.attempts == 0 {
            return true;
        }
        if !a.next_allocation.is_empty() {
            return true;
        }
        if policy.unlimited {
            return false;
        }
        // Its replacement may still be owed while the last reschedule is
        // within the policy's interval.
        let last = a
            .reschedule_tracker
            .as_ref()
            .and_then(|t| t.events.last())
            .map(|e| e.reschedule_time_unix_ns);
        match last {
            None => false,
            Some(at) => self.now_ns.saturating_sub(at) > policy.interval_ns,
        }
    }

    /// Nomad's `gcEval`: whether the eval may go, and which of its allocs
    /// may go (with it, or on their own when the eval stays).
    fn eval_collectable(
        &mut self,
        eval: &'a Evaluation,
        cutoff: i64,
        allow_batch: bool,
    ) -> (bool, Vec<&'a Arc<Allocation>>) {
        if !eval.status().is_terminal() || eval.modify_time_unix_ns > cutoff {
            return (false, Vec::new());
        }
        let job = self.job(&eval.namespace, &eval.job_id).map(|j| j.as_ref());
        let allocs = self
            .allocs_by_eval
            .get(eval.id.as_str())
            .cloned()
            .unwrap_or_default();
        if eval.r#type == "batch"
            && let Some(job) = job
        {
            let dead = self.is_dead(job);
            let collect = dead && (job.stop || allow_batch);
            if !collect {
                // Terminal allocs of older versions may go; the eval stays
                // so a running batch job doesn't run its finished work again.
                let old = allocs
                    .into_iter()
                    .filter(|a| a.job_version < job.version)
                    .filter(|a| self.alloc_eligible(a, Some(job), cutoff))
                    .collect();
                return (false, old);
            }
        }
        let mut all = !self.live.evals.contains(&eval.id);
        let mut eligible = Vec::new();
        for a in allocs {
            if self.alloc_eligible(a, job, cutoff) {
                eligible.push(a);
            } else {
                all = false;
            }
        }
        (all, eligible)
    }
}

/// Everything a sweep at `now_ns` with `cut` may delete, in the order to
/// delete it.
pub fn select(snap: &Tables, cut: GcCutoffs, now_ns: i64) -> Vec<GcUnit> {
    let mut sweep = Sweep::new(snap, cut, now_ns);
    let mut units = Vec::new();
    let mut taken_evals = BTreeSet::new();
    let mut taken_allocs = BTreeSet::new();
    let mut taken_deployments = BTreeSet::new();

    let mut children: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
    for job in snap.jobs().filter(|j| !j.parent_id.is_empty()) {
        children
            .entry((job.namespace.as_str(), job.parent_id.as_str()))
            .or_default()
            .push(job.id.as_str());
    }
    // Children before parents, so a parent can wait for them.
    let (plain, parents): (Vec<&Arc<Job>>, Vec<&Arc<Job>>) = snap
        .jobs()
        .partition(|j| !children.contains_key(&(j.namespace.as_str(), j.id.as_str())));
    let records = launch_records(snap);
    let mut job_unit: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for job in plain.into_iter().chain(parents) {
        let key = (job.namespace.as_str(), job.id.as_str());
        if records.contains(&key) {
            continue;
        }
        let mut after = Vec::new();
        if let Some(kids) = children.get(&key) {
            match kids
                .iter()
                .map(|k| job_unit.get(&(key.0, *k)).copied())
                .collect::<Option<Vec<usize>>>()
            {
                Some(deps) => after = deps,
                None => continue,
            }
        }
        if let Some(objects) = job_garbage(&mut sweep, job) {
            for o in &objects {
                match o {
                    Doomed::Eval(e) => taken_evals.insert(e.id.clone()),
                    Doomed::Alloc(a) => taken_allocs.insert(a.id.clone()),
                    Doomed::Deployment(d) => taken_deployments.insert(d.id.clone()),
                    _ => false,
                };
            }
            job_unit.insert(key, units.len());
            units.push(GcUnit { objects, after });
        }
    }

    for eval in snap.evals().filter(|e| !taken_evals.contains(&e.id)) {
        let cutoff = if eval.r#type == "batch" {
            cut.batch_eval
        } else {
            cut.eval
        };
        let (with_eval, allocs) = sweep.eval_collectable(eval, cutoff, false);
        let mut objects: Vec<Doomed> = allocs
            .into_iter()
            .filter(|a| taken_allocs.insert(a.id.clone()))
            .map(|a| Doomed::Alloc(Arc::clone(a)))
            .collect();
        if with_eval {
            objects.push(Doomed::Eval(Arc::clone(eval)));
        }
        if !objects.is_empty() {
            units.push(GcUnit {
                objects,
                after: Vec::new(),
            });
        }
    }

    // Allocs whose eval went in an earlier sweep while they stayed.
    for a in snap.allocs() {
        if taken_allocs.contains(&a.id) || snap.eval(&a.eval_id).is_some() {
            continue;
        }
        let job = sweep.job(&a.namespace, &a.job_id).map(|j| j.as_ref());
        if sweep.alloc_eligible(a, job, cut.eval) {
            units.push(GcUnit {
                objects: vec![Doomed::Alloc(Arc::clone(a))],
                after: Vec::new(),
            });
        }
    }

    for (alloc_id, revision) in snap.orphan_statuses() {
        units.push(GcUnit {
            objects: vec![Doomed::OrphanStatus(alloc_id.to_owned(), revision)],
            after: Vec::new(),
        });
    }

    for node in snap.nodes() {
        let old = node.status() == NodeStatus::Down
            && node.status_updated_at_unix_ns <= cut.node
            && !snap.heartbeat_live(&node.id);
        if old && snap.allocs_by_node(&node.id).all(|a| a.is_terminal()) {
            units.push(GcUnit {
                objects: vec![Doomed::Node(Arc::clone(node))],
                after: Vec::new(),
            });
        }
    }

    for d in snap.deployments() {
        if taken_deployments.contains(&d.id)
            || !d.status().is_terminal()
            || d.modify_time_unix_ns > cut.deployment
            || sweep.live.deployments.contains(&d.id)
        {
            continue;
        }
        units.push(GcUnit {
            objects: vec![Doomed::Deployment(Arc::clone(d))],
            after: Vec::new(),
        });
    }
    units
}

/// The newest child of every periodic parent still launching: it is the
/// parent's record of its last launch (see [`crate::periodic::last_launch`]),
/// so a new leader after a collection neither launches a run already made
/// nor replays one. It stays, with its batch evals, until a newer launch
/// or the parent's stop.
fn launch_records(snap: &Tables) -> BTreeSet<(&str, &str)> {
    snap.jobs()
        .filter(|j| crate::periodic::is_active(j))
        .filter_map(|parent| {
            crate::periodic::children(snap, parent)
                .max_by_key(|(launch, _)| *launch)
                .map(|(_, child)| (child.namespace.as_str(), child.id.as_str()))
        })
        .collect()
}

/// A dead job with everything that belongs to it, when all of it may go:
/// every eval and alloc collectable by the job's cutoff (batch evals
/// included), every deployment terminal and unnamed by live allocs.
fn job_garbage<'a>(sweep: &mut Sweep<'a>, job: &'a Arc<Job>) -> Option<Vec<Doomed>> {
    let snap = sweep.snap;
    if !job_collectable(snap, job) || job.submit_time_unix_ns > sweep.cut.job {
        return None;
    }
    let mut objects = Vec::new();
    let mut allocs = BTreeSet::new();
    for eval in snap.evals_by_job(&job.namespace, &job.id) {
        let (collect, eval_allocs) = sweep.eval_collectable(eval, sweep.cut.job, true);
        if !collect {
            return None;
        }
        for a in eval_allocs {
            allocs.insert(a.id.as_str());
            objects.push(Doomed::Alloc(Arc::clone(a)));
        }
        objects.push(Doomed::Eval(Arc::clone(eval)));
    }
    for a in snap.allocs_by_job(&job.namespace, &job.id) {
        if allocs.contains(a.id.as_str()) {
            continue;
        }
        if !sweep.alloc_eligible(a, Some(job), sweep.cut.job) {
            return None;
        }
        objects.push(Doomed::Alloc(Arc::clone(a)));
    }
    for d in snap.deployments_by_job(&job.namespace, &job.id) {
        if !d.status().is_terminal() || sweep.live.deployments.contains(&d.id) {
            return None;
        }
        objects.push(Doomed::Deployment(Arc::clone(d)));
    }
    objects.push(Doomed::Job(Arc::clone(job)));
    Some(objects)
}

#[cfg(test)]
mod tests;

//! The cluster reconciler: compares what a job wants with what runs and decides,
//! per task group, what to place, stop, migrate, replace and update.

pub mod filter;
mod group;
pub mod names;
pub mod reconnect;

use std::collections::BTreeMap;
use std::sync::Arc;

use caravan_model::{AllocExt, DeploymentStatusExt};
use caravan_proto::{
    AllocClientStatus, Allocation, Deployment, DeploymentStatus, DeploymentStatusUpdate,
    DesiredUpdates, Evaluation, Job, TaskGroup,
};

use crate::rng::Rng;
use filter::{AllocSet, Tainted};

/// Stop description: the group no longer needs the allocation.
pub const ALLOC_NOT_NEEDED: &str = "alloc not needed due to job update";
/// Stop description: replaced by a new version.
pub const ALLOC_UPDATING: &str = "alloc is being updated due to job update";
/// Stop description: moved off a draining node.
pub const ALLOC_MIGRATING: &str = "alloc is being migrated";
/// Stop description: its node is down.
pub const ALLOC_LOST: &str = "alloc is lost since its node is down";
/// Stop description: replaced after failing.
pub const ALLOC_RESCHEDULED: &str = "alloc was rescheduled because it failed";
/// Stop description: its node is tainted and it is not replaced.
pub const ALLOC_NODE_TAINTED: &str = "alloc not needed as node is tainted";

/// A new allocation to place.
#[derive(Debug, Clone)]
pub struct Placement {
    /// Its name.
    pub name: String,
    /// Its task group.
    pub group: String,
    /// The allocation it replaces.
    pub previous: Option<Arc<Allocation>>,
    /// Placed as a canary.
    pub canary: bool,
    /// Replaces a failed allocation.
    pub reschedule: bool,
    /// Replaces a lost allocation.
    pub lost: bool,
    /// A non-canary replacement while canaries are unpromoted: it runs the
    /// job version the group ran before the canaries, not the new one.
    pub downgrade: bool,
}

/// An allocation to stop.
#[derive(Debug, Clone)]
pub struct Stop {
    /// The allocation.
    pub alloc: Arc<Allocation>,
    /// Why.
    pub description: &'static str,
    /// A client status to record with the stop (lost).
    pub client_status: Option<AllocClientStatus>,
}

/// How an allocation follows a job update.
#[derive(Debug, Clone)]
pub enum UpdateKind {
    /// Stop it and place a new one.
    Destructive,
    /// Update it where it runs.
    InPlace(Box<Allocation>),
    /// Leave it as it is (a finished allocation whose tasks did not change).
    Ignore,
}

/// What the reconciler decided.
#[derive(Debug, Default)]
pub struct Results {
    /// A deployment to create.
    pub deployment: Option<Deployment>,
    /// The current deployment (created or existing) the placements belong to.
    pub active_deployment: Option<Deployment>,
    /// Status changes of deployments.
    pub deployment_updates: Vec<DeploymentStatusUpdate>,
    /// New allocations.
    pub place: Vec<Placement>,
    /// Allocations replaced by a new version (stop then place).
    pub destructive: Vec<Arc<Allocation>>,
    /// Allocations updated where they run.
    pub inplace: Vec<(Arc<Allocation>, Allocation)>,
    /// Allocations to stop.
    pub stop: Vec<Stop>,
    /// Allocations whose bookkeeping changes (follow-up eval ids).
    pub attribute_updates: Vec<Allocation>,
    /// Per group counts for annotations.
    pub desired: BTreeMap<String, DesiredUpdates>,
    /// Evaluations that replace failed allocations after their delay, and
    /// those that end the window of unknown allocations.
    pub followup_evals: Vec<Evaluation>,
    /// Allocations of disconnected nodes marked unknown.
    pub disconnect_updates: Vec<Allocation>,
    /// Allocations back from a disconnected node that keep running.
    pub reconnect_updates: Vec<Allocation>,
}

/// Everything the reconciler reads.
pub struct Input<'a> {
    /// The job; `None` when it was purged.
    pub job: Option<&'a Job>,
    /// Batch semantics (completed allocations are done).
    pub batch: bool,
    /// Service jobs run deployments.
    pub deployments: bool,
    /// The newest deployment of the job.
    pub deployment: Option<Arc<Deployment>>,
    /// All allocations of the job.
    pub allocs: &'a [Arc<Allocation>],
    /// Tainted nodes among the allocations'.
    pub tainted: &'a Tainted,
    /// The evaluation.
    pub eval: &'a Evaluation,
    /// Current time.
    pub now: i64,
}

/// Runs the reconciler. `update` decides how an allocation of an older version
/// follows the job.
pub fn reconcile(
    input: &Input<'_>,
    rng: &mut Rng,
    update: &mut dyn FnMut(&Arc<Allocation>, &Job, &TaskGroup) -> UpdateKind,
) -> Results {
    let mut results = Results::default();
    let mut by_group: BTreeMap<String, AllocSet> = BTreeMap::new();
    for a in input.allocs {
        by_group
            .entry(a.task_group.clone())
            .or_default()
            .insert(a.id.clone(), a.clone());
    }
    let job = match input.job {
        Some(j) if !j.stop => j,
        _ => {
            stop_everything(input, &by_group, &mut results);
            return results;
        }
    };

    let mut current: Option<Deployment> = None;
    let mut old: Option<Arc<Deployment>> = None;
    if let Some(d) = &input.deployment {
        let same_version = d.job_version == job.version
            && (d.job_create_revision == 0
                || job.create_revision == 0
                || d.job_create_revision == job.create_revision);
        if !same_version {
            if d.status().is_active() {
                results.deployment_updates.push(DeploymentStatusUpdate {
                    deployment_id: d.id.clone(),
                    status: DeploymentStatus::Cancelled as i32,
                    status_description: "Cancelled due to newer version of job".into(),
                });
            }
            old = Some(d.clone());
        } else if d.status().is_active() || d.status() == DeploymentStatus::Failed {
            current = Some((**d).clone());
        }
    }
    let had_deployment = current.is_some();
    let mut reconciler = group::GroupReconciler {
        input,
        job,
        rng,
        deployment: current,
        created: false,
        old_deployment: old,
        results: &mut results,
    };
    let mut complete = true;
    for tg in &job.task_groups {
        let set = by_group.remove(&tg.name).unwrap_or_default();
        complete &= reconciler.compute(tg, set, update);
    }
    let deployment = reconciler.deployment.take();
    let created = reconciler.created;
    // Groups the job no longer has.
    for (name, set) in by_group {
        let d = results.desired.entry(name).or_default();
        for a in set.values().filter(|a| !a.is_terminal()) {
            d.stop += 1;
            results.stop.push(Stop {
                alloc: a.clone(),
                description: ALLOC_NOT_NEEDED,
                client_status: None,
            });
        }
    }
    if let Some(d) = deployment {
        if created {
            results.deployment = Some(d.clone());
        } else if had_deployment && complete && d.status() == DeploymentStatus::Running {
            results.deployment_updates.push(DeploymentStatusUpdate {
                deployment_id: d.id.clone(),
                status: DeploymentStatus::Successful as i32,
                status_description: "Deployment completed successfully".into(),
            });
        }
        results.active_deployment = Some(d);
    }
    results
}

fn stop_everything(
    input: &Input<'_>,
    by_group: &BTreeMap<String, AllocSet>,
    results: &mut Results,
) {
    if let Some(d) = &input.deployment
        && d.status().is_active()
    {
        results.deployment_updates.push(DeploymentStatusUpdate {
            deployment_id: d.id.clone(),
            status: DeploymentStatus::Cancelled as i32,
            status_description: "Cancelled because job is stopped".into(),
        });
    }
    for (name, set) in by_group {
        let d = results.desired.entry(name.clone()).or_default();
        for a in set.values() {
            if a.is_terminal() {
                continue;
            }
            d.stop += 1;
            let lost = matches!(input.tainted.get(&a.node_id), Some(None))
                || input.tainted.get(&a.node_id).is_some_and(|n| {
                    n.as_ref()
                        .is_some_and(|n| matches!(n.status(), caravan_proto::NodeStatus::Down))
                });
            results.stop.push(Stop {
                alloc: a.clone(),
                description: if lost { ALLOC_LOST } else { ALLOC_NOT_NEEDED },
                client_status: lost.then_some(AllocClientStatus::Lost),
            });
        }
    }
}

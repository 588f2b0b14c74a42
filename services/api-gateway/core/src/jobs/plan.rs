//! `job plan`: a dry run of the scheduler on a cache snapshot with the
//! submitted job in place of the registered one. Nothing is written; the
//! answer carries the plan's annotations, placement failures and a diff.

use std::collections::BTreeMap;
use std::sync::Arc;

use caravan_jobspec::JobDiff;
use caravan_model::{JobExt, NomadName, now_unix_ns, trigger};
use caravan_proto::{
    AllocMetric, Allocation, Deployment, EvalStatus, Evaluation, Job, Node, Plan, PlanAnnotations,
    PlanResult, SchedulerConfiguration,
};
use caravan_scheduler::{PlanOutcome, Planner, PlannerError, State};
use caravan_state::Snapshot;
use caravan_store::Revision;

use crate::error::{GatewayError, Result};
use crate::gateway::Gateway;
use crate::jobs::register::prepare;
use crate::jobs::versions::spec_changed;

/// What a registration of the job would do.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// Per task group counts of what the plan would change, and preemptions.
    pub annotations: Option<PlanAnnotations>,
    /// Per task group: why placements would fail.
    pub failed_tg_allocs: BTreeMap<String, AllocMetric>,
    /// The registered job's spec revision, for `job run -check-index`.
    pub job_modify_revision: Revision,
    /// Evaluations the scheduler would create (blocked, follow-ups).
    pub created_evals: Vec<Evaluation>,
    /// The structured diff against the registered job, when asked for.
    pub diff: Option<JobDiff>,
    /// The diff rendered as `job plan` prints it, when asked for.
    pub diff_text: String,
    /// Non-fatal advice about the job.
    pub warnings: Vec<String>,
}

/// The cache snapshot with the planned job standing in for the registered one.
struct PlanState {
    snap: Snapshot,
    job: Arc<Job>,
}

impl PlanState {
    fn is_planned(&self, namespace: &str, job_id: &str) -> bool {
        self.job.namespace == namespace && self.job.id == job_id
    }
}

impl State for PlanState {
    fn revision(&self) -> i64 {
        self.snap.revision()
    }
    fn job(&self, namespace: &str, job_id: &str) -> Option<Arc<Job>> {
        if self.is_planned(namespace, job_id) {
            return Some(self.job.clone());
        }
        self.snap.job(namespace, job_id).cloned()
    }
    fn job_version(&self, namespace: &str, job_id: &str, version: u64) -> Option<Arc<Job>> {
        if self.is_planned(namespace, job_id) && version == self.job.version {
            return Some(self.job.clone());
        }
        self.snap.job_version(namespace, job_id, version).cloned()
    }
    fn node(&self, node_id: &str) -> Option<Arc<Node>> {
        self.snap.node(node_id).cloned()
    }
    fn nodes(&self) -> Vec<Arc<Node>> {
        self.snap.nodes().cloned().collect()
    }
    fn alloc(&self, alloc_id: &str) -> Option<Arc<Allocation>> {
        self.snap.alloc(alloc_id).cloned()
    }
    fn allocs_by_job(&self, namespace: &str, job_id: &str) -> Vec<Arc<Allocation>> {
        self.snap
            .allocs_by_job(namespace, job_id)
            .cloned()
            .collect()
    }
    fn allocs_by_node(&self, node_id: &str) -> Vec<Arc<Allocation>> {
        self.snap.allocs_by_node(node_id).cloned().collect()
    }
    fn deployments_by_job(&self, namespace: &str, job_id: &str) -> Vec<Arc<Deployment>> {
        self.snap
            .deployments_by_job(namespace, job_id)
            .cloned()
            .collect()
    }
    fn scheduler_config(&self) -> Option<Arc<SchedulerConfiguration>> {
        self.snap.scheduler_config().cloned()
    }
}

/// A planner that commits nothing: every plan "succeeds" in full and is kept
/// for its annotations.
#[derive(Default)]
struct DryRun {
    annotations: Option<PlanAnnotations>,
    created: Vec<Evaluation>,
    finished: Option<Evaluation>,
}

impl Planner for DryRun {
    type State = PlanState;

    fn submit_plan(&mut self, plan: Plan) -> Result<PlanOutcome<PlanState>, PlannerError> {
        if plan.annotations.is_some() {
            self.annotations = plan.annotations.clone();
        }
        let result = PlanResult {
            node_update: plan.node_update,
            node_allocation: plan.node_allocation,
            node_preemptions: plan.node_preemptions,
            deployment: plan.deployment,
            deployment_updates: plan.deployment_updates,
            refresh_revision: 0,
            alloc_revision: plan.snapshot_revision,
            ..Default::default()
        };
        Ok(PlanOutcome {
            result,
            refreshed: None,
        })
    }
    fn create_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError> {
        self.created.push(eval);
        Ok(())
    }
    fn update_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError> {
        self.finished = Some(eval);
        Ok(())
    }
    fn reblock_eval(&mut self, eval: Evaluation) -> Result<(), PlannerError> {
        self.created.push(eval);
        Ok(())
    }
}

/// Nomad's names of the desired-update counts in a plan's diff.
fn desired_counts(u: &caravan_proto::DesiredUpdates) -> BTreeMap<String, u64> {
    [
        ("ignore", u.ignore),
        ("create", u.place),
        ("migrate", u.migrate),
        ("destroy", u.stop),
        ("in-place update", u.in_place_update),
        ("create/destroy update", u.destructive_update),
        ("canary", u.canary),
        ("preemptions", u.preemptions),
    ]
    .into_iter()
    .filter(|(_, n)| *n > 0)
    .map(|(k, n)| (k.to_string(), n))
    .collect()
}

/// Plans `job` against the cache without writing anything.
pub async fn plan(gw: &Gateway, job: Job, want_diff: bool) -> Result<Planned> {
    let (mut job, warnings) = prepare(job, gw.config.max_job_allocs)?;
    let snap = gw.cache.snapshot();
    let existing = snap.job(&job.namespace, &job.id).cloned();
    let job_modify_revision = existing.as_ref().map_or(0, |j| j.job_modify_revision);
    match existing.as_deref() {
        Some(old) if !spec_changed(old, &job) => {
            job.version = old.version;
            job.job_modify_revision = old.job_modify_revision;
        }
        other => {
            job.version = other.map_or(0, |o| o.version.saturating_add(1));
            // A revision newer than anything placed, as the real write's would be.
            job.job_modify_revision = snap.revision().saturating_add(1);
        }
    }
    let mut diff = match want_diff {
        true => Some(caravan_jobspec::diff(existing.as_deref(), &job, true)?),
        false => None,
    };
    let mut planner = DryRun::default();
    if !job.is_template() {
        let mut eval = Evaluation {
            id: caravan_model::fresh_id(),
            namespace: job.namespace.clone(),
            priority: job.priority,
            r#type: job.r#type().nomad_name().to_string(),
            triggered_by: trigger::JOB_REGISTER.into(),
            job_id: job.id.clone(),
            job_modify_revision: job.job_modify_revision,
            annotate_plan: true,
            ..Default::default()
        };
        eval.set_status(EvalStatus::Pending);
        let state = PlanState {
            snap,
            job: Arc::new(job.clone()),
        };
        planner = tokio::task::spawn_blocking(move || {
            caravan_scheduler::process(&eval, state, &mut planner, now_unix_ns())
                .map(|()| planner)
                .map_err(|e| GatewayError::Unavailable(format!("planning failed: {e}")))
        })
        .await
        .map_err(|e| GatewayError::Unavailable(format!("planning was interrupted: {e}")))??;
    }
    if let (Some(d), Some(a)) = (diff.as_mut(), planner.annotations.as_ref()) {
        for tg in &mut d.task_groups {
            if let Some(u) = a.desired_tg_updates.get(&tg.name) {
                tg.updates = desired_counts(u);
            }
        }
    }
    let diff_text = diff
        .as_ref()
        .map(|d| caravan_jobspec::render_plan(d, false))
        .unwrap_or_default();
    Ok(Planned {
        annotations: planner.annotations,
        failed_tg_allocs: planner
            .finished
            .map(|e| e.failed_tg_allocs)
            .unwrap_or_default(),
        job_modify_revision,
        created_evals: planner.created,
        diff,
        diff_text,
        warnings,
    })
}

//! The evaluations the watcher creates, and the batching that keeps a burst
//! of allocations turning healthy from becoming a burst of evaluations: one
//! per deployment per window, as Nomad's watcher batches its evals.

use std::collections::BTreeMap;
use std::time::Duration;

use caravan_model::{NomadName, trigger};
use caravan_proto::{Deployment, EvalStatus, Evaluation, Job};
use tokio::time::Instant;

/// A pending `deployment-watcher` evaluation of `job` for deployment `d`.
/// `job_modify_revision` is the job's (0 when the job is written in the same
/// transaction, which resolves to that transaction's revision).
pub fn for_deployment(d: &Deployment, job: &Job, now_unix_ns: i64) -> Evaluation {
    let priority = if d.eval_priority > 0 {
        d.eval_priority
    } else if job.priority > 0 {
        job.priority
    } else {
        50
    };
    let mut eval = Evaluation {
        id: caravan_model::fresh_id(),
        namespace: d.namespace.clone(),
        priority,
        r#type: job.r#type().nomad_name().to_string(),
        triggered_by: trigger::DEPLOYMENT_WATCHER.to_string(),
        job_id: d.job_id.clone(),
        job_modify_revision: job.job_modify_revision,
        deployment_id: d.id.clone(),
        create_time_unix_ns: now_unix_ns,
        modify_time_unix_ns: now_unix_ns,
        // A deployment step starts its own trace (a child of the current
        // span, e.g. a promote request's, when there is one).
        trace_context: caravan_runtime::trace::of(&tracing::info_span!(
            "deployment.eval",
            deployment = %d.id,
            job = %d.job_id
        )),
        ..Default::default()
    };
    eval.set_status(EvalStatus::Pending);
    eval
}

/// Deployments waiting for an evaluation, each due one window after the
/// first reason for it.
#[derive(Debug, Clone)]
pub struct EvalBatcher {
    window: Duration,
    pending: BTreeMap<String, Instant>,
}

impl EvalBatcher {
    /// A batcher that holds each deployment's first request for `window`.
    pub fn new(window: Duration) -> Self {
        EvalBatcher {
            window,
            pending: BTreeMap::new(),
        }
    }

    /// Asks for an evaluation of `deployment_id`; requests made before the
    /// first is due join it.
    pub fn request(&mut self, deployment_id: &str, now: Instant) {
        self.pending
            .entry(deployment_id.to_string())
            .or_insert(now + self.window);
    }

    /// Drops the request of a deployment (it ended, or an eval was written
    /// for it another way).
    pub fn forget(&mut self, deployment_id: &str) {
        self.pending.remove(deployment_id);
    }

    /// Takes the deployments whose evaluation is due at `now`.
    pub fn due(&mut self, now: Instant) -> Vec<String> {
        let due: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &due {
            self.pending.remove(id);
        }
        due
    }

    /// When the next evaluation is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.pending.values().min().copied()
    }

    /// Whether `deployment_id` waits for an evaluation.
    #[cfg(test)]
    pub fn is_pending(&self, deployment_id: &str) -> bool {
        self.pending.contains_key(deployment_id)
    }
}

#[cfg(test)]
mod tests {
    use caravan_proto::JobType;

    use super::*;

    #[test]
    fn requests_within_a_window_make_one_eval() {
        let start = Instant::now();
        let window = Duration::from_millis(500);
        let mut b = EvalBatcher::new(window);
        b.request("d1", start);
        b.request("d1", start + Duration::from_millis(100));
        b.request("d2", start + Duration::from_millis(200));
        assert_eq!(b.next_due(), Some(start + window));
        assert!(b.due(start + Duration::from_millis(499)).is_empty());
        assert_eq!(b.due(start + window), vec!["d1".to_string()]);
        assert!(!b.is_pending("d1"));
        assert_eq!(b.next_due(), Some(start + Duration::from_millis(700)));
        b.forget("d2");
        assert_eq!(b.next_due(), None);
        assert!(b.due(start + Duration::from_secs(5)).is_empty());
        // A request after a flush starts a new window.
        b.request("d1", start + Duration::from_secs(6));
        assert_eq!(b.next_due(), Some(start + Duration::from_secs(6) + window));
    }

    #[test]
    fn the_eval_carries_the_jobs_type_and_priority_and_the_deployment() {
        let mut job = Job {
            id: "web".into(),
            priority: 70,
            job_modify_revision: 12,
            ..Default::default()
        };
        job.set_type(JobType::Service);
        let d = Deployment {
            id: "d1".into(),
            namespace: "default".into(),
            job_id: "web".into(),
            ..Default::default()
        };
        let e = for_deployment(&d, &job, 5);
        assert_eq!(e.triggered_by, "deployment-watcher");
        assert_eq!(e.r#type, "service");
        assert_eq!((e.priority, e.job_modify_revision), (70, 12));
        assert_eq!(e.deployment_id, "d1");
        assert_eq!(e.status(), EvalStatus::Pending);
        assert_eq!(e.create_time_unix_ns, 5);
        let d = Deployment {
            eval_priority: 90,
            ..d
        };
        assert_eq!(for_deployment(&d, &job, 5).priority, 90);
    }
}

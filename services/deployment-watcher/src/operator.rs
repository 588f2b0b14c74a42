//! The operator's steering of a deployment through the current term:
//! promote, fail, pause or resume, and allocation health set by hand. Each
//! reads the deployment from the store, decides with [`crate::steer`], and
//! writes guarded by what it read, reading again when it lost a race.

use caravan_model::now_unix_ns;
use caravan_proto::{
    Allocation, Deployment, WatcherAllocHealthRequest, WatcherFailRequest, WatcherPauseRequest,
    WatcherPromoteRequest, WatcherResponse,
};
use caravan_state::Snapshot;
use std::time::Duration;

use crate::assess::{DESC_FAILED_BY_USER, wants_rollback};
use crate::error::WatcherError;
use crate::evals::for_deployment;
use crate::steer;
use crate::term::{LeaderTerm, allocs_of, job_for};
use crate::writes::Commit;

/// How long a request waits for the cache to reach the store's revision.
const FRESH: Duration = Duration::from_secs(5);

impl LeaderTerm {
    /// A snapshot at least as new as the store right now, so a request sees
    /// the allocation health its caller saw.
    async fn fresh_snapshot(&self) -> Result<Snapshot, WatcherError> {
        let revision = self.writer.current_revision().await?;
        Ok(self.informer.wait_for_revision(revision, FRESH).await?)
    }

    async fn stored(&self, id: &str) -> Result<Deployment, WatcherError> {
        steer::check_id(id)?;
        self.writer
            .read_deployment(id)
            .await?
            .ok_or_else(|| WatcherError::NotFound(format!("deployment not found: {id}")))
    }

    /// Answers a write and makes the loop look at the deployment again.
    fn written(&self, id: &str, eval_id: String, revision: i64) -> WatcherResponse {
        self.state.lock().dirty.insert(id.to_string());
        self.wake.notify_one();
        WatcherResponse { eval_id, revision }
    }

    /// Promotes canaries (all groups, or those named) and creates the
    /// evaluation that rolls out the rest.
    pub async fn promote(
        &self,
        req: WatcherPromoteRequest,
    ) -> Result<WatcherResponse, WatcherError> {
        let result = self.promote_inner(&req).await;
        self.check(result)
    }

    async fn promote_inner(
        &self,
        req: &WatcherPromoteRequest,
    ) -> Result<WatcherResponse, WatcherError> {
        for _ in 0..self.config.attempts() {
            let d = self.stored(&req.deployment_id).await?;
            let snap = self.fresh_snapshot().await?;
            let now = now_unix_ns();
            let next = steer::promote(&d, allocs_of(&snap, &d), req.all, &req.groups, now)?;
            let eval = for_deployment(&next, &job_for(&snap, &d), now);
            if let Commit::Done(revision) = self
                .writer
                .put_deployment(&next, d.modify_revision, Some(&eval))
                .await?
            {
                self.state.lock().batcher.forget(&d.id);
                tracing::info!(deployment_id = %d.id, eval_id = %eval.id, all = req.all, groups = ?req.groups, "deployment promoted");
                return Ok(self.written(&d.id, eval.id, revision));
            }
        }
        Err(WatcherError::Conflict(req.deployment_id.clone()))
    }

    /// Fails a deployment by hand, rolling back when it has auto-revert.
    pub async fn fail_by_operator(
        &self,
        req: WatcherFailRequest,
    ) -> Result<WatcherResponse, WatcherError> {
        let result = self.fail_inner(&req).await;
        self.check(result)
    }

    async fn fail_inner(&self, req: &WatcherFailRequest) -> Result<WatcherResponse, WatcherError> {
        for _ in 0..self.config.attempts() {
            let d = self.stored(&req.deployment_id).await?;
            steer::fail(&d)?;
            let snap = self.fresh_snapshot().await?;
            let rollback = wants_rollback(&d);
            let read_at = d.modify_revision;
            if let Ok((eval_id, revision)) = self
                .fail(&snap, d.clone(), read_at, DESC_FAILED_BY_USER, rollback)
                .await?
            {
                return Ok(self.written(&d.id, eval_id, revision));
            }
        }
        Err(WatcherError::Conflict(req.deployment_id.clone()))
    }

    /// Pauses or resumes a deployment; a resume creates an evaluation.
    pub async fn pause(&self, req: WatcherPauseRequest) -> Result<WatcherResponse, WatcherError> {
        let result = self.pause_inner(&req).await;
        self.check(result)
    }

    async fn pause_inner(
        &self,
        req: &WatcherPauseRequest,
    ) -> Result<WatcherResponse, WatcherError> {
        for _ in 0..self.config.attempts() {
            let d = self.stored(&req.deployment_id).await?;
            let now = now_unix_ns();
            let (next, needs_eval) = steer::pause(&d, req.pause, now)?;
            let eval = if needs_eval {
                let snap = self.informer.snapshot();
                Some(for_deployment(&next, &job_for(&snap, &d), now))
            } else {
                None
            };
            if let Commit::Done(revision) = self
                .writer
                .put_deployment(&next, d.modify_revision, eval.as_ref())
                .await?
            {
                if req.pause {
                    self.state.lock().batcher.forget(&d.id);
                }
                tracing::info!(deployment_id = %d.id, pause = req.pause, "deployment {}", if req.pause { "paused" } else { "resumed" });
                let eval_id = eval.map(|e| e.id).unwrap_or_default();
                return Ok(self.written(&d.id, eval_id, revision));
            }
        }
        Err(WatcherError::Conflict(req.deployment_id.clone()))
    }

    /// Sets the deployment health of allocations by hand and creates an
    /// evaluation; an unhealthy mark fails the deployment on the next step.
    pub async fn set_alloc_health(
        &self,
        req: WatcherAllocHealthRequest,
    ) -> Result<WatcherResponse, WatcherError> {
        let result = self.set_alloc_health_inner(&req).await;
        self.check(result)
    }

    async fn set_alloc_health_inner(
        &self,
        req: &WatcherAllocHealthRequest,
    ) -> Result<WatcherResponse, WatcherError> {
        steer::check_id(&req.deployment_id)?;
        let marks = steer::health_marks(&req.healthy_alloc_ids, &req.unhealthy_alloc_ids)?;
        for _ in 0..self.config.attempts() {
            let d = self.stored(&req.deployment_id).await?;
            let now = now_unix_ns();
            let mut writes = Vec::with_capacity(marks.len());
            for (alloc_id, healthy) in &marks {
                let alloc: Allocation =
                    self.writer.read_alloc(alloc_id).await?.ok_or_else(|| {
                        WatcherError::NotFound(format!("unknown alloc {alloc_id:?}"))
                    })?;
                let marked = steer::set_health(&d, &alloc, *healthy, now)?;
                writes.push((alloc, marked));
            }
            let snap = self.informer.snapshot();
            let eval = for_deployment(&d, &job_for(&snap, &d), now);
            if let Commit::Done(revision) = self.writer.put_allocs(&writes, &eval).await? {
                tracing::info!(deployment_id = %d.id, allocs = marks.len(), eval_id = %eval.id, "allocation health set by hand");
                return Ok(self.written(&d.id, eval.id, revision));
            }
        }
        Err(WatcherError::Conflict(req.deployment_id.clone()))
    }
}

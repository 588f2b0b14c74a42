//! The control API of a replica: `SchedulerWorkerService` (pause, status).

use std::sync::Arc;

use caravan_proto::scheduler_worker_service_server::SchedulerWorkerService;
use caravan_proto::{SetPausedRequest, WorkerStatusRequest, WorkerStatusResponse};
use tonic::{Request, Response, Status};

use crate::worker::WorkerPool;

/// Serves pause and status of a [`WorkerPool`].
#[derive(Debug, Clone)]
pub struct SchedulerWorkerGrpc {
    pool: Arc<WorkerPool>,
}

impl SchedulerWorkerGrpc {
    /// Serves `pool`.
    pub fn new(pool: Arc<WorkerPool>) -> Self {
        SchedulerWorkerGrpc { pool }
    }

    fn status(&self) -> WorkerStatusResponse {
        WorkerStatusResponse {
            paused: self.pool.is_paused(),
            workers: u32::try_from(self.pool.workers()).unwrap_or(u32::MAX),
            evals_processed: self.pool.processed(),
            cache_revision: self.pool.cache_revision(),
        }
    }
}

#[async_trait::async_trait]
impl SchedulerWorkerService for SchedulerWorkerGrpc {
    async fn set_paused(
        &self,
        request: Request<SetPausedRequest>,
    ) -> Result<Response<WorkerStatusResponse>, Status> {
        self.pool.set_paused(request.into_inner().paused);
        Ok(Response::new(self.status()))
    }

    async fn status(
        &self,
        _request: Request<WorkerStatusRequest>,
    ) -> Result<Response<WorkerStatusResponse>, Status> {
        Ok(Response::new(self.status()))
    }
}

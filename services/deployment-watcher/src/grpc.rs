//! The `DeploymentWatcherService` gRPC surface: each handler finds the
//! current term (or answers not-leader) and calls into it.

use std::sync::Arc;

use caravan_proto::deployment_watcher_service_server::DeploymentWatcherService;
use caravan_proto::{
    WatcherAllocHealthRequest, WatcherFailRequest, WatcherPauseRequest, WatcherPromoteRequest,
    WatcherResponse,
};
use tonic::{Request, Response, Status};

use crate::watcher::DeploymentWatcher;

/// The gRPC service of one watcher replica.
#[derive(Clone)]
pub struct DeploymentWatcherGrpc {
    watcher: Arc<DeploymentWatcher>,
}

impl DeploymentWatcherGrpc {
    /// Serves `watcher`.
    pub fn new(watcher: Arc<DeploymentWatcher>) -> Self {
        DeploymentWatcherGrpc { watcher }
    }
}

#[tonic::async_trait]
impl DeploymentWatcherService for DeploymentWatcherGrpc {
    async fn promote(
        &self,
        request: Request<WatcherPromoteRequest>,
    ) -> Result<Response<WatcherResponse>, Status> {
        let term = self.watcher.term().await?;
        Ok(Response::new(term.promote(request.into_inner()).await?))
    }

    async fn fail(
        &self,
        request: Request<WatcherFailRequest>,
    ) -> Result<Response<WatcherResponse>, Status> {
        let term = self.watcher.term().await?;
        Ok(Response::new(
            term.fail_by_operator(request.into_inner()).await?,
        ))
    }

    async fn pause(
        &self,
        request: Request<WatcherPauseRequest>,
    ) -> Result<Response<WatcherResponse>, Status> {
        let term = self.watcher.term().await?;
        Ok(Response::new(term.pause(request.into_inner()).await?))
    }

    async fn set_alloc_health(
        &self,
        request: Request<WatcherAllocHealthRequest>,
    ) -> Result<Response<WatcherResponse>, Status> {
        let term = self.watcher.term().await?;
        Ok(Response::new(
            term.set_alloc_health(request.into_inner()).await?,
        ))
    }
}

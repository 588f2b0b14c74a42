//! Deployments: reads from the cache, and steering (promote, fail, pause,
//! allocation health) forwarded to the deployment-watcher leader, which
//! owns every deployment write.

use caravan_model::DeploymentStatusExt;
use caravan_proto::deployment_watcher_service_client::DeploymentWatcherServiceClient;
use caravan_proto::{
    Deployment, QueryMeta, WatcherAllocHealthRequest, WatcherFailRequest, WatcherPauseRequest,
    WatcherPromoteRequest, WatcherResponse,
};
use caravan_runtime::grpc::propagate_trace;

use crate::error::{GatewayError, Result};
use crate::gateway::Gateway;
use crate::query::{self, Query};

/// Every deployment in the query's namespace whose id has its prefix.
pub async fn list(gw: &Gateway, query: &Query) -> (Vec<Deployment>, QueryMeta) {
    let snap = query::block(gw, query).await;
    let deployments = snap
        .deployments()
        .filter(|d| query.matches_namespace(&d.namespace) && query.matches_prefix(&d.id))
        .map(|d| (**d).clone())
        .collect();
    (deployments, query::meta(gw, &snap))
}

/// One deployment.
pub async fn get(
    gw: &Gateway,
    deployment_id: &str,
    query: &Query,
) -> Result<(Deployment, QueryMeta)> {
    let snap = query::block(gw, query).await;
    let deployment = snap
        .deployment(deployment_id)
        .map(|d| (**d).clone())
        .ok_or_else(|| GatewayError::NotFound(format!("deployment not found: {deployment_id}")))?;
    Ok((deployment, query::meta(gw, &snap)))
}

/// The deployments of one job, newest first.
pub async fn of_job(gw: &Gateway, job_id: &str, query: &Query) -> (Vec<Deployment>, QueryMeta) {
    let snap = query::block(gw, query).await;
    let mut deployments: Vec<Deployment> = snap
        .deployments_by_job(&query.namespace, job_id)
        .map(|d| (**d).clone())
        .collect();
    deployments.sort_by_key(|d| std::cmp::Reverse(d.create_revision));
    (deployments, query::meta(gw, &snap))
}

/// A steering request to the deployment-watcher.
#[derive(Debug, Clone)]
pub enum Steer {
    /// Promote canaries of all or some groups.
    Promote(WatcherPromoteRequest),
    /// Mark the deployment failed.
    Fail(WatcherFailRequest),
    /// Pause or resume it.
    Pause(WatcherPauseRequest),
    /// Set allocations' health by hand.
    AllocHealth(WatcherAllocHealthRequest),
}

impl Steer {
    fn deployment_id(&self) -> &str {
        match self {
            Steer::Promote(r) => &r.deployment_id,
            Steer::Fail(r) => &r.deployment_id,
            Steer::Pause(r) => &r.deployment_id,
            Steer::AllocHealth(r) => &r.deployment_id,
        }
    }

    /// Nomad's refusal of this request for a terminal deployment.
    fn terminal_refusal(&self) -> &'static str {
        match self {
            Steer::Promote(_) => "can't promote terminal deployment",
            Steer::Fail(_) => "can't fail terminal deployment",
            Steer::Pause(r) if r.pause => "can't pause terminal deployment",
            Steer::Pause(_) => "can't resume terminal deployment",
            Steer::AllocHealth(_) => "can't set health of allocations for a terminal deployment",
        }
    }
}

/// Forwards a steering request to the deployment-watcher leader, following
/// one leader hint if the first replica asked no longer leads.
pub async fn steer(gw: &Gateway, request: Steer) -> Result<WatcherResponse> {
    let id = request.deployment_id().to_string();
    if id.is_empty() {
        return Err(GatewayError::field(
            "deployment_id",
            "missing deployment ID",
        ));
    }
    let Some(deployment) = gw.cache.snapshot().deployment(&id).cloned() else {
        return Err(GatewayError::NotFound(format!(
            "deployment not found: {id}"
        )));
    };
    // Refused here with Nomad's words; the watcher checks again against
    // the store, should the deployment end meanwhile.
    if !deployment.status().is_followed() {
        return Err(GatewayError::FailedPrecondition(
            request.terminal_refusal().to_string(),
        ));
    }
    let mut last = None;
    for _ in 0..2 {
        let channel = gw.watcher.channel().await.map_err(GatewayError::Upstream)?;
        let mut client = DeploymentWatcherServiceClient::with_interceptor(channel, propagate_trace);
        let answer = match request.clone() {
            Steer::Promote(r) => client.promote(r).await,
            Steer::Fail(r) => client.fail(r).await,
            Steer::Pause(r) => client.pause(r).await,
            Steer::AllocHealth(r) => client.set_alloc_health(r).await,
        };
        match answer {
            Ok(resp) => return Ok(resp.into_inner()),
            Err(status) => {
                gw.watcher.on_error(&status);
                last = Some(status);
            }
        }
    }
    Err(last.map_or_else(
        || GatewayError::Unavailable("deployment-watcher unreachable".into()),
        GatewayError::Upstream,
    ))
}

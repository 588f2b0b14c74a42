//! Deployments: read, list, and steer (promote, fail, pause, alloc health).

use std::time::Duration;

use caravan_proto::deployment_service_client::DeploymentServiceClient;
use caravan_proto::{
    Deployment, DeploymentUpdateResponse, FailDeploymentRequest, GetDeploymentRequest,
    ListDeploymentsRequest, PauseDeploymentRequest, PromoteDeploymentRequest,
    SetAllocHealthRequest,
};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::transport::{GrpcChannel, MAX_MESSAGE_BYTES};
use crate::{Read, revision};

fn service(ch: GrpcChannel) -> DeploymentServiceClient<GrpcChannel> {
    DeploymentServiceClient::new(ch).max_decoding_message_size(MAX_MESSAGE_BYTES)
}

/// The deployment calls of a [`Client`]: [`Client::deployments`].
#[derive(Debug, Clone, Copy)]
pub struct Deployments<'a> {
    client: &'a Client,
}

impl<'a> Deployments<'a> {
    pub(crate) fn new(client: &'a Client) -> Self {
        Deployments { client }
    }

    /// The deployments whose ids start with `prefix`.
    ///
    /// # Errors
    ///
    /// As any read.
    pub async fn list(&self, prefix: &str) -> Result<Vec<Deployment>> {
        let req = ListDeploymentsRequest {
            options: self.client.options(prefix),
        };
        let resp = self
            .client
            .read(
                req,
                |ch, r| async move { service(ch).list_deployments(r).await },
            )
            .await?;
        Ok(resp.deployments)
    }

    /// One deployment.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when there is no such deployment.
    pub async fn get(&self, deployment_id: &str) -> Result<Deployment> {
        Ok(self
            .get_after(deployment_id, 0, Duration::ZERO)
            .await?
            .value)
    }

    /// One deployment, answered once the state is past `min_revision` (0: at
    /// once) or `wait` has passed: a blocking read.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when there is no such deployment.
    pub async fn get_after(
        &self,
        deployment_id: &str,
        min_revision: i64,
        wait: Duration,
    ) -> Result<Read<Deployment>> {
        let req = GetDeploymentRequest {
            deployment_id: deployment_id.to_string(),
            options: self.client.blocking(min_revision, wait),
        };
        let resp = self
            .client
            .read_blocking(wait, req, |ch, r| async move {
                service(ch).get_deployment(r).await
            })
            .await?;
        let value = resp
            .deployment
            .ok_or_else(|| Error::missing("deployment", deployment_id))?;
        Ok(Read {
            value,
            revision: revision(resp.meta),
        })
    }

    /// Promotes the canaries of every group (`groups` empty) or of `groups`;
    /// sent once, since each promotion creates an evaluation.
    ///
    /// ```no_run
    /// # async fn demo(client: caravan_client::Client) -> caravan_client::Result<()> {
    /// for d in client.deployments().list("").await? {
    ///     if d.status_description.contains("promotion") {
    ///         client.deployments().promote(&d.id, Vec::new()).await?;
    ///     }
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Conflict`] when the deployment is not awaiting promotion.
    pub async fn promote(
        &self,
        deployment_id: &str,
        groups: Vec<String>,
    ) -> Result<DeploymentUpdateResponse> {
        let req = PromoteDeploymentRequest {
            deployment_id: deployment_id.to_string(),
            all: groups.is_empty(),
            groups,
        };
        self.client
            .write_once(req, |ch, r| async move {
                service(ch).promote_deployment(r).await
            })
            .await
    }

    /// Marks a deployment failed (auto-revert applies); sent once.
    ///
    /// # Errors
    ///
    /// [`Error::Conflict`] when the deployment is no longer running.
    pub async fn fail(&self, deployment_id: &str) -> Result<DeploymentUpdateResponse> {
        let req = FailDeploymentRequest {
            deployment_id: deployment_id.to_string(),
        };
        self.client
            .write_once(
                req,
                |ch, r| async move { service(ch).fail_deployment(r).await },
            )
            .await
    }

    /// Pauses (`pause`) or resumes a deployment. Setting the same state
    /// twice leaves it as once, so it is retried.
    ///
    /// # Errors
    ///
    /// [`Error::Conflict`] when the deployment is no longer running.
    pub async fn pause(
        &self,
        deployment_id: &str,
        pause: bool,
    ) -> Result<DeploymentUpdateResponse> {
        let req = PauseDeploymentRequest {
            deployment_id: deployment_id.to_string(),
            pause,
        };
        self.client
            .read(
                req,
                |ch, r| async move { service(ch).pause_deployment(r).await },
            )
            .await
    }

    /// Sets the health of allocations of a deployment (manual health
    /// checks); the same marks twice leave the same state, so it is retried.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for allocations not of the deployment.
    pub async fn set_alloc_health(
        &self,
        deployment_id: &str,
        healthy: Vec<String>,
        unhealthy: Vec<String>,
    ) -> Result<DeploymentUpdateResponse> {
        let req = SetAllocHealthRequest {
            deployment_id: deployment_id.to_string(),
            healthy_alloc_ids: healthy,
            unhealthy_alloc_ids: unhealthy,
        };
        self.client
            .read(
                req,
                |ch, r| async move { service(ch).set_alloc_health(r).await },
            )
            .await
    }
}

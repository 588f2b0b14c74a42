//! `EvalService`, `AllocService`, `NodeService`, `DeploymentService`,
//! `StatusService` and `SystemService` over gRPC: thin handlers over the domain modules.

use std::pin::Pin;

use caravan_proto::alloc_service_server::AllocService;
use caravan_proto::deployment_service_server::DeploymentService;
use caravan_proto::eval_service_server::EvalService;
use caravan_proto::node_service_server::NodeService;
use caravan_proto::status_service_server::StatusService;
use caravan_proto::system_service_server::SystemService;
use caravan_proto::{
    AllocActionResponse, AllocFileChunk, AllocFileInfo, AllocPathRequest, AllocResourceUsage,
    AllocStatsRequest, GcAllocRequest, GcNodeRequest, GcNodeResponse, HostStats, HostStatsRequest,
    ListAllocFilesResponse, ReadAllocFileRequest, RestartAllocRequest, SignalAllocRequest,
};
use caravan_proto::{
    DeploymentUpdateResponse, EvaluateNodeRequest, EvaluationAllocationsRequest,
    FailDeploymentRequest, GarbageCollectRequest, GarbageCollectResponse, GetAllocationRequest,
    GetAllocationResponse, GetDeploymentRequest, GetDeploymentResponse, GetEvaluationRequest,
    GetEvaluationResponse, GetNodeRequest, GetNodeResponse, LeadersRequest, LeadersResponse,
    ListAllocationsRequest, ListAllocationsResponse, ListDeploymentsRequest,
    ListDeploymentsResponse, ListEvaluationsRequest, ListEvaluationsResponse, ListNodesRequest,
    ListNodesResponse, LogChunk, NodeAllocationsRequest, NodeUpdateResponse,
    PauseDeploymentRequest, PromoteDeploymentRequest, PurgeNodeRequest, ReadLogsRequest,
    SetAllocHealthRequest, StopAllocationRequest, StopAllocationResponse, UpdateDrainRequest,
    UpdateEligibilityRequest, WatcherAllocHealthRequest, WatcherFailRequest, WatcherPauseRequest,
    WatcherPromoteRequest, WatcherResponse,
};
use futures::Stream;
use tonic::{Request, Response, Status};

use crate::acl_guard::authorize;
use caravan_gateway_core::client_fs;

use crate::{list_scope, query};
use caravan_gateway_core::acl::ListScope;
use caravan_gateway_core::deployments::Steer;
use caravan_gateway_core::gateway::Gateway;
use caravan_gateway_core::nodes::NodeUpdated;
use caravan_gateway_core::{allocs, deployments, evals, logs, nodes, status};

/// The evaluation, allocation, node, deployment and status APIs.
#[derive(Debug, Clone)]
pub struct ClusterApi(pub Gateway);

#[tonic::async_trait]
impl EvalService for ClusterApi {
    async fn get_evaluation(
        &self,
        request: Request<GetEvaluationRequest>,
    ) -> Result<Response<GetEvaluationResponse>, Status> {
        authorize(&self.0, &request)?;
        let req = request.into_inner();
        let q = query(&self.0, req.options);
        let (eval, meta) = evals::get(&self.0, &req.eval_id, &q).await?;
        Ok(Response::new(GetEvaluationResponse {
            eval: Some(eval),
            meta: Some(meta),
        }))
    }

    async fn list_evaluations(
        &self,
        request: Request<ListEvaluationsRequest>,
    ) -> Result<Response<ListEvaluationsResponse>, Status> {
        authorize(&self.0, &request)?;
        let scope = list_scope(&request);
        let q = query(&self.0, request.into_inner().options);
        let (mut evals, meta) = evals::list(&self.0, &q).await;
        ListScope::keep(scope.as_ref(), &mut evals, |e| (&e.namespace, ""));
        Ok(Response::new(ListEvaluationsResponse {
            evals,
            meta: Some(meta),
        }))
    }

    async fn evaluation_allocations(
        &self,
        request: Request<EvaluationAllocationsRequest>,
    ) -> Result<Response<ListAllocationsResponse>, Status> {
        authorize(&self.0, &request)?;
        let req = request.into_inner();
        let q = query(&self.0, req.options);
        let (allocs, meta) = evals::allocations(&self.0, &req.eval_id, &q).await?;
        Ok(Response::new(ListAllocationsResponse {
            allocs,
            meta: Some(meta),
        }))
    }
}

/// The stream of a task's log chunks.
pub type LogStream = Pin<Box<dyn Stream<Item = Result<LogChunk, Status>> + Send + 'static>>;

/// A file of an alloc dir as the node sends it.
pub type FileStream = Pin<Box<dyn Stream<Item = Result<AllocFileChunk, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl AllocService for ClusterApi {
    async fn get_allocation(
        &self,
        request: Request<GetAllocationRequest>,
    ) -> Result<Response<GetAllocationResponse>, Status> {
        authorize(&self.0, &request)?;
        let req = request.into_inner();
        let q = query(&self.0, req.options);
        let (alloc, meta) = allocs::get(&self.0, &req.alloc_id, &q).await?;
        Ok(Response::new(GetAllocationResponse {
            alloc: Some(alloc),
            meta: Some(meta),
        }))
    }

    async fn list_allocations(
        &self,
        request: Request<ListAllocationsRequest>,
    ) -> Result<Response<ListAllocationsResponse>, Status> {
        authorize(&self.0, &request)?;
        let scope = list_scope(&request);
        let q = query(&self.0, request.into_inner().options);
        let (mut allocs, meta) = allocs::list(&self.0, &q).await;
        ListScope::keep(scope.as_ref(), &mut allocs, |a| (&a.namespace, ""));
        Ok(Response::new(ListAllocationsResponse {
            allocs,
            meta: Some(meta),
        }))
    }

    async fn stop_allocation(
        &self,
        request: Request<StopAllocationRequest>,
    ) -> Result<Response<StopAllocationResponse>, Status> {
        authorize(&self.0, &request)?;
        let (eval_id, revision) = allocs::stop(&self.0, &request.into_inner().alloc_id).await?;
        Ok(Response::new(StopAllocationResponse { eval_id, revision }))
    }

    type ReadLogsStream = LogStream;

    async fn read_logs(
        &self,
        request: Request<ReadLogsRequest>,
    ) -> Result<Response<Self::ReadLogsStream>, Status> {
        authorize(&self.0, &request)?;
        let stream = logs::read_logs(&self.0, request.into_inner()).await?;
        Ok(Response::new(Box::pin(stream)))
    }

    async fn list_alloc_files(
        &self,
        request: Request<AllocPathRequest>,
    ) -> Result<Response<ListAllocFilesResponse>, Status> {
        authorize(&self.0, &request)?;
        Ok(Response::new(
            client_fs::list(&self.0, request.into_inner()).await?,
        ))
    }

    async fn stat_alloc_file(
        &self,
        request: Request<AllocPathRequest>,
    ) -> Result<Response<AllocFileInfo>, Status> {
        authorize(&self.0, &request)?;
        Ok(Response::new(
            client_fs::stat(&self.0, request.into_inner()).await?,
        ))
    }

    type ReadAllocFileStream = FileStream;

    async fn read_alloc_file(
        &self,
        request: Request<ReadAllocFileRequest>,
    ) -> Result<Response<Self::ReadAllocFileStream>, Status> {
        authorize(&self.0, &request)?;
        let stream = client_fs::read(&self.0, request.into_inner()).await?;
        Ok(Response::new(Box::pin(stream)))
    }

    async fn get_host_stats(
        &self,
        request: Request<HostStatsRequest>,
    ) -> Result<Response<HostStats>, Status> {
        authorize(&self.0, &request)?;
        let (_, stats) = client_fs::host_stats(&self.0, request.into_inner()).await?;
        Ok(Response::new(stats))
    }

    async fn alloc_stats(
        &self,
        request: Request<AllocStatsRequest>,
    ) -> Result<Response<AllocResourceUsage>, Status> {
        authorize(&self.0, &request)?;
        Ok(Response::new(
            client_fs::alloc_stats(&self.0, request.into_inner()).await?,
        ))
    }

    async fn signal_alloc(
        &self,
        request: Request<SignalAllocRequest>,
    ) -> Result<Response<AllocActionResponse>, Status> {
        authorize(&self.0, &request)?;
        Ok(Response::new(
            client_fs::signal(&self.0, request.into_inner()).await?,
        ))
    }

    async fn restart_alloc(
        &self,
        request: Request<RestartAllocRequest>,
    ) -> Result<Response<AllocActionResponse>, Status> {
        authorize(&self.0, &request)?;
        Ok(Response::new(
            client_fs::restart(&self.0, request.into_inner()).await?,
        ))
    }

    async fn gc_alloc(
        &self,
        request: Request<GcAllocRequest>,
    ) -> Result<Response<AllocActionResponse>, Status> {
        authorize(&self.0, &request)?;
        Ok(Response::new(
            client_fs::gc_alloc(&self.0, request.into_inner()).await?,
        ))
    }

    async fn gc_node(
        &self,
        request: Request<GcNodeRequest>,
    ) -> Result<Response<GcNodeResponse>, Status> {
        authorize(&self.0, &request)?;
        Ok(Response::new(
            client_fs::gc_node(&self.0, request.into_inner()).await?,
        ))
    }
}

fn node_update(u: NodeUpdated) -> Response<NodeUpdateResponse> {
    Response::new(NodeUpdateResponse {
        eval_ids: u.eval_ids,
        revision: u.revision,
    })
}

#[tonic::async_trait]
impl NodeService for ClusterApi {
    async fn get_node(
        &self,
        request: Request<GetNodeRequest>,
    ) -> Result<Response<GetNodeResponse>, Status> {
        authorize(&self.0, &request)?;
        let req = request.into_inner();
        let q = query(&self.0, req.options);
        let (node, meta) = nodes::get(&self.0, &req.node_id, &q).await?;
        Ok(Response::new(GetNodeResponse {
            node: Some(node),
            meta: Some(meta),
        }))
    }

    async fn list_nodes(
        &self,
        request: Request<ListNodesRequest>,
    ) -> Result<Response<ListNodesResponse>, Status> {
        authorize(&self.0, &request)?;
        let q = query(&self.0, request.into_inner().options);
        let (nodes, meta) = nodes::list(&self.0, &q).await;
        Ok(Response::new(ListNodesResponse {
            nodes,
            meta: Some(meta),
        }))
    }

    async fn node_allocations(
        &self,
        request: Request<NodeAllocationsRequest>,
    ) -> Result<Response<ListAllocationsResponse>, Status> {
        authorize(&self.0, &request)?;
        let scope = list_scope(&request);
        let req = request.into_inner();
        let q = query(&self.0, req.options);
        let (mut allocs, meta) = nodes::allocations(&self.0, &req.node_id, &q).await?;
        ListScope::keep(scope.as_ref(), &mut allocs, |a| (&a.namespace, ""));
        Ok(Response::new(ListAllocationsResponse {
            allocs,
            meta: Some(meta),
        }))
    }

    async fn update_eligibility(
        &self,
        request: Request<UpdateEligibilityRequest>,
    ) -> Result<Response<NodeUpdateResponse>, Status> {
        authorize(&self.0, &request)?;
        let req = request.into_inner();
        let eligibility = req.eligibility();
        Ok(node_update(
            nodes::update_eligibility(&self.0, &req.node_id, eligibility).await?,
        ))
    }

    async fn update_drain(
        &self,
        request: Request<UpdateDrainRequest>,
    ) -> Result<Response<NodeUpdateResponse>, Status> {
        authorize(&self.0, &request)?;
        let req = request.into_inner();
        Ok(node_update(
            nodes::update_drain(&self.0, &req.node_id, req.drain_strategy, req.mark_eligible)
                .await?,
        ))
    }

    async fn evaluate_node(
        &self,
        request: Request<EvaluateNodeRequest>,
    ) -> Result<Response<NodeUpdateResponse>, Status> {
        authorize(&self.0, &request)?;
        let req = request.into_inner();
        Ok(node_update(nodes::evaluate(&self.0, &req.node_id).await?))
    }

    async fn purge_node(
        &self,
        request: Request<PurgeNodeRequest>,
    ) -> Result<Response<NodeUpdateResponse>, Status> {
        authorize(&self.0, &request)?;
        let req = request.into_inner();
        Ok(node_update(nodes::purge(&self.0, &req.node_id).await?))
    }
}

fn steered(r: WatcherResponse) -> Response<DeploymentUpdateResponse> {
    Response::new(DeploymentUpdateResponse {
        eval_id: r.eval_id,
        revision: r.revision,
    })
}

#[tonic::async_trait]
impl DeploymentService for ClusterApi {
    async fn get_deployment(
        &self,
        request: Request<GetDeploymentRequest>,
    ) -> Result<Response<GetDeploymentResponse>, Status> {
        authorize(&self.0, &request)?;
        let req = request.into_inner();
        let q = query(&self.0, req.options);
        let (deployment, meta) = deployments::get(&self.0, &req.deployment_id, &q).await?;
        Ok(Response::new(GetDeploymentResponse {
            deployment: Some(deployment),
            meta: Some(meta),
        }))
    }

    async fn list_deployments(
        &self,
        request: Request<ListDeploymentsRequest>,
    ) -> Result<Response<ListDeploymentsResponse>, Status> {
        authorize(&self.0, &request)?;
        let scope = list_scope(&request);
        let q = query(&self.0, request.into_inner().options);
        let (mut deployments, meta) = deployments::list(&self.0, &q).await;
        ListScope::keep(scope.as_ref(), &mut deployments, |d| (&d.namespace, ""));
        Ok(Response::new(ListDeploymentsResponse {
            deployments,
            meta: Some(meta),
        }))
    }

    async fn promote_deployment(
        &self,
        request: Request<PromoteDeploymentRequest>,
    ) -> Result<Response<DeploymentUpdateResponse>, Status> {
        authorize(&self.0, &request)?;
        let r = request.into_inner();
        let steer = Steer::Promote(WatcherPromoteRequest {
            deployment_id: r.deployment_id,
            all: r.all,
            groups: r.groups,
        });
        Ok(steered(deployments::steer(&self.0, steer).await?))
    }

    async fn fail_deployment(
        &self,
        request: Request<FailDeploymentRequest>,
    ) -> Result<Response<DeploymentUpdateResponse>, Status> {
        authorize(&self.0, &request)?;
        let r = request.into_inner();
        let steer = Steer::Fail(WatcherFailRequest {
            deployment_id: r.deployment_id,
        });
        Ok(steered(deployments::steer(&self.0, steer).await?))
    }

    async fn pause_deployment(
        &self,
        request: Request<PauseDeploymentRequest>,
    ) -> Result<Response<DeploymentUpdateResponse>, Status> {
        authorize(&self.0, &request)?;
        let r = request.into_inner();
        let steer = Steer::Pause(WatcherPauseRequest {
            deployment_id: r.deployment_id,
            pause: r.pause,
        });
        Ok(steered(deployments::steer(&self.0, steer).await?))
    }

    async fn set_alloc_health(
        &self,
        request: Request<SetAllocHealthRequest>,
    ) -> Result<Response<DeploymentUpdateResponse>, Status> {
        authorize(&self.0, &request)?;
        let r = request.into_inner();
        let steer = Steer::AllocHealth(WatcherAllocHealthRequest {
            deployment_id: r.deployment_id,
            healthy_alloc_ids: r.healthy_alloc_ids,
            unhealthy_alloc_ids: r.unhealthy_alloc_ids,
        });
        Ok(steered(deployments::steer(&self.0, steer).await?))
    }
}

#[tonic::async_trait]
impl StatusService for ClusterApi {
    async fn leaders(
        &self,
        request: Request<LeadersRequest>,
    ) -> Result<Response<LeadersResponse>, Status> {
        authorize(&self.0, &request)?;
        let (leaders, revision) = status::leaders(&self.0).await?;
        Ok(Response::new(LeadersResponse { leaders, revision }))
    }
}

#[tonic::async_trait]
impl SystemService for ClusterApi {
    async fn garbage_collect(
        &self,
        request: Request<GarbageCollectRequest>,
    ) -> Result<Response<GarbageCollectResponse>, Status> {
        authorize(&self.0, &request)?;
        let c = caravan_gateway_core::broker::garbage_collect(&self.0).await?;
        Ok(Response::new(GarbageCollectResponse {
            evals: c.evals,
            allocs: c.allocs,
            jobs: c.jobs,
            nodes: c.nodes,
            deployments: c.deployments,
        }))
    }
}

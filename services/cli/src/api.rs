//! The api-gateway's public gRPC API as the CLI calls it: one lazily
//! connected channel, one method per call, errors phrased for the operator.

use caravan_proto::alloc_service_client::AllocServiceClient;
use caravan_proto::deployment_service_client::DeploymentServiceClient;
use caravan_proto::eval_service_client::EvalServiceClient;
use caravan_proto::job_service_client::JobServiceClient;
use caravan_proto::node_service_client::NodeServiceClient;
use caravan_proto::status_service_client::StatusServiceClient;
use caravan_proto::system_service_client::SystemServiceClient;
use caravan_proto::{
    Allocation, Deployment, DeploymentUpdateResponse, DeregisterJobRequest, DeregisterJobResponse,
    DispatchJobRequest, DispatchJobResponse, DrainStrategy, Evaluation,
    EvaluationAllocationsRequest, FailDeploymentRequest, ForcePeriodicJobRequest,
    ForcePeriodicJobResponse, GarbageCollectRequest, GarbageCollectResponse, GetAllocationRequest,
    GetDeploymentRequest, GetEvaluationRequest, GetJobRequest, GetNodeRequest, Job,
    JobAllocationsRequest, JobEvaluationsRequest, JobSummaryRequest, JobSummaryResponse,
    LeadersRequest, ListAllocationsRequest, ListDeploymentsRequest, ListEvaluationsRequest,
    ListJobVersionsRequest, ListJobsRequest, ListNodesRequest, LogChunk, Node,
    NodeAllocationsRequest, NodeUpdateResponse, PauseDeploymentRequest, PlanJobRequest,
    PlanJobResponse, PromoteDeploymentRequest, QueryMeta, QueryOptions, ReadLogsRequest,
    RegisterJobRequest, RegisterJobResponse, RevertJobRequest, SchedulingEligibility,
    StopAllocationRequest, StopAllocationResponse, UpdateDrainRequest, UpdateEligibilityRequest,
    ValidateJobRequest, ValidateJobResponse,
};
use std::collections::BTreeMap;
use std::time::Duration;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use crate::error::CliError;

/// Where the CLI looks for an api-gateway unless told otherwise.
pub const DEFAULT_ADDRESS: &str = "http://127.0.0.1:4647";

/// The largest answer accepted (a list of every allocation of a big cluster).
const MAX_MESSAGE_BYTES: usize = 512 * 1024 * 1024;

type Result<T> = std::result::Result<T, CliError>;

/// Puts the ACL token, if any, in every call's `x-nomad-token` metadata.
#[derive(Debug, Clone, Default)]
pub struct TokenHeader(Option<MetadataValue<Ascii>>);

impl Interceptor for TokenHeader {
    fn call(
        &mut self,
        mut req: tonic::Request<()>,
    ) -> std::result::Result<tonic::Request<()>, tonic::Status> {
        if let Some(token) = &self.0 {
            req.metadata_mut().insert("x-nomad-token", token.clone());
        }
        Ok(req)
    }
}

/// The connection every client of the CLI uses: the channel with the
/// token added to each call.
pub type Conn = InterceptedService<Channel, TokenHeader>;

/// A connection to one api-gateway.
#[derive(Debug, Clone)]
pub struct Api {
    address: String,
    namespace: String,
    raw: Channel,
    channel: Conn,
}

/// A read's answer and the revision it reflects.
#[derive(Debug, Clone)]
pub struct Read<T> {
    /// The answer.
    pub value: T,
    /// The store revision the gateway answered at.
    pub revision: i64,
}

fn revision(meta: Option<QueryMeta>) -> i64 {
    meta.map_or(0, |m| m.revision)
}

impl Api {
    /// A client of the gateway at `address` (`http://host:port` or
    /// `host:port`) reading and writing in `namespace`; connects on first use.
    pub fn new(address: &str, namespace: &str) -> Result<Api> {
        let channel = caravan_runtime::grpc::channel(address)
            .map_err(|e| CliError::Usage(format!("Invalid address {address:?}: {e}")))?;
        Ok(Api {
            address: address.to_string(),
            namespace: namespace.to_string(),
            raw: channel.clone(),
            channel: InterceptedService::new(channel, TokenHeader::default()),
        })
    }

    /// The same connection sending `token` (an ACL secret) with every call;
    /// `None` or empty sends none.
    pub fn with_token(mut self, token: Option<&str>) -> Result<Api> {
        let token = token.map(str::trim).filter(|t| !t.is_empty());
        let header = token
            .map(|t| {
                t.parse::<MetadataValue<Ascii>>().map_err(|_| {
                    CliError::Usage("Invalid -token: not a printable ASCII secret".into())
                })
            })
            .transpose()?;
        self.channel = InterceptedService::new(self.raw.clone(), TokenHeader(header));
        Ok(self)
    }

    /// The gateway's address.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The namespace of reads and writes.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The connection, for the services with their own client module.
    pub(crate) fn channel(&self) -> Conn {
        self.channel.clone()
    }

    pub(crate) fn err<'a>(
        &'a self,
        context: &'a str,
    ) -> impl FnOnce(tonic::Status) -> CliError + 'a {
        move |status| CliError::api(context, &self.address, status)
    }

    pub(crate) fn options(&self, prefix: &str) -> Option<QueryOptions> {
        Some(QueryOptions {
            namespace: self.namespace.clone(),
            prefix: prefix.to_string(),
            ..Default::default()
        })
    }

    /// Options of a blocking read: answer once past `min_revision`, or after `wait`.
    fn blocking(&self, min_revision: i64, wait: Duration) -> Option<QueryOptions> {
        Some(QueryOptions {
            namespace: self.namespace.clone(),
            min_revision,
            wait_ns: i64::try_from(wait.as_nanos()).unwrap_or(i64::MAX),
            prefix: String::new(),
        })
    }

    fn jobs(&self) -> JobServiceClient<Conn> {
        JobServiceClient::new(self.channel.clone())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
    }

    fn evals(&self) -> EvalServiceClient<Conn> {
        EvalServiceClient::new(self.channel.clone()).max_decoding_message_size(MAX_MESSAGE_BYTES)
    }

    pub(crate) fn allocs(&self) -> AllocServiceClient<Conn> {
        AllocServiceClient::new(self.channel.clone()).max_decoding_message_size(MAX_MESSAGE_BYTES)
    }

    fn nodes(&self) -> NodeServiceClient<Conn> {
        NodeServiceClient::new(self.channel.clone()).max_decoding_message_size(MAX_MESSAGE_BYTES)
    }

    fn deployments(&self) -> DeploymentServiceClient<Conn> {
        DeploymentServiceClient::new(self.channel.clone())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
    }

    /// Registers a job; with `check_index`, only if its modify revision matches.
    pub async fn register_job(
        &self,
        job: Job,
        check_index: Option<i64>,
    ) -> Result<RegisterJobResponse> {
        let req = RegisterJobRequest {
            job: Some(job),
            enforce_revision: check_index.is_some(),
            job_modify_revision: check_index.unwrap_or(0),
        };
        let resp = self.jobs().register_job(req).await;
        resp.map(tonic::Response::into_inner)
            .map_err(self.err("Error submitting job"))
    }

    /// Asks the gateway to validate a job.
    pub async fn validate_job(&self, job: Job) -> Result<ValidateJobResponse> {
        let resp = self
            .jobs()
            .validate_job(ValidateJobRequest { job: Some(job) })
            .await;
        resp.map(tonic::Response::into_inner)
            .map_err(self.err("Error validating job"))
    }

    /// A scheduler dry run of a job, with the diff against the registered one.
    pub async fn plan_job(&self, job: Job) -> Result<PlanJobResponse> {
        let resp = self
            .jobs()
            .plan_job(PlanJobRequest {
                job: Some(job),
                diff: true,
            })
            .await;
        resp.map(tonic::Response::into_inner)
            .map_err(self.err("Error during plan"))
    }

    /// Stops (or with `purge`, removes) a job.
    pub async fn deregister_job(&self, job_id: &str, purge: bool) -> Result<DeregisterJobResponse> {
        let req = DeregisterJobRequest {
            namespace: self.namespace.clone(),
            job_id: job_id.to_string(),
            purge,
        };
        let resp = self.jobs().deregister_job(req).await;
        resp.map(tonic::Response::into_inner)
            .map_err(self.err("Error deregistering job"))
    }

    /// One job, with its derived status.
    pub async fn job(&self, job_id: &str) -> Result<Job> {
        let req = GetJobRequest {
            job_id: job_id.to_string(),
            options: self.options(""),
        };
        let resp = self.jobs().get_job(req).await;
        let resp = resp
            .map(tonic::Response::into_inner)
            .map_err(self.err("Error querying job"))?;
        resp.job
            .ok_or_else(|| CliError::NotFound(format!("No job with ID {job_id:?} found")))
    }

    /// The jobs whose ids start with `prefix`.
    pub async fn list_jobs(&self, prefix: &str) -> Result<Vec<Job>> {
        let req = ListJobsRequest {
            options: self.options(prefix),
        };
        let resp = self.jobs().list_jobs(req).await;
        resp.map(|r| r.into_inner().jobs)
            .map_err(self.err("Error querying jobs"))
    }

    /// A job's allocations, terminal ones included.
    pub async fn job_allocations(&self, job_id: &str) -> Result<Vec<Allocation>> {
        let req = JobAllocationsRequest {
            job_id: job_id.to_string(),
            options: self.options(""),
        };
        let resp = self.jobs().job_allocations(req).await;
        resp.map(|r| r.into_inner().allocs)
            .map_err(self.err("Error querying job allocations"))
    }

    /// A job's evaluations.
    pub async fn job_evaluations(&self, job_id: &str) -> Result<Vec<Evaluation>> {
        let req = JobEvaluationsRequest {
            job_id: job_id.to_string(),
            options: self.options(""),
        };
        let resp = self.jobs().job_evaluations(req).await;
        resp.map(|r| r.into_inner().evals)
            .map_err(self.err("Error querying job evaluations"))
    }

    /// A job's allocation counts per task group.
    pub async fn job_summary(&self, job_id: &str) -> Result<JobSummaryResponse> {
        let req = JobSummaryRequest {
            job_id: job_id.to_string(),
            options: self.options(""),
        };
        let resp = self.jobs().job_summary(req).await;
        resp.map(tonic::Response::into_inner)
            .map_err(self.err("Error querying job summary"))
    }

    /// One evaluation, answered once the state is past `min_revision` (0: at
    /// once) or `wait` has passed.
    pub async fn evaluation_after(
        &self,
        eval_id: &str,
        min_revision: i64,
        wait: Duration,
    ) -> Result<Read<Evaluation>> {
        let req = GetEvaluationRequest {
            eval_id: eval_id.to_string(),
            options: self.blocking(min_revision, wait),
        };
        let resp = self.evals().get_evaluation(req).await;
        let resp = resp
            .map(tonic::Response::into_inner)
            .map_err(self.err("Error reading evaluation"))?;
        let value = resp.eval.ok_or_else(|| {
            CliError::NotFound(format!("No evaluation with id {eval_id:?} found"))
        })?;
        Ok(Read {
            value,
            revision: revision(resp.meta),
        })
    }

    /// One evaluation.
    pub async fn evaluation(&self, eval_id: &str) -> Result<Evaluation> {
        Ok(self
            .evaluation_after(eval_id, 0, Duration::ZERO)
            .await?
            .value)
    }

    /// The evaluations whose ids start with `prefix`.
    pub async fn list_evaluations(&self, prefix: &str) -> Result<Vec<Evaluation>> {
        let req = ListEvaluationsRequest {
            options: self.options(prefix),
        };
        let resp = self.evals().list_evaluations(req).await;
        resp.map(|r| r.into_inner().evals)
            .map_err(self.err("Error querying evaluations"))
    }

    /// The allocations an evaluation placed or updated.
    pub async fn evaluation_allocations(&self, eval_id: &str) -> Result<Vec<Allocation>> {
        let req = EvaluationAllocationsRequest {
            eval_id: eval_id.to_string(),
            options: self.options(""),
        };
        let resp = self.evals().evaluation_allocations(req).await;
        resp.map(|r| r.into_inner().allocs)
            .map_err(self.err("Error reading allocations"))
    }

    /// One allocation.
    pub async fn allocation(&self, alloc_id: &str) -> Result<Allocation> {
        let req = GetAllocationRequest {
            alloc_id: alloc_id.to_string(),
            options: self.options(""),
        };
        let resp = self.allocs().get_allocation(req).await;
        let resp = resp
            .map(tonic::Response::into_inner)
            .map_err(self.err("Error querying allocation"))?;
        resp.alloc
            .ok_or_else(|| CliError::NotFound(format!("No allocation with id {alloc_id:?} found")))
    }

    /// The allocations whose ids start with `prefix`.
    pub async fn list_allocations(&self, prefix: &str) -> Result<Vec<Allocation>> {
        let req = ListAllocationsRequest {
            options: self.options(prefix),
        };
        let resp = self.allocs().list_allocations(req).await;
        resp.map(|r| r.into_inner().allocs)
            .map_err(self.err("Error querying allocations"))
    }

    /// Stops an allocation; its job's scheduler replaces it.
    pub async fn stop_allocation(&self, alloc_id: &str) -> Result<StopAllocationResponse> {
        let req = StopAllocationRequest {
            alloc_id: alloc_id.to_string(),
        };
        let resp = self.allocs().stop_allocation(req).await;
        resp.map(tonic::Response::into_inner)
            .map_err(self.err("Error stopping allocation"))
    }

    /// Opens the log stream of a task.
    pub async fn read_logs(&self, request: ReadLogsRequest) -> Result<tonic::Streaming<LogChunk>> {
        let resp = self.allocs().read_logs(request).await;
        resp.map(tonic::Response::into_inner)
            .map_err(self.err("Error reading file"))
    }

    /// One node.
    pub async fn node(&self, node_id: &str) -> Result<Node> {
        let req = GetNodeRequest {
            node_id: node_id.to_string(),
            options: self.options(""),
        };
        let resp = self.nodes().get_node(req).await;
        let resp = resp
            .map(tonic::Response::into_inner)
            .map_err(self.err("Error querying node info"))?;
        resp.node
            .ok_or_else(|| CliError::NotFound(format!("No node with id {node_id:?} found")))
    }

    /// The nodes whose ids start with `prefix`.
    pub async fn list_nodes(&self, prefix: &str) -> Result<Vec<Node>> {
        let req = ListNodesRequest {
            options: self.options(prefix),
        };
        let resp = self.nodes().list_nodes(req).await;
        resp.map(|r| r.into_inner().nodes)
            .map_err(self.err("Error querying node status"))
    }

    /// The allocations of a node.
    pub async fn node_allocations(&self, node_id: &str) -> Result<Vec<Allocation>> {
        let req = NodeAllocationsRequest {
            node_id: node_id.to_string(),
            options: Some(QueryOptions {
                namespace: "*".into(),
                ..Default::default()
            }),
        };
        let resp = self.nodes().node_allocations(req).await;
        resp.map(|r| r.into_inner().allocs)
            .map_err(self.err("Error querying node allocations"))
    }

    /// Marks a node eligible or ineligible for new placements.
    pub async fn update_eligibility(
        &self,
        node_id: &str,
        eligible: bool,
    ) -> Result<NodeUpdateResponse> {
        let eligibility = if eligible {
            SchedulingEligibility::Eligible
        } else {
            SchedulingEligibility::Ineligible
        };
        let req = UpdateEligibilityRequest {
            node_id: node_id.to_string(),
            eligibility: eligibility as i32,
        };
        let resp = self.nodes().update_eligibility(req).await;
        resp.map(tonic::Response::into_inner)
            .map_err(self.err("Error updating scheduling eligibility"))
    }

    /// Starts (`Some`) or cancels (`None`) a drain.
    pub async fn update_drain(
        &self,
        node_id: &str,
        strategy: Option<DrainStrategy>,
        mark_eligible: bool,
    ) -> Result<NodeUpdateResponse> {
        let req = UpdateDrainRequest {
            node_id: node_id.to_string(),
            drain_strategy: strategy,
            mark_eligible,
        };
        let resp = self.nodes().update_drain(req).await;
        resp.map(tonic::Response::into_inner)
            .map_err(self.err("Error updating drain specification"))
    }

    /// Every deployment of the namespace.
    pub async fn list_deployments(&self) -> Result<Vec<Deployment>> {
        self.list_deployments_prefix("").await
    }

    /// The deployments of the namespace whose ids start with `prefix`.
    pub async fn list_deployments_prefix(&self, prefix: &str) -> Result<Vec<Deployment>> {
        let req = ListDeploymentsRequest {
            options: self.options(prefix),
        };
        let resp = self.deployments().list_deployments(req).await;
        resp.map(|r| r.into_inner().deployments)
            .map_err(self.err("Error querying deployments"))
    }

    /// One deployment.
    pub async fn deployment(&self, deployment_id: &str) -> Result<Deployment> {
        Ok(self
            .deployment_after(deployment_id, 0, Duration::ZERO)
            .await?
            .value)
    }

    /// One deployment, answered once the state is past `min_revision` (0:
    /// at once) or `wait` has passed.
    pub async fn deployment_after(
        &self,
        deployment_id: &str,
        min_revision: i64,
        wait: Duration,
    ) -> Result<Read<Deployment>> {
        let req = GetDeploymentRequest {
            deployment_id: deployment_id.to_string(),
            options: self.blocking(min_revision, wait),
        };
        let resp = self.deployments().get_deployment(req).await;
        let resp = resp
            .map(tonic::Response::into_inner)
            .map_err(self.err("Error retrieving deployment"))?;
        let value = resp.deployment.ok_or_else(|| {
            CliError::NotFound(format!("No deployment with id {deployment_id:?} found"))
        })?;
        Ok(Read {
            value,
            revision: revision(resp.meta),
        })
    }

    /// Promotes the canaries of every group (`groups` empty) or of `groups`.
    pub async fn promote_deployment(
        &self,
        deployment_id: &str,
        groups: Vec<String>,
    ) -> Result<DeploymentUpdateResponse> {
        let req = PromoteDeploymentRequest {
            deployment_id: deployment_id.to_string(),
            all: groups.is_empty(),
            groups,
        };
        let resp = self.deployments().promote_deployment(req).await;
        resp.map(tonic::Response::into_inner)
            .map_err(self.err("Error promoting deployment"))
    }

    /// Marks a deployment failed (auto-revert applies).
    pub async fn fail_deployment(&self, deployment_id: &str) -> Result<DeploymentUpdateResponse> {
        let req = FailDeploymentRequest {
            deployment_id: deployment_id.to_string(),
        };
        let resp = self.deployments().fail_deployment(req).await;
        resp.map(tonic::Response::into_inner)
            .map_err(self.err("Error failing deployment"))
    }

    /// Pauses (`pause`) or resumes a deployment.
    pub async fn pause_deployment(
        &self,
        deployment_id: &str,
        pause: bool,
    ) -> Result<DeploymentUpdateResponse> {
        let req = PauseDeploymentRequest {
            deployment_id: deployment_id.to_string(),
            pause,
        };
        let context = if pause {
            "Error pausing deployment"
        } else {
            "Error resuming deployment"
        };
        let resp = self.deployments().pause_deployment(req).await;
        resp.map(tonic::Response::into_inner)
            .map_err(self.err(context))
    }

    /// A job's kept versions, newest first.
    pub async fn job_versions(&self, job_id: &str) -> Result<Vec<Job>> {
        let req = ListJobVersionsRequest {
            job_id: job_id.to_string(),
            options: self.options(""),
        };
        let resp = self.jobs().list_job_versions(req).await;
        let mut versions = resp
            .map(|r| r.into_inner().versions)
            .map_err(self.err("Error retrieving job versions"))?;
        versions.sort_by_key(|j| std::cmp::Reverse(j.version));
        Ok(versions)
    }

    /// Registers version `version` of a job again as its newest version.
    pub async fn revert_job(&self, job_id: &str, version: u64) -> Result<RegisterJobResponse> {
        let req = RevertJobRequest {
            namespace: self.namespace.clone(),
            job_id: job_id.to_string(),
            job_version: version,
            enforce_prior_version: false,
            prior_version: 0,
        };
        let resp = self.jobs().revert_job(req).await;
        resp.map(tonic::Response::into_inner)
            .map_err(self.err("Error reverting job"))
    }

    /// Launches a child of a parameterized job.
    pub async fn dispatch_job(
        &self,
        job_id: &str,
        payload: Vec<u8>,
        meta: BTreeMap<String, String>,
    ) -> Result<DispatchJobResponse> {
        let req = DispatchJobRequest {
            namespace: self.namespace.clone(),
            job_id: job_id.to_string(),
            payload,
            meta: meta.into_iter().collect(),
        };
        let resp = self.jobs().dispatch_job(req).await;
        resp.map(tonic::Response::into_inner)
            .map_err(self.err("Failed to dispatch job"))
    }

    /// Launches a periodic job's child now.
    pub async fn force_periodic(&self, job_id: &str) -> Result<ForcePeriodicJobResponse> {
        let req = ForcePeriodicJobRequest {
            namespace: self.namespace.clone(),
            job_id: job_id.to_string(),
        };
        let resp = self.jobs().force_periodic_job(req).await;
        let context = format!("Error forcing periodic job {job_id:?}");
        resp.map(tonic::Response::into_inner)
            .map_err(|status| CliError::api(&context, &self.address, status))
    }

    /// Runs a garbage collection now.
    pub async fn garbage_collect(&self) -> Result<GarbageCollectResponse> {
        let resp = SystemServiceClient::new(self.channel.clone())
            .garbage_collect(GarbageCollectRequest {})
            .await;
        resp.map(tonic::Response::into_inner)
            .map_err(self.err("Error running system garbage-collection"))
    }

    /// The leader of each leader-elected service.
    pub async fn leaders(&self) -> Result<BTreeMap<String, String>> {
        let resp = StatusServiceClient::new(self.channel.clone())
            .leaders(LeadersRequest {})
            .await;
        resp.map(|r| r.into_inner().leaders.into_iter().collect())
            .map_err(self.err("Error querying leaders"))
    }
}

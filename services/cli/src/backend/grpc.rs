//! [`Backend`] over Caravan's gRPC API: each call is one call of the
//! `caravan-client` SDK, which retries what is safe to repeat.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use caravan_client::{Client, Read};
use caravan_proto::{
    AclPolicy, AclToken, AllocFileInfo, Allocation, DeleteVariableResponse, Deployment,
    DeploymentUpdateResponse, DeregisterJobResponse, DispatchJobRequest, DispatchJobResponse,
    DrainStrategy, Evaluation, ForcePeriodicJobResponse, Job, JobSummaryResponse, Node,
    NodeUpdateResponse, PlanJobResponse, ReadAllocFileRequest, ReadLogsRequest,
    RegisterJobResponse, StopAllocationResponse, ValidateJobResponse, VariableDecrypted,
    VariableMetadata,
};
use futures::StreamExt;
use serde_json::Value;

use super::{Backend, ByteStream, Error, NomadCall, Result, VariableWritten, needs_http};

/// A client of one gateway's gRPC API.
#[derive(Debug, Clone)]
pub struct GrpcBackend {
    client: Client,
}

impl GrpcBackend {
    /// The backend over an SDK client.
    pub fn new(client: Client) -> GrpcBackend {
        GrpcBackend { client }
    }
}

/// A gRPC stream of chunks as bytes, its failures as SDK errors.
fn bytes<T, F>(stream: tonic::Streaming<T>, address: String, data: F) -> ByteStream
where
    T: Send + 'static,
    F: Fn(T) -> Vec<u8> + Send + 'static,
{
    stream
        .map(move |item| match item {
            Ok(chunk) => Ok(data(chunk)),
            Err(status) => Err(Error::from_status(&status, &address)),
        })
        .boxed()
}

#[async_trait]
impl Backend for GrpcBackend {
    fn address(&self) -> &str {
        self.client.address()
    }

    fn speaks_http(&self) -> bool {
        false
    }

    fn namespace(&self) -> &str {
        self.client.namespace()
    }

    async fn register_job(
        &self,
        job: Job,
        check_index: Option<i64>,
        submission: Option<caravan_proto::JobSubmission>,
    ) -> Result<RegisterJobResponse> {
        let jobs = self.client.jobs();
        match (check_index, submission) {
            (index, Some(s)) => jobs.register_submitted(job, index, s).await,
            (Some(index), None) => jobs.register_checked(job, index).await,
            (None, None) => jobs.register(job).await,
        }
    }

    async fn plan_job(&self, job: Job) -> Result<PlanJobResponse> {
        self.client.jobs().plan(job, true).await
    }

    async fn validate_job(&self, job: Job) -> Result<ValidateJobResponse> {
        self.client.jobs().validate(job).await
    }

    async fn deregister_job(&self, job_id: &str, purge: bool) -> Result<DeregisterJobResponse> {
        self.client.jobs().stop(job_id, purge).await
    }

    async fn job(&self, job_id: &str) -> Result<Job> {
        self.client.jobs().get(job_id).await
    }

    async fn jobs(&self, prefix: &str) -> Result<Vec<Job>> {
        self.client.jobs().list(prefix).await
    }

    async fn job_allocations(&self, job_id: &str) -> Result<Vec<Allocation>> {
        self.client.jobs().allocations(job_id).await
    }

    async fn job_evaluations(&self, job_id: &str) -> Result<Vec<Evaluation>> {
        self.client.jobs().evaluations(job_id).await
    }

    async fn job_summary(&self, job_id: &str) -> Result<JobSummaryResponse> {
        self.client.jobs().summary(job_id).await
    }

    async fn job_versions(&self, job_id: &str) -> Result<Vec<Job>> {
        self.client.jobs().versions(job_id).await
    }

    async fn revert_job(&self, job_id: &str, version: u64) -> Result<RegisterJobResponse> {
        self.client.jobs().revert(job_id, version).await
    }

    async fn scale_job(
        &self,
        job_id: &str,
        group: &str,
        count: i64,
        job_modify_revision: i64,
    ) -> Result<RegisterJobResponse> {
        let jobs = self.client.jobs();
        jobs.scale_if_unchanged(job_id, group, count, job_modify_revision)
            .await
    }

    async fn dispatch_job(&self, request: DispatchJobRequest) -> Result<DispatchJobResponse> {
        self.client.jobs().dispatch_request(request).await
    }

    async fn force_periodic(&self, job_id: &str) -> Result<ForcePeriodicJobResponse> {
        self.client.jobs().force_periodic(job_id).await
    }

    async fn evaluate_job(&self, job_id: &str, force_reschedule: bool) -> Result<String> {
        let resp = self
            .client
            .jobs()
            .evaluate(job_id, force_reschedule)
            .await?;
        Ok(resp.eval_id)
    }

    async fn evaluation_after(
        &self,
        eval_id: &str,
        min_revision: i64,
        wait: Duration,
    ) -> Result<Read<Evaluation>> {
        self.client
            .evals()
            .get_after(eval_id, min_revision, wait)
            .await
    }

    async fn evaluations(&self, prefix: &str) -> Result<Vec<Evaluation>> {
        self.client.evals().list(prefix).await
    }

    async fn evaluation_allocations(&self, eval_id: &str) -> Result<Vec<Allocation>> {
        self.client.evals().allocations(eval_id).await
    }

    async fn allocation(&self, alloc_id: &str) -> Result<Allocation> {
        self.client.allocs().get(alloc_id).await
    }

    async fn allocations(&self, prefix: &str) -> Result<Vec<Allocation>> {
        self.client.allocs().list(prefix).await
    }

    async fn stop_allocation(&self, alloc_id: &str) -> Result<StopAllocationResponse> {
        self.client.allocs().stop(alloc_id).await
    }

    async fn logs(&self, request: ReadLogsRequest) -> Result<ByteStream> {
        let stream = self.client.allocs().logs(request).await?;
        Ok(bytes(stream, self.address().to_string(), |c| c.data))
    }

    async fn stat_file(&self, alloc_id: &str, path: &str) -> Result<AllocFileInfo> {
        self.client.allocs().stat_file(alloc_id, path).await
    }

    async fn list_files(&self, alloc_id: &str, path: &str) -> Result<Vec<AllocFileInfo>> {
        self.client.allocs().list_files(alloc_id, path).await
    }

    async fn read_file(&self, request: ReadAllocFileRequest) -> Result<ByteStream> {
        let stream = self.client.allocs().read_file(request).await?;
        Ok(bytes(stream, self.address().to_string(), |c| c.data))
    }

    async fn signal(&self, alloc_id: &str, task: Option<&str>, signal: &str) -> Result<()> {
        self.client.allocs().signal(alloc_id, task, signal).await
    }

    async fn restart_allocation(
        &self,
        alloc_id: &str,
        task: Option<&str>,
        all_tasks: bool,
    ) -> Result<()> {
        self.client
            .allocs()
            .restart(alloc_id, task, all_tasks)
            .await
    }

    async fn node(&self, node_id: &str) -> Result<Node> {
        self.client.nodes().get(node_id).await
    }

    async fn nodes(&self, prefix: &str) -> Result<Vec<Node>> {
        self.client.nodes().list(prefix).await
    }

    async fn node_allocations(&self, node_id: &str) -> Result<Vec<Allocation>> {
        self.client.nodes().allocations(node_id).await
    }

    async fn set_eligibility(&self, node_id: &str, eligible: bool) -> Result<NodeUpdateResponse> {
        self.client.nodes().set_eligibility(node_id, eligible).await
    }

    async fn drain(
        &self,
        node_id: &str,
        strategy: Option<DrainStrategy>,
        mark_eligible: bool,
    ) -> Result<NodeUpdateResponse> {
        self.client
            .nodes()
            .drain(node_id, strategy, mark_eligible)
            .await
    }

    async fn deployments(&self, prefix: &str) -> Result<Vec<Deployment>> {
        self.client.deployments().list(prefix).await
    }

    async fn deployment_after(
        &self,
        deployment_id: &str,
        min_revision: i64,
        wait: Duration,
    ) -> Result<Read<Deployment>> {
        self.client
            .deployments()
            .get_after(deployment_id, min_revision, wait)
            .await
    }

    async fn promote_deployment(
        &self,
        deployment_id: &str,
        groups: Vec<String>,
    ) -> Result<DeploymentUpdateResponse> {
        self.client
            .deployments()
            .promote(deployment_id, groups)
            .await
    }

    async fn fail_deployment(&self, deployment_id: &str) -> Result<DeploymentUpdateResponse> {
        self.client.deployments().fail(deployment_id).await
    }

    async fn pause_deployment(
        &self,
        deployment_id: &str,
        pause: bool,
    ) -> Result<DeploymentUpdateResponse> {
        self.client.deployments().pause(deployment_id, pause).await
    }

    async fn garbage_collect(&self) -> Result<()> {
        self.client.garbage_collect().await.map(|_| ())
    }

    async fn leaders(&self) -> Result<BTreeMap<String, String>> {
        self.client.leaders().await
    }

    async fn variable(&self, path: &str) -> Result<VariableDecrypted> {
        self.client.variables().get(path).await
    }

    async fn variables(&self, prefix: &str) -> Result<Vec<VariableMetadata>> {
        self.client.variables().list(prefix).await
    }

    async fn put_variable(
        &self,
        namespace: &str,
        path: &str,
        items: BTreeMap<String, String>,
        cas: Option<i64>,
    ) -> Result<VariableWritten> {
        self.client
            .variables()
            .put_in(namespace, path, items, cas)
            .await
    }

    async fn delete_variable(
        &self,
        path: &str,
        cas: Option<i64>,
    ) -> Result<DeleteVariableResponse> {
        self.client.variables().delete(path, cas).await
    }

    async fn acl_bootstrap(&self) -> Result<AclToken> {
        self.client.acl().bootstrap().await
    }

    async fn acl_policies(&self) -> Result<Vec<AclPolicy>> {
        self.client.acl().policies().await
    }

    async fn acl_policy(&self, name: &str) -> Result<AclPolicy> {
        self.client.acl().policy(name).await
    }

    async fn upsert_acl_policy(&self, policy: AclPolicy) -> Result<()> {
        self.client.acl().upsert_policy(policy).await.map(|_| ())
    }

    async fn delete_acl_policy(&self, name: &str) -> Result<()> {
        self.client.acl().delete_policy(name).await.map(|_| ())
    }

    async fn acl_tokens(&self) -> Result<Vec<AclToken>> {
        self.client.acl().tokens().await
    }

    async fn acl_token(&self, accessor_id: &str) -> Result<AclToken> {
        self.client.acl().token(accessor_id).await
    }

    async fn own_acl_token(&self) -> Result<AclToken> {
        self.client.acl().own_token().await
    }

    async fn upsert_acl_token(&self, token: AclToken) -> Result<AclToken> {
        self.client.acl().upsert_token(token).await
    }

    async fn delete_acl_token(&self, accessor_id: &str) -> Result<()> {
        self.client
            .acl()
            .delete_token(accessor_id)
            .await
            .map(|_| ())
    }

    async fn nomad(&self, call: NomadCall) -> Result<Option<Value>> {
        Err(needs_http(&format!(
            "{} {}",
            call.method.as_str(),
            call.path
        )))
    }
}

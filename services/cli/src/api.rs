//! The api-gateway as the verbs ask it: the calls of a [`Backend`] (gRPC or
//! Nomad's HTTP API), each failure phrased for the operator with what the
//! command was doing.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use caravan_client::Client;
use caravan_proto::{
    AclPolicy, AclToken, AllocFileInfo, Allocation, DeleteVariableResponse, Deployment,
    DeploymentUpdateResponse, DeregisterJobResponse, DispatchJobRequest, DispatchJobResponse,
    DrainStrategy, Evaluation, ForcePeriodicJobResponse, Job, JobSummaryResponse, Node,
    NodeUpdateResponse, PlanJobResponse, PutVariableResponse, ReadAllocFileRequest,
    ReadLogsRequest, RegisterJobResponse, StopAllocationResponse, ValidateJobResponse,
    VariableDecrypted, VariableMetadata,
};
use serde_json::Value;

use crate::backend::grpc::GrpcBackend;
use crate::backend::http::HttpBackend;
use crate::backend::{Backend, ByteStream, NomadCall};
use crate::connection::{Connection, Endpoint};
use crate::error::CliError;

pub use caravan_client::{DEFAULT_ADDRESS, Read};

/// How long one attempt of a gRPC call may take: long enough for a plan or a
/// garbage collection of a big cluster (blocking reads add their wait).
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

type Result<T> = std::result::Result<T, CliError>;

/// A client of one api-gateway, in one namespace, with one token.
#[derive(Debug, Clone)]
pub struct Api {
    backend: Arc<dyn Backend>,
}

impl Api {
    /// A client of the gateway's gRPC API at `address` (`http://host:port` or
    /// `host:port`) reading and writing in `namespace`; connects on first use.
    pub fn new(address: &str, namespace: &str) -> Result<Api> {
        Api::connect(&Connection {
            endpoint: Endpoint::Grpc(address.to_string()),
            token: None,
            namespace: namespace.to_string(),
            region: None,
            http_auth: None,
            tls: Default::default(),
        })
    }

    /// A client of the gateway `connection` names, over the API it names.
    pub fn connect(connection: &Connection) -> Result<Api> {
        let backend: Arc<dyn Backend> = match &connection.endpoint {
            Endpoint::Http(_) => Arc::new(HttpBackend::new(connection).map_err(setup_error)?),
            Endpoint::Grpc(address) => {
                Arc::new(GrpcBackend::new(grpc_client(address, connection)?))
            }
        };
        Ok(Api { backend })
    }

    /// The gateway's address.
    pub fn address(&self) -> &str {
        self.backend.address()
    }

    /// The namespace of reads and writes.
    pub fn namespace(&self) -> &str {
        self.backend.namespace()
    }

    /// Whether the CLI speaks Nomad's HTTP API (else Caravan's gRPC API).
    pub fn speaks_http(&self) -> bool {
        self.backend.speaks_http()
    }

    /// A request to Nomad's HTTP API (HTTP only), made to do `context`.
    pub async fn nomad(&self, context: &str, call: NomadCall) -> Result<Option<Value>> {
        let resp = self.backend.nomad(call).await;
        resp.map_err(sdk(context))
    }

    /// A GET of Nomad's HTTP API whose answer must be JSON.
    pub async fn nomad_get(&self, context: &str, call: NomadCall) -> Result<Value> {
        Ok(self.nomad(context, call).await?.unwrap_or(Value::Null))
    }

    /// Registers a job (with the source it was parsed from, kept with its
    /// version); with `check_index`, only if its modify revision matches.
    pub async fn register_job(
        &self,
        job: Job,
        check_index: Option<i64>,
        submission: Option<caravan_proto::JobSubmission>,
    ) -> Result<RegisterJobResponse> {
        let resp = self
            .backend
            .register_job(job, check_index, submission)
            .await;
        resp.map_err(sdk("Error submitting job"))
    }

    /// A scheduler dry run of a job, with the diff against the registered one.
    pub async fn plan_job(&self, job: Job) -> Result<PlanJobResponse> {
        let resp = self.backend.plan_job(job).await;
        resp.map_err(sdk("Error during plan"))
    }

    /// The gateway's validation of a job.
    pub async fn validate_job(&self, job: Job) -> Result<ValidateJobResponse> {
        let resp = self.backend.validate_job(job).await;
        resp.map_err(sdk("Error validating job"))
    }

    /// Stops (or with `purge`, removes) a job.
    pub async fn deregister_job(&self, job_id: &str, purge: bool) -> Result<DeregisterJobResponse> {
        let resp = self.backend.deregister_job(job_id, purge).await;
        resp.map_err(sdk("Error deregistering job"))
    }

    /// One job, with its derived status.
    pub async fn job(&self, job_id: &str) -> Result<Job> {
        let resp = self.backend.job(job_id).await;
        resp.map_err(sdk("Error querying job"))
    }

    /// The jobs whose ids start with `prefix`.
    pub async fn list_jobs(&self, prefix: &str) -> Result<Vec<Job>> {
        let resp = self.backend.jobs(prefix).await;
        resp.map_err(sdk("Error querying jobs"))
    }

    /// A job's allocations, terminal ones included.
    pub async fn job_allocations(&self, job_id: &str) -> Result<Vec<Allocation>> {
        let resp = self.backend.job_allocations(job_id).await;
        resp.map_err(sdk("Error querying job allocations"))
    }

    /// A job's evaluations.
    pub async fn job_evaluations(&self, job_id: &str) -> Result<Vec<Evaluation>> {
        let resp = self.backend.job_evaluations(job_id).await;
        resp.map_err(sdk("Error querying job evaluations"))
    }

    /// A job's allocation counts per task group.
    pub async fn job_summary(&self, job_id: &str) -> Result<JobSummaryResponse> {
        let resp = self.backend.job_summary(job_id).await;
        resp.map_err(sdk("Error querying job summary"))
    }

    /// Sets the count of one task group of a job.
    pub async fn scale_job(
        &self,
        job_id: &str,
        group: &str,
        count: i64,
        job_modify_revision: i64,
    ) -> Result<RegisterJobResponse> {
        let resp = (self.backend)
            .scale_job(job_id, group, count, job_modify_revision)
            .await;
        resp.map_err(sdk("Error submitting scaling request"))
    }

    /// One evaluation, answered once the state is past `min_revision` (0: at
    /// once) or `wait` has passed.
    pub async fn evaluation_after(
        &self,
        eval_id: &str,
        min_revision: i64,
        wait: Duration,
    ) -> Result<Read<Evaluation>> {
        let resp = self
            .backend
            .evaluation_after(eval_id, min_revision, wait)
            .await;
        resp.map_err(sdk("Error reading evaluation"))
    }

    /// One evaluation.
    pub async fn evaluation(&self, eval_id: &str) -> Result<Evaluation> {
        let resp = self
            .backend
            .evaluation_after(eval_id, 0, Duration::ZERO)
            .await;
        resp.map(|r| r.value)
            .map_err(sdk("Error reading evaluation"))
    }

    /// The evaluations whose ids start with `prefix`.
    pub async fn list_evaluations(&self, prefix: &str) -> Result<Vec<Evaluation>> {
        let resp = self.backend.evaluations(prefix).await;
        resp.map_err(sdk("Error querying evaluations"))
    }

    /// The allocations an evaluation placed or updated.
    pub async fn evaluation_allocations(&self, eval_id: &str) -> Result<Vec<Allocation>> {
        let resp = self.backend.evaluation_allocations(eval_id).await;
        resp.map_err(sdk("Error reading allocations"))
    }

    /// One allocation.
    pub async fn allocation(&self, alloc_id: &str) -> Result<Allocation> {
        let resp = self.backend.allocation(alloc_id).await;
        resp.map_err(sdk("Error querying allocation"))
    }

    /// The allocations whose ids start with `prefix`.
    pub async fn list_allocations(&self, prefix: &str) -> Result<Vec<Allocation>> {
        let resp = self.backend.allocations(prefix).await;
        resp.map_err(sdk("Error querying allocations"))
    }

    /// Stops an allocation; its job's scheduler replaces it.
    pub async fn stop_allocation(&self, alloc_id: &str) -> Result<StopAllocationResponse> {
        let resp = self.backend.stop_allocation(alloc_id).await;
        resp.map_err(sdk("Error stopping allocation"))
    }

    /// Opens the log stream of a task.
    pub async fn read_logs(&self, request: ReadLogsRequest) -> Result<ByteStream> {
        let resp = self.backend.logs(request).await;
        resp.map_err(sdk("Error reading file"))
    }

    /// A file's or directory's details in an allocation's directory.
    pub async fn stat_file(&self, alloc_id: &str, path: &str) -> Result<AllocFileInfo> {
        let resp = self.backend.stat_file(alloc_id, path).await;
        resp.map_err(sdk("Error querying file"))
    }

    /// A directory's entries in an allocation's directory.
    pub async fn list_files(&self, alloc_id: &str, path: &str) -> Result<Vec<AllocFileInfo>> {
        let resp = self.backend.list_files(alloc_id, path).await;
        resp.map_err(sdk("Error listing alloc dir"))
    }

    /// Opens a file of an allocation's directory.
    pub async fn read_file(&self, request: ReadAllocFileRequest) -> Result<ByteStream> {
        let resp = self.backend.read_file(request).await;
        resp.map_err(sdk("Error reading file"))
    }

    /// Opens the WebSocket of an `alloc exec` (`task`, `command`, `tty` in
    /// `query`).
    pub async fn exec_socket(
        &self,
        alloc_id: &str,
        query: &[(String, String)],
    ) -> Result<crate::backend::ExecSocket> {
        let resp = self.backend.exec_socket(alloc_id, query).await;
        resp.map_err(sdk("failed to exec into task"))
    }

    /// Sends a signal to an allocation's tasks (or one).
    pub async fn signal_allocation(
        &self,
        alloc_id: &str,
        task: Option<&str>,
        signal: &str,
    ) -> Result<()> {
        let resp = self.backend.signal(alloc_id, task, signal).await;
        resp.map_err(sdk("Error signalling allocation"))
    }

    /// Restarts an allocation's tasks (or one) in place.
    pub async fn restart_allocation(
        &self,
        alloc_id: &str,
        task: Option<&str>,
        all_tasks: bool,
    ) -> Result<()> {
        let resp = self
            .backend
            .restart_allocation(alloc_id, task, all_tasks)
            .await;
        resp.map_err(sdk("Failed to restart allocation"))
    }

    /// One node.
    pub async fn node(&self, node_id: &str) -> Result<Node> {
        let resp = self.backend.node(node_id).await;
        resp.map_err(sdk("Error querying node info"))
    }

    /// The nodes whose ids start with `prefix`.
    pub async fn list_nodes(&self, prefix: &str) -> Result<Vec<Node>> {
        let resp = self.backend.nodes(prefix).await;
        resp.map_err(sdk("Error querying node status"))
    }

    /// The allocations of a node.
    pub async fn node_allocations(&self, node_id: &str) -> Result<Vec<Allocation>> {
        let resp = self.backend.node_allocations(node_id).await;
        resp.map_err(sdk("Error querying node allocations"))
    }

    /// Marks a node eligible or ineligible for new placements.
    pub async fn update_eligibility(
        &self,
        node_id: &str,
        eligible: bool,
    ) -> Result<NodeUpdateResponse> {
        let resp = self.backend.set_eligibility(node_id, eligible).await;
        resp.map_err(sdk("Error updating scheduling eligibility"))
    }

    /// Starts (`Some`) or cancels (`None`) a drain.
    pub async fn update_drain(
        &self,
        node_id: &str,
        strategy: Option<DrainStrategy>,
        mark_eligible: bool,
    ) -> Result<NodeUpdateResponse> {
        let resp = self.backend.drain(node_id, strategy, mark_eligible).await;
        resp.map_err(sdk("Error updating drain specification"))
    }

    /// Every deployment of the namespace.
    pub async fn list_deployments(&self) -> Result<Vec<Deployment>> {
        self.list_deployments_prefix("").await
    }

    /// The deployments of the namespace whose ids start with `prefix`.
    pub async fn list_deployments_prefix(&self, prefix: &str) -> Result<Vec<Deployment>> {
        let resp = self.backend.deployments(prefix).await;
        resp.map_err(sdk("Error querying deployments"))
    }

    /// One deployment.
    pub async fn deployment(&self, deployment_id: &str) -> Result<Deployment> {
        let resp = self
            .deployment_after(deployment_id, 0, Duration::ZERO)
            .await;
        resp.map(|r| r.value)
    }

    /// One deployment, answered once the state is past `min_revision` (0:
    /// at once) or `wait` has passed.
    pub async fn deployment_after(
        &self,
        deployment_id: &str,
        min_revision: i64,
        wait: Duration,
    ) -> Result<Read<Deployment>> {
        let resp = self
            .backend
            .deployment_after(deployment_id, min_revision, wait)
            .await;
        resp.map_err(sdk("Error retrieving deployment"))
    }

    /// Promotes the canaries of every group (`groups` empty) or of `groups`.
    pub async fn promote_deployment(
        &self,
        deployment_id: &str,
        groups: Vec<String>,
    ) -> Result<DeploymentUpdateResponse> {
        let resp = self.backend.promote_deployment(deployment_id, groups).await;
        resp.map_err(sdk("Error promoting deployment"))
    }

    /// Marks a deployment failed (auto-revert applies).
    pub async fn fail_deployment(&self, deployment_id: &str) -> Result<DeploymentUpdateResponse> {
        let resp = self.backend.fail_deployment(deployment_id).await;
        resp.map_err(sdk("Error failing deployment"))
    }

    /// Pauses (`pause`) or resumes a deployment.
    pub async fn pause_deployment(
        &self,
        deployment_id: &str,
        pause: bool,
    ) -> Result<DeploymentUpdateResponse> {
        let context = if pause {
            "Error pausing deployment"
        } else {
            "Error resuming deployment"
        };
        let resp = self.backend.pause_deployment(deployment_id, pause).await;
        resp.map_err(sdk(context))
    }

    /// A job's kept versions, newest first.
    pub async fn job_versions(&self, job_id: &str) -> Result<Vec<Job>> {
        let resp = self.backend.job_versions(job_id).await;
        resp.map_err(sdk("Error retrieving job versions"))
    }

    /// Registers version `version` of a job again as its newest version.
    pub async fn revert_job(&self, job_id: &str, version: u64) -> Result<RegisterJobResponse> {
        let resp = self.backend.revert_job(job_id, version).await;
        resp.map_err(sdk("Error reverting job"))
    }

    /// Launches a child of a parameterized job.
    pub async fn dispatch_job(&self, request: DispatchJobRequest) -> Result<DispatchJobResponse> {
        let resp = self.backend.dispatch_job(request).await;
        resp.map_err(sdk("Failed to dispatch job"))
    }

    /// Launches a periodic job's child now.
    pub async fn force_periodic(&self, job_id: &str) -> Result<ForcePeriodicJobResponse> {
        let resp = self.backend.force_periodic(job_id).await;
        let context = format!("Error forcing periodic job {job_id:?}");
        resp.map_err(|e| CliError::sdk(&context, e))
    }

    /// Creates an evaluation of a job; the evaluation's id.
    pub async fn evaluate_job(&self, job_id: &str, force_reschedule: bool) -> Result<String> {
        let resp = self.backend.evaluate_job(job_id, force_reschedule).await;
        resp.map_err(sdk("Failed evaluate job"))
    }

    /// Runs a garbage collection now.
    pub async fn garbage_collect(&self) -> Result<()> {
        let resp = self.backend.garbage_collect().await;
        resp.map_err(sdk("Error running system garbage-collection"))
    }

    /// The leader of each leader-elected service.
    pub async fn leaders(&self) -> Result<BTreeMap<String, String>> {
        let resp = self.backend.leaders().await;
        resp.map_err(sdk("Error querying leaders"))
    }

    /// One variable with its items.
    pub async fn variable(&self, path: &str) -> Result<VariableDecrypted> {
        let resp = self.backend.variable(path).await;
        resp.map_err(sdk("Error retrieving variable"))
    }

    /// The metadata of the variables whose paths start with `prefix`.
    pub async fn list_variables(&self, prefix: &str) -> Result<Vec<VariableMetadata>> {
        let resp = self.backend.variables(prefix).await;
        resp.map_err(sdk("Error retrieving vars"))
    }

    /// Writes a variable in `namespace`; with `cas`, only if its modify
    /// revision is `cas`.
    pub async fn put_variable(
        &self,
        namespace: &str,
        path: &str,
        items: BTreeMap<String, String>,
        cas: Option<i64>,
    ) -> Result<PutVariableResponse> {
        let resp = self.backend.put_variable(namespace, path, items, cas).await;
        resp.map_err(sdk("Error creating variable"))
    }

    /// Deletes a variable; with `cas`, only if its modify revision is `cas`.
    pub async fn delete_variable(
        &self,
        path: &str,
        cas: Option<i64>,
    ) -> Result<DeleteVariableResponse> {
        let resp = self.backend.delete_variable(path, cas).await;
        resp.map_err(sdk("Error purging variable"))
    }

    /// The first management token.
    pub async fn acl_bootstrap(&self) -> Result<AclToken> {
        let resp = self.backend.acl_bootstrap().await;
        resp.map_err(sdk("Error bootstrapping"))
    }

    /// The policies the caller may read.
    pub async fn acl_policies(&self) -> Result<Vec<AclPolicy>> {
        let resp = self.backend.acl_policies().await;
        resp.map_err(sdk("Error listing ACL policies"))
    }

    /// One policy.
    pub async fn acl_policy(&self, name: &str) -> Result<AclPolicy> {
        let resp = self.backend.acl_policy(name).await;
        resp.map_err(sdk("Error reading ACL policy"))
    }

    /// Creates or replaces a policy.
    pub async fn upsert_acl_policy(&self, policy: AclPolicy) -> Result<()> {
        let resp = self.backend.upsert_acl_policy(policy).await;
        resp.map_err(sdk("Error writing ACL policy"))
    }

    /// Deletes a policy.
    pub async fn delete_acl_policy(&self, name: &str) -> Result<()> {
        let resp = self.backend.delete_acl_policy(name).await;
        resp.map_err(sdk("Error deleting ACL policy"))
    }

    /// Every token's stub.
    pub async fn acl_tokens(&self) -> Result<Vec<AclToken>> {
        let resp = self.backend.acl_tokens().await;
        resp.map_err(sdk("Error listing tokens"))
    }

    /// One token.
    pub async fn acl_token(&self, accessor_id: &str) -> Result<AclToken> {
        let resp = self.backend.acl_token(accessor_id).await;
        resp.map_err(sdk("Error fetching token"))
    }

    /// The caller's own token.
    pub async fn own_acl_token(&self) -> Result<AclToken> {
        let resp = self.backend.own_acl_token().await;
        resp.map_err(sdk("Error fetching self token"))
    }

    /// Creates a token.
    pub async fn upsert_acl_token(&self, token: AclToken) -> Result<AclToken> {
        let resp = self.backend.upsert_acl_token(token).await;
        resp.map_err(sdk("Error creating token"))
    }

    /// Deletes a token.
    pub async fn delete_acl_token(&self, accessor_id: &str) -> Result<()> {
        let resp = self.backend.delete_acl_token(accessor_id).await;
        resp.map_err(sdk("Error deleting token"))
    }
}

/// The SDK client of a gRPC connection.
fn grpc_client(address: &str, connection: &Connection) -> Result<Client> {
    let mut builder = Client::builder()
        .address(address)
        .namespace(&connection.namespace)
        .timeout(CALL_TIMEOUT);
    let tls = &connection.tls;
    if let (Some(ca), Some(cert), Some(key)) = (&tls.ca_cert, &tls.client_cert, &tls.client_key) {
        let read = |flag: &str, path: &std::path::Path| {
            std::fs::read(path).map_err(|e| {
                CliError::Usage(format!("Error reading -{flag} {}: {e}", path.display()))
            })
        };
        builder = builder.tls(
            read("ca-cert", ca)?,
            read("client-cert", cert)?,
            read("client-key", key)?,
        );
    }
    if let Some(token) = &connection.token {
        builder = builder.token(token);
    }
    builder.build().map_err(setup_error)
}

/// A client that could not be set up, phrased for the operator.
fn setup_error(err: caravan_client::Error) -> CliError {
    match err {
        caravan_client::Error::InvalidToken => {
            CliError::Usage("Invalid -token: not a printable ASCII secret".into())
        }
        caravan_client::Error::InvalidAddress { address, reason } => {
            CliError::Usage(format!("Invalid address {address:?}: {reason}"))
        }
        other => CliError::Other(other.to_string()),
    }
}

/// Phrases a failed call made to do `context`.
pub(crate) fn sdk(context: &str) -> impl FnOnce(caravan_client::Error) -> CliError + '_ {
    move |err| CliError::sdk(context, err)
}

//! The api-gateway as the CLI asks it: the calls of the Rust SDK
//! (`caravan-client`), each failure phrased for the operator with what the
//! command was doing.

use std::collections::BTreeMap;
use std::time::Duration;

use caravan_client::Client;
use caravan_client::proto::{
    Allocation, Deployment, DeploymentUpdateResponse, DeregisterJobResponse, DispatchJobResponse,
    DrainStrategy, Evaluation, ForcePeriodicJobResponse, GarbageCollectResponse, Job,
    JobSummaryResponse, LogChunk, Node, NodeUpdateResponse, PlanJobResponse, ReadLogsRequest,
    RegisterJobResponse, StopAllocationResponse, ValidateJobResponse,
};

use crate::error::CliError;

pub use caravan_client::{DEFAULT_ADDRESS, Read};

/// How long one attempt of a call may take: long enough for a plan or a
/// garbage collection of a big cluster (blocking reads add their wait).
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

type Result<T> = std::result::Result<T, CliError>;

/// The files a CLI calling a TLS gateway presents and trusts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The CA that signed the gateway's certificate.
    pub ca_cert: std::path::PathBuf,
    /// This CLI's certificate (`caravan tls cert create -cli`).
    pub client_cert: std::path::PathBuf,
    /// Its key.
    pub client_key: std::path::PathBuf,
}

/// A client of one api-gateway, in one namespace, with one token.
#[derive(Debug, Clone)]
pub struct Api {
    address: String,
    client: Client,
}

impl Api {
    /// A client of the gateway at `address` (`http://host:port` or
    /// `host:port`) reading and writing in `namespace`; connects on first use.
    pub fn new(address: &str, namespace: &str) -> Result<Api> {
        Api::with_tls(address, namespace, None, None)
    }

    /// A client of the gateway at `address` sending `token`, over TLS with
    /// `tls`'s files when given.
    pub fn with_tls(
        address: &str,
        namespace: &str,
        token: Option<&str>,
        tls: Option<&TlsFiles>,
    ) -> Result<Api> {
        let mut builder = Client::builder()
            .address(address)
            .namespace(namespace)
            .timeout(CALL_TIMEOUT);
        if let Some(tls) = tls {
            let read = |flag: &str, path: &std::path::Path| {
                std::fs::read(path).map_err(|e| {
                    CliError::Usage(format!("Error reading -{flag} {}: {e}", path.display()))
                })
            };
            builder = builder.tls(
                read("ca-cert", &tls.ca_cert)?,
                read("client-cert", &tls.client_cert)?,
                read("client-key", &tls.client_key)?,
            );
        }
        Api::finish(builder, address, token)
    }

    fn finish(
        mut builder: caravan_client::ClientBuilder,
        address: &str,
        token: Option<&str>,
    ) -> Result<Api> {
        if let Some(token) = token {
            builder = builder.token(token);
        }
        let client = builder.build().map_err(|e| match e {
            caravan_client::Error::InvalidToken => {
                CliError::Usage("Invalid -token: not a printable ASCII secret".into())
            }
            caravan_client::Error::InvalidAddress { reason, .. } => {
                CliError::Usage(format!("Invalid address {address:?}: {reason}"))
            }
            other => CliError::Other(other.to_string()),
        })?;
        Ok(Api {
            address: address.to_string(),
            client,
        })
    }

    /// The gateway's address.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The namespace of reads and writes.
    pub fn namespace(&self) -> &str {
        self.client.namespace()
    }

    /// The SDK client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Registers a job; with `check_index`, only if its modify revision matches.
    pub async fn register_job(
        &self,
        job: Job,
        check_index: Option<i64>,
    ) -> Result<RegisterJobResponse> {
        let jobs = self.client.jobs();
        let resp = match check_index {
            Some(index) => jobs.register_checked(job, index).await,
            None => jobs.register(job).await,
        };
        resp.map_err(sdk("Error submitting job"))
    }

    /// Asks the gateway to validate a job.
    pub async fn validate_job(&self, job: Job) -> Result<ValidateJobResponse> {
        let resp = self.client.jobs().validate(job).await;
        resp.map_err(sdk("Error validating job"))
    }

    /// A scheduler dry run of a job, with the diff against the registered one.
    pub async fn plan_job(&self, job: Job) -> Result<PlanJobResponse> {
        let resp = self.client.jobs().plan(job, true).await;
        resp.map_err(sdk("Error during plan"))
    }

    /// Stops (or with `purge`, removes) a job.
    pub async fn deregister_job(&self, job_id: &str, purge: bool) -> Result<DeregisterJobResponse> {
        let resp = self.client.jobs().stop(job_id, purge).await;
        resp.map_err(sdk("Error deregistering job"))
    }

    /// One job, with its derived status.
    pub async fn job(&self, job_id: &str) -> Result<Job> {
        let resp = self.client.jobs().get(job_id).await;
        resp.map_err(sdk("Error querying job"))
    }

    /// The jobs whose ids start with `prefix`.
    pub async fn list_jobs(&self, prefix: &str) -> Result<Vec<Job>> {
        let resp = self.client.jobs().list(prefix).await;
        resp.map_err(sdk("Error querying jobs"))
    }

    /// A job's allocations, terminal ones included.
    pub async fn job_allocations(&self, job_id: &str) -> Result<Vec<Allocation>> {
        let resp = self.client.jobs().allocations(job_id).await;
        resp.map_err(sdk("Error querying job allocations"))
    }

    /// A job's evaluations.
    pub async fn job_evaluations(&self, job_id: &str) -> Result<Vec<Evaluation>> {
        let resp = self.client.jobs().evaluations(job_id).await;
        resp.map_err(sdk("Error querying job evaluations"))
    }

    /// A job's allocation counts per task group.
    pub async fn job_summary(&self, job_id: &str) -> Result<JobSummaryResponse> {
        let resp = self.client.jobs().summary(job_id).await;
        resp.map_err(sdk("Error querying job summary"))
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
            .client
            .evals()
            .get_after(eval_id, min_revision, wait)
            .await;
        resp.map_err(sdk("Error reading evaluation"))
    }

    /// One evaluation.
    pub async fn evaluation(&self, eval_id: &str) -> Result<Evaluation> {
        let resp = self.client.evals().get(eval_id).await;
        resp.map_err(sdk("Error reading evaluation"))
    }

    /// The evaluations whose ids start with `prefix`.
    pub async fn list_evaluations(&self, prefix: &str) -> Result<Vec<Evaluation>> {
        let resp = self.client.evals().list(prefix).await;
        resp.map_err(sdk("Error querying evaluations"))
    }

    /// The allocations an evaluation placed or updated.
    pub async fn evaluation_allocations(&self, eval_id: &str) -> Result<Vec<Allocation>> {
        let resp = self.client.evals().allocations(eval_id).await;
        resp.map_err(sdk("Error reading allocations"))
    }

    /// One allocation.
    pub async fn allocation(&self, alloc_id: &str) -> Result<Allocation> {
        let resp = self.client.allocs().get(alloc_id).await;
        resp.map_err(sdk("Error querying allocation"))
    }

    /// The allocations whose ids start with `prefix`.
    pub async fn list_allocations(&self, prefix: &str) -> Result<Vec<Allocation>> {
        let resp = self.client.allocs().list(prefix).await;
        resp.map_err(sdk("Error querying allocations"))
    }

    /// Stops an allocation; its job's scheduler replaces it.
    pub async fn stop_allocation(&self, alloc_id: &str) -> Result<StopAllocationResponse> {
        let resp = self.client.allocs().stop(alloc_id).await;
        resp.map_err(sdk("Error stopping allocation"))
    }

    /// Opens the log stream of a task.
    pub async fn read_logs(&self, request: ReadLogsRequest) -> Result<tonic::Streaming<LogChunk>> {
        let resp = self.client.allocs().logs(request).await;
        resp.map_err(sdk("Error reading file"))
    }

    /// One node.
    pub async fn node(&self, node_id: &str) -> Result<Node> {
        let resp = self.client.nodes().get(node_id).await;
        resp.map_err(sdk("Error querying node info"))
    }

    /// The nodes whose ids start with `prefix`.
    pub async fn list_nodes(&self, prefix: &str) -> Result<Vec<Node>> {
        let resp = self.client.nodes().list(prefix).await;
        resp.map_err(sdk("Error querying node status"))
    }

    /// The allocations of a node.
    pub async fn node_allocations(&self, node_id: &str) -> Result<Vec<Allocation>> {
        let resp = self.client.nodes().allocations(node_id).await;
        resp.map_err(sdk("Error querying node allocations"))
    }

    /// Marks a node eligible or ineligible for new placements.
    pub async fn update_eligibility(
        &self,
        node_id: &str,
        eligible: bool,
    ) -> Result<NodeUpdateResponse> {
        let resp = self.client.nodes().set_eligibility(node_id, eligible).await;
        resp.map_err(sdk("Error updating scheduling eligibility"))
    }

    /// Starts (`Some`) or cancels (`None`) a drain.
    pub async fn update_drain(
        &self,
        node_id: &str,
        strategy: Option<DrainStrategy>,
        mark_eligible: bool,
    ) -> Result<NodeUpdateResponse> {
        let resp = self
            .client
            .nodes()
            .drain(node_id, strategy, mark_eligible)
            .await;
        resp.map_err(sdk("Error updating drain specification"))
    }

    /// Every deployment of the namespace.
    pub async fn list_deployments(&self) -> Result<Vec<Deployment>> {
        self.list_deployments_prefix("").await
    }

    /// The deployments of the namespace whose ids start with `prefix`.
    pub async fn list_deployments_prefix(&self, prefix: &str) -> Result<Vec<Deployment>> {
        let resp = self.client.deployments().list(prefix).await;
        resp.map_err(sdk("Error querying deployments"))
    }

    /// One deployment.
    pub async fn deployment(&self, deployment_id: &str) -> Result<Deployment> {
        let resp = self.client.deployments().get(deployment_id).await;
        resp.map_err(sdk("Error retrieving deployment"))
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
            .client
            .deployments()
            .get_after(deployment_id, min_revision, wait)
            .await;
        resp.map_err(sdk("Error retrieving deployment"))
    }

    /// Promotes the canaries of every group (`groups` empty) or of `groups`.
    pub async fn promote_deployment(
        &self,
        deployment_id: &str,
        groups: Vec<String>,
    ) -> Result<DeploymentUpdateResponse> {
        let resp = self
            .client
            .deployments()
            .promote(deployment_id, groups)
            .await;
        resp.map_err(sdk("Error promoting deployment"))
    }

    /// Marks a deployment failed (auto-revert applies).
    pub async fn fail_deployment(&self, deployment_id: &str) -> Result<DeploymentUpdateResponse> {
        let resp = self.client.deployments().fail(deployment_id).await;
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
        let resp = self.client.deployments().pause(deployment_id, pause).await;
        resp.map_err(sdk(context))
    }

    /// A job's kept versions, newest first.
    pub async fn job_versions(&self, job_id: &str) -> Result<Vec<Job>> {
        let resp = self.client.jobs().versions(job_id).await;
        resp.map_err(sdk("Error retrieving job versions"))
    }

    /// Registers version `version` of a job again as its newest version.
    pub async fn revert_job(&self, job_id: &str, version: u64) -> Result<RegisterJobResponse> {
        let resp = self.client.jobs().revert(job_id, version).await;
        resp.map_err(sdk("Error reverting job"))
    }

    /// Launches a child of a parameterized job.
    pub async fn dispatch_job(
        &self,
        job_id: &str,
        payload: Vec<u8>,
        meta: BTreeMap<String, String>,
    ) -> Result<DispatchJobResponse> {
        let resp = self.client.jobs().dispatch(job_id, payload, meta).await;
        resp.map_err(sdk("Failed to dispatch job"))
    }

    /// Launches a periodic job's child now.
    pub async fn force_periodic(&self, job_id: &str) -> Result<ForcePeriodicJobResponse> {
        let resp = self.client.jobs().force_periodic(job_id).await;
        let context = format!("Error forcing periodic job {job_id:?}");
        resp.map_err(|e| CliError::sdk(&context, e))
    }

    /// Runs a garbage collection now.
    pub async fn garbage_collect(&self) -> Result<GarbageCollectResponse> {
        let resp = self.client.garbage_collect().await;
        resp.map_err(sdk("Error running system garbage-collection"))
    }

    /// The leader of each leader-elected service.
    pub async fn leaders(&self) -> Result<BTreeMap<String, String>> {
        let resp = self.client.leaders().await;
        resp.map_err(sdk("Error querying leaders"))
    }
}

/// Phrases a failed SDK call made to do `context`.
pub(crate) fn sdk(context: &str) -> impl FnOnce(caravan_client::Error) -> CliError + '_ {
    move |err| CliError::sdk(context, err)
}

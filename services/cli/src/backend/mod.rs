//! The one interface every verb calls, [`Backend`], and its two transports:
//! [`grpc::GrpcBackend`] over Caravan's gRPC API (the `caravan-client` SDK)
//! and [`http::HttpBackend`] over Nomad's HTTP API, which turns Nomad's JSON
//! back into Caravan's messages so the verbs and their views are written
//! once.
//!
//! What only the HTTP API offers (namespaces, node pools, the scheduler
//! configuration, variable locks, and Nomad's JSON itself for `-json` and
//! `-t`) goes through [`Backend::nomad`]; the gRPC transport refuses it with a
//! message naming the HTTP address to use.

pub mod grpc;
pub mod http;

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use caravan_client::Read;
use caravan_proto::{
    AclPolicy, AclToken, AllocFileInfo, Allocation, DeleteVariableResponse, Deployment,
    DeploymentUpdateResponse, DeregisterJobResponse, DispatchJobRequest, DispatchJobResponse,
    DrainStrategy, Evaluation, ForcePeriodicJobResponse, Job, JobSummaryResponse, Node,
    NodeUpdateResponse, PlanJobResponse, PutVariableResponse, ReadAllocFileRequest,
    ReadLogsRequest, RegisterJobResponse, StopAllocationResponse, ValidateJobResponse,
    VariableDecrypted, VariableMetadata,
};
use futures::stream::BoxStream;
use serde_json::Value;

pub use caravan_client::Error;

/// The result of one call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Bytes of a log or file as they arrive.
pub type ByteStream = BoxStream<'static, Result<Vec<u8>>>;

/// The WebSocket of one `alloc exec` (Nomad's HTTP API only).
pub type ExecSocket =
    tokio_tungstenite::WebSocketStream<hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>>;

/// An HTTP method of Nomad's API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// A read.
    Get,
    /// A write.
    Put,
    /// A write (Nomad takes PUT and POST alike).
    Post,
    /// A removal.
    Delete,
}

impl Method {
    /// The method's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Put => "PUT",
            Method::Post => "POST",
            Method::Delete => "DELETE",
        }
    }
}

/// One request to Nomad's HTTP API, beside the typed calls.
#[derive(Debug, Clone, PartialEq)]
pub struct NomadCall {
    /// The method.
    pub method: Method,
    /// The path, `/v1/...`, its segments already escaped.
    pub path: String,
    /// Query parameters besides `namespace` and `region`, which the
    /// transport adds.
    pub query: Vec<(String, String)>,
    /// The JSON body, if any.
    pub body: Option<Value>,
}

impl NomadCall {
    /// A GET of `path`.
    pub fn get(path: impl Into<String>) -> NomadCall {
        NomadCall {
            method: Method::Get,
            path: path.into(),
            query: Vec::new(),
            body: None,
        }
    }

    /// A write of `body` to `path` with `method`.
    pub fn write(method: Method, path: impl Into<String>, body: Option<Value>) -> NomadCall {
        NomadCall {
            method,
            path: path.into(),
            query: Vec::new(),
            body,
        }
    }

    /// Adds a query parameter.
    pub fn param(mut self, name: &str, value: impl Into<String>) -> NomadCall {
        self.query.push((name.to_string(), value.into()));
        self
    }
}

/// What a write of a variable did.
pub type VariableWritten = PutVariableResponse;

/// Everything the verbs ask of a cluster, answered as Caravan's messages.
/// Each method is one call of the gateway; errors carry the gateway's code
/// (gRPC) or status (HTTP) as [`Error`]'s kind.
#[async_trait]
pub trait Backend: Send + Sync + std::fmt::Debug {
    /// The address called, for messages.
    fn address(&self) -> &str;
    /// The namespace of reads and writes.
    fn namespace(&self) -> &str;
    /// Whether [`Backend::nomad`] is served (Nomad's HTTP API).
    fn speaks_http(&self) -> bool;
    /// Opens the WebSocket of an `alloc exec` with the endpoint's query
    /// (`task`, `command`, `tty`); only Nomad's HTTP API has one.
    async fn exec_socket(&self, alloc_id: &str, query: &[(String, String)]) -> Result<ExecSocket> {
        let _ = (alloc_id, query);
        Err(needs_http("alloc exec"))
    }

    // Jobs.
    /// Registers a job (with its submission, when given); with
    /// `check_index`, only if its modify revision matches.
    async fn register_job(
        &self,
        job: Job,
        check_index: Option<i64>,
        submission: Option<caravan_proto::JobSubmission>,
    ) -> Result<RegisterJobResponse>;
    /// A scheduler dry run of a job.
    async fn plan_job(&self, job: Job) -> Result<PlanJobResponse>;
    /// The gateway's validation of a job: its errors and warnings.
    async fn validate_job(&self, job: Job) -> Result<ValidateJobResponse>;
    /// Stops (or with `purge`, removes) a job.
    async fn deregister_job(&self, job_id: &str, purge: bool) -> Result<DeregisterJobResponse>;
    /// One job.
    async fn job(&self, job_id: &str) -> Result<Job>;
    /// The jobs whose ids start with `prefix`.
    async fn jobs(&self, prefix: &str) -> Result<Vec<Job>>;
    /// A job's allocations.
    async fn job_allocations(&self, job_id: &str) -> Result<Vec<Allocation>>;
    /// A job's evaluations.
    async fn job_evaluations(&self, job_id: &str) -> Result<Vec<Evaluation>>;
    /// A job's allocation counts per group.
    async fn job_summary(&self, job_id: &str) -> Result<JobSummaryResponse>;
    /// A job's kept versions, newest first.
    async fn job_versions(&self, job_id: &str) -> Result<Vec<Job>>;
    /// Registers version `version` of a job again.
    async fn revert_job(&self, job_id: &str, version: u64) -> Result<RegisterJobResponse>;
    /// Sets the count of one group; with a nonzero `job_modify_revision`,
    /// only while the job's is that one (`-check-index`).
    async fn scale_job(
        &self,
        job_id: &str,
        group: &str,
        count: i64,
        job_modify_revision: i64,
    ) -> Result<RegisterJobResponse>;
    /// Launches a child of a parameterized job (`request.job_id`) in the
    /// connection's namespace.
    async fn dispatch_job(&self, request: DispatchJobRequest) -> Result<DispatchJobResponse>;
    /// Launches a periodic job's child now.
    async fn force_periodic(&self, job_id: &str) -> Result<ForcePeriodicJobResponse>;
    /// Creates an evaluation of a job; the id of the evaluation.
    async fn evaluate_job(&self, job_id: &str, force_reschedule: bool) -> Result<String>;

    // Evaluations.
    /// One evaluation, once the state is past `min_revision` or `wait` passed.
    async fn evaluation_after(
        &self,
        eval_id: &str,
        min_revision: i64,
        wait: Duration,
    ) -> Result<Read<Evaluation>>;
    /// The evaluations whose ids start with `prefix`.
    async fn evaluations(&self, prefix: &str) -> Result<Vec<Evaluation>>;
    /// The allocations an evaluation placed or updated.
    async fn evaluation_allocations(&self, eval_id: &str) -> Result<Vec<Allocation>>;

    // Allocations.
    /// One allocation.
    async fn allocation(&self, alloc_id: &str) -> Result<Allocation>;
    /// The allocations whose ids start with `prefix`.
    async fn allocations(&self, prefix: &str) -> Result<Vec<Allocation>>;
    /// Stops an allocation.
    async fn stop_allocation(&self, alloc_id: &str) -> Result<StopAllocationResponse>;
    /// A task's log.
    async fn logs(&self, request: ReadLogsRequest) -> Result<ByteStream>;
    /// A file's or directory's details.
    async fn stat_file(&self, alloc_id: &str, path: &str) -> Result<AllocFileInfo>;
    /// A directory's entries.
    async fn list_files(&self, alloc_id: &str, path: &str) -> Result<Vec<AllocFileInfo>>;
    /// A file's bytes.
    async fn read_file(&self, request: ReadAllocFileRequest) -> Result<ByteStream>;
    /// Sends a signal to an allocation's tasks (or one).
    async fn signal(&self, alloc_id: &str, task: Option<&str>, signal: &str) -> Result<()>;
    /// Restarts an allocation's tasks (or one) in place.
    async fn restart_allocation(
        &self,
        alloc_id: &str,
        task: Option<&str>,
        all_tasks: bool,
    ) -> Result<()>;

    // Nodes.
    /// One node.
    async fn node(&self, node_id: &str) -> Result<Node>;
    /// The nodes whose ids start with `prefix`.
    async fn nodes(&self, prefix: &str) -> Result<Vec<Node>>;
    /// A node's allocations.
    async fn node_allocations(&self, node_id: &str) -> Result<Vec<Allocation>>;
    /// Marks a node eligible or not.
    async fn set_eligibility(&self, node_id: &str, eligible: bool) -> Result<NodeUpdateResponse>;
    /// Starts (`Some`) or cancels a drain.
    async fn drain(
        &self,
        node_id: &str,
        strategy: Option<DrainStrategy>,
        mark_eligible: bool,
    ) -> Result<NodeUpdateResponse>;

    // Deployments.
    /// The deployments whose ids start with `prefix`.
    async fn deployments(&self, prefix: &str) -> Result<Vec<Deployment>>;
    /// One deployment, once the state is past `min_revision` or `wait` passed.
    async fn deployment_after(
        &self,
        deployment_id: &str,
        min_revision: i64,
        wait: Duration,
    ) -> Result<Read<Deployment>>;
    /// Promotes canaries (all groups when `groups` is empty).
    async fn promote_deployment(
        &self,
        deployment_id: &str,
        groups: Vec<String>,
    ) -> Result<DeploymentUpdateResponse>;
    /// Marks a deployment failed.
    async fn fail_deployment(&self, deployment_id: &str) -> Result<DeploymentUpdateResponse>;
    /// Pauses or resumes a deployment.
    async fn pause_deployment(
        &self,
        deployment_id: &str,
        pause: bool,
    ) -> Result<DeploymentUpdateResponse>;

    // The cluster.
    /// Runs a garbage collection now.
    async fn garbage_collect(&self) -> Result<()>;
    /// The leader of each leader-elected service.
    async fn leaders(&self) -> Result<BTreeMap<String, String>>;

    // Variables.
    /// One variable with its items.
    async fn variable(&self, path: &str) -> Result<VariableDecrypted>;
    /// The metadata of the variables under `prefix`.
    async fn variables(&self, prefix: &str) -> Result<Vec<VariableMetadata>>;
    /// Writes a variable in `namespace`, with check-and-set when `cas` is given.
    async fn put_variable(
        &self,
        namespace: &str,
        path: &str,
        items: BTreeMap<String, String>,
        cas: Option<i64>,
    ) -> Result<VariableWritten>;
    /// Deletes a variable, with check-and-set when `cas` is given.
    async fn delete_variable(&self, path: &str, cas: Option<i64>)
    -> Result<DeleteVariableResponse>;

    // ACLs.
    /// The first management token.
    async fn acl_bootstrap(&self) -> Result<AclToken>;
    /// The policies the caller may read.
    async fn acl_policies(&self) -> Result<Vec<AclPolicy>>;
    /// One policy.
    async fn acl_policy(&self, name: &str) -> Result<AclPolicy>;
    /// Creates or replaces a policy.
    async fn upsert_acl_policy(&self, policy: AclPolicy) -> Result<()>;
    /// Deletes a policy.
    async fn delete_acl_policy(&self, name: &str) -> Result<()>;
    /// Every token's stub.
    async fn acl_tokens(&self) -> Result<Vec<AclToken>>;
    /// One token.
    async fn acl_token(&self, accessor_id: &str) -> Result<AclToken>;
    /// The caller's own token.
    async fn own_acl_token(&self) -> Result<AclToken>;
    /// Creates (or updates, with an accessor) a token.
    async fn upsert_acl_token(&self, token: AclToken) -> Result<AclToken>;
    /// Deletes a token.
    async fn delete_acl_token(&self, accessor_id: &str) -> Result<()>;

    /// A request to Nomad's HTTP API answered with its JSON (`None` for an
    /// empty body): what `-json` and `-t` print, and what only that API
    /// offers. The gRPC transport refuses it.
    async fn nomad(&self, call: NomadCall) -> Result<Option<Value>>;
}

/// A path segment escaped as Nomad's API client escapes ids (`web app` → `web%20app`).
pub fn segment(id: &str) -> String {
    http::escape_segment(id)
}

/// The refusal of an HTTP-only request by the gRPC transport.
pub fn needs_http(what: &str) -> Error {
    Error::Config(format!(
        "{what} needs Nomad's HTTP API: set -address (or NOMAD_ADDR) to the gateway's \
         http:// address (`caravan dev` serves it on http://127.0.0.1:4646) instead of \
         -grpc-address or CARAVAN_ADDR"
    ))
}

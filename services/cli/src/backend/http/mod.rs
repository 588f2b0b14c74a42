//! [`Backend`] over Nomad's HTTP API: each call is one request of Nomad's
//! documented API, its JSON read back by [`decode`].

mod client;
pub mod decode;
mod frames;
pub mod json;

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine;
use caravan_client::Read;
use caravan_model::NomadName;
use caravan_proto::{
    AclPolicy, AclToken, AllocFileInfo, Allocation, DeleteVariableResponse, Deployment,
    DeploymentUpdateResponse, DeregisterJobResponse, DispatchJobRequest, DispatchJobResponse,
    DrainStrategy, Evaluation, ForcePeriodicJobResponse, Job, JobSummaryResponse, Node,
    NodeUpdateResponse, PlanJobResponse, PutVariableResponse, ReadAllocFileRequest,
    ReadLogsRequest, RegisterJobResponse, SchedulingEligibility, StopAllocationResponse,
    ValidateJobResponse, VariableDecrypted, VariableMetadata,
};
use futures::StreamExt;
use serde_json::{Value, json};

use client::unexpected_body;
pub use client::{HttpClient, escape_segment};
use json::J;

use super::{Backend, ByteStream, Method, NomadCall, Result, VariableWritten};
use crate::connection::Connection;

/// A client of one gateway's HTTP API.
#[derive(Debug, Clone)]
pub struct HttpBackend {
    client: HttpClient,
}

/// A query parameter.
fn p(name: &str, value: impl Into<String>) -> (String, String) {
    (name.to_string(), value.into())
}

/// A Go duration of whole milliseconds, as `?wait=` takes it.
fn go_wait(wait: Duration) -> String {
    format!("{}ms", wait.as_millis())
}

impl HttpBackend {
    /// The backend of `connection`, whose endpoint is HTTP.
    pub fn new(connection: &Connection) -> Result<HttpBackend> {
        Ok(HttpBackend {
            client: HttpClient::new(connection)?,
        })
    }

    /// A call whose answer must be JSON.
    async fn json(
        &self,
        method: Method,
        path: &str,
        query: &[(String, String)],
        body: Option<Value>,
    ) -> Result<(Value, Option<i64>)> {
        let reply = self.client.call(method, path, query, body.as_ref()).await?;
        let value = reply
            .json(self.client.address())?
            .ok_or_else(|| unexpected_body(self.client.address(), &format!("{path}: empty")))?;
        Ok((value, reply.index))
    }

    async fn get(&self, path: &str, query: &[(String, String)]) -> Result<Value> {
        Ok(self.json(Method::Get, path, query, None).await?.0)
    }

    async fn put(&self, path: &str, body: Value) -> Result<Value> {
        Ok(self.json(Method::Put, path, &[], Some(body)).await?.0)
    }

    /// A list answer decoded item by item.
    async fn list<T>(
        &self,
        path: &str,
        query: &[(String, String)],
        item: fn(J<'_>) -> T,
    ) -> Result<Vec<T>> {
        let value = self.get(path, query).await?;
        match &value {
            Value::Array(items) => Ok(items.iter().map(|v| item(J(v))).collect()),
            Value::Null => Ok(Vec::new()),
            _ => Err(unexpected_body(
                self.client.address(),
                &format!("{path}: not a list"),
            )),
        }
    }

    /// A job in Nomad's JSON, parsed as a job file is.
    fn job_of(&self, value: &Value) -> Result<Job> {
        let body = value.to_string();
        let options = caravan_jobspec::ParseOptions {
            max_bytes: body.len().max(caravan_jobspec::DEFAULT_MAX_JOB_BYTES),
        };
        caravan_jobspec::parse_json(body.as_bytes(), &options)
            .map(|parsed| parsed.job)
            .map_err(|e| unexpected_body(self.client.address(), &format!("a job: {e}")))
    }

    fn job_path(job_id: &str, rest: &str) -> String {
        format!("/v1/job/{}{rest}", escape_segment(job_id))
    }

    fn registered(v: &Value) -> RegisterJobResponse {
        let v = J(v);
        RegisterJobResponse {
            eval_id: v.s("EvalID"),
            eval_create_revision: v.i("EvalCreateIndex"),
            job_modify_revision: v.i("JobModifyIndex"),
            warnings: decode::warnings(v),
        }
    }

    fn deployment_update(v: &Value) -> DeploymentUpdateResponse {
        let v = J(v);
        DeploymentUpdateResponse {
            eval_id: v.s("EvalID"),
            revision: v.i("DeploymentModifyIndex").max(v.i("Index")),
        }
    }

    fn node_update(v: &Value) -> NodeUpdateResponse {
        let v = J(v);
        NodeUpdateResponse {
            eval_ids: v.strings("EvalIDs"),
            revision: v.i("NodeModifyIndex").max(v.i("Index")),
        }
    }

    /// A variable write or delete, whose conflict (409) carries the winner.
    async fn variable_write(
        &self,
        method: Method,
        path: &str,
        query: &[(String, String)],
        body: Option<Value>,
    ) -> Result<(bool, Option<VariableDecrypted>, i64)> {
        let target = format!("/v1/var/{}", variable_path(path));
        let reply = self
            .client
            .call_any(method, &target, query, body.as_ref())
            .await?;
        let value = reply.json(self.client.address()).ok().flatten();
        let variable = value
            .as_ref()
            .filter(|v| v.is_object())
            .map(|v| decode::variable(J(v)));
        match reply.status {
            200..=299 => Ok((true, variable, reply.index.unwrap_or(0))),
            409 => Ok((false, variable, reply.index.unwrap_or(0))),
            status => Err(client::status_error(
                hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::BAD_GATEWAY),
                &String::from_utf8_lossy(&reply.body),
            )),
        }
    }
}

/// A variable path as Nomad's API takes it: its own slashes kept, each
/// segment escaped.
fn variable_path(path: &str) -> String {
    path.trim_start_matches('/')
        .split('/')
        .map(escape_segment)
        .collect::<Vec<_>>()
        .join("/")
}

#[async_trait]
impl Backend for HttpBackend {
    fn address(&self) -> &str {
        self.client.address()
    }

    fn speaks_http(&self) -> bool {
        true
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
        let mut body = json!({ "Job": caravan_jobspec::render_json(&job) });
        if let Some(index) = check_index {
            body["EnforceIndex"] = json!(true);
            body["JobModifyIndex"] = json!(index);
        }
        if let Some(s) = submission {
            body["Submission"] = json!({
                "Source": s.source,
                "Format": s.format,
                "VariableFlags": s.variable_flags,
                "Variables": s.variables,
            });
        }
        Ok(Self::registered(&self.put("/v1/jobs", body).await?))
    }

    async fn plan_job(&self, job: Job) -> Result<PlanJobResponse> {
        let path = Self::job_path(&job.id, "/plan");
        let body = json!({
            "Job": caravan_jobspec::render_json(&job),
            "Diff": true,
            "PolicyOverride": false,
        });
        Ok(decode::plan_response(J(&self.put(&path, body).await?)))
    }

    async fn validate_job(&self, job: Job) -> Result<ValidateJobResponse> {
        let body = json!({ "Job": caravan_jobspec::render_json(&job) });
        let v = self.put("/v1/validate/job", body).await?;
        let v = J(&v);
        Ok(ValidateJobResponse {
            errors: v.strings("ValidationErrors"),
            warnings: decode::warnings(v),
        })
    }

    async fn deregister_job(&self, job_id: &str, purge: bool) -> Result<DeregisterJobResponse> {
        let query = [p("purge", purge.to_string())];
        let (v, _) = self
            .json(Method::Delete, &Self::job_path(job_id, ""), &query, None)
            .await?;
        let v = J(&v);
        Ok(DeregisterJobResponse {
            eval_id: v.s("EvalID"),
            eval_create_revision: v.i("EvalCreateIndex"),
            job_modify_revision: v.i("JobModifyIndex"),
        })
    }

    async fn job(&self, job_id: &str) -> Result<Job> {
        let v = self.get(&Self::job_path(job_id, ""), &[]).await?;
        self.job_of(&v)
    }

    async fn jobs(&self, prefix: &str) -> Result<Vec<Job>> {
        self.list("/v1/jobs", &[p("prefix", prefix)], decode::job_stub)
            .await
    }

    async fn job_allocations(&self, job_id: &str) -> Result<Vec<Allocation>> {
        let path = Self::job_path(job_id, "/allocations");
        self.list(&path, &[p("all", "true")], decode::allocation)
            .await
    }

    async fn job_evaluations(&self, job_id: &str) -> Result<Vec<Evaluation>> {
        let path = Self::job_path(job_id, "/evaluations");
        self.list(&path, &[], decode::evaluation).await
    }

    async fn job_summary(&self, job_id: &str) -> Result<JobSummaryResponse> {
        let (v, index) = self
            .json(Method::Get, &Self::job_path(job_id, "/summary"), &[], None)
            .await?;
        let j = J(&v);
        Ok(JobSummaryResponse {
            job_id: j.s("JobID"),
            namespace: j.s("Namespace"),
            summary: decode::group_summaries(j),
            meta: Some(caravan_proto::QueryMeta {
                revision: index.unwrap_or(0),
                known_leader: true,
            }),
        })
    }

    async fn job_versions(&self, job_id: &str) -> Result<Vec<Job>> {
        let v = self.get(&Self::job_path(job_id, "/versions"), &[]).await?;
        let versions = match v.get("Versions") {
            Some(Value::Array(items)) => items,
            _ => {
                return Err(unexpected_body(
                    self.client.address(),
                    "job versions: no Versions list",
                ));
            }
        };
        versions.iter().map(|j| self.job_of(j)).collect()
    }

    async fn revert_job(&self, job_id: &str, version: u64) -> Result<RegisterJobResponse> {
        let body = json!({"JobID": job_id, "JobVersion": version});
        let v = self.put(&Self::job_path(job_id, "/revert"), body).await?;
        Ok(Self::registered(&v))
    }

    async fn scale_job(
        &self,
        job_id: &str,
        group: &str,
        count: i64,
        job_modify_revision: i64,
    ) -> Result<RegisterJobResponse> {
        let body = json!({
            "Count": count,
            "Target": {"Job": job_id, "Group": group},
            "Message": "submitted using the Caravan CLI",
            "PolicyOverride": false,
            "JobModifyIndex": job_modify_revision,
        });
        let v = self.put(&Self::job_path(job_id, "/scale"), body).await?;
        Ok(Self::registered(&v))
    }

    async fn dispatch_job(&self, request: DispatchJobRequest) -> Result<DispatchJobResponse> {
        let job_id = &request.job_id;
        let mut body = json!({ "JobID": job_id, "Meta": request.meta });
        if !request.payload.is_empty() {
            body["Payload"] =
                json!(base64::engine::general_purpose::STANDARD.encode(&request.payload));
        }
        if !request.id_prefix_template.is_empty() {
            body["IdPrefixTemplate"] = json!(request.id_prefix_template);
        }
        // Nomad's API sends the token as a write option: `?idempotency_token=`.
        let mut query = Vec::new();
        if !request.idempotency_token.is_empty() {
            query.push(p("idempotency_token", request.idempotency_token.clone()));
        }
        let path = Self::job_path(job_id, "/dispatch");
        let (v, _) = self.json(Method::Put, &path, &query, Some(body)).await?;
        let v = J(&v);
        Ok(DispatchJobResponse {
            dispatched_job_id: v.s("DispatchedJobID"),
            eval_id: v.s("EvalID"),
            eval_create_revision: v.i("EvalCreateIndex"),
            job_create_revision: v.i("JobCreateIndex"),
        })
    }

    async fn force_periodic(&self, job_id: &str) -> Result<ForcePeriodicJobResponse> {
        let path = Self::job_path(job_id, "/periodic/force");
        let (v, _) = self.json(Method::Put, &path, &[], None).await?;
        let v = J(&v);
        Ok(ForcePeriodicJobResponse {
            dispatched_job_id: v.s("DispatchedJobID"),
            eval_id: v.s("EvalID"),
            eval_create_revision: v.i("EvalCreateIndex"),
        })
    }

    async fn evaluate_job(&self, job_id: &str, force_reschedule: bool) -> Result<String> {
        let body = json!({
            "JobID": job_id,
            "EvalOptions": {"ForceReschedule": force_reschedule},
        });
        let v = self.put(&Self::job_path(job_id, "/evaluate"), body).await?;
        Ok(J(&v).s("EvalID"))
    }

    async fn evaluation_after(
        &self,
        eval_id: &str,
        min_revision: i64,
        wait: Duration,
    ) -> Result<Read<Evaluation>> {
        let path = format!("/v1/evaluation/{}", escape_segment(eval_id));
        let mut query = Vec::new();
        if min_revision > 0 {
            query.push(p("index", min_revision.to_string()));
            query.push(p("wait", go_wait(wait)));
        }
        let (v, index) = self.json(Method::Get, &path, &query, None).await?;
        Ok(Read {
            value: decode::evaluation(J(&v)),
            revision: index.unwrap_or(0),
        })
    }

    async fn evaluations(&self, prefix: &str) -> Result<Vec<Evaluation>> {
        self.list(
            "/v1/evaluations",
            &[p("prefix", prefix)],
            decode::evaluation,
        )
        .await
    }

    async fn evaluation_allocations(&self, eval_id: &str) -> Result<Vec<Allocation>> {
        let path = format!("/v1/evaluation/{}/allocations", escape_segment(eval_id));
        self.list(&path, &[], decode::allocation).await
    }

    async fn allocation(&self, alloc_id: &str) -> Result<Allocation> {
        let path = format!("/v1/allocation/{}", escape_segment(alloc_id));
        Ok(decode::allocation(J(&self.get(&path, &[]).await?)))
    }

    async fn allocations(&self, prefix: &str) -> Result<Vec<Allocation>> {
        self.list(
            "/v1/allocations",
            &[p("prefix", prefix)],
            decode::allocation,
        )
        .await
    }

    async fn stop_allocation(&self, alloc_id: &str) -> Result<StopAllocationResponse> {
        let path = format!("/v1/allocation/{}/stop", escape_segment(alloc_id));
        let (v, _) = self.json(Method::Put, &path, &[], None).await?;
        let v = J(&v);
        Ok(StopAllocationResponse {
            eval_id: v.s("EvalID"),
            revision: v.i("Index"),
        })
    }

    async fn logs(&self, request: ReadLogsRequest) -> Result<ByteStream> {
        let path = format!("/v1/client/fs/logs/{}", escape_segment(&request.alloc_id));
        let mut query = vec![
            p("task", request.task.clone()),
            p("type", request.stream.clone()),
            p("follow", request.follow.to_string()),
            p("plain", "true"),
        ];
        if request.from_end {
            query.push(p("origin", "end"));
        }
        if request.offset != 0 {
            query.push(p("offset", request.offset.to_string()));
        }
        let stream = self.client.stream(&path, &query).await?;
        Ok(stream.map(|chunk| chunk.map(|b| b.to_vec())).boxed())
    }

    async fn stat_file(&self, alloc_id: &str, path: &str) -> Result<AllocFileInfo> {
        let target = format!("/v1/client/fs/stat/{}", escape_segment(alloc_id));
        let v = self.get(&target, &[p("path", path)]).await?;
        Ok(decode::file_info(J(&v)))
    }

    async fn list_files(&self, alloc_id: &str, path: &str) -> Result<Vec<AllocFileInfo>> {
        let target = format!("/v1/client/fs/ls/{}", escape_segment(alloc_id));
        self.list(&target, &[p("path", path)], decode::file_info)
            .await
    }

    async fn read_file(&self, request: ReadAllocFileRequest) -> Result<ByteStream> {
        let alloc = escape_segment(&request.alloc_id);
        if !request.follow && !request.from_end && request.offset == 0 && request.limit == 0 {
            let target = format!("/v1/client/fs/cat/{alloc}");
            let stream = self
                .client
                .stream(&target, &[p("path", request.path.clone())])
                .await?;
            return Ok(stream.map(|chunk| chunk.map(|b| b.to_vec())).boxed());
        }
        // A tail or a followed file comes as Nomad's stream frames.
        let target = format!("/v1/client/fs/stream/{alloc}");
        let mut query = vec![
            p("path", request.path.clone()),
            p("follow", request.follow.to_string()),
            p("offset", request.offset.to_string()),
        ];
        if request.from_end {
            query.push(p("origin", "end"));
        }
        let stream = self.client.stream(&target, &query).await?;
        Ok(frames::data(stream, self.client.address().to_string()))
    }

    async fn exec_socket(
        &self,
        alloc_id: &str,
        query: &[(String, String)],
    ) -> Result<super::ExecSocket> {
        let path = format!("/v1/client/allocation/{}/exec", escape_segment(alloc_id));
        self.client.websocket(&path, query).await
    }

    async fn signal(&self, alloc_id: &str, task: Option<&str>, signal: &str) -> Result<()> {
        let path = format!("/v1/client/allocation/{}/signal", escape_segment(alloc_id));
        let body = json!({"Signal": signal, "Task": task.unwrap_or_default()});
        self.put(&path, body).await.map(|_| ())
    }

    async fn restart_allocation(
        &self,
        alloc_id: &str,
        task: Option<&str>,
        all_tasks: bool,
    ) -> Result<()> {
        let path = format!("/v1/client/allocation/{}/restart", escape_segment(alloc_id));
        let body = json!({"TaskName": task.unwrap_or_default(), "AllTasks": all_tasks});
        self.put(&path, body).await.map(|_| ())
    }

    async fn node(&self, node_id: &str) -> Result<Node> {
        let path = format!("/v1/node/{}", escape_segment(node_id));
        Ok(decode::node(J(&self.get(&path, &[]).await?)))
    }

    async fn nodes(&self, prefix: &str) -> Result<Vec<Node>> {
        self.list("/v1/nodes", &[p("prefix", prefix)], decode::node)
            .await
    }

    async fn node_allocations(&self, node_id: &str) -> Result<Vec<Allocation>> {
        let path = format!("/v1/node/{}/allocations", escape_segment(node_id));
        self.list(&path, &[], decode::allocation).await
    }

    async fn set_eligibility(&self, node_id: &str, eligible: bool) -> Result<NodeUpdateResponse> {
        let path = format!("/v1/node/{}/eligibility", escape_segment(node_id));
        let eligibility = if eligible {
            SchedulingEligibility::Eligible
        } else {
            SchedulingEligibility::Ineligible
        }
        .nomad_name();
        let body = json!({"NodeID": node_id, "Eligibility": eligibility});
        Ok(Self::node_update(&self.put(&path, body).await?))
    }

    async fn drain(
        &self,
        node_id: &str,
        strategy: Option<DrainStrategy>,
        mark_eligible: bool,
    ) -> Result<NodeUpdateResponse> {
        let path = format!("/v1/node/{}/drain", escape_segment(node_id));
        let spec = strategy.map_or(
            Value::Null,
            |s| json!({"Deadline": s.deadline_ns, "IgnoreSystemJobs": s.ignore_system_jobs}),
        );
        let body = json!({"NodeID": node_id, "DrainSpec": spec, "MarkEligible": mark_eligible});
        Ok(Self::node_update(&self.put(&path, body).await?))
    }

    async fn deployments(&self, prefix: &str) -> Result<Vec<Deployment>> {
        self.list(
            "/v1/deployments",
            &[p("prefix", prefix)],
            decode::deployment,
        )
        .await
    }

    async fn deployment_after(
        &self,
        deployment_id: &str,
        min_revision: i64,
        wait: Duration,
    ) -> Result<Read<Deployment>> {
        let path = format!("/v1/deployment/{}", escape_segment(deployment_id));
        let mut query = Vec::new();
        if min_revision > 0 {
            query.push(p("index", min_revision.to_string()));
            query.push(p("wait", go_wait(wait)));
        }
        let (v, index) = self.json(Method::Get, &path, &query, None).await?;
        Ok(Read {
            value: decode::deployment(J(&v)),
            revision: index.unwrap_or(0),
        })
    }

    async fn promote_deployment(
        &self,
        deployment_id: &str,
        groups: Vec<String>,
    ) -> Result<DeploymentUpdateResponse> {
        let path = format!("/v1/deployment/promote/{}", escape_segment(deployment_id));
        let body = json!({
            "DeploymentID": deployment_id,
            "All": groups.is_empty(),
            "Groups": groups,
        });
        Ok(Self::deployment_update(&self.put(&path, body).await?))
    }

    async fn fail_deployment(&self, deployment_id: &str) -> Result<DeploymentUpdateResponse> {
        let path = format!("/v1/deployment/fail/{}", escape_segment(deployment_id));
        let body = json!({"DeploymentID": deployment_id});
        Ok(Self::deployment_update(&self.put(&path, body).await?))
    }

    async fn pause_deployment(
        &self,
        deployment_id: &str,
        pause: bool,
    ) -> Result<DeploymentUpdateResponse> {
        let path = format!("/v1/deployment/pause/{}", escape_segment(deployment_id));
        let body = json!({"DeploymentID": deployment_id, "Pause": pause});
        Ok(Self::deployment_update(&self.put(&path, body).await?))
    }

    async fn garbage_collect(&self) -> Result<()> {
        self.client
            .call(Method::Put, "/v1/system/gc", &[], None)
            .await
            .map(|_| ())
    }

    async fn leaders(&self) -> Result<BTreeMap<String, String>> {
        let v = self.get("/v1/agent/self", &[]).await?;
        Ok(J(&v).get("stats").get("caravan").string_map("leaders"))
    }

    async fn variable(&self, path: &str) -> Result<VariableDecrypted> {
        let target = format!("/v1/var/{}", variable_path(path));
        Ok(decode::variable(J(&self.get(&target, &[]).await?)))
    }

    async fn variables(&self, prefix: &str) -> Result<Vec<VariableMetadata>> {
        self.list(
            "/v1/vars",
            &[p("prefix", prefix)],
            decode::variable_metadata,
        )
        .await
    }

    async fn put_variable(
        &self,
        namespace: &str,
        path: &str,
        items: BTreeMap<String, String>,
        cas: Option<i64>,
    ) -> Result<VariableWritten> {
        let mut query = vec![p("namespace", namespace)];
        if let Some(cas) = cas {
            query.push(p("cas", cas.to_string()));
        }
        let body = json!({"Namespace": namespace, "Path": path, "Items": items});
        let (written, variable, revision) = self
            .variable_write(Method::Put, path, &query, Some(body))
            .await?;
        Ok(PutVariableResponse {
            written,
            variable,
            revision,
        })
    }

    async fn delete_variable(
        &self,
        path: &str,
        cas: Option<i64>,
    ) -> Result<DeleteVariableResponse> {
        let query: Vec<_> = cas.map(|c| p("cas", c.to_string())).into_iter().collect();
        let (deleted, conflict, revision) = self
            .variable_write(Method::Delete, path, &query, None)
            .await?;
        Ok(DeleteVariableResponse {
            deleted,
            conflict: if deleted { None } else { conflict },
            revision,
        })
    }

    async fn acl_bootstrap(&self) -> Result<AclToken> {
        let (v, _) = self
            .json(Method::Put, "/v1/acl/bootstrap", &[], None)
            .await?;
        Ok(decode::acl_token(J(&v)))
    }

    async fn acl_policies(&self) -> Result<Vec<AclPolicy>> {
        self.list("/v1/acl/policies", &[], decode::acl_policy).await
    }

    async fn acl_policy(&self, name: &str) -> Result<AclPolicy> {
        let path = format!("/v1/acl/policy/{}", escape_segment(name));
        Ok(decode::acl_policy(J(&self.get(&path, &[]).await?)))
    }

    async fn upsert_acl_policy(&self, policy: AclPolicy) -> Result<()> {
        let path = format!("/v1/acl/policy/{}", escape_segment(&policy.name));
        let body = json!({
            "Name": policy.name,
            "Description": policy.description,
            "Rules": policy.rules,
        });
        self.client
            .call(Method::Put, &path, &[], Some(&body))
            .await
            .map(|_| ())
    }

    async fn delete_acl_policy(&self, name: &str) -> Result<()> {
        let path = format!("/v1/acl/policy/{}", escape_segment(name));
        self.client
            .call(Method::Delete, &path, &[], None)
            .await
            .map(|_| ())
    }

    async fn acl_tokens(&self) -> Result<Vec<AclToken>> {
        self.list("/v1/acl/tokens", &[], decode::acl_token).await
    }

    async fn acl_token(&self, accessor_id: &str) -> Result<AclToken> {
        let path = format!("/v1/acl/token/{}", escape_segment(accessor_id));
        Ok(decode::acl_token(J(&self.get(&path, &[]).await?)))
    }

    async fn own_acl_token(&self) -> Result<AclToken> {
        Ok(decode::acl_token(J(&self
            .get("/v1/acl/token/self", &[])
            .await?)))
    }

    async fn upsert_acl_token(&self, token: AclToken) -> Result<AclToken> {
        let path = if token.accessor_id.is_empty() {
            "/v1/acl/token".to_string()
        } else {
            format!("/v1/acl/token/{}", escape_segment(&token.accessor_id))
        };
        let body = json!({
            "AccessorID": token.accessor_id,
            "Name": token.name,
            "Type": token.r#type,
            "Policies": token.policies,
            "Global": token.global,
        });
        Ok(decode::acl_token(J(&self.put(&path, body).await?)))
    }

    async fn delete_acl_token(&self, accessor_id: &str) -> Result<()> {
        let path = format!("/v1/acl/token/{}", escape_segment(accessor_id));
        self.client
            .call(Method::Delete, &path, &[], None)
            .await
            .map(|_| ())
    }

    async fn nomad(&self, call: NomadCall) -> Result<Option<Value>> {
        let reply = self
            .client
            .call(call.method, &call.path, &call.query, call.body.as_ref())
            .await?;
        reply.json(self.client.address())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variable_paths_keep_their_slashes() {
        assert_eq!(variable_path("nomad/jobs/web"), "nomad/jobs/web");
        assert_eq!(variable_path("/a b/c"), "a%20b/c");
    }

    #[test]
    fn waits_are_go_durations() {
        assert_eq!(go_wait(Duration::from_secs(1)), "1000ms");
    }
}

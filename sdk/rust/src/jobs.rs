//! Jobs: register, validate, plan, read, stop, versions and revert, scale,
//! dispatch and periodic launches.

use std::collections::BTreeMap;

use caravan_proto::job_service_client::JobServiceClient;
use caravan_proto::{
    Allocation, DeregisterJobRequest, DeregisterJobResponse, DispatchJobRequest,
    DispatchJobResponse, EvaluateJobRequest, EvaluateJobResponse, Evaluation,
    ForcePeriodicJobRequest, ForcePeriodicJobResponse, GetJobRequest, Job, JobAllocationsRequest,
    JobEvaluationsRequest, JobSubmission, JobSummaryRequest, JobSummaryResponse,
    ListJobVersionsRequest, ListJobsRequest, PlanJobRequest, PlanJobResponse, RegisterJobRequest,
    RegisterJobResponse, RevertJobRequest, ScaleJobRequest, SetJobStabilityRequest,
    ValidateJobRequest, ValidateJobResponse,
};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::transport::{GrpcChannel, MAX_MESSAGE_BYTES};

fn service(ch: GrpcChannel) -> JobServiceClient<GrpcChannel> {
    JobServiceClient::new(ch)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES)
}

/// The job calls of a [`Client`]: [`Client::jobs`].
#[derive(Debug, Clone, Copy)]
pub struct Jobs<'a> {
    client: &'a Client,
}

impl<'a> Jobs<'a> {
    pub(crate) fn new(client: &'a Client) -> Self {
        Jobs { client }
    }

    /// Registers a job (a new version when it exists) and returns the
    /// evaluation it created. Sent once: a second registration would make a
    /// second evaluation.
    ///
    /// ```no_run
    /// # async fn demo(client: caravan_client::Client) -> caravan_client::Result<()> {
    /// use caravan_client::proto::{Job, JobType, Task, TaskGroup};
    /// let mut job = Job {
    ///     id: "hello".into(),
    ///     datacenters: vec!["dc1".into()],
    ///     task_groups: vec![TaskGroup {
    ///         name: "g".into(),
    ///         count: 1,
    ///         tasks: vec![Task { name: "t".into(), driver: "mock".into(), ..Default::default() }],
    ///         ..Default::default()
    ///     }],
    ///     ..Default::default()
    /// };
    /// job.set_type(JobType::Batch);
    /// let registered = client.jobs().register(job).await?;
    /// let eval = client.evals().wait(&registered.eval_id, std::time::Duration::from_secs(30)).await?;
    /// println!("{}: {:?}", eval.id, eval.status());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] naming the field of an invalid job.
    pub async fn register(&self, job: Job) -> Result<RegisterJobResponse> {
        self.register_request(job, None, None).await
    }

    /// Registers a job only if its current `job_modify_revision` is
    /// `revision` (0: only if it does not exist). Sent once: after an unknown
    /// outcome a second attempt would fail with a spurious
    /// [`Error::Conflict`] if the first one committed.
    ///
    /// # Errors
    ///
    /// [`Error::Conflict`] when the job changed since `revision`.
    pub async fn register_checked(&self, job: Job, revision: i64) -> Result<RegisterJobResponse> {
        self.register_request(job, Some(revision), None).await
    }

    /// Registers a job with the source it was parsed from (kept with the
    /// version the registration makes), only if its current
    /// `job_modify_revision` is `revision` when one is given.
    ///
    /// # Errors
    ///
    /// [`Error::Conflict`] when the job changed since `revision`.
    pub async fn register_submitted(
        &self,
        job: Job,
        revision: Option<i64>,
        submission: JobSubmission,
    ) -> Result<RegisterJobResponse> {
        self.register_request(job, revision, Some(submission)).await
    }

    async fn register_request(
        &self,
        job: Job,
        revision: Option<i64>,
        submission: Option<JobSubmission>,
    ) -> Result<RegisterJobResponse> {
        let mut job = job;
        if job.namespace.is_empty() {
            job.namespace = self.client.namespace().to_string();
        }
        let req = RegisterJobRequest {
            job: Some(job),
            enforce_revision: revision.is_some(),
            job_modify_revision: revision.unwrap_or(0),
            submission,
        };
        self.client
            .write_once(
                req,
                |ch, r| async move { service(ch).register_job(r).await },
            )
            .await
    }

    /// Validates a job without registering it (errors and warnings).
    ///
    /// # Errors
    ///
    /// As any read.
    pub async fn validate(&self, job: Job) -> Result<ValidateJobResponse> {
        let req = ValidateJobRequest { job: Some(job) };
        self.client
            .read(
                req,
                |ch, r| async move { service(ch).validate_job(r).await },
            )
            .await
    }

    /// A scheduler dry run of a job, with the diff against the registered
    /// version when `diff`. Nothing is written, so it is retried.
    ///
    /// # Errors
    ///
    /// As any read.
    pub async fn plan(&self, job: Job, diff: bool) -> Result<PlanJobResponse> {
        let req = PlanJobRequest {
            job: Some(job),
            diff,
        };
        self.client
            .read(req, |ch, r| async move { service(ch).plan_job(r).await })
            .await
    }

    /// One job, with its derived status.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when there is no such job.
    pub async fn get(&self, job_id: &str) -> Result<Job> {
        let req = GetJobRequest {
            job_id: job_id.to_string(),
            options: self.client.options(""),
        };
        let resp = self
            .client
            .read(req, |ch, r| async move { service(ch).get_job(r).await })
            .await?;
        resp.job.ok_or_else(|| Error::missing("job", job_id))
    }

    /// A job's status: the job (its `status` field: pending, running or
    /// dead) with its allocation counts per task group.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when there is no such job.
    pub async fn status(&self, job_id: &str) -> Result<JobStatus> {
        let job = self.get(job_id).await?;
        let summary = self.summary(job_id).await?;
        Ok(JobStatus {
            job,
            summary: summary.summary,
        })
    }

    /// The jobs whose ids start with `prefix`.
    ///
    /// # Errors
    ///
    /// As any read.
    pub async fn list(&self, prefix: &str) -> Result<Vec<Job>> {
        let req = ListJobsRequest {
            options: self.client.options(prefix),
        };
        let resp = self
            .client
            .read(req, |ch, r| async move { service(ch).list_jobs(r).await })
            .await?;
        Ok(resp.jobs)
    }

    /// Stops a job (with `purge`, removes it). Sent once: each stop creates
    /// an evaluation.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when there is no such job.
    pub async fn stop(&self, job_id: &str, purge: bool) -> Result<DeregisterJobResponse> {
        let req = DeregisterJobRequest {
            namespace: self.client.namespace().to_string(),
            job_id: job_id.to_string(),
            purge,
        };
        self.client
            .write_once(
                req,
                |ch, r| async move { service(ch).deregister_job(r).await },
            )
            .await
    }

    /// A job's kept versions, newest first.
    ///
    /// # Errors
    ///
    /// As any read.
    pub async fn versions(&self, job_id: &str) -> Result<Vec<Job>> {
        let req = ListJobVersionsRequest {
            job_id: job_id.to_string(),
            options: self.client.options(""),
        };
        let resp = self
            .client
            .read(req, |ch, r| async move {
                service(ch).list_job_versions(r).await
            })
            .await?;
        let mut versions = resp.versions;
        versions.sort_by_key(|j| std::cmp::Reverse(j.version));
        Ok(versions)
    }

    /// Registers version `version` of a job again as its newest version.
    /// Sent once: it makes a new version and an evaluation.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown job or version.
    pub async fn revert(&self, job_id: &str, version: u64) -> Result<RegisterJobResponse> {
        let req = RevertJobRequest {
            namespace: self.client.namespace().to_string(),
            job_id: job_id.to_string(),
            job_version: version,
            enforce_prior_version: false,
            prior_version: 0,
        };
        self.client
            .write_once(req, |ch, r| async move { service(ch).revert_job(r).await })
            .await
    }

    /// Marks one version stable or not; repeating it changes nothing, so it
    /// is retried.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown job or version.
    pub async fn set_stability(&self, job_id: &str, version: u64, stable: bool) -> Result<i64> {
        let req = SetJobStabilityRequest {
            namespace: self.client.namespace().to_string(),
            job_id: job_id.to_string(),
            job_version: version,
            stable,
        };
        let resp = self
            .client
            .read(req, |ch, r| async move {
                service(ch).set_job_stability(r).await
            })
            .await?;
        Ok(resp.revision)
    }

    /// Sets the count of one task group (a new version and an evaluation);
    /// sent once.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown job or group.
    pub async fn scale(
        &self,
        job_id: &str,
        group: &str,
        count: i64,
    ) -> Result<RegisterJobResponse> {
        self.scale_if_unchanged(job_id, group, count, 0).await
    }

    /// [`Jobs::scale`], only while the job's `job_modify_revision` is
    /// `job_modify_revision` (0 scales whatever it is); sent once.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown job or group;
    /// [`Error::Conflict`] when the job changed since.
    pub async fn scale_if_unchanged(
        &self,
        job_id: &str,
        group: &str,
        count: i64,
        job_modify_revision: i64,
    ) -> Result<RegisterJobResponse> {
        let req = ScaleJobRequest {
            namespace: self.client.namespace().to_string(),
            job_id: job_id.to_string(),
            group: group.to_string(),
            count,
            job_modify_revision,
        };
        self.client
            .write_once(req, |ch, r| async move { service(ch).scale_job(r).await })
            .await
    }

    /// Launches a child of a parameterized job with `payload` and `meta`;
    /// sent once, since each dispatch launches a child.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when the payload or meta break the job's
    /// parameterized block.
    pub async fn dispatch(
        &self,
        job_id: &str,
        payload: Vec<u8>,
        meta: BTreeMap<String, String>,
    ) -> Result<DispatchJobResponse> {
        self.dispatch_request(DispatchJobRequest {
            job_id: job_id.to_string(),
            payload,
            meta,
            ..Default::default()
        })
        .await
    }

    /// Launches a child of a parameterized job as `request` asks (with an
    /// id prefix template or an idempotency token); an empty namespace is
    /// the client's. Sent once.
    ///
    /// # Errors
    ///
    /// As [`Jobs::dispatch`].
    pub async fn dispatch_request(
        &self,
        mut request: DispatchJobRequest,
    ) -> Result<DispatchJobResponse> {
        if request.namespace.is_empty() {
            request.namespace = self.client.namespace().to_string();
        }
        self.client
            .write_once(
                request,
                |ch, r| async move { service(ch).dispatch_job(r).await },
            )
            .await
    }

    /// Launches a periodic job's child now; sent once.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown job.
    pub async fn force_periodic(&self, job_id: &str) -> Result<ForcePeriodicJobResponse> {
        let req = ForcePeriodicJobRequest {
            namespace: self.client.namespace().to_string(),
            job_id: job_id.to_string(),
        };
        self.client
            .write_once(req, |ch, r| async move {
                service(ch).force_periodic_job(r).await
            })
            .await
    }

    /// Creates an evaluation of a job (with `force_reschedule`, failed
    /// allocations are rescheduled at once); sent once.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown job.
    pub async fn evaluate(
        &self,
        job_id: &str,
        force_reschedule: bool,
    ) -> Result<EvaluateJobResponse> {
        let req = EvaluateJobRequest {
            namespace: self.client.namespace().to_string(),
            job_id: job_id.to_string(),
            force_reschedule,
        };
        self.client
            .write_once(
                req,
                |ch, r| async move { service(ch).evaluate_job(r).await },
            )
            .await
    }

    /// A job's allocation counts per task group.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown job.
    pub async fn summary(&self, job_id: &str) -> Result<JobSummaryResponse> {
        let req = JobSummaryRequest {
            job_id: job_id.to_string(),
            options: self.client.options(""),
        };
        self.client
            .read(req, |ch, r| async move { service(ch).job_summary(r).await })
            .await
    }

    /// A job's allocations, terminal ones included.
    ///
    /// # Errors
    ///
    /// As any read.
    pub async fn allocations(&self, job_id: &str) -> Result<Vec<Allocation>> {
        let req = JobAllocationsRequest {
            job_id: job_id.to_string(),
            options: self.client.options(""),
        };
        let resp = self
            .client
            .read(
                req,
                |ch, r| async move { service(ch).job_allocations(r).await },
            )
            .await?;
        Ok(resp.allocs)
    }

    /// A job's evaluations.
    ///
    /// # Errors
    ///
    /// As any read.
    pub async fn evaluations(&self, job_id: &str) -> Result<Vec<Evaluation>> {
        let req = JobEvaluationsRequest {
            job_id: job_id.to_string(),
            options: self.client.options(""),
        };
        let resp = self
            .client
            .read(
                req,
                |ch, r| async move { service(ch).job_evaluations(r).await },
            )
            .await?;
        Ok(resp.evals)
    }
}

/// A job and its allocation counts: [`Jobs::status`].
#[derive(Debug, Clone)]
pub struct JobStatus {
    /// The job, its `status` derived from its allocations.
    pub job: Job,
    /// Allocation counts by client status, per task group.
    pub summary: BTreeMap<String, caravan_proto::TaskGroupSummary>,
}

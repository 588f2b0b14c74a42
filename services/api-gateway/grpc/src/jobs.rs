//! `JobService` over gRPC: thin handlers over [`caravan_gateway_core::jobs`].

use caravan_proto::job_service_server::JobService;
use caravan_proto::{
    DeregisterJobRequest, DeregisterJobResponse, DispatchJobRequest, DispatchJobResponse,
    EvaluateJobRequest, EvaluateJobResponse, ForcePeriodicJobRequest, ForcePeriodicJobResponse,
    GetJobRequest, GetJobResponse, JobAllocationsRequest, JobEvaluationsRequest, JobSummaryRequest,
    JobSummaryResponse, ListAllocationsResponse, ListEvaluationsResponse, ListJobVersionsRequest,
    ListJobVersionsResponse, ListJobsRequest, ListJobsResponse, PlanJobRequest, PlanJobResponse,
    RegisterJobRequest, RegisterJobResponse, RevertJobRequest, ScaleJobRequest,
    SetJobStabilityRequest, SetJobStabilityResponse, ValidateJobRequest, ValidateJobResponse,
};
use tonic::{Request, Response, Status};

use crate::acl_guard::authorize;
use crate::{list_scope, query};
use caravan_gateway_core::acl::ListScope;
use caravan_gateway_core::error::GatewayError;
use caravan_gateway_core::gateway::Gateway;
use caravan_gateway_core::jobs::{lifecycle, plan, reads, register};

/// The job API.
#[derive(Debug, Clone)]
pub struct JobApi(pub Gateway);

fn registered(r: register::Registered) -> RegisterJobResponse {
    RegisterJobResponse {
        eval_id: r.eval_id,
        eval_create_revision: r.eval_create_revision,
        job_modify_revision: r.job_modify_revision,
        warnings: r.warnings,
    }
}

fn missing_job() -> Status {
    GatewayError::field("job", "missing job").into()
}

#[tonic::async_trait]
impl JobService for JobApi {
    async fn register_job(
        &self,
        request: Request<RegisterJobRequest>,
    ) -> Result<Response<RegisterJobResponse>, Status> {
        authorize(&self.0, &request)?;
        let caller = request
            .extensions()
            .get::<caravan_gateway_core::acl::Caller>()
            .cloned();
        let req = request.into_inner();
        let job = req.job.ok_or_else(missing_job)?;
        caravan_gateway_core::acl::volumes::check_job_volumes(caller.as_ref(), &job)?;
        let enforce = req.enforce_revision.then_some(req.job_modify_revision);
        let r = register::register_submitted(
            &self.0,
            job,
            enforce,
            caravan_model::trigger::JOB_REGISTER,
            req.submission,
        )
        .await?;
        Ok(Response::new(registered(r)))
    }

    async fn deregister_job(
        &self,
        request: Request<DeregisterJobRequest>,
    ) -> Result<Response<DeregisterJobResponse>, Status> {
        authorize(&self.0, &request)?;
        let req = request.into_inner();
        let r = register::deregister(&self.0, &req.namespace, &req.job_id, req.purge).await?;
        Ok(Response::new(DeregisterJobResponse {
            eval_id: r.eval_id,
            eval_create_revision: r.eval_create_revision,
            job_modify_revision: r.job_modify_revision,
        }))
    }

    async fn get_job(
        &self,
        request: Request<GetJobRequest>,
    ) -> Result<Response<GetJobResponse>, Status> {
        authorize(&self.0, &request)?;
        let req = request.into_inner();
        let q = query(&self.0, req.options);
        let (job, meta) = reads::get(&self.0, &req.job_id, &q).await?;
        Ok(Response::new(GetJobResponse {
            job: Some(job),
            meta: Some(meta),
        }))
    }

    async fn list_jobs(
        &self,
        request: Request<ListJobsRequest>,
    ) -> Result<Response<ListJobsResponse>, Status> {
        authorize(&self.0, &request)?;
        let scope = list_scope(&request);
        let q = query(&self.0, request.into_inner().options);
        let (mut jobs, meta) = reads::list(&self.0, &q).await;
        ListScope::keep(scope.as_ref(), &mut jobs, |j| (&j.namespace, ""));
        Ok(Response::new(ListJobsResponse {
            jobs,
            meta: Some(meta),
        }))
    }

    async fn validate_job(
        &self,
        request: Request<ValidateJobRequest>,
    ) -> Result<Response<ValidateJobResponse>, Status> {
        authorize(&self.0, &request)?;
        let job = request.into_inner().job.ok_or_else(missing_job)?;
        Ok(Response::new(
            match register::prepare(job, self.0.config.max_job_allocs) {
                Ok((_, warnings)) => ValidateJobResponse {
                    errors: Vec::new(),
                    warnings,
                },
                Err(GatewayError::InvalidJob(errors)) => ValidateJobResponse {
                    errors: errors.messages(),
                    warnings: Vec::new(),
                },
                Err(err) if err.is_bad_input() => ValidateJobResponse {
                    errors: vec![err.to_string()],
                    warnings: Vec::new(),
                },
                Err(err) => return Err(err.into()),
            },
        ))
    }

    async fn plan_job(
        &self,
        request: Request<PlanJobRequest>,
    ) -> Result<Response<PlanJobResponse>, Status> {
        authorize(&self.0, &request)?;
        let req = request.into_inner();
        let job = req.job.ok_or_else(missing_job)?;
        let p = plan::plan(&self.0, job, req.diff).await?;
        Ok(Response::new(PlanJobResponse {
            annotations: p.annotations,
            failed_tg_allocs: p.failed_tg_allocs,
            job_modify_revision: p.job_modify_revision,
            created_evals: p.created_evals,
            diff: p.diff_text,
            warnings: p.warnings,
        }))
    }

    async fn evaluate_job(
        &self,
        request: Request<EvaluateJobRequest>,
    ) -> Result<Response<EvaluateJobResponse>, Status> {
        authorize(&self.0, &request)?;
        let req = request.into_inner();
        let (eval_id, revision) =
            register::evaluate(&self.0, &req.namespace, &req.job_id, req.force_reschedule).await?;
        Ok(Response::new(EvaluateJobResponse {
            eval_id,
            eval_create_revision: revision,
        }))
    }

    async fn list_job_versions(
        &self,
        request: Request<ListJobVersionsRequest>,
    ) -> Result<Response<ListJobVersionsResponse>, Status> {
        authorize(&self.0, &request)?;
        let req = request.into_inner();
        let q = query(&self.0, req.options);
        let (versions, meta) = reads::versions(&self.0, &req.job_id, &q).await?;
        Ok(Response::new(ListJobVersionsResponse {
            versions,
            meta: Some(meta),
        }))
    }

    async fn job_allocations(
        &self,
        request: Request<JobAllocationsRequest>,
    ) -> Result<Response<ListAllocationsResponse>, Status> {
        authorize(&self.0, &request)?;
        let req = request.into_inner();
        let q = query(&self.0, req.options);
        let (allocs, meta) = reads::allocations(&self.0, &req.job_id, &q).await?;
        Ok(Response::new(ListAllocationsResponse {
            allocs,
            meta: Some(meta),
        }))
    }

    async fn job_evaluations(
        &self,
        request: Request<JobEvaluationsRequest>,
    ) -> Result<Response<ListEvaluationsResponse>, Status> {
        authorize(&self.0, &request)?;
        let req = request.into_inner();
        let q = query(&self.0, req.options);
        let (evals, meta) = reads::evaluations(&self.0, &req.job_id, &q).await?;
        Ok(Response::new(ListEvaluationsResponse {
            evals,
            meta: Some(meta),
        }))
    }

    async fn job_summary(
        &self,
        request: Request<JobSummaryRequest>,
    ) -> Result<Response<JobSummaryResponse>, Status> {
        authorize(&self.0, &request)?;
        let req = request.into_inner();
        let q = query(&self.0, req.options);
        let (s, meta) = reads::summary(&self.0, &req.job_id, &q).await?;
        Ok(Response::new(JobSummaryResponse {
            job_id: s.job.id,
            namespace: s.job.namespace,
            summary: s.groups,
            meta: Some(meta),
        }))
    }

    async fn revert_job(
        &self,
        request: Request<RevertJobRequest>,
    ) -> Result<Response<RegisterJobResponse>, Status> {
        authorize(&self.0, &request)?;
        let req = request.into_inner();
        let prior = req.enforce_prior_version.then_some(req.prior_version);
        let r =
            lifecycle::revert(&self.0, &req.namespace, &req.job_id, req.job_version, prior).await?;
        Ok(Response::new(registered(r)))
    }

    async fn set_job_stability(
        &self,
        request: Request<SetJobStabilityRequest>,
    ) -> Result<Response<SetJobStabilityResponse>, Status> {
        authorize(&self.0, &request)?;
        let req = request.into_inner();
        let revision = lifecycle::set_stability(
            &self.0,
            &req.namespace,
            &req.job_id,
            req.job_version,
            req.stable,
        )
        .await?;
        Ok(Response::new(SetJobStabilityResponse { revision }))
    }

    async fn scale_job(
        &self,
        request: Request<ScaleJobRequest>,
    ) -> Result<Response<RegisterJobResponse>, Status> {
        authorize(&self.0, &request)?;
        let req = request.into_inner();
        let enforce = match req.job_modify_revision {
            0 => None,
            r if r > 0 => Some(r),
            _ => {
                return Err(
                    GatewayError::field("job_modify_revision", "must not be negative").into(),
                );
            }
        };
        let r = lifecycle::scale(
            &self.0,
            &req.namespace,
            &req.job_id,
            &req.group,
            req.count,
            enforce,
        )
        .await?;
        Ok(Response::new(registered(r)))
    }

    async fn dispatch_job(
        &self,
        request: Request<DispatchJobRequest>,
    ) -> Result<Response<DispatchJobResponse>, Status> {
        authorize(&self.0, &request)?;
        let req = request.into_inner();
        let asked = lifecycle::DispatchRequest {
            payload: req.payload,
            meta: req.meta,
            id_prefix_template: req.id_prefix_template,
            idempotency_token: req.idempotency_token,
        };
        let d = lifecycle::dispatch(&self.0, &req.namespace, &req.job_id, asked).await?;
        Ok(Response::new(DispatchJobResponse {
            dispatched_job_id: d.job_id,
            eval_id: d.registered.eval_id,
            eval_create_revision: d.registered.eval_create_revision,
            job_create_revision: d.job_create_revision,
        }))
    }

    async fn force_periodic_job(
        &self,
        request: Request<ForcePeriodicJobRequest>,
    ) -> Result<Response<ForcePeriodicJobResponse>, Status> {
        authorize(&self.0, &request)?;
        let req = request.into_inner();
        let l = caravan_gateway_core::broker::force_periodic(&self.0, &req.namespace, &req.job_id)
            .await?;
        Ok(Response::new(ForcePeriodicJobResponse {
            dispatched_job_id: l.dispatched_job_id,
            eval_id: l.eval_id,
            eval_create_revision: l.eval_create_revision,
        }))
    }
}

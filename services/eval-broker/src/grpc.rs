//! The `EvalBrokerService` gRPC surface: each handler finds the current term
//! (or answers not-leader) and calls into it.

use std::sync::Arc;
use std::time::Duration;

use caravan_proto::eval_broker_service_server::EvalBrokerService;
use caravan_proto::{
    AckRequest, AckResponse, BrokerStatsRequest, BrokerStatsResponse, CreateEvalRequest,
    DequeueRequest, DequeueResponse, EvalWriteResponse, Evaluation, ForceGcRequest,
    ForceGcResponse, ForcePeriodicRequest, ForcePeriodicResponse, NackRequest, NackResponse,
    OutstandingResetRequest, OutstandingResetResponse, OutstandingResetsRequest,
    OutstandingResetsResponse, ReblockEvalRequest, UpdateEvalRequest,
};
use tonic::{Request, Response, Status};

use crate::broker::EvalBroker;
use crate::error::BrokerError;
use crate::gc::{GcCutoffs, collector};
use crate::periodic::launcher;

/// The gRPC service of one broker replica.
#[derive(Clone)]
pub struct EvalBrokerGrpc {
    broker: Arc<EvalBroker>,
}

impl EvalBrokerGrpc {
    /// Serves `broker`.
    pub fn new(broker: Arc<EvalBroker>) -> Self {
        EvalBrokerGrpc { broker }
    }
}

fn eval_of(eval: Option<Evaluation>) -> Result<Evaluation, BrokerError> {
    eval.ok_or_else(|| BrokerError::InvalidArgument {
        field: "eval".into(),
        problem: "is required".into(),
    })
}

#[tonic::async_trait]
impl EvalBrokerService for EvalBrokerGrpc {
    async fn dequeue(
        &self,
        request: Request<DequeueRequest>,
    ) -> Result<Response<DequeueResponse>, Status> {
        let req = request.into_inner();
        let timeout = u64::try_from(req.timeout_ns).map_err(|_| BrokerError::InvalidArgument {
            field: "timeout_ns".into(),
            problem: "must not be negative".into(),
        })?;
        crate::term::check_schedulers(&req.schedulers)?;
        if let Some(ack) = &req.ack {
            for (field, value) in [("ack.eval_id", &ack.eval_id), ("ack.token", &ack.token)] {
                if value.is_empty() {
                    return Err(BrokerError::InvalidArgument {
                        field: field.into(),
                        problem: "must not be empty".into(),
                    }
                    .into());
                }
            }
            crate::term::written("ack.written_revision", ack.written_revision)?;
        }
        let term = self.broker.term().await?;
        // The finished delivery first, so its room and its job's next eval
        // are free for this very poll; a refusal is told, not fatal.
        let ack_error = match &req.ack {
            Some(ack) => term
                .ack(&ack.eval_id, &ack.token, ack.written_revision)
                .err()
                .map(|err| err.to_string())
                .unwrap_or_default(),
            None => String::new(),
        };
        let delivery = term
            .dequeue(&req.schedulers, Duration::from_nanos(timeout))
            .await?;
        Ok(Response::new(match delivery {
            Some(d) => {
                let mut eval = (*d.eval).clone();
                eval.delivery_count = d.deliveries.saturating_sub(1);
                if !eval.trace_context.is_empty() {
                    let span = tracing::info_span!(
                        "broker.dequeue",
                        eval = %eval.id,
                        deliveries = d.deliveries,
                        wait_revision = d.wait_revision
                    );
                    caravan_runtime::trace::follow(&span, &eval.trace_context);
                }
                DequeueResponse {
                    eval: Some(eval),
                    token: d.token,
                    wait_revision: d.wait_revision,
                    ack_error,
                }
            }
            None => DequeueResponse {
                ack_error,
                ..Default::default()
            },
        }))
    }

    async fn ack(&self, request: Request<AckRequest>) -> Result<Response<AckResponse>, Status> {
        let req = request.into_inner();
        self.broker
            .term()
            .await?
            .ack(&req.eval_id, &req.token, req.written_revision)?;
        Ok(Response::new(AckResponse {}))
    }

    async fn nack(&self, request: Request<NackRequest>) -> Result<Response<NackResponse>, Status> {
        let req = request.into_inner();
        self.broker
            .term()
            .await?
            .nack(&req.eval_id, &req.token, req.written_revision)?;
        Ok(Response::new(NackResponse {}))
    }

    async fn outstanding_reset(
        &self,
        request: Request<OutstandingResetRequest>,
    ) -> Result<Response<OutstandingResetResponse>, Status> {
        let req = request.into_inner();
        self.broker
            .term()
            .await?
            .outstanding_reset(&req.eval_id, &req.token)?;
        Ok(Response::new(OutstandingResetResponse {}))
    }

    async fn outstanding_resets(
        &self,
        request: Request<OutstandingResetsRequest>,
    ) -> Result<Response<OutstandingResetsResponse>, Status> {
        let req = request.into_inner();
        let term = self.broker.term().await?;
        let results = req
            .resets
            .iter()
            .map(|r| {
                term.outstanding_reset(&r.eval_id, &r.token)
                    .map_err(Status::from)
                    .into()
            })
            .collect();
        Ok(Response::new(OutstandingResetsResponse { results }))
    }

    async fn update_eval(
        &self,
        request: Request<UpdateEvalRequest>,
    ) -> Result<Response<EvalWriteResponse>, Status> {
        let req = request.into_inner();
        let eval = eval_of(req.eval)?;
        let revision = self
            .broker
            .term()
            .await?
            .update_eval(eval, &req.token)
            .await?;
        Ok(Response::new(EvalWriteResponse { revision }))
    }

    async fn create_eval(
        &self,
        request: Request<CreateEvalRequest>,
    ) -> Result<Response<EvalWriteResponse>, Status> {
        let req = request.into_inner();
        let eval = eval_of(req.eval)?;
        let revision = self
            .broker
            .term()
            .await?
            .create_eval(eval, &req.token)
            .await?;
        Ok(Response::new(EvalWriteResponse { revision }))
    }

    async fn reblock_eval(
        &self,
        request: Request<ReblockEvalRequest>,
    ) -> Result<Response<EvalWriteResponse>, Status> {
        let req = request.into_inner();
        let eval = eval_of(req.eval)?;
        let revision = self
            .broker
            .term()
            .await?
            .reblock_eval(eval, &req.token)
            .await?;
        Ok(Response::new(EvalWriteResponse { revision }))
    }

    async fn stats(
        &self,
        _request: Request<BrokerStatsRequest>,
    ) -> Result<Response<BrokerStatsResponse>, Status> {
        Ok(Response::new(self.broker.term().await?.stats()))
    }

    async fn force_periodic(
        &self,
        request: Request<ForcePeriodicRequest>,
    ) -> Result<Response<ForcePeriodicResponse>, Status> {
        let req = request.into_inner();
        let term = self.broker.term().await?;
        let launched = launcher::force(&term, &req.namespace, &req.job_id).await?;
        Ok(Response::new(ForcePeriodicResponse {
            dispatched_job_id: launched.child_id,
            eval_id: launched.eval_id,
            eval_create_revision: launched.revision,
        }))
    }

    async fn force_gc(
        &self,
        _request: Request<ForceGcRequest>,
    ) -> Result<Response<ForceGcResponse>, Status> {
        let term = self.broker.term().await?;
        let counts = collector::sweep(&term, GcCutoffs::forced()).await?;
        tracing::info!(?counts, "forced garbage collection");
        Ok(Response::new(ForceGcResponse {
            evals: counts.evals,
            allocs: counts.allocs,
            jobs: counts.jobs,
            nodes: counts.nodes,
            deployments: counts.deployments,
            registrations: counts.registrations,
            status_batches: counts.status_batches,
        }))
    }
}

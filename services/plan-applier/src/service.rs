//! The gRPC face of the applier: `PlanApplierService.SubmitPlan`.

use std::sync::Arc;

use caravan_proto::plan_applier_service_server::PlanApplierService;
use caravan_proto::{SubmitPlanRequest, SubmitPlanResponse};
use caravan_runtime::status::invalid_field;
use tonic::{Request, Response, Status};

use crate::applier::PlanApplier;

/// Serves `SubmitPlan` from a [`PlanApplier`]; followers answer UNAVAILABLE
/// naming the leader.
#[derive(Debug, Clone)]
pub struct PlanApplierGrpc {
    applier: Arc<PlanApplier>,
}

impl PlanApplierGrpc {
    /// Serves `applier`.
    pub fn new(applier: Arc<PlanApplier>) -> Self {
        PlanApplierGrpc { applier }
    }
}

#[async_trait::async_trait]
impl PlanApplierService for PlanApplierGrpc {
    async fn submit_plan(
        &self,
        request: Request<SubmitPlanRequest>,
    ) -> Result<Response<SubmitPlanResponse>, Status> {
        let plan = request
            .into_inner()
            .plan
            .ok_or_else(|| invalid_field("plan", "required"))?;
        let result = self.applier.submit(plan).await?;
        Ok(Response::new(SubmitPlanResponse {
            result: Some(result),
        }))
    }
}

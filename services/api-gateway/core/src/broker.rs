//! Work the eval-broker leader does on a caller's behalf: launching a
//! periodic job's child now (`job periodic force`) and collecting garbage
//! now (`system gc`). The gateway only forwards; the broker owns the writes.

use caravan_proto::eval_broker_service_client::EvalBrokerServiceClient;
use caravan_proto::{ForceGcRequest, ForceGcResponse, ForcePeriodicRequest, ForcePeriodicResponse};
use caravan_runtime::grpc::propagate_trace;
use caravan_runtime::status::leader_hint;
use tonic::Code;

use crate::error::{GatewayError, Result};
use crate::gateway::Gateway;
use crate::query::DEFAULT_NAMESPACE;

type BrokerClient = EvalBrokerServiceClient<
    tonic::service::interceptor::InterceptedService<
        caravan_runtime::local::Transport,
        fn(tonic::Request<()>) -> std::result::Result<tonic::Request<()>, tonic::Status>,
    >,
>;

async fn client(gw: &Gateway) -> Result<BrokerClient> {
    let channel = gw.broker.channel().await.map_err(GatewayError::Upstream)?;
    Ok(EvalBrokerServiceClient::with_interceptor(
        channel,
        propagate_trace as fn(_) -> _,
    ))
}

/// Launches a child of the periodic job now, at the broker leader. Only a
/// follower's refusal is retried at the leader it names: any other failure
/// may have launched, and launching again would make a second child.
pub async fn force_periodic(
    gw: &Gateway,
    namespace: &str,
    job_id: &str,
) -> Result<ForcePeriodicResponse> {
    if job_id.is_empty() {
        return Err(GatewayError::field("job_id", "missing job ID"));
    }
    let namespace = if namespace.is_empty() {
        DEFAULT_NAMESPACE
    } else {
        namespace
    };
    let request = ForcePeriodicRequest {
        namespace: namespace.to_string(),
        job_id: job_id.to_string(),
    };
    let mut last = None;
    for _ in 0..2 {
        match client(gw).await?.force_periodic(request.clone()).await {
            Ok(resp) => {
                let launched = resp.into_inner();
                gw.settle(launched.eval_create_revision).await;
                return Ok(launched);
            }
            Err(status) => {
                gw.broker.on_error(&status);
                let refused = leader_hint(&status).is_some();
                last = Some(status);
                if !refused {
                    break;
                }
            }
        }
    }
    Err(last.map_or_else(
        || GatewayError::Unavailable("eval-broker unreachable".into()),
        GatewayError::Upstream,
    ))
}

/// Runs a garbage collection now at the broker leader, every threshold
/// taken as zero. A sweep deletes only what it judged, so trying again
/// after an unknown outcome is safe.
pub async fn garbage_collect(gw: &Gateway) -> Result<ForceGcResponse> {
    let mut last = None;
    for _ in 0..2 {
        match client(gw).await?.force_gc(ForceGcRequest {}).await {
            Ok(resp) => return Ok(resp.into_inner()),
            Err(status) => {
                gw.broker.on_error(&status);
                let retry = status.code() == Code::Unavailable;
                last = Some(status);
                if !retry {
                    break;
                }
            }
        }
    }
    Err(last.map_or_else(
        || GatewayError::Unavailable("eval-broker unreachable".into()),
        GatewayError::Upstream,
    ))
}

//! ACL enforcement on the public gRPC services, in two halves. Each service
//! is wrapped in [`Guarded`], a layer that resolves the token in the
//! metadata (`x-nomad-token` or `authorization: Bearer`) into a
//! [`Caller`], looks the method up in [`METHODS`] (a method missing there
//! is refused) and hands both to the handler in the request's extensions,
//! with a [`ListScope`] for list methods, whose handlers keep to what the
//! token may read. It never reads the request's body. Each handler then
//! calls [`authorize`] on the request tonic decoded: the method's
//! operation's need is checked in the namespace its message targets
//! ([`Targeted`]), or in that of the allocation, evaluation or deployment
//! it names. A handler that answers without calling it is caught by the
//! layer, which refuses the answer. The node-facing `NodeClientService`
//! is not wrapped.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tonic::codegen::{BoxFuture, Context, Poll, Service, http};
use tonic::server::NamedService;
use tonic::{Request, Status, body::Body};

use crate::targets::Targeted;
use caravan_gateway_core::acl::need::Need;
use caravan_gateway_core::acl::ops::{self, Op};
use caravan_gateway_core::acl::owner::owner_namespace;
use caravan_gateway_core::acl::store::ResolveError;
use caravan_gateway_core::acl::{Caller, ListScope, token_from_headers};
use caravan_gateway_core::gateway::Gateway;
use caravan_gateway_core::query::DEFAULT_NAMESPACE;

/// One method's entry: its full path and the operation it carries out
/// (what it needs, and whether it lists objects of several namespaces,
/// its answer then keeping to what the token may read).
#[derive(Debug)]
pub struct MethodRule {
    /// The method's full path, e.g. `/caravan.v1.JobService/GetJob`.
    pub path: &'static str,
    /// The operation.
    pub op: Op,
}

const fn m(path: &'static str, op: Op) -> MethodRule {
    MethodRule { path, op }
}

/// Every method of the guarded services and its operation.
pub const METHODS: &[MethodRule] = &[
    m("/caravan.v1.JobService/RegisterJob", ops::JOB_REGISTER),
    m("/caravan.v1.JobService/DeregisterJob", ops::JOB_DEREGISTER),
    m("/caravan.v1.JobService/GetJob", ops::JOB_READ),
    m("/caravan.v1.JobService/ListJobs", ops::JOB_LIST),
    m("/caravan.v1.JobService/ValidateJob", ops::JOB_VALIDATE),
    m("/caravan.v1.JobService/PlanJob", ops::JOB_PLAN),
    m("/caravan.v1.JobService/EvaluateJob", ops::JOB_EVALUATE),
    m("/caravan.v1.JobService/ListJobVersions", ops::JOB_VERSIONS),
    m(
        "/caravan.v1.JobService/JobAllocations",
        ops::JOB_ALLOCATIONS,
    ),
    m(
        "/caravan.v1.JobService/JobEvaluations",
        ops::JOB_EVALUATIONS,
    ),
    m("/caravan.v1.JobService/JobSummary", ops::JOB_SUMMARY),
    m("/caravan.v1.JobService/RevertJob", ops::JOB_REVERT),
    m("/caravan.v1.JobService/SetJobStability", ops::JOB_STABILITY),
    m("/caravan.v1.JobService/ScaleJob", ops::JOB_SCALE),
    m("/caravan.v1.JobService/DispatchJob", ops::JOB_DISPATCH),
    m(
        "/caravan.v1.JobService/ForcePeriodicJob",
        ops::JOB_PERIODIC_FORCE,
    ),
    m("/caravan.v1.EvalService/GetEvaluation", ops::EVAL_READ),
    m("/caravan.v1.EvalService/ListEvaluations", ops::EVAL_LIST),
    m(
        "/caravan.v1.EvalService/EvaluationAllocations",
        ops::EVAL_ALLOCATIONS,
    ),
    m("/caravan.v1.AllocService/GetAllocation", ops::ALLOC_READ),
    m("/caravan.v1.AllocService/ListAllocations", ops::ALLOC_LIST),
    m("/caravan.v1.AllocService/StopAllocation", ops::ALLOC_STOP),
    m("/caravan.v1.AllocService/ReadLogs", ops::ALLOC_LOGS),
    m(
        "/caravan.v1.AllocService/ListAllocFiles",
        ops::ALLOC_FS_LIST,
    ),
    m("/caravan.v1.AllocService/StatAllocFile", ops::ALLOC_FS_STAT),
    m("/caravan.v1.AllocService/ReadAllocFile", ops::ALLOC_FS_READ),
    m("/caravan.v1.AllocService/GetHostStats", ops::NODE_STATS),
    m("/caravan.v1.AllocService/AllocStats", ops::ALLOC_STATS),
    m("/caravan.v1.AllocService/SignalAlloc", ops::ALLOC_SIGNAL),
    m("/caravan.v1.AllocService/RestartAlloc", ops::ALLOC_RESTART),
    m("/caravan.v1.AllocService/GcAlloc", ops::ALLOC_GC),
    m("/caravan.v1.AllocService/GcNode", ops::NODE_GC),
    m("/caravan.v1.NodeService/GetNode", ops::NODE_READ),
    m("/caravan.v1.NodeService/ListNodes", ops::NODE_LIST),
    m(
        "/caravan.v1.NodeService/NodeAllocations",
        ops::NODE_ALLOCATIONS,
    ),
    m(
        "/caravan.v1.NodeService/UpdateEligibility",
        ops::NODE_ELIGIBILITY,
    ),
    m("/caravan.v1.NodeService/UpdateDrain", ops::NODE_DRAIN),
    m("/caravan.v1.NodeService/EvaluateNode", ops::NODE_EVALUATE),
    m("/caravan.v1.NodeService/PurgeNode", ops::NODE_PURGE),
    m(
        "/caravan.v1.DeploymentService/GetDeployment",
        ops::DEPLOYMENT_READ,
    ),
    m(
        "/caravan.v1.DeploymentService/ListDeployments",
        ops::DEPLOYMENT_LIST,
    ),
    m(
        "/caravan.v1.DeploymentService/PromoteDeployment",
        ops::DEPLOYMENT_PROMOTE,
    ),
    m(
        "/caravan.v1.DeploymentService/FailDeployment",
        ops::DEPLOYMENT_FAIL,
    ),
    m(
        "/caravan.v1.DeploymentService/PauseDeployment",
        ops::DEPLOYMENT_PAUSE,
    ),
    m(
        "/caravan.v1.DeploymentService/SetAllocHealth",
        ops::DEPLOYMENT_ALLOC_HEALTH,
    ),
    m("/caravan.v1.StatusService/Leaders", ops::STATUS_LEADER),
    m("/caravan.v1.SystemService/GarbageCollect", ops::SYSTEM_GC),
    m("/caravan.v1.EventService/Stream", ops::EVENT_STREAM),
    m("/caravan.v1.VariableService/ListVariables", ops::VAR_LIST),
    m("/caravan.v1.VariableService/GetVariable", ops::VAR_READ),
    m("/caravan.v1.VariableService/PutVariable", ops::VAR_WRITE),
    m(
        "/caravan.v1.VariableService/DeleteVariable",
        ops::VAR_DELETE,
    ),
    m(
        "/caravan.v1.ServiceRegistryService/ListServices",
        ops::SERVICE_LIST,
    ),
    m(
        "/caravan.v1.ServiceRegistryService/GetService",
        ops::SERVICE_READ,
    ),
    m("/caravan.v1.AclService/Bootstrap", ops::ACL_BOOTSTRAP),
    m("/caravan.v1.AclService/ListPolicies", ops::ACL_POLICY_LIST),
    m("/caravan.v1.AclService/GetPolicy", ops::ACL_POLICY_READ),
    m("/caravan.v1.AclService/UpsertPolicy", ops::ACL_POLICY_WRITE),
    m(
        "/caravan.v1.AclService/DeletePolicy",
        ops::ACL_POLICY_DELETE,
    ),
    m("/caravan.v1.AclService/ListTokens", ops::ACL_TOKEN_LIST),
    m("/caravan.v1.AclService/GetToken", ops::ACL_TOKEN_READ),
    m("/caravan.v1.AclService/TokenSelf", ops::ACL_TOKEN_SELF),
    m("/caravan.v1.AclService/UpsertToken", ops::ACL_TOKEN_WRITE),
    m("/caravan.v1.AclService/DeleteToken", ops::ACL_TOKEN_DELETE),
];

fn lookup(path: &str) -> Option<&'static MethodRule> {
    METHODS.iter().find(|rule| rule.path == path)
}

/// What the layer hands a guarded handler besides its [`Caller`]: the
/// method's entry, and whether [`authorize`] has been called.
#[derive(Debug, Clone)]
struct Pending {
    rule: &'static MethodRule,
    checked: Arc<AtomicBool>,
}

fn denied() -> Status {
    Status::permission_denied("Permission denied")
}

/// Whether the caller the guard resolved for `request` may make it: its
/// method's need, checked where the decoded message says it targets.
/// Every handler of a guarded service calls it first. With ACLs off
/// everything is allowed; with them on, a request the guard did not see
/// is refused.
pub(crate) fn authorize<T: Targeted>(gw: &Gateway, request: &Request<T>) -> Result<(), Status> {
    if gw.acl.is_none() {
        return Ok(());
    }
    let extensions = request.extensions();
    let (Some(pending), Some(caller)) = (extensions.get::<Pending>(), extensions.get::<Caller>())
    else {
        return Err(denied());
    };
    pending.checked.store(true, Ordering::Release);
    let need = pending.rule.op.need;
    if need == Need::Token && caller.token.is_none() {
        return Err(denied());
    }
    let target = request.get_ref().target();
    let namespace = if target.namespace.is_empty() {
        DEFAULT_NAMESPACE
    } else {
        target.namespace.as_str()
    };
    let acl = &caller.acl;
    if !need.permits(acl, namespace, &target.path, pending.rule.op.list) {
        return Err(denied());
    }
    if let Need::Ns(_) = need
        && let Some(object) = &target.object
        && let Some(owner) = owner_namespace(&gw.cache.snapshot(), object)
        && !need.allowed(acl, &owner, &target.path)
    {
        return Err(denied());
    }
    Ok(())
}

/// A public gRPC service behind the ACL guard.
#[derive(Debug, Clone)]
pub(crate) struct Guarded<S> {
    inner: S,
    gw: Gateway,
}

impl<S> Guarded<S> {
    /// `inner`, guarded when the gateway has ACLs enabled (and passed
    /// through untouched otherwise).
    pub(crate) fn new(inner: S, gw: &Gateway) -> Self {
        Guarded {
            inner,
            gw: gw.clone(),
        }
    }
}

impl<S: NamedService> NamedService for Guarded<S> {
    const NAME: &'static str = S::NAME;
}

fn refuse(status: Status) -> http::Response<Body> {
    status.into_http()
}

/// Whether `response` carries an answer (not an error status, which tonic
/// sends in the headers of an answer with no body).
fn answered(response: &http::Response<Body>) -> bool {
    response
        .headers()
        .get("grpc-status")
        .is_none_or(|status| status == "0")
}

impl<S> Service<http::Request<Body>> for Guarded<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<Body>) -> Self::Future {
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let gw = self.gw.clone();
        Box::pin(async move {
            let Some(cache) = gw.acl.clone() else {
                return inner.call(req).await;
            };
            let Some(rule) = lookup(req.uri().path()) else {
                tracing::warn!(
                    method = req.uri().path(),
                    "gRPC method without an ACL entry refused"
                );
                return Ok(refuse(denied()));
            };
            if !cache.ready().await {
                return Ok(refuse(Status::unavailable(
                    "ACL state not loaded yet; try again",
                )));
            }
            let secret = token_from_headers(req.headers());
            let caller =
                match caravan_gateway_core::acl::workload::resolve(&gw, &cache, secret.as_deref())
                    .await
                {
                    Ok(caller) => caller,
                    Err(ResolveError::Unavailable(why)) => {
                        return Ok(refuse(Status::unavailable(why)));
                    }
                    Err(err) => return Ok(refuse(Status::permission_denied(err.message()))),
                };
            if rule.op.list && !caller.acl.is_management() {
                req.extensions_mut().insert(ListScope {
                    acl: caller.acl.clone(),
                    need: rule.op.need,
                });
            }
            let checked = Arc::new(AtomicBool::new(false));
            req.extensions_mut().insert(caller);
            req.extensions_mut().insert(Pending {
                rule,
                checked: checked.clone(),
            });
            let response = inner.call(req).await?;
            if !checked.load(Ordering::Acquire) && answered(&response) {
                tracing::error!(
                    method = rule.path,
                    "gRPC handler answered without authorizing its request; refused"
                );
                return Ok(refuse(denied()));
            }
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_of_the_guarded_services_has_an_entry() {
        let proto = [
            include_str!("../../../../proto/caravan/v1/api.proto"),
            include_str!("../../../../proto/caravan/v1/variable.proto"),
            include_str!("../../../../proto/caravan/v1/acl.proto"),
            include_str!("../../../../proto/caravan/v1/service_registry.proto"),
        ];
        let mut expected = Vec::new();
        for text in proto {
            let mut service = "";
            for line in text.lines().map(str::trim) {
                if let Some(rest) = line.strip_prefix("service ") {
                    service = rest.split_whitespace().next().unwrap_or_default();
                } else if let Some(rest) = line.strip_prefix("rpc ") {
                    let method = rest.split('(').next().unwrap_or_default().trim();
                    expected.push(format!("/caravan.v1.{service}/{method}"));
                }
            }
        }
        assert!(expected.len() > 40, "{expected:?}");
        let paths: Vec<&str> = METHODS.iter().map(|m| m.path).collect();
        let missing: Vec<_> = expected
            .iter()
            .filter(|p| !paths.contains(&p.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "methods without an ACL entry: {missing:?}"
        );
        let stale: Vec<_> = paths
            .iter()
            .filter(|p| !expected.iter().any(|e| e == *p))
            .collect();
        assert!(stale.is_empty(), "entries for no method: {stale:?}");
    }

    #[test]
    fn answers_and_error_statuses_are_told_apart() {
        assert!(!answered(&refuse(denied())));
        assert!(answered(&http::Response::new(Body::empty())));
    }
}

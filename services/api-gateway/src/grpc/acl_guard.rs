//! ACL enforcement on the public gRPC services: each is wrapped in
//! [`Guarded`], which resolves the token in the metadata (`x-nomad-token`
//! or `authorization: Bearer`), looks the method up in [`METHODS`] (a
//! method missing there is refused), reads the namespace the request
//! targets from its message when the method's [`Need`] depends on it (or
//! the namespace of the allocation, evaluation or deployment it names),
//! checks the need there, and hands the resolved
//! [`Caller`](crate::acl::Caller) to the handler in the request's
//! extensions, with a [`ListScope`] for list methods, whose handlers keep
//! to what the token may read. The node-facing `NodeClientService` is not
//! wrapped.

use std::convert::Infallible;

use caravan_proto::*;
use http_body_util::BodyExt;
use prost::Message;
use tonic::Status;
use tonic::body::Body;
use tonic::codegen::{BoxFuture, Context, Poll, Service, http};
use tonic::server::NamedService;

use crate::acl::need::Need;
use crate::acl::ops::{self, Op};
use crate::acl::owner::{Object, owner_namespace};
use crate::acl::store::ResolveError;
use crate::acl::{Acl, ListScope, token_from_headers};
use crate::gateway::Gateway;
use crate::query::DEFAULT_NAMESPACE;

/// What a request's message says it targets.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// The namespace named (empty: the default).
    pub namespace: String,
    /// An object named by id, checked in its own namespace.
    pub object: Option<Object>,
    /// A variable path.
    pub path: String,
}

type Extract = fn(&[u8]) -> Result<Target, prost::DecodeError>;

fn none(_: &[u8]) -> Result<Target, prost::DecodeError> {
    Ok(Target::default())
}

fn ns(namespace: &str) -> Target {
    Target {
        namespace: namespace.to_string(),
        ..Target::default()
    }
}

fn opts(options: &Option<QueryOptions>) -> Target {
    ns(options.as_ref().map_or("", |o| o.namespace.as_str()))
}

fn object(object: Object, options: &Option<QueryOptions>) -> Target {
    Target {
        object: Some(object),
        ..opts(options)
    }
}

fn job_ns(job: &Option<Job>) -> Target {
    ns(job.as_ref().map_or("", |j| j.namespace.as_str()))
}

/// One method's entry: its full path, the operation it carries out
/// (what it needs, and whether it lists objects of several namespaces,
/// its answer then keeping to what the token may read), and how to read
/// the target from its message.
pub struct MethodRule {
    /// The method's full path, e.g. `/caravan.v1.JobService/GetJob`.
    pub path: &'static str,
    /// The operation.
    pub op: Op,
    extract: Extract,
}

const fn m(path: &'static str, op: Op, extract: Extract) -> MethodRule {
    MethodRule { path, op, extract }
}

impl MethodRule {
    /// Whether checking this method reads the target from the request's
    /// message; other requests pass the guard unread.
    fn reads_message(&self) -> bool {
        matches!(
            self.op.need,
            Need::Ns(_) | Need::Var(_) | Need::AnyRead | Need::ServiceRead
        )
    }
}

/// Every method of the guarded services and its operation.
pub const METHODS: &[MethodRule] = &[
    m(
        "/caravan.v1.JobService/RegisterJob",
        ops::JOB_REGISTER,
        |b| Ok(job_ns(&RegisterJobRequest::decode(b)?.job)),
    ),
    m(
        "/caravan.v1.JobService/DeregisterJob",
        ops::JOB_DEREGISTER,
        |b| Ok(ns(&DeregisterJobRequest::decode(b)?.namespace)),
    ),
    m("/caravan.v1.JobService/GetJob", ops::JOB_READ, |b| {
        Ok(opts(&GetJobRequest::decode(b)?.options))
    }),
    m("/caravan.v1.JobService/ListJobs", ops::JOB_LIST, |b| {
        Ok(opts(&ListJobsRequest::decode(b)?.options))
    }),
    m(
        "/caravan.v1.JobService/ValidateJob",
        ops::JOB_VALIDATE,
        |b| Ok(job_ns(&ValidateJobRequest::decode(b)?.job)),
    ),
    m("/caravan.v1.JobService/PlanJob", ops::JOB_PLAN, |b| {
        Ok(job_ns(&PlanJobRequest::decode(b)?.job))
    }),
    m(
        "/caravan.v1.JobService/EvaluateJob",
        ops::JOB_EVALUATE,
        |b| Ok(ns(&EvaluateJobRequest::decode(b)?.namespace)),
    ),
    m(
        "/caravan.v1.JobService/ListJobVersions",
        ops::JOB_VERSIONS,
        |b| Ok(opts(&ListJobVersionsRequest::decode(b)?.options)),
    ),
    m(
        "/caravan.v1.JobService/JobAllocations",
        ops::JOB_ALLOCATIONS,
        |b| Ok(opts(&JobAllocationsRequest::decode(b)?.options)),
    ),
    m(
        "/caravan.v1.JobService/JobEvaluations",
        ops::JOB_EVALUATIONS,
        |b| Ok(opts(&JobEvaluationsRequest::decode(b)?.options)),
    ),
    m("/caravan.v1.JobService/JobSummary", ops::JOB_SUMMARY, |b| {
        Ok(opts(&JobSummaryRequest::decode(b)?.options))
    }),
    m("/caravan.v1.JobService/RevertJob", ops::JOB_REVERT, |b| {
        Ok(ns(&RevertJobRequest::decode(b)?.namespace))
    }),
    m(
        "/caravan.v1.JobService/SetJobStability",
        ops::JOB_STABILITY,
        |b| Ok(ns(&SetJobStabilityRequest::decode(b)?.namespace)),
    ),
    m("/caravan.v1.JobService/ScaleJob", ops::JOB_SCALE, |b| {
        Ok(ns(&ScaleJobRequest::decode(b)?.namespace))
    }),
    m(
        "/caravan.v1.JobService/DispatchJob",
        ops::JOB_DISPATCH,
        |b| Ok(ns(&DispatchJobRequest::decode(b)?.namespace)),
    ),
    m(
        "/caravan.v1.JobService/ForcePeriodicJob",
        ops::JOB_PERIODIC_FORCE,
        |b| Ok(ns(&ForcePeriodicJobRequest::decode(b)?.namespace)),
    ),
    m(
        "/caravan.v1.EvalService/GetEvaluation",
        ops::EVAL_READ,
        |b| {
            let r = GetEvaluationRequest::decode(b)?;
            Ok(object(Object::Eval(r.eval_id), &r.options))
        },
    ),
    m(
        "/caravan.v1.EvalService/ListEvaluations",
        ops::EVAL_LIST,
        |b| Ok(opts(&ListEvaluationsRequest::decode(b)?.options)),
    ),
    m(
        "/caravan.v1.EvalService/EvaluationAllocations",
        ops::EVAL_ALLOCATIONS,
        |b| {
            let r = EvaluationAllocationsRequest::decode(b)?;
            Ok(object(Object::Eval(r.eval_id), &r.options))
        },
    ),
    m(
        "/caravan.v1.AllocService/GetAllocation",
        ops::ALLOC_READ,
        |b| {
            let r = GetAllocationRequest::decode(b)?;
            Ok(object(Object::Alloc(r.alloc_id), &r.options))
        },
    ),
    m(
        "/caravan.v1.AllocService/ListAllocations",
        ops::ALLOC_LIST,
        |b| Ok(opts(&ListAllocationsRequest::decode(b)?.options)),
    ),
    m(
        "/caravan.v1.AllocService/StopAllocation",
        ops::ALLOC_STOP,
        |b| {
            let r = StopAllocationRequest::decode(b)?;
            Ok(object(Object::Alloc(r.alloc_id), &None))
        },
    ),
    m("/caravan.v1.AllocService/ReadLogs", ops::ALLOC_LOGS, |b| {
        let r = ReadLogsRequest::decode(b)?;
        Ok(object(Object::Alloc(r.alloc_id), &None))
    }),
    m(
        "/caravan.v1.AllocService/ListAllocFiles",
        ops::ALLOC_FS_LIST,
        |b| {
            let r = AllocPathRequest::decode(b)?;
            Ok(object(Object::Alloc(r.alloc_id), &None))
        },
    ),
    m(
        "/caravan.v1.AllocService/StatAllocFile",
        ops::ALLOC_FS_STAT,
        |b| {
            let r = AllocPathRequest::decode(b)?;
            Ok(object(Object::Alloc(r.alloc_id), &None))
        },
    ),
    m(
        "/caravan.v1.AllocService/ReadAllocFile",
        ops::ALLOC_FS_READ,
        |b| {
            let r = ReadAllocFileRequest::decode(b)?;
            Ok(object(Object::Alloc(r.alloc_id), &None))
        },
    ),
    m(
        "/caravan.v1.AllocService/GetHostStats",
        ops::NODE_STATS,
        none,
    ),
    m(
        "/caravan.v1.AllocService/AllocStats",
        ops::ALLOC_STATS,
        |b| {
            let r = AllocStatsRequest::decode(b)?;
            Ok(object(Object::Alloc(r.alloc_id), &None))
        },
    ),
    m(
        "/caravan.v1.AllocService/SignalAlloc",
        ops::ALLOC_SIGNAL,
        |b| {
            let r = SignalAllocRequest::decode(b)?;
            Ok(object(Object::Alloc(r.alloc_id), &None))
        },
    ),
    m(
        "/caravan.v1.AllocService/RestartAlloc",
        ops::ALLOC_RESTART,
        |b| {
            let r = RestartAllocRequest::decode(b)?;
            Ok(object(Object::Alloc(r.alloc_id), &None))
        },
    ),
    // Nomad takes submit-job or gc-allocation; the table holds one.
    m("/caravan.v1.AllocService/GcAlloc", ops::ALLOC_GC, |b| {
        let r = GcAllocRequest::decode(b)?;
        Ok(object(Object::Alloc(r.alloc_id), &None))
    }),
    m("/caravan.v1.AllocService/GcNode", ops::NODE_GC, none),
    m("/caravan.v1.NodeService/GetNode", ops::NODE_READ, none),
    m("/caravan.v1.NodeService/ListNodes", ops::NODE_LIST, none),
    m(
        "/caravan.v1.NodeService/NodeAllocations",
        ops::NODE_ALLOCATIONS,
        none,
    ),
    m(
        "/caravan.v1.NodeService/UpdateEligibility",
        ops::NODE_ELIGIBILITY,
        none,
    ),
    m("/caravan.v1.NodeService/UpdateDrain", ops::NODE_DRAIN, none),
    m(
        "/caravan.v1.NodeService/EvaluateNode",
        ops::NODE_EVALUATE,
        none,
    ),
    m("/caravan.v1.NodeService/PurgeNode", ops::NODE_PURGE, none),
    m(
        "/caravan.v1.DeploymentService/GetDeployment",
        ops::DEPLOYMENT_READ,
        |b| {
            let r = GetDeploymentRequest::decode(b)?;
            Ok(object(Object::Deployment(r.deployment_id), &r.options))
        },
    ),
    m(
        "/caravan.v1.DeploymentService/ListDeployments",
        ops::DEPLOYMENT_LIST,
        |b| Ok(opts(&ListDeploymentsRequest::decode(b)?.options)),
    ),
    m(
        "/caravan.v1.DeploymentService/PromoteDeployment",
        ops::DEPLOYMENT_PROMOTE,
        |b| {
            let r = PromoteDeploymentRequest::decode(b)?;
            Ok(object(Object::Deployment(r.deployment_id), &None))
        },
    ),
    m(
        "/caravan.v1.DeploymentService/FailDeployment",
        ops::DEPLOYMENT_FAIL,
        |b| {
            let r = FailDeploymentRequest::decode(b)?;
            Ok(object(Object::Deployment(r.deployment_id), &None))
        },
    ),
    m(
        "/caravan.v1.DeploymentService/PauseDeployment",
        ops::DEPLOYMENT_PAUSE,
        |b| {
            let r = PauseDeploymentRequest::decode(b)?;
            Ok(object(Object::Deployment(r.deployment_id), &None))
        },
    ),
    m(
        "/caravan.v1.DeploymentService/SetAllocHealth",
        ops::DEPLOYMENT_ALLOC_HEALTH,
        |b| {
            let r = SetAllocHealthRequest::decode(b)?;
            Ok(object(Object::Deployment(r.deployment_id), &None))
        },
    ),
    m(
        "/caravan.v1.StatusService/Leaders",
        ops::STATUS_LEADER,
        none,
    ),
    m(
        "/caravan.v1.SystemService/GarbageCollect",
        ops::SYSTEM_GC,
        none,
    ),
    m("/caravan.v1.EventService/Stream", ops::EVENT_STREAM, |b| {
        Ok(ns(&EventStreamRequest::decode(b)?.namespace))
    }),
    m(
        "/caravan.v1.VariableService/ListVariables",
        ops::VAR_LIST,
        |b| Ok(opts(&ListVariablesRequest::decode(b)?.options)),
    ),
    m(
        "/caravan.v1.VariableService/GetVariable",
        ops::VAR_READ,
        |b| {
            let r = GetVariableRequest::decode(b)?;
            Ok(Target {
                path: r.path,
                ..opts(&r.options)
            })
        },
    ),
    m(
        "/caravan.v1.VariableService/PutVariable",
        ops::VAR_WRITE,
        |b| {
            let r = PutVariableRequest::decode(b)?;
            Ok(Target {
                path: r.path,
                ..ns(&r.namespace)
            })
        },
    ),
    m(
        "/caravan.v1.VariableService/DeleteVariable",
        ops::VAR_DELETE,
        |b| {
            let r = DeleteVariableRequest::decode(b)?;
            Ok(Target {
                path: r.path,
                ..ns(&r.namespace)
            })
        },
    ),
    m(
        "/caravan.v1.ServiceRegistryService/ListServices",
        ops::SERVICE_LIST,
        |b| Ok(opts(&ListServicesRequest::decode(b)?.options)),
    ),
    m(
        "/caravan.v1.ServiceRegistryService/GetService",
        ops::SERVICE_READ,
        |b| Ok(opts(&GetServiceRequest::decode(b)?.options)),
    ),
    m("/caravan.v1.AclService/Bootstrap", ops::ACL_BOOTSTRAP, none),
    m(
        "/caravan.v1.AclService/ListPolicies",
        ops::ACL_POLICY_LIST,
        none,
    ),
    m(
        "/caravan.v1.AclService/GetPolicy",
        ops::ACL_POLICY_READ,
        none,
    ),
    m(
        "/caravan.v1.AclService/UpsertPolicy",
        ops::ACL_POLICY_WRITE,
        none,
    ),
    m(
        "/caravan.v1.AclService/DeletePolicy",
        ops::ACL_POLICY_DELETE,
        none,
    ),
    m(
        "/caravan.v1.AclService/ListTokens",
        ops::ACL_TOKEN_LIST,
        none,
    ),
    m("/caravan.v1.AclService/GetToken", ops::ACL_TOKEN_READ, none),
    m(
        "/caravan.v1.AclService/TokenSelf",
        ops::ACL_TOKEN_SELF,
        none,
    ),
    m(
        "/caravan.v1.AclService/UpsertToken",
        ops::ACL_TOKEN_WRITE,
        none,
    ),
    m(
        "/caravan.v1.AclService/DeleteToken",
        ops::ACL_TOKEN_DELETE,
        none,
    ),
];

fn lookup(path: &str) -> Option<&'static MethodRule> {
    METHODS.iter().find(|rule| rule.path == path)
}

/// The first message of a gRPC body (past its 5-byte frame header);
/// `None` when compressed or cut short.
fn first_message(body: &[u8]) -> Option<&[u8]> {
    let (&flag, rest) = body.split_first()?;
    if flag != 0 || rest.len() < 4 {
        return None;
    }
    let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
    rest.get(4..4 + len)
}

/// Whether the caller's ACL allows `rule` for the request `body` (its
/// first message is read only when [`MethodRule::reads_message`]).
fn allows(gw: &Gateway, acl: &Acl, rule: &MethodRule, body: &[u8]) -> Result<(), Status> {
    let denied = || Err(Status::permission_denied("Permission denied"));
    let target = if rule.reads_message() {
        let message = first_message(body).ok_or_else(|| {
            Status::invalid_argument("the request message is missing or compressed")
        })?;
        (rule.extract)(message)
            .map_err(|e| Status::invalid_argument(format!("request does not decode: {e}")))?
    } else {
        Target::default()
    };
    let namespace = if target.namespace.is_empty() {
        DEFAULT_NAMESPACE
    } else {
        target.namespace.as_str()
    };
    if !rule
        .op
        .need
        .permits(acl, namespace, &target.path, rule.op.list)
    {
        return denied();
    }
    if let Need::Ns(_) = rule.op.need
        && let Some(object) = &target.object
        && let Some(owner) = owner_namespace(&gw.cache.snapshot(), object)
        && !rule.op.need.allowed(acl, &owner, &target.path)
    {
        return denied();
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

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
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
                return Ok(refuse(Status::permission_denied("Permission denied")));
            };
            if !cache.ready().await {
                return Ok(refuse(Status::unavailable(
                    "ACL state not loaded yet; try again",
                )));
            }
            let secret = token_from_headers(req.headers());
            let caller = match crate::acl::workload::resolve(&gw, &cache, secret.as_deref()).await {
                Ok(caller) => caller,
                Err(ResolveError::Unavailable(why)) => {
                    return Ok(refuse(Status::unavailable(why)));
                }
                Err(err) => return Ok(refuse(Status::permission_denied(err.message()))),
            };
            if rule.op.need == Need::Token && caller.token.is_none() {
                return Ok(refuse(Status::permission_denied("Permission denied")));
            }
            let mut req = if rule.reads_message() {
                let (parts, body) = req.into_parts();
                // The request is read whole to find its target, within the
                // largest message the gateway accepts.
                let limit = gw.config.max_body_bytes.max(16 * 1024 * 1024);
                let bytes = match http_body_util::Limited::new(body, limit).collect().await {
                    Ok(collected) => collected.to_bytes(),
                    Err(err) => {
                        return Ok(refuse(Status::resource_exhausted(format!(
                            "reading the request: {err}"
                        ))));
                    }
                };
                if let Err(status) = allows(&gw, &caller.acl, rule, &bytes) {
                    return Ok(refuse(status));
                }
                http::Request::from_parts(parts, Body::new(http_body_util::Full::new(bytes)))
            } else {
                // Nothing to read: the body (a stream, perhaps large or
                // still open) goes on untouched.
                if let Err(status) = allows(&gw, &caller.acl, rule, &[]) {
                    return Ok(refuse(status));
                }
                req
            };
            if rule.op.list && !caller.acl.is_management() {
                req.extensions_mut().insert(ListScope {
                    acl: caller.acl.clone(),
                    need: rule.op.need,
                });
            }
            req.extensions_mut().insert(caller);
            inner.call(req).await
        })
    }
}

/// The method table's paths, for the test that every method has one.
#[cfg(test)]
pub(crate) fn method_paths() -> Vec<&'static str> {
    METHODS.iter().map(|m| m.path).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(message: &impl Message) -> Vec<u8> {
        let bytes = message.encode_to_vec();
        let mut out = vec![0];
        out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
        out.extend_from_slice(&bytes);
        out
    }

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
        let paths = method_paths();
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
    fn targets_are_read_from_the_message() {
        let rule = lookup("/caravan.v1.JobService/RegisterJob").unwrap();
        let req = RegisterJobRequest {
            job: Some(Job {
                id: "x".into(),
                namespace: "prod".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let body = frame(&req);
        let target = (rule.extract)(first_message(&body).unwrap()).unwrap();
        assert_eq!(target.namespace, "prod");
        let rule = lookup("/caravan.v1.VariableService/GetVariable").unwrap();
        let req = GetVariableRequest {
            path: "a/b".into(),
            options: None,
        };
        let target = (rule.extract)(&req.encode_to_vec()).unwrap();
        assert_eq!(
            (target.namespace.as_str(), target.path.as_str()),
            ("", "a/b")
        );
        assert!(first_message(&[1, 0, 0, 0, 0]).is_none(), "compressed");
        assert!(first_message(&[0, 0, 0, 0, 9, 1]).is_none(), "cut short");
    }
}

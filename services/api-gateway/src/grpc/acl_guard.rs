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

use crate::acl::owner::{Object, owner_namespace};
use crate::acl::routes::Need;
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

/// One method's entry: its full path, what it needs, how to read the
/// target from its message, and whether it lists objects of several
/// namespaces (its answer then keeps to what the token may read).
pub struct MethodRule {
    /// The method's full path, e.g. `/caravan.v1.JobService/GetJob`.
    pub path: &'static str,
    /// What a call needs.
    pub need: Need,
    extract: Extract,
    /// A list whose answer keeps to what the token may read.
    pub list: bool,
}

const fn m(path: &'static str, need: Need, extract: Extract) -> MethodRule {
    MethodRule {
        path,
        need,
        extract,
        list: false,
    }
}

const fn list(path: &'static str, need: Need, extract: Extract) -> MethodRule {
    MethodRule {
        path,
        need,
        extract,
        list: true,
    }
}

impl MethodRule {
    /// Whether checking this method reads the target from the request's
    /// message; other requests pass the guard unread.
    fn reads_message(&self) -> bool {
        matches!(
            self.need,
            Need::Ns(_) | Need::Var(_) | Need::AnyRead | Need::ServiceRead
        )
    }
}

const LIST_JOBS: Need = Need::Ns("list-jobs");
const READ_JOB: Need = Need::Ns("read-job");
const SUBMIT_JOB: Need = Need::Ns("submit-job");

/// Every method of the guarded services and what it needs.
pub const METHODS: &[MethodRule] = &[
    m("/caravan.v1.JobService/RegisterJob", SUBMIT_JOB, |b| {
        Ok(job_ns(&RegisterJobRequest::decode(b)?.job))
    }),
    m("/caravan.v1.JobService/DeregisterJob", SUBMIT_JOB, |b| {
        Ok(ns(&DeregisterJobRequest::decode(b)?.namespace))
    }),
    m("/caravan.v1.JobService/GetJob", READ_JOB, |b| {
        Ok(opts(&GetJobRequest::decode(b)?.options))
    }),
    list("/caravan.v1.JobService/ListJobs", LIST_JOBS, |b| {
        Ok(opts(&ListJobsRequest::decode(b)?.options))
    }),
    m("/caravan.v1.JobService/ValidateJob", READ_JOB, |b| {
        Ok(job_ns(&ValidateJobRequest::decode(b)?.job))
    }),
    m("/caravan.v1.JobService/PlanJob", SUBMIT_JOB, |b| {
        Ok(job_ns(&PlanJobRequest::decode(b)?.job))
    }),
    m("/caravan.v1.JobService/EvaluateJob", SUBMIT_JOB, |b| {
        Ok(ns(&EvaluateJobRequest::decode(b)?.namespace))
    }),
    m("/caravan.v1.JobService/ListJobVersions", READ_JOB, |b| {
        Ok(opts(&ListJobVersionsRequest::decode(b)?.options))
    }),
    m("/caravan.v1.JobService/JobAllocations", READ_JOB, |b| {
        Ok(opts(&JobAllocationsRequest::decode(b)?.options))
    }),
    m("/caravan.v1.JobService/JobEvaluations", READ_JOB, |b| {
        Ok(opts(&JobEvaluationsRequest::decode(b)?.options))
    }),
    m("/caravan.v1.JobService/JobSummary", READ_JOB, |b| {
        Ok(opts(&JobSummaryRequest::decode(b)?.options))
    }),
    m("/caravan.v1.JobService/RevertJob", SUBMIT_JOB, |b| {
        Ok(ns(&RevertJobRequest::decode(b)?.namespace))
    }),
    m("/caravan.v1.JobService/SetJobStability", SUBMIT_JOB, |b| {
        Ok(ns(&SetJobStabilityRequest::decode(b)?.namespace))
    }),
    m(
        "/caravan.v1.JobService/ScaleJob",
        Need::Ns("scale-job"),
        |b| Ok(ns(&ScaleJobRequest::decode(b)?.namespace)),
    ),
    m(
        "/caravan.v1.JobService/DispatchJob",
        Need::Ns("dispatch-job"),
        |b| Ok(ns(&DispatchJobRequest::decode(b)?.namespace)),
    ),
    m("/caravan.v1.JobService/ForcePeriodicJob", SUBMIT_JOB, |b| {
        Ok(ns(&ForcePeriodicJobRequest::decode(b)?.namespace))
    }),
    m("/caravan.v1.EvalService/GetEvaluation", READ_JOB, |b| {
        let r = GetEvaluationRequest::decode(b)?;
        Ok(object(Object::Eval(r.eval_id), &r.options))
    }),
    list("/caravan.v1.EvalService/ListEvaluations", READ_JOB, |b| {
        Ok(opts(&ListEvaluationsRequest::decode(b)?.options))
    }),
    m(
        "/caravan.v1.EvalService/EvaluationAllocations",
        READ_JOB,
        |b| {
            let r = EvaluationAllocationsRequest::decode(b)?;
            Ok(object(Object::Eval(r.eval_id), &r.options))
        },
    ),
    m("/caravan.v1.AllocService/GetAllocation", READ_JOB, |b| {
        let r = GetAllocationRequest::decode(b)?;
        Ok(object(Object::Alloc(r.alloc_id), &r.options))
    }),
    list("/caravan.v1.AllocService/ListAllocations", READ_JOB, |b| {
        Ok(opts(&ListAllocationsRequest::decode(b)?.options))
    }),
    m(
        "/caravan.v1.AllocService/StopAllocation",
        Need::Ns("alloc-lifecycle"),
        |b| {
            let r = StopAllocationRequest::decode(b)?;
            Ok(object(Object::Alloc(r.alloc_id), &None))
        },
    ),
    m(
        "/caravan.v1.AllocService/ReadLogs",
        Need::Ns("read-logs"),
        |b| {
            let r = ReadLogsRequest::decode(b)?;
            Ok(object(Object::Alloc(r.alloc_id), &None))
        },
    ),
    m(
        "/caravan.v1.AllocService/ListAllocFiles",
        Need::Ns("read-fs"),
        |b| {
            let r = AllocPathRequest::decode(b)?;
            Ok(object(Object::Alloc(r.alloc_id), &None))
        },
    ),
    m(
        "/caravan.v1.AllocService/StatAllocFile",
        Need::Ns("read-fs"),
        |b| {
            let r = AllocPathRequest::decode(b)?;
            Ok(object(Object::Alloc(r.alloc_id), &None))
        },
    ),
    m(
        "/caravan.v1.AllocService/ReadAllocFile",
        Need::Ns("read-fs"),
        |b| {
            let r = ReadAllocFileRequest::decode(b)?;
            Ok(object(Object::Alloc(r.alloc_id), &None))
        },
    ),
    m(
        "/caravan.v1.AllocService/GetHostStats",
        Need::NodeRead,
        none,
    ),
    m("/caravan.v1.AllocService/AllocStats", READ_JOB, |b| {
        let r = AllocStatsRequest::decode(b)?;
        Ok(object(Object::Alloc(r.alloc_id), &None))
    }),
    m(
        "/caravan.v1.AllocService/SignalAlloc",
        Need::Ns("alloc-lifecycle"),
        |b| {
            let r = SignalAllocRequest::decode(b)?;
            Ok(object(Object::Alloc(r.alloc_id), &None))
        },
    ),
    m(
        "/caravan.v1.AllocService/RestartAlloc",
        Need::Ns("alloc-lifecycle"),
        |b| {
            let r = RestartAllocRequest::decode(b)?;
            Ok(object(Object::Alloc(r.alloc_id), &None))
        },
    ),
    // Nomad takes submit-job or gc-allocation; the table holds one.
    m("/caravan.v1.AllocService/GcAlloc", SUBMIT_JOB, |b| {
        let r = GcAllocRequest::decode(b)?;
        Ok(object(Object::Alloc(r.alloc_id), &None))
    }),
    m("/caravan.v1.AllocService/GcNode", Need::NodeWrite, none),
    m("/caravan.v1.NodeService/GetNode", Need::NodeRead, none),
    m("/caravan.v1.NodeService/ListNodes", Need::NodeRead, none),
    list(
        "/caravan.v1.NodeService/NodeAllocations",
        Need::NodeRead,
        none,
    ),
    m(
        "/caravan.v1.NodeService/UpdateEligibility",
        Need::NodeWrite,
        none,
    ),
    m("/caravan.v1.NodeService/UpdateDrain", Need::NodeWrite, none),
    m(
        "/caravan.v1.NodeService/EvaluateNode",
        Need::NodeWrite,
        none,
    ),
    m("/caravan.v1.NodeService/PurgeNode", Need::NodeWrite, none),
    m(
        "/caravan.v1.DeploymentService/GetDeployment",
        READ_JOB,
        |b| {
            let r = GetDeploymentRequest::decode(b)?;
            Ok(object(Object::Deployment(r.deployment_id), &r.options))
        },
    ),
    list(
        "/caravan.v1.DeploymentService/ListDeployments",
        READ_JOB,
        |b| Ok(opts(&ListDeploymentsRequest::decode(b)?.options)),
    ),
    m(
        "/caravan.v1.DeploymentService/PromoteDeployment",
        SUBMIT_JOB,
        |b| {
            let r = PromoteDeploymentRequest::decode(b)?;
            Ok(object(Object::Deployment(r.deployment_id), &None))
        },
    ),
    m(
        "/caravan.v1.DeploymentService/FailDeployment",
        SUBMIT_JOB,
        |b| {
            let r = FailDeploymentRequest::decode(b)?;
            Ok(object(Object::Deployment(r.deployment_id), &None))
        },
    ),
    m(
        "/caravan.v1.DeploymentService/PauseDeployment",
        SUBMIT_JOB,
        |b| {
            let r = PauseDeploymentRequest::decode(b)?;
            Ok(object(Object::Deployment(r.deployment_id), &None))
        },
    ),
    m(
        "/caravan.v1.DeploymentService/SetAllocHealth",
        SUBMIT_JOB,
        |b| {
            let r = SetAllocHealthRequest::decode(b)?;
            Ok(object(Object::Deployment(r.deployment_id), &None))
        },
    ),
    m("/caravan.v1.StatusService/Leaders", Need::Public, none),
    m(
        "/caravan.v1.SystemService/GarbageCollect",
        Need::Management,
        none,
    ),
    m("/caravan.v1.EventService/Stream", Need::AnyRead, |b| {
        Ok(ns(&EventStreamRequest::decode(b)?.namespace))
    }),
    list(
        "/caravan.v1.VariableService/ListVariables",
        Need::Var("list"),
        |b| Ok(opts(&ListVariablesRequest::decode(b)?.options)),
    ),
    m(
        "/caravan.v1.VariableService/GetVariable",
        Need::Var("read"),
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
        Need::Var("write"),
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
        Need::Var("destroy"),
        |b| {
            let r = DeleteVariableRequest::decode(b)?;
            Ok(Target {
                path: r.path,
                ..ns(&r.namespace)
            })
        },
    ),
    list(
        "/caravan.v1.ServiceRegistryService/ListServices",
        Need::ServiceRead,
        |b| Ok(opts(&ListServicesRequest::decode(b)?.options)),
    ),
    m(
        "/caravan.v1.ServiceRegistryService/GetService",
        Need::ServiceRead,
        |b| Ok(opts(&GetServiceRequest::decode(b)?.options)),
    ),
    m("/caravan.v1.AclService/Bootstrap", Need::Public, none),
    m("/caravan.v1.AclService/ListPolicies", Need::Token, none),
    m("/caravan.v1.AclService/GetPolicy", Need::Token, none),
    m(
        "/caravan.v1.AclService/UpsertPolicy",
        Need::Management,
        none,
    ),
    m(
        "/caravan.v1.AclService/DeletePolicy",
        Need::Management,
        none,
    ),
    m("/caravan.v1.AclService/ListTokens", Need::Management, none),
    m("/caravan.v1.AclService/GetToken", Need::Token, none),
    m("/caravan.v1.AclService/TokenSelf", Need::Token, none),
    m("/caravan.v1.AclService/UpsertToken", Need::Management, none),
    m("/caravan.v1.AclService/DeleteToken", Need::Management, none),
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
    if !rule.need.permits(acl, namespace, &target.path, rule.list) {
        return denied();
    }
    if let Need::Ns(_) = rule.need
        && let Some(object) = &target.object
        && let Some(owner) = owner_namespace(&gw.cache.snapshot(), object)
        && !rule.need.allowed(acl, &owner, &target.path)
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
            if rule.need == Need::Token && caller.token.is_none() {
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
            if rule.list && !caller.acl.is_management() {
                req.extensions_mut().insert(ListScope {
                    acl: caller.acl.clone(),
                    need: rule.need,
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

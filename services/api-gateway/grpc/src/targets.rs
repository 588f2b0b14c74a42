//! What each request message of the guarded gRPC services targets, for the
//! ACL check each handler makes once tonic has decoded it
//! ([`super::acl_guard::authorize`]): the namespace it names, the
//! allocation, evaluation or deployment it names by id (checked in that
//! object's own namespace), or the variable path. A message whose method's
//! need depends on none of these targets nothing.

use caravan_proto::*;

use caravan_gateway_core::acl::owner::Object;

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

/// A request message of a guarded method.
pub(crate) trait Targeted {
    /// What the message targets; by default nothing (the method's need
    /// does not depend on it).
    fn target(&self) -> Target {
        Target::default()
    }
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

/// Implements [`Targeted`] for message types, each with the expression
/// (over `self`) that finds its target.
macro_rules! targets {
    ($($message:ty => |$m:ident| $target:expr;)*) => {
        $(impl Targeted for $message {
            fn target(&self) -> Target {
                let $m = self;
                $target
            }
        })*
    };
}

/// Implements [`Targeted`] for message types that target nothing.
macro_rules! no_target {
    ($($message:ty),* $(,)?) => {
        $(impl Targeted for $message {})*
    };
}

targets! {
    RegisterJobRequest => |r| job_ns(&r.job);
    DeregisterJobRequest => |r| ns(&r.namespace);
    GetJobRequest => |r| opts(&r.options);
    ListJobsRequest => |r| opts(&r.options);
    ValidateJobRequest => |r| job_ns(&r.job);
    PlanJobRequest => |r| job_ns(&r.job);
    EvaluateJobRequest => |r| ns(&r.namespace);
    ListJobVersionsRequest => |r| opts(&r.options);
    JobAllocationsRequest => |r| opts(&r.options);
    JobEvaluationsRequest => |r| opts(&r.options);
    JobSummaryRequest => |r| opts(&r.options);
    RevertJobRequest => |r| ns(&r.namespace);
    SetJobStabilityRequest => |r| ns(&r.namespace);
    ScaleJobRequest => |r| ns(&r.namespace);
    DispatchJobRequest => |r| ns(&r.namespace);
    ForcePeriodicJobRequest => |r| ns(&r.namespace);
    GetEvaluationRequest => |r| object(Object::Eval(r.eval_id.clone()), &r.options);
    ListEvaluationsRequest => |r| opts(&r.options);
    EvaluationAllocationsRequest => |r| object(Object::Eval(r.eval_id.clone()), &r.options);
    GetAllocationRequest => |r| object(Object::Alloc(r.alloc_id.clone()), &r.options);
    ListAllocationsRequest => |r| opts(&r.options);
    StopAllocationRequest => |r| object(Object::Alloc(r.alloc_id.clone()), &None);
    ReadLogsRequest => |r| object(Object::Alloc(r.alloc_id.clone()), &None);
    AllocPathRequest => |r| object(Object::Alloc(r.alloc_id.clone()), &None);
    ReadAllocFileRequest => |r| object(Object::Alloc(r.alloc_id.clone()), &None);
    AllocStatsRequest => |r| object(Object::Alloc(r.alloc_id.clone()), &None);
    SignalAllocRequest => |r| object(Object::Alloc(r.alloc_id.clone()), &None);
    RestartAllocRequest => |r| object(Object::Alloc(r.alloc_id.clone()), &None);
    GcAllocRequest => |r| object(Object::Alloc(r.alloc_id.clone()), &None);
    GetDeploymentRequest => |r| object(Object::Deployment(r.deployment_id.clone()), &r.options);
    ListDeploymentsRequest => |r| opts(&r.options);
    PromoteDeploymentRequest => |r| object(Object::Deployment(r.deployment_id.clone()), &None);
    FailDeploymentRequest => |r| object(Object::Deployment(r.deployment_id.clone()), &None);
    PauseDeploymentRequest => |r| object(Object::Deployment(r.deployment_id.clone()), &None);
    SetAllocHealthRequest => |r| object(Object::Deployment(r.deployment_id.clone()), &None);
    EventStreamRequest => |r| ns(&r.namespace);
    ListVariablesRequest => |r| opts(&r.options);
    GetVariableRequest => |r| Target { path: r.path.clone(), ..opts(&r.options) };
    PutVariableRequest => |r| Target { path: r.path.clone(), ..ns(&r.namespace) };
    DeleteVariableRequest => |r| Target { path: r.path.clone(), ..ns(&r.namespace) };
    ListServicesRequest => |r| opts(&r.options);
    GetServiceRequest => |r| opts(&r.options);
}

// Node, status, system and ACL methods need nothing of their messages.
no_target!(
    HostStatsRequest,
    GcNodeRequest,
    GetNodeRequest,
    ListNodesRequest,
    NodeAllocationsRequest,
    UpdateEligibilityRequest,
    UpdateDrainRequest,
    EvaluateNodeRequest,
    PurgeNodeRequest,
    LeadersRequest,
    GarbageCollectRequest,
    AclBootstrapRequest,
    ListAclPoliciesRequest,
    GetAclPolicyRequest,
    UpsertAclPolicyRequest,
    DeleteAclPolicyRequest,
    ListAclTokensRequest,
    GetAclTokenRequest,
    AclTokenSelfRequest,
    UpsertAclTokenRequest,
    DeleteAclTokenRequest,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_read_from_the_message() {
        let req = RegisterJobRequest {
            job: Some(Job {
                id: "x".into(),
                namespace: "prod".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(req.target().namespace, "prod");
        let req = GetVariableRequest {
            path: "a/b".into(),
            options: None,
        };
        let target = req.target();
        assert_eq!(
            (target.namespace.as_str(), target.path.as_str()),
            ("", "a/b")
        );
        let req = StopAllocationRequest {
            alloc_id: "a-1".into(),
        };
        assert_eq!(req.target().object, Some(Object::Alloc("a-1".into())));
        assert_eq!(GetNodeRequest::default().target(), Target::default());
    }
}

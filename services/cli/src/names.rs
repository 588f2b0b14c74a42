//! The lowercase status names Nomad's CLI prints for Caravan's enums.

use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, DeploymentStatus, EvalStatus, JobStatus, NodeStatus,
    SchedulingEligibility,
};

/// `pending`, `blocked`, `complete`, `failed`, `canceled`.
pub fn eval_status(s: EvalStatus) -> &'static str {
    match s {
        EvalStatus::Unspecified => "",
        EvalStatus::Pending => "pending",
        EvalStatus::Blocked => "blocked",
        EvalStatus::Complete => "complete",
        EvalStatus::Failed => "failed",
        EvalStatus::Canceled => "canceled",
    }
}

/// `run`, `stop`, `evict`.
pub fn desired_status(s: AllocDesiredStatus) -> &'static str {
    match s {
        AllocDesiredStatus::Unspecified => "",
        AllocDesiredStatus::Run => "run",
        AllocDesiredStatus::Stop => "stop",
        AllocDesiredStatus::Evict => "evict",
    }
}

/// `pending`, `running`, `complete`, `failed`, `lost`, `unknown`.
pub fn client_status(s: AllocClientStatus) -> &'static str {
    match s {
        AllocClientStatus::Unspecified => "",
        AllocClientStatus::Pending => "pending",
        AllocClientStatus::Running => "running",
        AllocClientStatus::Complete => "complete",
        AllocClientStatus::Failed => "failed",
        AllocClientStatus::Lost => "lost",
        AllocClientStatus::Unknown => "unknown",
    }
}

/// `pending`, `running`, `dead`.
pub fn job_status(s: JobStatus) -> &'static str {
    match s {
        JobStatus::Unspecified => "",
        JobStatus::Pending => "pending",
        JobStatus::Running => "running",
        JobStatus::Dead => "dead",
    }
}

/// `initializing`, `ready`, `down`, `disconnected`.
pub fn node_status(s: NodeStatus) -> &'static str {
    match s {
        NodeStatus::Unspecified => "",
        NodeStatus::Initializing => "initializing",
        NodeStatus::Ready => "ready",
        NodeStatus::Down => "down",
        NodeStatus::Disconnected => "disconnected",
    }
}

/// `eligible`, `ineligible`.
pub fn eligibility(s: SchedulingEligibility) -> &'static str {
    match s {
        SchedulingEligibility::Ineligible => "ineligible",
        _ => "eligible",
    }
}

/// `running`, `successful`, `failed`, … as Nomad names deployment statuses.
pub fn deployment_status(s: DeploymentStatus) -> &'static str {
    match s {
        DeploymentStatus::Unspecified => "",
        DeploymentStatus::Running => "running",
        DeploymentStatus::Paused => "paused",
        DeploymentStatus::Failed => "failed",
        DeploymentStatus::Successful => "successful",
        DeploymentStatus::Cancelled => "cancelled",
        DeploymentStatus::Pending => "pending",
        DeploymentStatus::Blocked => "blocked",
        DeploymentStatus::Unblocking => "unblocking",
        DeploymentStatus::Initializing => "initializing",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_nomads() {
        assert_eq!(eval_status(EvalStatus::Canceled), "canceled");
        assert_eq!(desired_status(AllocDesiredStatus::Run), "run");
        assert_eq!(client_status(AllocClientStatus::Lost), "lost");
        assert_eq!(job_status(JobStatus::Dead), "dead");
        assert_eq!(node_status(NodeStatus::Ready), "ready");
        assert_eq!(eligibility(SchedulingEligibility::Unspecified), "eligible");
        assert_eq!(deployment_status(DeploymentStatus::Cancelled), "cancelled");
    }
}

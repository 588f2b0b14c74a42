//! The lowercase names Nomad gives the values of Caravan's enums, as its API
//! and CLI print them.

use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, DeploymentStatus, EvalStatus, JobStatus, JobType,
    NodeStatus, SchedulingEligibility,
};

/// Nomad's name of an enum value.
pub trait NomadName {
    /// The name, such as `complete` or `sysbatch`. An unset status has the
    /// empty name; an unset job type is `service` and an unset eligibility
    /// `eligible`, since Nomad reads them so.
    fn nomad_name(self) -> &'static str;
}

impl NomadName for EvalStatus {
    fn nomad_name(self) -> &'static str {
        match self {
            Self::Unspecified => "",
            Self::Pending => "pending",
            Self::Blocked => "blocked",
            Self::Complete => "complete",
            Self::Failed => "failed",
            Self::Canceled => "canceled",
        }
    }
}

impl NomadName for AllocDesiredStatus {
    fn nomad_name(self) -> &'static str {
        match self {
            Self::Unspecified => "",
            Self::Run => "run",
            Self::Stop => "stop",
            Self::Evict => "evict",
        }
    }
}

impl NomadName for AllocClientStatus {
    fn nomad_name(self) -> &'static str {
        match self {
            Self::Unspecified => "",
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Complete => "complete",
            Self::Failed => "failed",
            Self::Lost => "lost",
            Self::Unknown => "unknown",
        }
    }
}

impl NomadName for JobStatus {
    fn nomad_name(self) -> &'static str {
        match self {
            Self::Unspecified => "",
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Dead => "dead",
        }
    }
}

impl NomadName for JobType {
    fn nomad_name(self) -> &'static str {
        match self {
            Self::Unspecified | Self::Service => "service",
            Self::Batch => "batch",
            Self::System => "system",
            Self::Sysbatch => "sysbatch",
        }
    }
}

impl NomadName for NodeStatus {
    fn nomad_name(self) -> &'static str {
        match self {
            Self::Unspecified => "",
            Self::Initializing => "initializing",
            Self::Ready => "ready",
            Self::Down => "down",
            Self::Disconnected => "disconnected",
        }
    }
}

impl NomadName for SchedulingEligibility {
    fn nomad_name(self) -> &'static str {
        match self {
            Self::Unspecified | Self::Eligible => "eligible",
            Self::Ineligible => "ineligible",
        }
    }
}

impl NomadName for DeploymentStatus {
    fn nomad_name(self) -> &'static str {
        match self {
            Self::Unspecified => "",
            Self::Running => "running",
            Self::Paused => "paused",
            Self::Failed => "failed",
            Self::Successful => "successful",
            Self::Cancelled => "cancelled",
            Self::Pending => "pending",
            Self::Blocked => "blocked",
            Self::Unblocking => "unblocking",
            Self::Initializing => "initializing",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value of `T` from 0 up, through prost's `TryFrom<i32>`.
    fn all<T: TryFrom<i32>>() -> Vec<T> {
        (0..).map_while(|i| T::try_from(i).ok()).collect()
    }

    /// Every set value has its own name: Nomad's, in lowercase.
    fn distinct_lowercase<T: NomadName + Copy + std::fmt::Debug>(values: &[T]) {
        let mut seen = std::collections::BTreeSet::new();
        for v in values {
            let name = v.nomad_name();
            assert!(name.chars().all(|c| c.is_ascii_lowercase()), "{v:?}");
            assert!(seen.insert(name), "{v:?} shares the name {name:?}");
        }
    }

    #[test]
    fn eval_statuses() {
        let all = all::<EvalStatus>();
        assert_eq!(all.len(), 6);
        distinct_lowercase(&all);
        let names: Vec<_> = all.iter().map(|s| s.nomad_name()).collect();
        assert_eq!(
            names,
            ["", "pending", "blocked", "complete", "failed", "canceled"]
        );
    }

    #[test]
    fn alloc_statuses() {
        let desired = all::<AllocDesiredStatus>();
        distinct_lowercase(&desired);
        let names: Vec<_> = desired.iter().map(|s| s.nomad_name()).collect();
        assert_eq!(names, ["", "run", "stop", "evict"]);
        let client = all::<AllocClientStatus>();
        distinct_lowercase(&client);
        let names: Vec<_> = client.iter().map(|s| s.nomad_name()).collect();
        assert_eq!(
            names,
            [
                "", "pending", "running", "complete", "failed", "lost", "unknown"
            ]
        );
    }

    #[test]
    fn job_statuses_and_types() {
        let status = all::<JobStatus>();
        distinct_lowercase(&status);
        let names: Vec<_> = status.iter().map(|s| s.nomad_name()).collect();
        assert_eq!(names, ["", "pending", "running", "dead"]);
        let names: Vec<_> = all::<JobType>().iter().map(|t| t.nomad_name()).collect();
        assert_eq!(names, ["service", "service", "batch", "system", "sysbatch"]);
    }

    #[test]
    fn node_statuses_and_eligibility() {
        let status = all::<NodeStatus>();
        distinct_lowercase(&status);
        let names: Vec<_> = status.iter().map(|s| s.nomad_name()).collect();
        assert_eq!(names, ["", "initializing", "ready", "down", "disconnected"]);
        let names: Vec<_> = all::<SchedulingEligibility>()
            .iter()
            .map(|e| e.nomad_name())
            .collect();
        assert_eq!(names, ["eligible", "eligible", "ineligible"]);
    }

    #[test]
    fn deployment_statuses() {
        let all = all::<DeploymentStatus>();
        assert_eq!(all.len(), 10);
        distinct_lowercase(&all);
        assert_eq!(DeploymentStatus::Cancelled.nomad_name(), "cancelled");
        assert_eq!(DeploymentStatus::Successful.nomad_name(), "successful");
        assert_eq!(DeploymentStatus::Unblocking.nomad_name(), "unblocking");
        assert_eq!(DeploymentStatus::Unspecified.nomad_name(), "");
    }
}

//! The lowercase names Nomad gives the values of Caravan's enums, as its API
//! and CLI print them, each written once: the name of a value, the value a
//! name stands for, and the name the API shows for an unset value.

use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, DeploymentStatus, EvalStatus, JobStatus, JobType,
    NodeStatus, SchedulingEligibility,
};

/// Nomad's name of an enum value.
pub trait NomadName: Copy + PartialEq + 'static {
    /// Every set value (all but the unset one), in declaration order.
    const SET: &'static [Self];

    /// What an unset value reads as where the API shows it: the status
    /// Nomad gives a new object of its kind (a new job is `pending`, a new
    /// node `initializing`), and for a job type or an eligibility the value
    /// Nomad reads an unset one as.
    const NEW: Self;

    /// The name, such as `complete` or `sysbatch`. An unset status has the
    /// empty name; an unset job type is `service` and an unset eligibility
    /// `eligible`, since Nomad reads them so.
    fn nomad_name(self) -> &'static str;

    /// The name as the API shows it, never empty: an unset value reads as
    /// [`NomadName::NEW`].
    fn api_name(self) -> &'static str {
        match self.nomad_name() {
            "" => Self::NEW.nomad_name(),
            name => name,
        }
    }

    /// The set value Nomad's `name` stands for; `None` for the empty name
    /// and for a name of no value (names are matched exactly, lowercase).
    fn from_nomad_name(name: &str) -> Option<Self> {
        Self::SET.iter().copied().find(|v| v.nomad_name() == name)
    }
}

impl NomadName for EvalStatus {
    const SET: &'static [Self] = &[
        Self::Pending,
        Self::Blocked,
        Self::Complete,
        Self::Failed,
        Self::Canceled,
    ];
    const NEW: Self = Self::Pending;

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
    const SET: &'static [Self] = &[Self::Run, Self::Stop, Self::Evict];
    const NEW: Self = Self::Run;

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
    const SET: &'static [Self] = &[
        Self::Pending,
        Self::Running,
        Self::Complete,
        Self::Failed,
        Self::Lost,
        Self::Unknown,
    ];
    const NEW: Self = Self::Pending;

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
    const SET: &'static [Self] = &[Self::Pending, Self::Running, Self::Dead];
    const NEW: Self = Self::Pending;

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
    const SET: &'static [Self] = &[Self::Service, Self::Batch, Self::System, Self::Sysbatch];
    const NEW: Self = Self::Service;

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
    const SET: &'static [Self] = &[
        Self::Initializing,
        Self::Ready,
        Self::Down,
        Self::Disconnected,
    ];
    const NEW: Self = Self::Initializing;

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
    const SET: &'static [Self] = &[Self::Eligible, Self::Ineligible];
    const NEW: Self = Self::Eligible;

    fn nomad_name(self) -> &'static str {
        match self {
            Self::Unspecified | Self::Eligible => "eligible",
            Self::Ineligible => "ineligible",
        }
    }
}

impl NomadName for DeploymentStatus {
    const SET: &'static [Self] = &[
        Self::Running,
        Self::Paused,
        Self::Failed,
        Self::Successful,
        Self::Cancelled,
        Self::Pending,
        Self::Blocked,
        Self::Unblocking,
        Self::Initializing,
    ];
    const NEW: Self = Self::Running;

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

    /// `SET` is every value but the unset one, each name reads back as its
    /// value, and the API shows no value as empty.
    fn names_round_trip<T: NomadName + TryFrom<i32> + Default + std::fmt::Debug>() {
        let every = all::<T>();
        assert_eq!(every[0], T::default(), "the unset value is 0");
        assert_eq!(T::SET, &every[1..], "SET lists every set value in order");
        assert!(T::SET.contains(&T::NEW));
        for &v in T::SET {
            assert_eq!(T::from_nomad_name(v.nomad_name()), Some(v), "{v:?}");
            assert_eq!(v.api_name(), v.nomad_name(), "{v:?}");
        }
        assert_eq!(T::default().api_name(), T::NEW.nomad_name());
        assert_eq!(T::from_nomad_name(""), None);
        assert_eq!(T::from_nomad_name("no-such-name"), None);
    }

    #[test]
    fn every_name_reads_back_as_its_value() {
        names_round_trip::<EvalStatus>();
        names_round_trip::<AllocDesiredStatus>();
        names_round_trip::<AllocClientStatus>();
        names_round_trip::<JobStatus>();
        names_round_trip::<JobType>();
        names_round_trip::<NodeStatus>();
        names_round_trip::<SchedulingEligibility>();
        names_round_trip::<DeploymentStatus>();
    }

    #[test]
    fn unset_values_show_as_a_new_objects() {
        assert_eq!(EvalStatus::Unspecified.api_name(), "pending");
        assert_eq!(AllocDesiredStatus::Unspecified.api_name(), "run");
        assert_eq!(AllocClientStatus::Unspecified.api_name(), "pending");
        assert_eq!(JobStatus::Unspecified.api_name(), "pending");
        assert_eq!(JobType::Unspecified.api_name(), "service");
        assert_eq!(NodeStatus::Unspecified.api_name(), "initializing");
        assert_eq!(SchedulingEligibility::Unspecified.api_name(), "eligible");
        assert_eq!(DeploymentStatus::Unspecified.api_name(), "running");
        assert_eq!(EvalStatus::Canceled.api_name(), "canceled");
        assert_eq!(DeploymentStatus::Cancelled.api_name(), "cancelled");
    }

    #[test]
    fn names_are_exact() {
        assert_eq!(
            JobType::from_nomad_name("service"),
            Some(JobType::Service),
            "a name shared with the unset value reads as the set one"
        );
        assert_eq!(
            SchedulingEligibility::from_nomad_name("eligible"),
            Some(SchedulingEligibility::Eligible)
        );
        assert_eq!(JobType::from_nomad_name("Batch"), None);
        assert_eq!(NodeStatus::from_nomad_name(" ready"), None);
        assert_eq!(
            DeploymentStatus::from_nomad_name("canceled"),
            None,
            "deployments spell it cancelled"
        );
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

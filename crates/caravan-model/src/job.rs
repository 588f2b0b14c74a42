//! Which jobs are scheduled themselves, and the priority of one that sets
//! none.

use caravan_proto::Job;

/// Priority of a job that sets none, Nomad's default.
pub const DEFAULT_PRIORITY: i32 = 50;

/// Rules of a job.
pub trait JobExt {
    /// Whether it launches on a schedule: it has a periodic block that is
    /// enabled.
    fn is_periodic(&self) -> bool;

    /// Whether it is a parameterized parent, launched by dispatch: it has a
    /// parameterized block and is not itself a dispatched child.
    fn is_parameterized(&self) -> bool;

    /// Whether it is a template (a periodic or parameterized parent) that is
    /// never scheduled itself: its registration creates no evaluation and
    /// it runs until stopped.
    fn is_template(&self) -> bool;
}

impl JobExt for Job {
    fn is_periodic(&self) -> bool {
        self.periodic.as_ref().is_some_and(|p| p.enabled)
    }

    fn is_parameterized(&self) -> bool {
        self.parameterized.is_some() && !self.dispatched
    }

    fn is_template(&self) -> bool {
        self.is_periodic() || self.is_parameterized()
    }
}

#[cfg(test)]
mod tests {
    use caravan_proto::{ParameterizedJobConfig, PeriodicConfig};

    use super::*;

    #[test]
    fn a_plain_job_is_no_template() {
        let job = Job::default();
        assert!(!job.is_periodic() && !job.is_parameterized() && !job.is_template());
    }

    #[test]
    fn periodic_only_when_enabled() {
        let mut job = Job {
            periodic: Some(PeriodicConfig::default()),
            ..Default::default()
        };
        assert!(!job.is_periodic() && !job.is_template());
        if let Some(p) = job.periodic.as_mut() {
            p.enabled = true;
        }
        assert!(job.is_periodic() && job.is_template());
    }

    #[test]
    fn a_dispatched_child_is_not_its_parents_template() {
        let mut job = Job {
            parameterized: Some(ParameterizedJobConfig::default()),
            ..Default::default()
        };
        assert!(job.is_parameterized() && job.is_template());
        job.dispatched = true;
        assert!(!job.is_parameterized() && !job.is_template());
    }
}

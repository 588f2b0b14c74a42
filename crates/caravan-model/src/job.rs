//! Which jobs are scheduled themselves, what a job's allocations and
//! evaluations say of its status, and the priorities it may have.

use caravan_proto::{Allocation, Evaluation, Job, JobStatus, JobType};

use crate::{AllocExt, EvalStatusExt};

/// Priority of a job that sets none, Nomad's default.
pub const DEFAULT_PRIORITY: i32 = 50;
/// Lowest valid priority of a job or an evaluation.
pub const MIN_PRIORITY: i32 = 1;
/// Highest valid priority of a job or an evaluation.
pub const MAX_PRIORITY: i32 = 100;

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

/// Rules of a job type.
pub trait JobTypeExt {
    /// Whether its jobs run an allocation on every eligible node: system and
    /// sysbatch.
    fn runs_on_every_node(self) -> bool;

    /// Whether its allocations run to completion and are done when they
    /// finish, rather than kept running: batch and sysbatch.
    fn runs_to_completion(self) -> bool;
}

impl JobTypeExt for JobType {
    fn runs_on_every_node(self) -> bool {
        matches!(self, Self::System | Self::Sysbatch)
    }

    fn runs_to_completion(self) -> bool {
        matches!(self, Self::Batch | Self::Sysbatch)
    }
}

/// Nomad's status of a job, derived from its allocations and evaluations:
/// system jobs and templates run until stopped; any other job is running
/// with a non-terminal allocation, pending with a non-terminal evaluation,
/// and dead once all its work finished or it was stopped. A job that is not
/// stopped and has neither allocations nor evaluations is pending: nothing
/// has looked at it yet.
pub fn job_status<'a>(
    job: &Job,
    allocs: impl IntoIterator<Item = &'a Allocation>,
    evals: impl IntoIterator<Item = &'a Evaluation>,
) -> JobStatus {
    match work(job, allocs, evals) {
        Work::Running => JobStatus::Running,
        Work::Waiting => JobStatus::Pending,
        Work::Done => JobStatus::Dead,
        Work::None if job.stop => JobStatus::Dead,
        Work::None => JobStatus::Pending,
    }
}

/// Whether nothing of a job runs or waits any more, as garbage collection
/// asks: a system job or template once stopped; any other job once it has
/// no non-terminal allocation or evaluation. Unlike a [`job_status`] of
/// dead, a job with neither allocations nor evaluations is finished here
/// (they may all have been collected, as Nomad's status reads once its
/// evaluations are gone).
pub fn job_finished<'a>(
    job: &Job,
    allocs: impl IntoIterator<Item = &'a Allocation>,
    evals: impl IntoIterator<Item = &'a Evaluation>,
) -> bool {
    match work(job, allocs, evals) {
        Work::Running | Work::Waiting => false,
        Work::Done | Work::None => true,
    }
}

/// Where a job's work stands.
enum Work {
    /// An allocation is not terminal (or, for a system job or template, it
    /// is not stopped).
    Running,
    /// No allocation runs but an evaluation is not terminal.
    Waiting,
    /// Everything it had finished (or, for a system job or template, it is
    /// stopped).
    Done,
    /// It has neither allocations nor evaluations.
    None,
}

fn work<'a>(
    job: &Job,
    allocs: impl IntoIterator<Item = &'a Allocation>,
    evals: impl IntoIterator<Item = &'a Evaluation>,
) -> Work {
    if job.r#type() == JobType::System || job.is_template() {
        return if job.stop { Work::Done } else { Work::Running };
    }
    let mut any = false;
    for alloc in allocs {
        any = true;
        if !alloc.is_terminal() {
            return Work::Running;
        }
    }
    for eval in evals {
        any = true;
        if !eval.status().is_terminal() {
            return Work::Waiting;
        }
    }
    if any { Work::Done } else { Work::None }
}

#[cfg(test)]
mod tests {
    use caravan_proto::{
        AllocClientStatus, AllocDesiredStatus, EvalStatus, ParameterizedJobConfig, PeriodicConfig,
    };

    use super::*;

    #[test]
    fn job_types_by_placement_and_lifetime() {
        use JobType as T;
        let every_node = [T::System, T::Sysbatch];
        let to_completion = [T::Batch, T::Sysbatch];
        for t in [T::Unspecified, T::Service, T::Batch, T::System, T::Sysbatch] {
            assert_eq!(t.runs_on_every_node(), every_node.contains(&t), "{t:?}");
            assert_eq!(t.runs_to_completion(), to_completion.contains(&t), "{t:?}");
        }
    }

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

    fn alloc(client: AllocClientStatus) -> Allocation {
        let mut a = Allocation::default();
        a.set_desired_status(AllocDesiredStatus::Run);
        a.set_client_status(client);
        a
    }

    fn eval(status: EvalStatus) -> Evaluation {
        let mut e = Evaluation::default();
        e.set_status(status);
        e
    }

    /// `job_status` and `job_finished` of `job` with these allocs and evals.
    fn judge(job: &Job, allocs: &[Allocation], evals: &[Evaluation]) -> (JobStatus, bool) {
        (
            job_status(job, allocs, evals),
            job_finished(job, allocs, evals),
        )
    }

    #[test]
    fn live_work_decides_first() {
        use AllocClientStatus as C;
        let job = Job::default();
        let running = [alloc(C::Complete), alloc(C::Running)];
        let waiting = [eval(EvalStatus::Complete), eval(EvalStatus::Blocked)];
        assert_eq!(judge(&job, &running, &waiting), (JobStatus::Running, false));
        assert_eq!(judge(&job, &[], &waiting), (JobStatus::Pending, false));
        let done = [alloc(C::Complete), alloc(C::Failed)];
        let finished = [eval(EvalStatus::Complete)];
        assert_eq!(judge(&job, &done, &finished), (JobStatus::Dead, true));
        assert_eq!(judge(&job, &done, &[]), (JobStatus::Dead, true));
        assert_eq!(judge(&job, &[], &finished), (JobStatus::Dead, true));
    }

    #[test]
    fn a_job_with_nothing_is_pending_yet_finished() {
        let mut job = Job::default();
        assert_eq!(judge(&job, &[], &[]), (JobStatus::Pending, true));
        job.stop = true;
        assert_eq!(judge(&job, &[], &[]), (JobStatus::Dead, true));
    }

    #[test]
    fn a_stopped_job_still_runs_while_its_work_does() {
        let job = Job {
            stop: true,
            ..Default::default()
        };
        let running = [alloc(AllocClientStatus::Running)];
        assert_eq!(judge(&job, &running, &[]), (JobStatus::Running, false));
    }

    #[test]
    fn system_jobs_and_templates_run_until_stopped() {
        let mut system = Job::default();
        system.set_type(JobType::System);
        let template = Job {
            parameterized: Some(ParameterizedJobConfig::default()),
            ..Default::default()
        };
        let done = [alloc(AllocClientStatus::Complete)];
        for mut job in [system, template] {
            assert_eq!(judge(&job, &[], &[]), (JobStatus::Running, false));
            assert_eq!(judge(&job, &done, &[]), (JobStatus::Running, false));
            job.stop = true;
            let running = [alloc(AllocClientStatus::Running)];
            assert_eq!(judge(&job, &running, &[]), (JobStatus::Dead, true));
        }
    }
}

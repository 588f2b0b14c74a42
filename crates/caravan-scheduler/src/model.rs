//! Small facts about the data model the schedulers need: names, defaults,
//! policies. The rules shared with the services (terminal states, Nomad's
//! names) live in `caravan-model`.

use caravan_model::task_state;
use caravan_proto::{
    AllocClientStatus, Allocation, Job, JobType, MigrateStrategy, ReschedulePolicy, TaskGroup,
    UpdateStrategy,
};

pub use caravan_model::DEFAULT_PRIORITY;

/// One second in nanoseconds.
pub const SECOND_NS: i64 = 1_000_000_000;

/// Whether every task of the allocation finished without failing.
pub fn ran_successfully(a: &Allocation) -> bool {
    if a.client_status() == AllocClientStatus::Complete {
        return true;
    }
    !a.task_states.is_empty()
        && a.task_states
            .values()
            .all(|t| t.state == task_state::DEAD && !t.failed)
}

/// The scheduler type of a job.
pub fn job_type(job: &Job) -> JobType {
    job.r#type()
}

/// The job's effective priority.
pub fn priority(job: &Job) -> i32 {
    if job.priority == 0 {
        DEFAULT_PRIORITY
    } else {
        job.priority
    }
}

/// The group's update strategy, falling back to the job's; `None` when rolling
/// updates are off (no strategy or `max_parallel` 0).
pub fn update_strategy<'a>(job: &'a Job, tg: &'a TaskGroup) -> Option<&'a UpdateStrategy> {
    let s = tg.update.as_ref().or(job.update.as_ref())?;
    (s.max_parallel > 0).then_some(s)
}

/// The group's migrate strategy with Nomad's default of one at a time.
pub fn migrate_max_parallel(tg: &TaskGroup) -> usize {
    match &tg.migrate {
        Some(MigrateStrategy { max_parallel, .. }) if *max_parallel > 0 => *max_parallel as usize,
        _ => 1,
    }
}

/// The group's reschedule policy, or the defaults of its job type.
pub fn reschedule_policy(job_type: JobType, tg: &TaskGroup) -> ReschedulePolicy {
    if let Some(p) = &tg.reschedule_policy {
        return p.clone();
    }
    match job_type {
        JobType::Batch => ReschedulePolicy {
            attempts: 1,
            interval_ns: 24 * 3600 * SECOND_NS,
            delay_ns: 5 * SECOND_NS,
            delay_function: "constant".into(),
            max_delay_ns: 0,
            unlimited: false,
        },
        JobType::Service => ReschedulePolicy {
            attempts: 0,
            interval_ns: 0,
            delay_ns: 30 * SECOND_NS,
            delay_function: "exponential".into(),
            max_delay_ns: 3600 * SECOND_NS,
            unlimited: true,
        },
        _ => ReschedulePolicy::default(),
    }
}

/// The task group by name.
pub fn group<'a>(job: &'a Job, name: &str) -> Option<&'a TaskGroup> {
    job.task_groups.iter().find(|g| g.name == name)
}

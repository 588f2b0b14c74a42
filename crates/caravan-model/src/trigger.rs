//! Why an evaluation exists: its `triggered_by`, as Nomad spells it.

/// A job was registered (or its evaluation forced).
pub const JOB_REGISTER: &str = "job-register";
/// A job was deregistered.
pub const JOB_DEREGISTER: &str = "job-deregister";
/// A task group was scaled.
pub const JOB_SCALING: &str = "job-scaling";
/// A node's status or eligibility changed, or it went down.
pub const NODE_UPDATE: &str = "node-update";
/// A node drains: its allocations move elsewhere.
pub const NODE_DRAIN: &str = "node-drain";
/// An operator stopped one allocation.
pub const ALLOC_STOP: &str = "alloc-stop";
/// A client reported an allocation failed.
pub const ALLOC_FAILURE: &str = "alloc-failure";
/// The next batch of a system job's rolling update, after its stagger.
pub const ROLLING_UPDATE: &str = "rolling-update";
/// The deployment watcher moves a deployment on.
pub const DEPLOYMENT_WATCHER: &str = "deployment-watcher";
/// Retries an evaluation that reached its delivery limit.
pub const FAILED_FOLLOW_UP: &str = "failed-follow-up";
/// A blocked evaluation created because plans kept failing; retried
/// periodically, not only when capacity changes.
pub const MAX_PLAN_ATTEMPTS: &str = "max-plan-attempts";
/// Schedules a periodic job's child.
pub const PERIODIC_JOB: &str = "periodic-job";
/// A blocked evaluation waiting for capacity for what could not be placed.
pub const QUEUED_ALLOCS: &str = "queued-allocs";
/// An allocation was preempted.
pub const PREEMPTION: &str = "preemption";
/// A scaling policy acted.
pub const SCALING: &str = "scaling";
/// A failed allocation is retried.
pub const RETRY_FAILED_ALLOC: &str = "retry-failed-alloc";
/// A disconnected node stayed away past its allocations' timeout.
pub const MAX_DISCONNECT_TIMEOUT: &str = "max-disconnect-timeout";
/// A disconnected node came back.
pub const RECONNECT: &str = "reconnect";

/// Every trigger the schedulers accept.
pub const KNOWN: &[&str] = &[
    JOB_REGISTER,
    JOB_DEREGISTER,
    NODE_UPDATE,
    NODE_DRAIN,
    ALLOC_STOP,
    ALLOC_FAILURE,
    ROLLING_UPDATE,
    DEPLOYMENT_WATCHER,
    FAILED_FOLLOW_UP,
    MAX_PLAN_ATTEMPTS,
    PERIODIC_JOB,
    QUEUED_ALLOCS,
    PREEMPTION,
    SCALING,
    JOB_SCALING,
    RETRY_FAILED_ALLOC,
    MAX_DISCONNECT_TIMEOUT,
    RECONNECT,
];

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn known_triggers_are_distinct_and_nomads() {
        let distinct: BTreeSet<&str> = KNOWN.iter().copied().collect();
        assert_eq!(distinct.len(), KNOWN.len());
        assert_eq!(KNOWN.len(), 18);
        for t in KNOWN {
            assert!(
                !t.is_empty() && t.chars().all(|c| c.is_ascii_lowercase() || c == '-'),
                "{t}"
            );
        }
        assert!(KNOWN.contains(&"job-register") && KNOWN.contains(&"max-plan-attempts"));
    }
}

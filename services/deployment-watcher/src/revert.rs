//! Auto-revert: which version a failed deployment rolls its job back to,
//! and how the failure's description says so.

use std::sync::Arc;

use caravan_proto::Job;
use caravan_state::spec_changed;

/// Where a failed deployment's job goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Rollback {
    /// Register this stable version's specification again.
    To(Box<Job>),
    /// No stable version older than the failing one is kept.
    NoStableVersion,
    /// The latest stable version has the job's current specification:
    /// registering it would change nothing.
    SameSpec(u64),
    /// The job moved past the failing version (or is gone): an operator
    /// registered something newer, which a rollback must not undo.
    JobMoved,
}

/// The rollback of a deployment of `failing_version` for the job whose
/// current version is `current` and whose kept versions are `versions`:
/// the latest stable version older than the failing one.
pub fn rollback_target<'a>(
    current: Option<&Job>,
    versions: impl DoubleEndedIterator<Item = &'a Arc<Job>>,
    failing_version: u64,
) -> Rollback {
    let Some(current) = current.filter(|j| j.version == failing_version && !j.stop) else {
        return Rollback::JobMoved;
    };
    let Some(stable) = versions
        .rev()
        .find(|v| v.stable && v.version < failing_version)
    else {
        return Rollback::NoStableVersion;
    };
    if !spec_changed(current, stable) {
        return Rollback::SameSpec(stable.version);
    }
    Rollback::To(Box::new((**stable).clone()))
}

/// The failure's description with what the rollback did: `base` alone when
/// there was nothing to decide, else Nomad's wording.
pub fn describe(base: &str, rollback: Option<&Rollback>, reverted_to: Option<u64>) -> String {
    match (rollback, reverted_to) {
        (_, Some(version)) => format!("{base} - rolling back to job version {version}"),
        (Some(Rollback::NoStableVersion), None) => {
            format!("{base} - no stable job version to auto revert to")
        }
        (Some(Rollback::SameSpec(version)), None) => format!(
            "{base} - not rolling back to stable job version {version} as current job has same specification"
        ),
        _ => base.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use caravan_proto::TaskGroup;

    use super::*;

    fn version(v: u64, stable: bool, count: i32) -> Arc<Job> {
        Arc::new(Job {
            id: "web".into(),
            version: v,
            stable,
            task_groups: vec![TaskGroup {
                name: "g".into(),
                count,
                ..Default::default()
            }],
            ..Default::default()
        })
    }

    #[test]
    fn the_target_is_the_latest_stable_version_older_than_the_failing_one() {
        let versions = [
            version(0, true, 1),
            version(1, true, 2),
            version(2, false, 3),
            version(3, false, 4),
        ];
        let current = version(3, false, 4);
        match rollback_target(Some(&current), versions.iter(), 3) {
            Rollback::To(job) => assert_eq!((job.version, job.task_groups[0].count), (1, 2)),
            other => panic!("expected a target, got {other:?}"),
        }
        // A stable version newer than the failing one (marked by hand) is not a target.
        let versions = [
            version(0, true, 1),
            version(1, false, 2),
            version(2, true, 3),
        ];
        let current = version(1, false, 2);
        match rollback_target(Some(&current), versions.iter(), 1) {
            Rollback::To(job) => assert_eq!(job.version, 0),
            other => panic!("expected version 0, got {other:?}"),
        }
    }

    #[test]
    fn no_target_without_a_stable_version_or_with_the_same_spec() {
        let versions = [version(0, false, 1), version(1, false, 2)];
        let current = version(1, false, 2);
        assert_eq!(
            rollback_target(Some(&current), versions.iter(), 1),
            Rollback::NoStableVersion
        );
        let versions = [version(0, true, 2), version(1, false, 2)];
        assert_eq!(
            rollback_target(Some(&current), versions.iter(), 1),
            Rollback::SameSpec(0)
        );
    }

    #[test]
    fn a_job_that_moved_on_is_not_rolled_back() {
        let versions = [
            version(0, true, 1),
            version(1, false, 2),
            version(2, false, 3),
        ];
        let current = version(2, false, 3);
        assert_eq!(
            rollback_target(Some(&current), versions.iter(), 1),
            Rollback::JobMoved
        );
        assert_eq!(
            rollback_target(None, versions.iter(), 1),
            Rollback::JobMoved
        );
    }

    #[test]
    fn descriptions_follow_nomad() {
        let base = "Failed due to unhealthy allocations";
        assert_eq!(
            describe(base, None, Some(3)),
            "Failed due to unhealthy allocations - rolling back to job version 3"
        );
        assert_eq!(
            describe(base, Some(&Rollback::NoStableVersion), None),
            "Failed due to unhealthy allocations - no stable job version to auto revert to"
        );
        assert!(
            describe(base, Some(&Rollback::SameSpec(2)), None).contains("stable job version 2")
        );
        assert_eq!(describe(base, Some(&Rollback::JobMoved), None), base);
        assert_eq!(describe(base, None, None), base);
    }
}

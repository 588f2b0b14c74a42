//! Job versions: when a registration is a new version, and which old
//! versions a new one pushes out of the six kept.

use caravan_proto::Job;

/// Versions of a job kept in the store (Nomad's `JobTrackedVersions`).
pub const KEPT_VERSIONS: usize = 6;

/// Whether `new` differs from `old` in anything the operator specifies, as
/// opposed to what the servers maintain (version, status, stability,
/// revisions, submit time).
pub fn spec_changed(old: &Job, new: &Job) -> bool {
    spec_of(old) != spec_of(new)
}

fn spec_of(job: &Job) -> Job {
    Job {
        status: 0,
        status_description: String::new(),
        stable: false,
        version: 0,
        submit_time_unix_ns: 0,
        create_revision: 0,
        modify_revision: 0,
        job_modify_revision: 0,
        ..job.clone()
    }
}

/// The versions to delete once `new_version` is written next to `existing`
/// (version, stable) pairs: all but the newest [`KEPT_VERSIONS`], except that
/// the newest stable version survives when none of those is stable, so a
/// rollback target is never lost.
pub fn versions_to_delete(existing: &[(u64, bool)], new_version: u64) -> Vec<u64> {
    let mut all: Vec<(u64, bool)> = existing
        .iter()
        .copied()
        .filter(|(v, _)| *v != new_version)
        .collect();
    all.push((new_version, false));
    all.sort_by_key(|v| std::cmp::Reverse(v.0));
    if all.len() <= KEPT_VERSIONS {
        return Vec::new();
    }
    let mut keep: Vec<u64> = all.iter().take(KEPT_VERSIONS).map(|(v, _)| *v).collect();
    let kept_stable = all.iter().take(KEPT_VERSIONS).any(|(_, s)| *s);
    if !kept_stable && let Some((stable, _)) = all.iter().skip(KEPT_VERSIONS).find(|(_, s)| *s) {
        // The oldest kept version makes room for the newest stable one.
        keep.pop();
        keep.push(*stable);
    }
    all.iter()
        .map(|(v, _)| *v)
        .filter(|v| !keep.contains(v))
        .collect()
}

#[cfg(test)]
mod tests {
    use caravan_proto::{JobStatus, TaskGroup};

    use super::*;

    #[test]
    fn server_fields_are_not_spec_changes() {
        let old = Job {
            id: "web".into(),
            version: 3,
            stable: true,
            job_modify_revision: 40,
            modify_revision: 41,
            submit_time_unix_ns: 5,
            status: JobStatus::Running as i32,
            ..Default::default()
        };
        let same = Job {
            id: "web".into(),
            ..Default::default()
        };
        assert!(!spec_changed(&old, &same));
        let mut changed = same.clone();
        changed.task_groups.push(TaskGroup::default());
        assert!(spec_changed(&old, &changed));
        let mut stopped = same.clone();
        stopped.stop = true;
        assert!(spec_changed(&old, &stopped), "stop is part of the spec");
    }

    #[test]
    fn six_versions_are_kept() {
        let existing: Vec<(u64, bool)> = (0..6).map(|v| (v, false)).collect();
        assert_eq!(versions_to_delete(&existing, 6), vec![0]);
        let existing: Vec<(u64, bool)> = (0..5).map(|v| (v, false)).collect();
        assert!(versions_to_delete(&existing, 5).is_empty());
        // Rewriting an existing version number counts it once.
        let existing: Vec<(u64, bool)> = (0..6).map(|v| (v, false)).collect();
        assert!(versions_to_delete(&existing, 5).is_empty());
    }

    #[test]
    fn the_newest_stable_version_survives() {
        let existing: Vec<(u64, bool)> = (0..8).map(|v| (v, v == 1)).collect();
        // Kept: 8,7,6,5,4 and stable 1; deleted: 0,2,3.
        let mut deleted = versions_to_delete(&existing, 8);
        deleted.sort();
        assert_eq!(deleted, vec![0, 2, 3]);
        // A stable version among the newest six needs no exception.
        let existing: Vec<(u64, bool)> = (0..8).map(|v| (v, v == 5 || v == 1)).collect();
        let mut deleted = versions_to_delete(&existing, 8);
        deleted.sort();
        assert_eq!(deleted, vec![0, 1, 2]);
    }
}

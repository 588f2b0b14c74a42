//! The job registration write every writer of jobs builds (the api-gateway
//! for operators, the deployment-watcher for auto-revert): the job and its
//! new version in one transaction compared on the job's mod revision, the
//! versions a new one pushes out of the six kept, and when a registration
//! is a new version at all. The caller adds the evaluation it causes to the
//! same transaction.

use caravan_proto::{Job, JobStatus};
use caravan_store::{Compare, CompareOp, Op, Txn};

use crate::codec::encode;
use crate::keyspace::Keyspace;

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

/// A registration transaction before its evaluation is added.
#[derive(Debug, Clone)]
pub struct RegisterTxn {
    /// The transaction: the compare on the job and, when the spec changed,
    /// the job, its version and the deletions of pushed-out versions.
    pub txn: Txn,
    /// The job as the registration leaves it: the new version (its
    /// `job_modify_revision` 0, resolved to the transaction's revision on
    /// read), or the existing job when nothing changed.
    pub job: Job,
    /// Whether the job itself (and a new version) is written.
    pub changed: bool,
}

/// Builds the registration of `job` over `existing` (as read, revisions
/// resolved) whose kept versions are `versions` (version, stable), at
/// `now_unix_ns`. A spec equal to the existing one writes nothing but the
/// compare, so the caller's evaluation still evaluates the current version.
pub fn register_txn(
    keys: &Keyspace,
    existing: Option<&Job>,
    mut job: Job,
    versions: &[(u64, bool)],
    now_unix_ns: i64,
) -> RegisterTxn {
    let job_key = keys.job(&job.namespace, &job.id);
    let mut txn = Txn::new().when(match existing {
        Some(old) => Compare::mod_revision(job_key.clone(), CompareOp::Equal, old.modify_revision),
        None => Compare::absent(job_key.clone()),
    });
    let changed = existing.is_none_or(|old| spec_changed(old, &job));
    if changed {
        job.version = existing.map_or(0, |old| old.version.saturating_add(1));
        // Resolved on read to this transaction's revision.
        job.job_modify_revision = 0;
        job.create_revision = 0;
        job.modify_revision = 0;
        job.stable = false;
        job.submit_time_unix_ns = now_unix_ns;
        job.set_status(JobStatus::Pending);
        job.status_description.clear();
        let bytes = encode(&job);
        txn = txn
            .and_then(Op::put(job_key, bytes.clone()))
            .and_then(Op::put(
                keys.job_version(&job.namespace, &job.id, job.version),
                bytes,
            ));
        for old in versions_to_delete(versions, job.version) {
            txn = txn.and_then(Op::delete(keys.job_version(&job.namespace, &job.id, old)));
        }
    } else if let Some(old) = existing {
        job = old.clone();
    }
    RegisterTxn { txn, job, changed }
}

/// The specification of a stored version, with the servers' fields cleared,
/// so registering it makes a new version (a revert).
pub fn as_spec(mut job: Job) -> Job {
    job.version = 0;
    job.stable = false;
    job.status = 0;
    job.status_description.clear();
    job.create_revision = 0;
    job.modify_revision = 0;
    job.job_modify_revision = 0;
    job.submit_time_unix_ns = 0;
    job
}

#[cfg(test)]
mod tests {
    use caravan_proto::TaskGroup;

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
        assert!(!spec_changed(&old, &as_spec(old.clone())));
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

    #[test]
    fn a_changed_spec_is_the_next_version_and_an_equal_one_writes_nothing() {
        let keys = Keyspace::new("/t");
        let old = Job {
            id: "web".into(),
            namespace: "default".into(),
            version: 2,
            stable: true,
            job_modify_revision: 40,
            modify_revision: 41,
            ..Default::default()
        };
        let mut new = as_spec(old.clone());
        new.priority = 70;
        let w = register_txn(&keys, Some(&old), new, &[(2, true)], 9);
        assert!(w.changed);
        assert_eq!((w.job.version, w.job.stable), (3, false));
        assert_eq!(w.job.submit_time_unix_ns, 9);
        assert_eq!(w.job.job_modify_revision, 0);
        assert_eq!(
            w.txn.compares,
            vec![Compare::mod_revision(
                keys.job("default", "web"),
                CompareOp::Equal,
                41
            )]
        );
        assert_eq!(w.txn.success.len(), 2, "job and version");
        let same = register_txn(&keys, Some(&old), as_spec(old.clone()), &[(2, true)], 9);
        assert!(!same.changed);
        assert!(same.txn.success.is_empty());
        assert_eq!(same.job.version, 2);
    }
}

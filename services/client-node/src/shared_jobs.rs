//! Job versions and their task groups shared by every node of one client
//! process. The servers send each node the job versions its allocations
//! run; a process simulating thousands of nodes would otherwise keep a copy
//! per node, which for jobs spread evenly over the nodes is a copy per
//! allocation, and every alloc runner its own copy of its task group.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use caravan_proto::{Job, TaskGroup};
use parking_lot::Mutex;

/// Namespace, id, version.
type Key = (String, String, u64);

/// The process's copies of job versions, held weakly: a version is freed
/// once no node keeps it.
#[derive(Debug, Default)]
pub struct SharedJobs {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    jobs: HashMap<Key, Weak<Job>>,
    groups: HashMap<(Key, String), Weak<TaskGroup>>,
    /// Size at which dead entries are swept next.
    sweep_at: usize,
}

impl Inner {
    /// Forgets what nobody holds any more, once the maps doubled.
    fn sweep_if_due(&mut self) {
        if self.jobs.len() + self.groups.len() >= self.sweep_at {
            self.jobs.retain(|_, held| held.strong_count() > 0);
            self.groups.retain(|_, held| held.strong_count() > 0);
            self.sweep_at = ((self.jobs.len() + self.groups.len()) * 2).max(64);
        }
    }
}

impl SharedJobs {
    /// The process's copy of `job`: the one already held when it is equal,
    /// else `job` itself, which becomes the copy others share.
    pub fn share(&self, job: Job) -> Arc<Job> {
        let key = (job.namespace.clone(), job.id.clone(), job.version);
        let mut inner = self.inner.lock();
        if let Some(held) = inner.jobs.get(&key).and_then(Weak::upgrade)
            && *held == job
        {
            return held;
        }
        let job = Arc::new(job);
        inner.jobs.insert(key, Arc::downgrade(&job));
        inner.sweep_if_due();
        job
    }

    /// The process's copy of task group `name` of `job`, if the job has it.
    pub fn group(&self, job: &Job, name: &str) -> Option<Arc<TaskGroup>> {
        let group = job.task_groups.iter().find(|g| g.name == name)?;
        let key = (
            (job.namespace.clone(), job.id.clone(), job.version),
            name.to_string(),
        );
        let mut inner = self.inner.lock();
        if let Some(held) = inner.groups.get(&key).and_then(Weak::upgrade)
            && *held == *group
        {
            return Some(held);
        }
        let group = Arc::new(group.clone());
        inner.groups.insert(key, Arc::downgrade(&group));
        inner.sweep_if_due();
        Some(group)
    }

    /// Job versions some node still holds.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        let inner = self.inner.lock();
        inner.jobs.values().filter(|j| j.strong_count() > 0).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(version: u64, priority: i32) -> Job {
        Job {
            id: "web".into(),
            namespace: "default".into(),
            version,
            priority,
            ..Default::default()
        }
    }

    #[test]
    fn equal_versions_share_one_copy_and_a_different_one_does_not() {
        let shared = SharedJobs::default();
        let a = shared.share(job(1, 50));
        let b = shared.share(job(1, 50));
        assert!(Arc::ptr_eq(&a, &b));
        // Same key, other content (never sent by the servers, but not
        // trusted): its own copy.
        let c = shared.share(job(1, 70));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(c.priority, 70);
        let d = shared.share(job(2, 50));
        assert!(!Arc::ptr_eq(&c, &d));
        drop((a, b, c));
        assert_eq!(shared.len(), 1, "only version 2 is still held");
    }

    #[test]
    fn allocations_of_one_group_share_it() {
        let shared = SharedJobs::default();
        let mut j = job(1, 50);
        j.task_groups.push(TaskGroup {
            name: "web".into(),
            count: 3,
            ..Default::default()
        });
        let a = shared.group(&j, "web").unwrap();
        let b = shared.group(&j, "web").unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(a.count, 3);
        assert!(shared.group(&j, "db").is_none());
    }
}

//! The cache's tables and their indexes, and the pure logic that applies one
//! decoded change to them. No I/O: the informer feeds it, tests drive it.

use std::sync::Arc;

use caravan_model::AllocExt;
use caravan_proto::{
    AllocStatus, Allocation, Deployment, Evaluation, Job, Node, NodePool, SchedulerConfiguration,
};
use caravan_store::Revision;
use imbl::{OrdMap, OrdSet};

use crate::alloc_status::{carry_client_part, lay_status};
use crate::change::Change;
use crate::codec::{AllocDetail, StateObject, keeps_task_states};
use crate::index::{Id, JobMap, Shared, job_set_insert, job_set_remove};
use crate::keyspace::StateKey;
use crate::status_batch::{highest, outranks, rank};
use crate::usage::{AllocUsage, NodeUsage};

/// The allocations placed on one node, by id, and what the live ones hold.
///
/// The indexes hold ids, not allocations: an allocation's status changes
/// in place (placed, running, healthy) rewrite only the primary table, not
/// a path in every index too. Readers resolve ids through the primary
/// table.
#[derive(Clone, Debug, Default)]
pub(crate) struct NodeAllocs {
    pub(crate) ids: OrdSet<Id>,
    pub(crate) usage: NodeUsage,
}

/// Every object under the prefix, decoded, with the indexes the services
/// read. Persistent maps throughout, so a clone is O(1) and shares structure:
/// that clone is a [`Snapshot`](crate::Snapshot).
#[derive(Clone, Debug, Default)]
pub struct Tables {
    pub(crate) revision: Revision,
    pub(crate) jobs: JobMap<Arc<Job>>,
    pub(crate) job_versions: JobMap<OrdMap<u64, Arc<Job>>>,
    pub(crate) evals: OrdMap<Id, Shared<Evaluation>>,
    pub(crate) evals_by_job: JobMap<OrdMap<Id, Arc<Evaluation>>>,
    pub(crate) allocs: OrdMap<Id, Shared<Allocation>>,
    pub(crate) allocs_by_node: OrdMap<Id, Arc<NodeAllocs>>,
    /// The ids of each job's allocations (see [`NodeAllocs`]).
    pub(crate) allocs_by_job: JobMap<OrdSet<Id>>,
    pub(crate) nodes: OrdMap<Id, Shared<Node>>,
    pub(crate) heartbeats: OrdSet<Id>,
    pub(crate) deployments: OrdMap<Id, Shared<Deployment>>,
    pub(crate) deployments_by_job: JobMap<OrdMap<Id, Arc<Deployment>>>,
    pub(crate) scheduler_config: Option<Arc<SchedulerConfiguration>>,
    /// The node pools written as objects, by name.
    pub(crate) node_pools: OrdMap<Id, Arc<NodePool>>,
    /// How much of an allocation the tables keep (task states of live
    /// allocations are dropped for [`AllocDetail::Scheduling`] after every
    /// fold of a status, as its decode drops them).
    pub(crate) detail: AllocDetail,
    /// Statuses that came before their allocation's record (a watch orders
    /// events per key, not across the two keys of an allocation), with
    /// their revisions: folded in when the record comes.
    pub(crate) orphan_statuses: OrdMap<Id, (Arc<AllocStatus>, Revision)>,
    /// The same for statuses from status batches, each with the batch it
    /// came from: dropped with that batch (an allocation collected before
    /// its batch was freed leaves its entries behind until then). All of
    /// them, not the best alone: an entry moved to another batch is met
    /// twice, and only the copy whose batch stays may be kept.
    pub(crate) orphan_entries: OrdMap<Id, Vec<OrphanEntry>>,
}

impl Tables {
    /// Empty tables at revision 0.
    pub fn new() -> Self {
        Tables::default()
    }

    /// Empty tables keeping `detail` of each allocation; the changes
    /// applied must be decoded with the same detail.
    pub fn with_detail(detail: AllocDetail) -> Self {
        Tables {
            detail,
            ..Tables::default()
        }
    }

    /// Records that every change up to `revision` has been applied. The
    /// revision never moves back.
    pub fn advance_to(&mut self, revision: Revision) {
        self.revision = self.revision.max(revision);
    }

    /// Applies one change, keeping every index and the node usage in step.
    pub fn apply(&mut self, change: Change) {
        match change {
            Change::Job { namespace, id, job } => {
                match job {
                    Some(job) => self.jobs.insert(&namespace, &id, job),
                    None => self.jobs.remove(&namespace, &id),
                };
            }
            Change::JobVersion {
                namespace,
                id,
                version,
                job,
            } => self.apply_job_version(&namespace, &id, version, job),
            Change::Eval { id, eval } => {
                let old = put_or_remove(&mut self.evals, &id, eval.as_ref());
                reindex_by_job(&mut self.evals_by_job, &id, old.as_ref(), eval, |e| {
                    (&e.namespace, &e.job_id)
                });
            }
            Change::Alloc { id, alloc } => {
                let alloc = match alloc {
                    Some(record) => Some(self.under_status(&id, record)),
                    None => {
                        self.orphan_statuses.remove(&id);
                        self.orphan_entries.remove(&id);
                        None
                    }
                };
                self.apply_alloc(id, alloc);
            }
            Change::AllocStatus {
                id,
                status,
                revision,
            } => self.apply_alloc_status(id, status, revision),
            Change::StatusBatch { batch, entries } => match entries {
                Some(entries) => {
                    for (id, status, revision) in entries {
                        self.apply_batch_entry(id, status, revision, &batch);
                    }
                }
                // What a freed batch held that was still chosen was moved
                // first: only the entries of collected allocations go.
                None => {
                    let touched: Vec<Id> = self
                        .orphan_entries
                        .iter()
                        .filter(|(_, entries)| entries.iter().any(|e| *e.batch == *batch))
                        .map(|(id, _)| id.clone())
                        .collect();
                    for id in touched {
                        if let Some(entries) = self.orphan_entries.get_mut(&id) {
                            entries.retain(|e| *e.batch != *batch);
                            if entries.is_empty() {
                                self.orphan_entries.remove(&id);
                            }
                        }
                    }
                }
            },
            Change::Node { id, node } => {
                put_or_remove(&mut self.nodes, &id, node.as_ref());
            }
            Change::Heartbeat { node_id, live } => {
                if live {
                    self.heartbeats.insert(node_id);
                } else {
                    self.heartbeats.remove(&node_id);
                }
            }
            Change::Deployment { id, deployment } => {
                let old = put_or_remove(&mut self.deployments, &id, deployment.as_ref());
                reindex_by_job(
                    &mut self.deployments_by_job,
                    &id,
                    old.as_ref(),
                    deployment,
                    |d| (&d.namespace, &d.job_id),
                );
            }
            Change::SchedulerConfig(config) => self.scheduler_config = config,
            Change::NodePool { name, pool } => match pool {
                Some(pool) => {
                    self.node_pools.insert(name, pool);
                }
                None => {
                    self.node_pools.remove(&name);
                }
            },
        }
    }

    fn apply_job_version(&mut self, ns: &str, id: &str, version: u64, job: Option<Arc<Job>>) {
        match job {
            Some(job) => {
                if let Some(versions) = self.job_versions.get_mut(ns, id) {
                    versions.insert(version, job);
                } else {
                    self.job_versions.insert(ns, id, OrdMap::unit(version, job));
                }
            }
            None => {
                let now_empty = self.job_versions.get_mut(ns, id).is_some_and(|versions| {
                    versions.remove(&version);
                    versions.is_empty()
                });
                if now_empty {
                    self.job_versions.remove(ns, id);
                }
            }
        }
    }

    /// A new record of allocation `id`, with the client's part of the one
    /// held laid over it when that came from a status key: the status is
    /// the allocation's until it changes or goes.
    fn under_status(&mut self, id: &Id, record: Arc<Allocation>) -> Arc<Allocation> {
        if let Some(held) = self
            .allocs
            .get(id)
            .filter(|a| a.0.client_modify_revision != 0)
        {
            let mut next = Arc::unwrap_or_clone(record);
            // A lean copy held no task states while it ran; the servers'
            // record carries the ones they read with the status, which a
            // stop makes wanted.
            let from_record = std::mem::take(&mut next.task_states);
            carry_client_part(&mut next, &held.0);
            if self.detail == AllocDetail::Scheduling && next.task_states.is_empty() {
                next.task_states = from_record;
            }
            self.trim(&mut next);
            return Arc::new(next);
        }
        let own = self.orphan_statuses.remove(id);
        let entries = self.orphan_entries.remove(id).unwrap_or_default();
        let candidates = own
            .into_iter()
            .chain(entries.into_iter().map(|e| (e.status, e.revision)));
        let Some(chosen) = highest(candidates, |(s, rev)| (s.client_status(), *rev)) else {
            return record;
        };
        let (status, revision) = chosen;
        let mut next = Arc::unwrap_or_clone(record);
        lay_status(&mut next, &status, revision);
        self.trim(&mut next);
        Arc::new(next)
    }

    /// Folds a status write (or delete) into the allocation held; a status
    /// whose record is not held yet waits for it.
    fn apply_alloc_status(&mut self, id: Id, status: Option<Box<AllocStatus>>, revision: Revision) {
        let Some(held) = self.allocs.get(&id) else {
            match status {
                Some(status) => {
                    let newer = self
                        .orphan_statuses
                        .get(&id)
                        .is_none_or(|(_, held)| *held < revision);
                    if newer {
                        self.orphan_statuses
                            .insert(id, (Arc::from(status), revision));
                    }
                }
                None => {
                    self.orphan_statuses.remove(&id);
                }
            }
            return;
        };
        // A status key goes only with its record (the collector deletes
        // both in one transaction), so its delete alone changes nothing
        // held: a re-list that finds no status key of an allocation whose
        // status came from a batch deletes it all the same.
        let Some(status) = status else {
            return;
        };
        let held = Arc::clone(&held.0);
        self.lay_over(id, &held, &status, revision);
    }

    /// Lays `status` over `held`, the allocation `id` the tables hold,
    /// unless the status it holds outranks it (an older one delivered again,
    /// or an unfinished one under a finished).
    fn lay_over(&mut self, id: Id, held: &Allocation, status: &AllocStatus, revision: Revision) {
        if !outranks(status.client_status(), revision, held_rank(held)) {
            return;
        }
        let mut next = held.clone();
        lay_status(&mut next, status, revision);
        self.trim(&mut next);
        self.apply_alloc(id, Some(Arc::new(next)));
    }

    /// Folds an entry of status batch `batch` into the allocation held;
    /// an entry whose record is not held waits for it with the batch named.
    fn apply_batch_entry(
        &mut self,
        id: Id,
        status: Box<AllocStatus>,
        revision: Revision,
        batch: &Arc<StateKey>,
    ) {
        let Some(held) = self.allocs.get(&id) else {
            let entries = self.orphan_entries.entry(id).or_default();
            if !entries
                .iter()
                .any(|e| e.revision == revision && *e.batch == **batch)
            {
                entries.push(OrphanEntry {
                    status: Arc::from(status),
                    revision,
                    batch: Arc::clone(batch),
                });
            }
            return;
        };
        let held = Arc::clone(&held.0);
        self.lay_over(id, &held, &status, revision);
    }

    /// Drops what this table's detail leaves out of a folded allocation.
    fn trim(&self, alloc: &mut Allocation) {
        if self.detail == AllocDetail::Scheduling && !keeps_task_states(alloc) {
            alloc.task_states = Default::default();
        }
    }

    fn apply_alloc(&mut self, id: Id, alloc: Option<Arc<Allocation>>) {
        let old = put_or_remove(&mut self.allocs, &id, alloc.as_ref());
        if old.is_none() && alloc.is_none() {
            return;
        }
        self.reindex_alloc_by_node(&id, old.as_ref(), alloc.as_ref());
        let old_job = old.as_deref().map(job_of).filter(|(_, j)| !j.is_empty());
        let new_job = alloc.as_deref().map(job_of).filter(|(_, j)| !j.is_empty());
        if old_job == new_job {
            return;
        }
        if let Some((ns, job)) = old_job {
            job_set_remove(&mut self.allocs_by_job, ns, job, &id);
        }
        if let Some((ns, job)) = new_job {
            job_set_insert(&mut self.allocs_by_job, ns, job, id, ());
        }
    }

    fn reindex_alloc_by_node(
        &mut self,
        id: &Id,
        old: Option<&Arc<Allocation>>,
        new: Option<&Arc<Allocation>>,
    ) {
        let old_node = old.map(|a| a.node_id.as_str()).filter(|n| !n.is_empty());
        let new_node = new.map(|a| a.node_id.as_str()).filter(|n| !n.is_empty());
        if let (Some(node), Some(old), Some(new)) = (old_node, old, new)
            && old_node == new_node
        {
            // The common case (a status update in place): the node's ids are
            // unchanged, and its usage changes only if what the alloc holds
            // does.
            let holds_same = old.is_terminal() == new.is_terminal()
                && old.allocated_resources == new.allocated_resources;
            if !holds_same {
                self.update_node(node, |entry| {
                    if let Some(u) = AllocUsage::of(old) {
                        entry.usage.sub(&u);
                    }
                    if let Some(u) = AllocUsage::of(new) {
                        entry.usage.add(&u);
                    }
                });
            }
            return;
        }
        if let (Some(node), Some(old)) = (old_node, old) {
            self.update_node(node, |entry| {
                entry.ids.remove(id);
                if let Some(u) = AllocUsage::of(old) {
                    entry.usage.sub(&u);
                }
            });
        }
        if let (Some(node), Some(new)) = (new_node, new) {
            self.update_node(node, |entry| {
                entry.ids.insert(id.clone());
                if let Some(u) = AllocUsage::of(new) {
                    entry.usage.add(&u);
                }
            });
        }
    }

    /// Changes one node's entry in place (copying it only if a snapshot
    /// shares it), creating it if needed and dropping it once it holds no
    /// allocs, so deleted nodes leave nothing behind.
    fn update_node(&mut self, node: &str, f: impl FnOnce(&mut NodeAllocs)) {
        let node = Id::from(node);
        if let Some(entry) = self.allocs_by_node.get_mut(&node) {
            let entry = Arc::make_mut(entry);
            f(entry);
            if entry.ids.is_empty() {
                self.allocs_by_node.remove(&node);
            }
            return;
        }
        let mut entry = NodeAllocs::default();
        f(&mut entry);
        if !entry.ids.is_empty() {
            self.allocs_by_node.insert(node, Arc::new(entry));
        }
    }

    /// Applies changes in order; takes an `Option<Change>` as zero or one.
    pub fn apply_all(&mut self, changes: impl IntoIterator<Item = Change>) {
        for change in changes {
            self.apply(change);
        }
    }

    /// Whether the tables hold no object at all.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
            && self.job_versions.is_empty()
            && self.evals.is_empty()
            && self.allocs.is_empty()
            && self.nodes.is_empty()
            && self.heartbeats.is_empty()
            && self.deployments.is_empty()
            && self.scheduler_config.is_none()
            && self.node_pools.is_empty()
    }

    /// The mod revision of the object `key` names, if the tables hold it.
    /// A re-list skips decoding values whose revision it already has.
    pub fn mod_revision_of(&self, key: &StateKey) -> Option<Revision> {
        match key {
            StateKey::Job { namespace, id } => {
                self.jobs.get(namespace, id).map(|j| j.modify_revision())
            }
            StateKey::JobVersion {
                namespace,
                id,
                version,
            } => self
                .job_versions
                .get(namespace, id)?
                .get(version)
                .map(|j| j.modify_revision()),
            StateKey::Eval(id) => self
                .evals
                .get(&Id::from(id.as_str()))
                .map(|e| e.0.modify_revision()),
            StateKey::Alloc(id) => self
                .allocs
                .get(&Id::from(id.as_str()))
                .map(|a| a.0.modify_revision()),
            StateKey::AllocStatus(id) => self
                .allocs
                .get(&Id::from(id.as_str()))
                .map(|a| a.0.client_modify_revision)
                .filter(|rev| *rev != 0),
            StateKey::Node(id) => self
                .nodes
                .get(&Id::from(id.as_str()))
                .map(|n| n.0.modify_revision()),
            StateKey::Deployment(id) => self
                .deployments
                .get(&Id::from(id.as_str()))
                .map(|d| d.0.modify_revision()),
            StateKey::SchedulerConfig => {
                self.scheduler_config.as_ref().map(|c| c.modify_revision())
            }
            StateKey::NodePool(name) => self
                .node_pools
                .get(&Id::from(name.as_str()))
                .map(|p| p.modify_revision()),
            StateKey::Heartbeat(_)
            | StateKey::JobStatus { .. }
            | StateKey::Leader { .. }
            | StateKey::JobPlan { .. }
            | StateKey::Var { .. }
            | StateKey::Acl(_)
            | StateKey::Namespace(_)
            | StateKey::JobSubmission { .. }
            | StateKey::Service { .. } => None,
        }
    }

    /// The key of every object the tables hold; a re-list deletes those it
    /// no longer finds.
    pub fn keys(&self) -> Vec<StateKey> {
        let mut keys = Vec::with_capacity(
            self.jobs.len() + self.evals.len() + self.allocs.len() + self.nodes.len(),
        );
        keys.extend(self.jobs.iter().map(|(ns, id, _)| StateKey::Job {
            namespace: ns.to_string(),
            id: id.to_string(),
        }));
        for (ns, id, versions) in self.job_versions.iter() {
            keys.extend(versions.keys().map(|v| StateKey::JobVersion {
                namespace: ns.to_string(),
                id: id.to_string(),
                version: *v,
            }));
        }
        keys.extend(self.evals.keys().map(|id| StateKey::Eval(id.to_string())));
        keys.extend(self.allocs.keys().map(|id| StateKey::Alloc(id.to_string())));
        keys.extend(
            self.allocs
                .iter()
                .filter(|(_, a)| a.0.client_modify_revision != 0)
                .map(|(id, _)| StateKey::AllocStatus(id.to_string())),
        );
        // The batches the tables know of are those of their orphans: a
        // re-list that no longer finds one drops what it left behind.
        let batches: std::collections::HashSet<&StateKey> = self
            .orphan_entries
            .values()
            .flatten()
            .map(|e| &*e.batch)
            .collect();
        keys.extend(batches.into_iter().cloned());
        keys.extend(self.nodes.keys().map(|id| StateKey::Node(id.to_string())));
        keys.extend(
            self.heartbeats
                .iter()
                .map(|id| StateKey::Heartbeat(id.to_string())),
        );
        keys.extend(
            self.deployments
                .keys()
                .map(|id| StateKey::Deployment(id.to_string())),
        );
        if self.scheduler_config.is_some() {
            keys.push(StateKey::SchedulerConfig);
        }
        keys.extend(
            self.node_pools
                .keys()
                .map(|name| StateKey::NodePool(name.to_string())),
        );
        keys
    }
}

/// A status from a batch whose allocation's record the tables do not hold.
#[derive(Clone, Debug)]
pub(crate) struct OrphanEntry {
    pub(crate) status: Arc<AllocStatus>,
    pub(crate) revision: Revision,
    pub(crate) batch: Arc<StateKey>,
}

/// The rank of the status `alloc` holds (see [`crate::status_batch`]);
/// `None` when no status was folded into it.
fn held_rank(alloc: &Allocation) -> Option<(bool, Revision)> {
    (alloc.client_modify_revision != 0)
        .then(|| rank(alloc.client_status(), alloc.client_modify_revision))
}

/// The (namespace, job id) an allocation is indexed under.
fn job_of(alloc: &Allocation) -> (&str, &str) {
    (&alloc.namespace, &alloc.job_id)
}

/// Writes or removes `id` in a primary table; returns what was there.
fn put_or_remove<T>(
    table: &mut OrdMap<Id, Shared<T>>,
    id: &Id,
    value: Option<&Arc<T>>,
) -> Option<Arc<T>> {
    match value {
        Some(v) => table.insert(id.clone(), Shared(Arc::clone(v))),
        None => table.remove(id),
    }
    .map(|old| old.0)
}

/// Moves `id` in a by-job index from the old value's job to the new one's.
fn reindex_by_job<T>(
    index: &mut JobMap<OrdMap<Id, Arc<T>>>,
    id: &Id,
    old: Option<&Arc<T>>,
    new: Option<Arc<T>>,
    job_of: impl Fn(&T) -> (&String, &String),
) {
    let old_job = old.map(|o| job_of(o)).filter(|(_, j)| !j.is_empty());
    let new_job = new.as_deref().map(&job_of).filter(|(_, j)| !j.is_empty());
    if let Some((ns, job)) = old_job
        && old_job != new_job
    {
        job_set_remove(index, ns, job, id);
    }
    if let (Some((ns, job)), Some(new)) = (new_job, new.as_ref()) {
        job_set_insert(index, ns, job, id.clone(), Arc::clone(new));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Snapshot;
    use caravan_proto::{
        AllocClientStatus, AllocDesiredStatus, AllocatedPort, AllocatedResources,
        AllocatedSharedResources, AllocatedTaskResources,
    };
    use rand::{Rng, SeedableRng};

    fn alloc(id: &str, node: &str, job: &str, cpu: u32, mem: u32, port: u32) -> Arc<Allocation> {
        let mut res = AllocatedResources::default();
        res.tasks.insert(
            "main".into(),
            AllocatedTaskResources {
                cpu_mhz: cpu,
                memory_mb: mem,
                ports: vec![AllocatedPort {
                    label: "http".into(),
                    value: port,
                    to: 0,
                    host_ip: "10.0.0.1".into(),
                }],
                ..Default::default()
            },
        );
        res.shared = Some(AllocatedSharedResources {
            disk_mb: 100,
            ..Default::default()
        });
        Arc::new(Allocation {
            id: id.into(),
            namespace: "default".into(),
            job_id: job.into(),
            node_id: node.into(),
            desired_status: AllocDesiredStatus::Run as i32,
            client_status: AllocClientStatus::Pending as i32,
            allocated_resources: Some(res),
            ..Default::default()
        })
    }

    fn with(a: &Arc<Allocation>, f: impl FnOnce(&mut Allocation)) -> Arc<Allocation> {
        let mut a = Allocation::clone(a);
        f(&mut a);
        Arc::new(a)
    }

    fn put(t: &mut Tables, a: &Arc<Allocation>) {
        t.apply(Change::Alloc {
            id: Id::from(a.id.as_str()),
            alloc: Some(Arc::clone(a)),
        });
    }

    fn delete(t: &mut Tables, id: &str) {
        t.apply(Change::Alloc {
            id: Id::from(id),
            alloc: None,
        });
    }

    fn ids<'a>(it: impl Iterator<Item = &'a Arc<Allocation>>) -> Vec<String> {
        it.map(|a| a.id.clone()).collect()
    }

    #[test]
    fn put_indexes_and_counts_usage() {
        let mut t = Tables::new();
        put(&mut t, &alloc("a1", "n1", "web", 500, 256, 8080));
        put(&mut t, &alloc("a2", "n1", "api", 250, 128, 9090));
        put(&mut t, &alloc("a3", "n2", "web", 100, 64, 8080));
        assert_eq!(t.alloc_count(), 3);
        assert_eq!(ids(t.allocs_by_node("n1")), vec!["a1", "a2"]);
        assert_eq!(ids(t.allocs_by_job("default", "web")), vec!["a1", "a3"]);
        assert_eq!(ids(t.allocs_by_job("other", "web")), Vec::<String>::new());
        let u = t.node_usage("n1");
        assert_eq!(
            (u.cpu_mhz, u.memory_mb, u.memory_max_mb, u.disk_mb),
            (750, 384, 384, 200)
        );
        assert_eq!(u.allocs, 2);
        assert!(u.port_in_use(8080) && u.port_in_use(9090));
        assert!(t.node_usage("n3").is_empty());
    }

    #[test]
    fn moving_an_alloc_moves_its_usage() {
        let mut t = Tables::new();
        let a = alloc("a1", "n1", "web", 500, 256, 8080);
        put(&mut t, &a);
        put(&mut t, &with(&a, |a| a.node_id = "n2".into()));
        assert_eq!(ids(t.allocs_by_node("n1")), Vec::<String>::new());
        assert!(t.node_usage("n1").is_empty());
        assert!(
            !t.allocs_by_node.contains_key(&Id::from("n1")),
            "empty node entries are dropped"
        );
        assert_eq!(ids(t.allocs_by_node("n2")), vec!["a1"]);
        assert_eq!(t.node_usage("n2").cpu_mhz, 500);
        assert!(t.node_usage("n2").port_in_use_on("10.0.0.1", 8080));
    }

    #[test]
    fn terminal_allocs_stay_indexed_but_hold_nothing() {
        for terminal in [
            |a: &mut Allocation| a.desired_status = AllocDesiredStatus::Stop as i32,
            |a: &mut Allocation| a.desired_status = AllocDesiredStatus::Evict as i32,
            |a: &mut Allocation| a.client_status = AllocClientStatus::Complete as i32,
            |a: &mut Allocation| a.client_status = AllocClientStatus::Failed as i32,
            |a: &mut Allocation| a.client_status = AllocClientStatus::Lost as i32,
        ] {
            let mut t = Tables::new();
            let a = alloc("a1", "n1", "web", 500, 256, 8080);
            put(&mut t, &a);
            put(&mut t, &alloc("a2", "n1", "web", 100, 10, 8081));
            put(
                &mut t,
                &with(&a, |a| a.client_status = AllocClientStatus::Running as i32),
            );
            assert_eq!(t.node_usage("n1").cpu_mhz, 600);
            let stopped = with(&a, terminal);
            put(&mut t, &stopped);
            assert_eq!(ids(t.allocs_by_node("n1")), vec!["a1", "a2"]);
            let u = t.node_usage("n1");
            assert_eq!((u.cpu_mhz, u.memory_mb, u.allocs), (100, 10, 1));
            assert!(!u.port_in_use(8080));
            // A terminal alloc written again (client reports more) changes nothing.
            put(
                &mut t,
                &with(&stopped, |a| a.client_description = "x".into()),
            );
            assert_eq!(t.node_usage("n1").cpu_mhz, 100);
        }
    }

    #[test]
    fn delete_removes_everywhere() {
        let mut t = Tables::new();
        put(&mut t, &alloc("a1", "n1", "web", 500, 256, 8080));
        delete(&mut t, "a1");
        delete(&mut t, "a1");
        delete(&mut t, "never-existed");
        assert_eq!(t.alloc_count(), 0);
        assert!(t.allocs_by_node.is_empty());
        assert!(t.allocs_by_job.is_empty());
        assert!(t.node_usage("n1").is_empty());
    }

    #[test]
    fn in_place_resize_and_job_change_reindex() {
        let mut t = Tables::new();
        let a = alloc("a1", "n1", "web", 500, 256, 8080);
        put(&mut t, &a);
        let bigger = alloc("a1", "n1", "web", 800, 512, 8081);
        put(&mut t, &bigger);
        let u = t.node_usage("n1");
        assert_eq!((u.cpu_mhz, u.memory_mb, u.allocs), (800, 512, 1));
        assert!(!u.port_in_use(8080) && u.port_in_use(8081));
        put(&mut t, &with(&bigger, |a| a.job_id = "api".into()));
        assert_eq!(ids(t.allocs_by_job("default", "web")), Vec::<String>::new());
        assert_eq!(ids(t.allocs_by_job("default", "api")), vec!["a1"]);
    }

    /// The indexes name allocations by id: after a status update in place,
    /// every way of reading the allocation gives its newest version, and a
    /// snapshot taken before still gives the one it saw.
    #[test]
    fn indexed_reads_give_the_newest_version_after_an_update_in_place() {
        let mut t = Tables::new();
        let placed = alloc("a1", "n1", "web", 500, 256, 8080);
        put(&mut t, &placed);
        put(&mut t, &alloc("a2", "n1", "web", 100, 10, 8081));
        let before = Snapshot::new(t.clone());
        let running = with(&placed, |a| {
            a.client_status = AllocClientStatus::Running as i32;
        });
        put(&mut t, &running);
        let newest = t.alloc("a1").unwrap();
        assert!(Arc::ptr_eq(newest, &running));
        let by_node: Vec<_> = t.allocs_by_node("n1").collect();
        let by_job: Vec<_> = t.allocs_by_job("default", "web").collect();
        assert!(Arc::ptr_eq(by_node[0], &running) && Arc::ptr_eq(by_job[0], &running));
        assert!(Arc::ptr_eq(t.on_node("n1").alloc("a1").unwrap(), &running));
        assert!(t.on_node("n2").alloc("a1").is_none());
        assert!(t.on_node("n1").alloc("a3").is_none());
        assert!(Arc::ptr_eq(
            before.on_node("n1").alloc("a1").unwrap(),
            &placed
        ));
        assert!(Arc::ptr_eq(
            before.allocs_by_job("default", "web").next().unwrap(),
            &placed
        ));
        assert_eq!(t.node_usage("n1").cpu_mhz, 600);
        // The update wrote the primary table only: the indexes are still
        // shared with the snapshot, not copied.
        let node_entry = |t: &Tables| Arc::clone(t.allocs_by_node.get(&Id::from("n1")).unwrap());
        assert!(Arc::ptr_eq(&node_entry(&before), &node_entry(&t)));
        let job_ids = |t: &Tables| t.allocs_by_job.get("default", "web").unwrap().clone();
        assert!(job_ids(&before).ptr_eq(&job_ids(&t)));
    }

    #[test]
    fn unplaced_allocs_are_indexed_by_id_and_job_only() {
        let mut t = Tables::new();
        put(&mut t, &alloc("a1", "", "web", 500, 256, 8080));
        assert_eq!(t.alloc_count(), 1);
        assert!(t.allocs_by_node.is_empty());
        assert_eq!(ids(t.allocs_by_job("default", "web")), vec!["a1"]);
    }

    #[test]
    fn evals_deployments_versions_heartbeats_config() {
        let mut t = Tables::new();
        let eval = |id: &str, job: &str| Change::Eval {
            id: Id::from(id),
            eval: Some(Arc::new(Evaluation {
                id: id.into(),
                namespace: "default".into(),
                job_id: job.into(),
                ..Default::default()
            })),
        };
        t.apply(eval("e1", "web"));
        t.apply(eval("e2", "web"));
        t.apply(eval("e1", "api"));
        let by_job: Vec<_> = t
            .evals_by_job("default", "web")
            .map(|e| e.id.clone())
            .collect();
        assert_eq!(by_job, vec!["e2"]);
        t.apply(Change::Eval {
            id: Id::from("e2"),
            eval: None,
        });
        assert_eq!(t.evals_by_job("default", "web").count(), 0);
        assert!(t.evals_by_job.get("default", "web").is_none());
        assert_eq!(t.eval_count(), 1);

        t.apply(Change::Deployment {
            id: Id::from("d1"),
            deployment: Some(Arc::new(Deployment {
                id: "d1".into(),
                namespace: "default".into(),
                job_id: "web".into(),
                ..Default::default()
            })),
        });
        assert_eq!(t.deployments_by_job("default", "web").count(), 1);
        assert!(t.deployment("d1").is_some());

        for v in [2u64, 0, 1] {
            t.apply(Change::JobVersion {
                namespace: Id::from("default"),
                id: Id::from("web/periodic-1"),
                version: v,
                job: Some(Arc::new(Job {
                    version: v,
                    ..Default::default()
                })),
            });
        }
        let versions: Vec<u64> = t
            .job_versions("default", "web/periodic-1")
            .map(|j| j.version)
            .collect();
        assert_eq!(versions, vec![0, 1, 2]);
        assert_eq!(
            t.job_version("default", "web/periodic-1", 1)
                .map(|j| j.version),
            Some(1)
        );
        for v in 0..3 {
            t.apply(Change::JobVersion {
                namespace: Id::from("default"),
                id: Id::from("web/periodic-1"),
                version: v,
                job: None,
            });
        }
        assert!(t.job_versions.is_empty());

        t.apply(Change::Heartbeat {
            node_id: Id::from("n1"),
            live: true,
        });
        assert!(t.heartbeat_live("n1"));
        t.apply(Change::Heartbeat {
            node_id: Id::from("n1"),
            live: false,
        });
        assert!(!t.heartbeat_live("n1"));

        t.apply(Change::SchedulerConfig(Some(Arc::new(
            SchedulerConfiguration {
                memory_oversubscription_enabled: true,
                ..Default::default()
            },
        ))));
        assert!(
            t.scheduler_config()
                .is_some_and(|c| c.memory_oversubscription_enabled)
        );
        assert_eq!(t.keys().len(), 3, "{:?}", t.keys());
    }

    #[test]
    fn a_held_snapshot_does_not_change() {
        let mut t = Tables::new();
        put(&mut t, &alloc("a1", "n1", "web", 500, 256, 8080));
        t.advance_to(5);
        let snap = Snapshot::new(t.clone());
        put(&mut t, &alloc("a2", "n1", "web", 500, 256, 8081));
        delete(&mut t, "a1");
        t.advance_to(7);
        t.advance_to(6);
        assert_eq!(t.revision(), 7);
        assert_eq!(snap.revision(), 5);
        assert_eq!(ids(snap.allocs()), vec!["a1"]);
        assert_eq!(ids(snap.allocs_by_node("n1")), vec!["a1"]);
        assert!(snap.node_usage("n1").port_in_use(8080));
        assert!(!snap.node_usage("n1").port_in_use(8081));
        assert_eq!(ids(t.allocs_by_node("n1")), vec!["a2"]);
    }

    /// Usage kept incrementally must equal usage summed from scratch, under
    /// any sequence of puts, moves, terminal transitions and deletes.
    #[test]
    fn incremental_usage_matches_a_full_recount() {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
        let mut t = Tables::new();
        for step in 0..5000 {
            let id = format!("a{}", rng.random_range(0..200));
            if rng.random_bool(0.1) {
                delete(&mut t, &id);
                continue;
            }
            let node = format!("n{}", rng.random_range(0..10));
            // Mostly the alloc's own job, as in place updates; sometimes another.
            let job = if rng.random_bool(0.9) {
                format!("j{}", id.len() % 5)
            } else {
                format!("j{}", rng.random_range(0..5))
            };
            let mut a = Allocation::clone(&alloc(
                &id,
                &node,
                &job,
                rng.random_range(1..1000),
                rng.random_range(1..1000),
                rng.random_range(20000..20010),
            ));
            if rng.random_bool(0.2) {
                a.client_status = rng.random_range(0..7);
            }
            if rng.random_bool(0.1) {
                a.desired_status = rng.random_range(0..4);
            }
            if let Some(task) = a
                .allocated_resources
                .as_mut()
                .and_then(|r| r.tasks.get_mut("main"))
            {
                task.reserved_cores = vec![rng.random_range(0..4)];
                task.memory_max_mb = rng.random_range(0..2) * 2000;
            }
            put(&mut t, &Arc::new(a));
            if step % 500 == 0 {
                assert_recount(&t);
            }
        }
        assert_recount(&t);
    }

    fn assert_recount(t: &Tables) {
        let mut expected: std::collections::BTreeMap<String, NodeUsage> = Default::default();
        for a in t.allocs() {
            if let Some(u) = AllocUsage::of(a) {
                expected.entry(a.node_id.clone()).or_default().add(&u);
            }
        }
        for (node, entry) in t.allocs_by_node.iter() {
            let want = expected.remove(node.as_str()).unwrap_or_default();
            assert_eq!(entry.usage, want, "node {node}");
            assert_eq!(
                entry.ids.len(),
                t.allocs().filter(|a| a.node_id == node.as_str()).count()
            );
        }
        assert!(
            expected.is_empty(),
            "usage missing for {:?}",
            expected.keys()
        );
        let mut by_job: std::collections::BTreeMap<(String, String), Vec<String>> =
            Default::default();
        for a in t.allocs() {
            by_job
                .entry((a.namespace.clone(), a.job_id.clone()))
                .or_default()
                .push(a.id.clone());
        }
        let indexed: std::collections::BTreeMap<(String, String), Vec<String>> = t
            .allocs_by_job
            .iter()
            .map(|(ns, job, ids)| {
                let ids = ids.iter().map(|id| id.to_string()).collect();
                ((ns.to_string(), job.to_string()), ids)
            })
            .collect();
        assert_eq!(
            indexed, by_job,
            "the job index names exactly each job's allocs"
        );
    }
}

//! A node's allocation stream: its whole set first, then only what the
//! servers changed. Each stream sleeps on its node's subscription to the
//! [`NodeAllocFeed`](crate::feed::NodeAllocFeed), which hands it the
//! ids of the allocations that changed; it looks those up in the newest
//! snapshot and sends the ones whose server-side part moved on since it last
//! sent them. A node with k allocations therefore costs O(changes), not
//! O(k) per change, and its own status reports never come back to it.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use caravan_proto::{Allocation, Job, NodeAllocations};
use caravan_state::{Id, Snapshot};
use caravan_store::Revision;
use tokio::sync::mpsc;

use crate::NodeApi;
use crate::feed::NodeChanges;
use caravan_gateway_core::error::{GatewayError, Result};

/// The server-side part of an allocation a node acts on; a change of
/// anything else (client status, task states, health) is the node's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ServerPart {
    alloc_modify_revision: Revision,
    desired_status: i32,
    migrate: Option<bool>,
}

impl ServerPart {
    fn of(alloc: &Allocation) -> Self {
        ServerPart {
            alloc_modify_revision: alloc.alloc_modify_revision,
            desired_status: alloc.desired_status,
            migrate: alloc.desired_transition.as_ref().and_then(|t| t.migrate),
        }
    }
}

/// A job version the stream has already carried.
type JobVersionKey = (String, String, u64);

/// What one stream has told its node so far.
#[derive(Debug, Default)]
struct Sent {
    allocs: HashMap<Id, ServerPart>,
    /// Each job version carried, with the `job_modify_revision` it had: a
    /// job purged and registered again starts its versions over, and its
    /// version 0 is another job than the one the node heard of.
    jobs: HashMap<JobVersionKey, Revision>,
}

impl Sent {
    /// The allocation as the node gets it (without placement metrics), and
    /// its job version unless this stream already carried it.
    fn add(&mut self, snap: &Snapshot, alloc: &Allocation, out: &mut NodeAllocations) {
        self.allocs
            .insert(Id::from(alloc.id.as_str()), ServerPart::of(alloc));
        let mut copy = alloc.clone();
        copy.metrics = None;
        out.allocs.push(copy);
        let key = (
            alloc.namespace.clone(),
            alloc.job_id.clone(),
            alloc.job_version,
        );
        let Some(job) = job_version(snap, alloc) else {
            return;
        };
        if self.jobs.get(&key) == Some(&job.job_modify_revision) {
            return;
        }
        out.jobs.push(job.clone());
        self.jobs.insert(key, job.job_modify_revision);
    }

    /// The node's whole set at `snap`.
    fn full(&mut self, snap: &Snapshot, node_id: &str) -> NodeAllocations {
        self.allocs.clear();
        let mut out = NodeAllocations {
            revision: snap.revision(),
            full: true,
            ..Default::default()
        };
        for alloc in snap.allocs_by_node(node_id) {
            self.add(snap, alloc, &mut out);
        }
        out
    }

    /// What of `changed` the node has not heard yet; `None` when nothing.
    fn delta(
        &mut self,
        snap: &Snapshot,
        node_id: &str,
        changed: HashSet<Id>,
    ) -> Option<NodeAllocations> {
        let mut out = NodeAllocations {
            revision: snap.revision(),
            ..Default::default()
        };
        let mut changed: Vec<Id> = changed.into_iter().collect();
        changed.sort();
        for id in changed {
            match snap.alloc(&id).filter(|a| a.node_id == node_id) {
                Some(alloc) => {
                    if self.allocs.get(&id) != Some(&ServerPart::of(alloc)) {
                        self.add(snap, alloc, &mut out);
                    }
                }
                None => {
                    if self.allocs.remove(&id).is_some() {
                        out.removed_alloc_ids.push(id.to_string());
                    }
                }
            }
        }
        (!out.allocs.is_empty() || !out.removed_alloc_ids.is_empty()).then_some(out)
    }
}

/// The job version an allocation runs, from the versions table or, for the
/// current version, the job itself.
fn job_version<'a>(snap: &'a Snapshot, alloc: &Allocation) -> Option<&'a Job> {
    snap.job_version(&alloc.namespace, &alloc.job_id, alloc.job_version)
        .or_else(|| {
            snap.job(&alloc.namespace, &alloc.job_id)
                .filter(|j| j.version == alloc.job_version)
        })
        .map(|j| &**j)
}

/// How long a stream waits for this gateway's cache to reach the revision
/// its node has already seen before it ends, so the node opens its stream
/// again (on whichever gateway answers).
const CATCH_UP: Duration = Duration::from_secs(15);

/// The snapshot the node's whole set is taken from: one at `min_revision`
/// or later. A node that saw revision R through another gateway (or an
/// earlier stream) stops whatever a whole set leaves out, so a set from a
/// cache still behind R would stop allocations placed up to R that this
/// cache has not heard of yet. `None` when the cache does not get there in
/// time: the stream ends and the node asks again. A store whose history
/// went back (a restore) never reaches R: the node's revision is from the
/// lost history, and the current set is all there is.
async fn first_snapshot(gw: &NodeApi, node_id: &str, min_revision: Revision) -> Option<Snapshot> {
    if min_revision <= 0 {
        return Some(gw.cache.snapshot());
    }
    match gw.cache.wait_for_revision(min_revision, CATCH_UP).await {
        Ok(snap) => Some(snap),
        Err(err) => match gw.store.current_revision().await {
            Ok(current) if current < min_revision => {
                tracing::warn!(node = %node_id, min_revision, current, "the node saw a revision the store does not have; sending the current set");
                Some(gw.cache.snapshot())
            }
            _ => {
                tracing::info!(node = %node_id, min_revision, %err, "cache behind what the node saw; ending its stream");
                None
            }
        },
    }
}

/// Sends `node_id`'s allocations on `out` until the receiver goes away or
/// the gateway shuts down: the whole set first, then what changed. With
/// `min_revision` 0 the set goes out at once; otherwise once this gateway's
/// cache has reached `min_revision` (see [`first_snapshot`]).
pub async fn stream_allocations(
    gw: NodeApi,
    node_id: String,
    min_revision: Revision,
    out: mpsc::Sender<NodeAllocations>,
) {
    // Subscribed before the first snapshot, so no change slips between them.
    let changes = gw.feed.subscribe(&node_id);
    let mut sent = Sent::default();
    let mut started = false;
    loop {
        let msg = if started {
            let Some(changed) = take(&changes, &gw, &out).await else {
                return;
            };
            sent.delta(&gw.cache.snapshot(), &node_id, changed)
        } else {
            // Cleared before the snapshot: whatever changes after it is kept.
            changes.clear();
            let first = tokio::select! {
                snap = first_snapshot(&gw, &node_id, min_revision) => snap,
                _ = out.closed() => return,
                _ = gw.shutdown.cancelled() => return,
            };
            let Some(snap) = first else {
                return;
            };
            started = true;
            Some(sent.full(&snap, &node_id))
        };
        if let Some(msg) = msg
            && out.send(msg).await.is_err()
        {
            return;
        }
    }
}

/// The next ids that changed; `None` once the stream should end.
async fn take(
    changes: &NodeChanges,
    gw: &NodeApi,
    out: &mpsc::Sender<NodeAllocations>,
) -> Option<HashSet<Id>> {
    tokio::select! {
        ids = changes.next() => Some(ids),
        _ = out.closed() => None,
        _ = gw.shutdown.cancelled() => None,
    }
}

/// Checks a watch request.
pub fn validate(node_id: &str) -> Result<()> {
    if node_id.is_empty() {
        return Err(GatewayError::field("node_id", "missing node ID"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use caravan_proto::{AllocClientStatus, AllocDesiredStatus};
    use caravan_state::{Change, Tables};

    use super::*;

    fn put(tables: &mut Tables, alloc: Allocation, revision: Revision) {
        let mut alloc = alloc;
        alloc.modify_revision = revision;
        tables.apply(Change::Alloc {
            id: alloc.id.as_str().into(),
            alloc: Some(Arc::new(alloc)),
        });
        tables.advance_to(revision);
    }

    fn alloc(id: &str, node: &str) -> Allocation {
        let mut a = Allocation {
            id: id.into(),
            node_id: node.into(),
            namespace: "default".into(),
            job_id: "web".into(),
            alloc_modify_revision: 1,
            metrics: Some(Default::default()),
            ..Default::default()
        };
        a.set_desired_status(AllocDesiredStatus::Run);
        a
    }

    fn ids(set: &[&str]) -> HashSet<Id> {
        set.iter().map(|s| Id::from(*s)).collect()
    }

    #[test]
    fn a_node_hears_server_changes_only() {
        let mut tables = Tables::new();
        tables.apply(Change::Job {
            namespace: "default".into(),
            id: "web".into(),
            job: Some(Arc::new(Job {
                id: "web".into(),
                namespace: "default".into(),
                ..Default::default()
            })),
        });
        put(&mut tables, alloc("a1", "n1"), 2);
        put(&mut tables, alloc("b1", "n2"), 3);
        let mut sent = Sent::default();
        let first = sent.full(&Snapshot::new(tables.clone()), "n1");
        assert!(first.full);
        assert_eq!(first.allocs.len(), 1);
        assert!(
            first.allocs[0].metrics.is_none(),
            "metrics stay on the servers"
        );
        assert_eq!(first.jobs.len(), 1);

        // The node's own report comes back as no news.
        let mut running = alloc("a1", "n1");
        running.set_client_status(AllocClientStatus::Running);
        put(&mut tables, running.clone(), 4);
        let snap = Snapshot::new(tables.clone());
        assert!(sent.delta(&snap, "n1", ids(&["a1"])).is_none());

        // A new placement and a stop are news, without the job again.
        put(&mut tables, alloc("a2", "n1"), 5);
        let mut stopped = running;
        stopped.set_desired_status(AllocDesiredStatus::Stop);
        stopped.alloc_modify_revision = 6;
        put(&mut tables, stopped, 6);
        let snap = Snapshot::new(tables.clone());
        let delta = sent.delta(&snap, "n1", ids(&["a1", "a2"])).unwrap();
        assert!(!delta.full);
        let got: Vec<&str> = delta.allocs.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(got, vec!["a1", "a2"]);
        assert!(delta.jobs.is_empty());

        // Gone from the store, or moved away: removed, once.
        tables.apply(Change::Alloc {
            id: "a2".into(),
            alloc: None,
        });
        put(&mut tables, alloc("a1", "n2"), 8);
        let snap = Snapshot::new(tables);
        let delta = sent.delta(&snap, "n1", ids(&["a1", "a2"])).unwrap();
        assert!(delta.allocs.is_empty());
        assert_eq!(delta.removed_alloc_ids, vec!["a1", "a2"]);
        assert!(sent.delta(&snap, "n1", ids(&["a1", "a2"])).is_none());
    }

    #[test]
    fn a_job_purged_and_registered_again_is_sent_again() {
        let mut tables = Tables::new();
        let job = |command: &str, revision: Revision| Job {
            id: "web".into(),
            namespace: "default".into(),
            job_modify_revision: revision,
            meta: [("command".to_string(), command.to_string())].into(),
            ..Default::default()
        };
        tables.apply(Change::Job {
            namespace: "default".into(),
            id: "web".into(),
            job: Some(Arc::new(job("old", 2))),
        });
        put(&mut tables, alloc("a1", "n1"), 3);
        let mut sent = Sent::default();
        let first = sent.full(&Snapshot::new(tables.clone()), "n1");
        assert_eq!(first.jobs[0].meta["command"], "old");

        // Purged (its alloc with it), registered again: version 0 anew.
        tables.apply(Change::Alloc {
            id: "a1".into(),
            alloc: None,
        });
        tables.apply(Change::Job {
            namespace: "default".into(),
            id: "web".into(),
            job: Some(Arc::new(job("new", 9))),
        });
        put(&mut tables, alloc("a2", "n1"), 10);
        let snap = Snapshot::new(tables);
        let delta = sent.delta(&snap, "n1", ids(&["a1", "a2"])).unwrap();
        assert_eq!(delta.jobs.len(), 1, "the new version 0 goes to the node");
        assert_eq!(delta.jobs[0].meta["command"], "new");
    }
}

//! A node's allocation stream: the full set of its allocations, sent from
//! the watch cache whenever the set changes. Each stream sleeps on its
//! node's signal from the [`NodeAllocFeed`](crate::client::feed::NodeAllocFeed)
//! and compares a cheap fingerprint of the set before sending, so thousands
//! of idle streams cost nothing between changes.

use std::collections::HashSet;

use caravan_proto::NodeAllocations;
use caravan_state::Snapshot;
use caravan_store::Revision;
use tokio::sync::mpsc;

use crate::error::{GatewayError, Result};
use crate::gateway::Gateway;

/// What identifies a node's allocation set at one revision: any put raises
/// the newest mod revision, and a delete alone lowers the count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fingerprint {
    count: usize,
    newest: Revision,
}

fn fingerprint(snap: &Snapshot, node_id: &str) -> Fingerprint {
    let mut count = 0;
    let mut newest = 0;
    for alloc in snap.allocs_by_node(node_id) {
        count += 1;
        newest = newest.max(alloc.modify_revision);
    }
    Fingerprint { count, newest }
}

/// A job version the stream has already carried.
type JobVersionKey = (String, String, u64);

/// The node's allocations with the job versions they run that this stream
/// has not sent yet (the client keeps those for the life of the stream).
fn message(snap: &Snapshot, node_id: &str, sent: &mut HashSet<JobVersionKey>) -> NodeAllocations {
    let mut jobs = Vec::new();
    let allocs: Vec<_> = snap
        .allocs_by_node(node_id)
        .map(|a| (**a).clone())
        .collect();
    for alloc in &allocs {
        let key = (
            alloc.namespace.clone(),
            alloc.job_id.clone(),
            alloc.job_version,
        );
        if sent.contains(&key) {
            continue;
        }
        let job = snap
            .job_version(&alloc.namespace, &alloc.job_id, alloc.job_version)
            .or_else(|| {
                snap.job(&alloc.namespace, &alloc.job_id)
                    .filter(|j| j.version == alloc.job_version)
            });
        if let Some(job) = job {
            jobs.push((**job).clone());
            sent.insert(key);
        }
    }
    NodeAllocations {
        allocs,
        revision: snap.revision(),
        jobs,
    }
}

/// Sends `node_id`'s allocations on `out` whenever they change, until the
/// receiver goes away or the gateway shuts down. With `min_revision` 0 the
/// current set goes out at once; otherwise the caller already holds the set
/// as of `min_revision` and hears only of later changes.
pub async fn stream_allocations(
    gw: Gateway,
    node_id: String,
    min_revision: Revision,
    out: mpsc::Sender<NodeAllocations>,
) {
    // Subscribed before the first snapshot, so no change slips between them.
    let mut revisions = gw.feed.subscribe(&node_id);
    let mut last: Option<Fingerprint> = None;
    let mut sent = HashSet::new();
    loop {
        revisions.borrow_and_update();
        let snap = gw.cache.snapshot();
        let print = fingerprint(&snap, &node_id);
        let send = match last {
            Some(prev) => prev != print,
            None => min_revision <= 0 || print.newest > min_revision,
        };
        last = Some(print);
        if send && out.send(message(&snap, &node_id, &mut sent)).await.is_err() {
            return;
        }
        tokio::select! {
            changed = revisions.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            _ = out.closed() => return,
            _ = gw.shutdown.cancelled() => return,
        }
    }
}

/// Checks a watch request.
pub fn validate(node_id: &str) -> Result<()> {
    if node_id.is_empty() {
        return Err(GatewayError::field("node_id", "missing node ID"));
    }
    Ok(())
}

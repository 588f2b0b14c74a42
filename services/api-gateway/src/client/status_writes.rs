//! Client status writes of every node, coalesced: the updates that arrive
//! while one transaction commits go together into the next, so the store's
//! disk sync is paid per batch rather than per node and per report (Nomad's
//! servers coalesce client updates the same way). Each allocation is still
//! compared on its mod revision and re-read on conflict, and every caller
//! hears the outcome of the transaction that carried its updates.

use std::collections::HashMap;

use caravan_model::now_unix_ns;
use caravan_proto::{AllocUpdate, Allocation};
use caravan_state::{Informer, Keyspace, Snapshot};
use caravan_store::{Revision, Store};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::client::updates::{Batch, build_batch, refreshed};
use crate::error::{GatewayError, Result};

/// Requests waiting for the writer; beyond this, callers wait to queue.
const QUEUE: usize = 4096;

/// One node's updates with the allocations they apply to.
pub(crate) type Current = Vec<(AllocUpdate, Option<Arc<Allocation>>)>;

struct Request {
    current: Current,
    respond: oneshot::Sender<Result<Revision>>,
}

/// What the writer needs from the gateway.
pub(crate) struct WriterContext {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) keys: Keyspace,
    pub(crate) cache: Arc<Informer>,
    /// Tries of one batch before its callers hear of a conflict.
    pub(crate) attempts: u32,
    /// Most allocations in one transaction.
    pub(crate) max_allocs: usize,
}

/// The gateway's one writer of client status updates. Cheap to clone.
#[derive(Clone, Debug)]
pub struct StatusWrites {
    queue: mpsc::Sender<Request>,
}

impl StatusWrites {
    /// Starts the writer; it stops once `shutdown` fires and the queue is
    /// drained of what was already sent.
    pub(crate) fn start(ctx: WriterContext, shutdown: CancellationToken) -> Self {
        let (queue, rx) = mpsc::channel(QUEUE);
        tokio::spawn(run(ctx, rx, shutdown));
        StatusWrites { queue }
    }

    /// Writes `current` in the next batch; returns the batch's revision.
    pub(crate) async fn write(&self, current: Current) -> Result<Revision> {
        let (respond, answer) = oneshot::channel();
        self.queue
            .send(Request { current, respond })
            .await
            .map_err(|_| shutting_down())?;
        answer.await.unwrap_or_else(|_| Err(shutting_down()))
    }
}

fn shutting_down() -> GatewayError {
    GatewayError::Unavailable("the api-gateway is shutting down".into())
}

async fn run(ctx: WriterContext, mut rx: mpsc::Receiver<Request>, shutdown: CancellationToken) {
    let max = ctx.max_allocs.max(1);
    let mut carried: Option<Request> = None;
    let mut written = Written::default();
    loop {
        let first = match carried.take() {
            Some(r) => r,
            None => tokio::select! {
                r = rx.recv() => match r {
                    Some(r) => r,
                    None => return,
                },
                _ = shutdown.cancelled() => return,
            },
        };
        let mut size = first.current.len();
        let mut batch = vec![first];
        while size < max {
            match rx.try_recv() {
                Ok(next) if size + next.current.len() > max => {
                    carried = Some(next);
                    break;
                }
                Ok(next) => {
                    size += next.current.len();
                    batch.push(next);
                }
                Err(_) => break,
            }
        }
        commit(&ctx, &mut written, batch).await;
    }
}

/// The allocations this writer wrote that the cache may not show yet: a
/// node reports an allocation pending, then running a moment later, and the
/// second report must compare against the first one's write, not against
/// the cache's older copy (which would fail the whole batch's transaction).
#[derive(Default)]
struct Written {
    allocs: HashMap<String, Arc<Allocation>>,
}

impl Written {
    /// Forgets what the cache has caught up with.
    fn prune(&mut self, cache_revision: Revision) {
        self.allocs
            .retain(|_, a| a.modify_revision > cache_revision);
    }

    /// The newest copy of each allocation among the caller's, the cache's
    /// and this writer's own writes.
    fn freshen(&self, snap: &Snapshot, current: &mut Current) {
        for (update, alloc) in current.iter_mut() {
            let Some(held) = alloc else { continue };
            if let Some(cached) = snap.alloc(&update.alloc_id)
                && cached.modify_revision > held.modify_revision
            {
                *held = Arc::clone(cached);
            }
            if let Some(mine) = self.allocs.get(&update.alloc_id)
                && mine.modify_revision > held.modify_revision
            {
                *held = Arc::clone(mine);
            }
        }
    }

    /// Remembers what a transaction at `revision` wrote.
    fn record(&mut self, allocs: Vec<Allocation>, revision: Revision) {
        for mut alloc in allocs {
            alloc.modify_revision = revision;
            self.allocs.insert(alloc.id.clone(), Arc::new(alloc));
        }
    }
}

/// Writes one batch and answers each of its callers.
async fn commit(ctx: &WriterContext, written: &mut Written, mut batch: Vec<Request>) {
    // A caller that gave up waiting (its deadline passed while the queue was
    // long) sends its updates again, newest state first: writing the stale
    // copy would only lengthen the queue for everyone behind it.
    batch.retain(|r| !r.respond.is_closed());
    if batch.is_empty() {
        return;
    }
    let mut merged = merge(batch.iter_mut().map(|r| std::mem::take(&mut r.current)));
    written.prune(ctx.cache.revision());
    written.freshen(&ctx.cache.snapshot(), &mut merged);
    let outcome = write_merged(ctx, written, &mut merged).await;
    for request in batch {
        let answer = match &outcome {
            Ok(revision) => Ok(*revision),
            Err(message) => Err(GatewayError::Conflict(message.clone())),
        };
        // A caller that stopped waiting loses nothing: the write stands.
        let _ = request.respond.send(answer);
    }
}

/// The updates of a batch, one per allocation: a later report of the same
/// allocation replaces an earlier one (a transaction may name a key once).
fn merge(requests: impl Iterator<Item = Current>) -> Current {
    let mut merged: Current = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    for (update, alloc) in requests.flatten() {
        match at.get(&update.alloc_id) {
            Some(&i) => merged[i].0 = update,
            None => {
                at.insert(update.alloc_id.clone(), merged.len());
                merged.push((update, alloc));
            }
        }
    }
    merged
}

/// Commits the merged updates, re-reading and retrying on conflict; the
/// error is the message every caller gets.
async fn write_merged(
    ctx: &WriterContext,
    written: &mut Written,
    current: &mut Current,
) -> Result<Revision, String> {
    for attempt in 0..ctx.attempts.max(1) {
        if current.iter().all(|(_, a)| a.is_none()) {
            // Every allocation is gone (garbage collected): nothing to record.
            return Ok(ctx.cache.revision());
        }
        let snap = ctx.cache.snapshot();
        let Batch { txn, evals, allocs } = build_batch(&ctx.keys, &snap, current, now_unix_ns());
        let result = ctx
            .store
            .txn(txn)
            .await
            .map_err(|err| format!("writing client updates: {err}"))?;
        if result.succeeded {
            if !evals.is_empty() {
                tracing::info!(evals = evals.len(), "client updates created evaluations");
            }
            written.record(allocs, result.revision);
            return Ok(result.revision);
        }
        tracing::debug!(
            allocs = current.len(),
            attempt,
            "client updates conflicted; re-reading"
        );
        let fresh = refreshed(&result, current.len())
            .map_err(|err| format!("re-reading allocations: {err}"))?;
        for ((_, alloc), fresh) in current.iter_mut().zip(fresh) {
            *alloc = fresh.map(Arc::new);
        }
    }
    Err("allocations kept changing concurrently; send the update again".into())
}

#[cfg(test)]
mod tests {
    use caravan_proto::AllocClientStatus;

    use super::*;

    fn update(id: &str, status: AllocClientStatus) -> (AllocUpdate, Option<Arc<Allocation>>) {
        let mut u = AllocUpdate {
            alloc_id: id.into(),
            ..Default::default()
        };
        u.set_client_status(status);
        let a = Allocation {
            id: id.into(),
            ..Default::default()
        };
        (u, Some(Arc::new(a)))
    }

    #[test]
    fn a_batch_names_each_allocation_once_with_its_newest_report() {
        let first = vec![
            update("a", AllocClientStatus::Pending),
            update("b", AllocClientStatus::Running),
        ];
        let second = vec![update("a", AllocClientStatus::Running)];
        let merged = merge([first, second].into_iter());
        let got: Vec<(&str, AllocClientStatus)> = merged
            .iter()
            .map(|(u, _)| (u.alloc_id.as_str(), u.client_status()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("a", AllocClientStatus::Running),
                ("b", AllocClientStatus::Running)
            ]
        );
    }

    #[test]
    fn a_second_report_compares_against_the_writers_own_write() {
        let cache = Snapshot::new(caravan_state::Tables::new());
        let mut written = Written::default();
        let (_, stale) = update("a", AllocClientStatus::Pending);
        let mut ours = (*stale.unwrap()).clone();
        ours.set_client_status(AllocClientStatus::Pending);
        written.record(vec![ours], 42);
        let mut current = vec![update("a", AllocClientStatus::Running)];
        written.freshen(&cache, &mut current);
        let held = current[0].1.as_ref().unwrap();
        assert_eq!(held.modify_revision, 42);
        assert_eq!(held.client_status(), AllocClientStatus::Pending);
        // Once the cache has caught up, the writer's copy goes.
        written.prune(42);
        assert!(written.allocs.is_empty());
    }

    #[tokio::test]
    async fn updates_of_a_caller_that_left_are_not_written() {
        let store: Arc<dyn Store> = Arc::new(caravan_store::MemStore::new());
        let keys = Keyspace::new("/t");
        let alloc = Allocation {
            id: "a".into(),
            ..Default::default()
        };
        let created = store
            .put(&keys.alloc("a"), &caravan_state::encode(&alloc), 0)
            .await
            .unwrap();
        let cache = Arc::new(
            Informer::start(store.clone(), keys.clone(), Default::default())
                .await
                .unwrap(),
        );
        let ctx = WriterContext {
            store: store.clone(),
            keys: keys.clone(),
            cache,
            attempts: 3,
            max_allocs: 100,
        };
        let current = |status| {
            let (u, _) = update("a", status);
            let mut held = alloc.clone();
            held.modify_revision = created;
            vec![(u, Some(Arc::new(held)))]
        };
        let mut written = Written::default();
        let (respond, answer) = oneshot::channel();
        drop(answer);
        let left = Request {
            current: current(AllocClientStatus::Pending),
            respond,
        };
        commit(&ctx, &mut written, vec![left]).await;
        assert_eq!(store.current_revision().await.unwrap(), created);

        let (respond, answer) = oneshot::channel();
        let waiting = Request {
            current: current(AllocClientStatus::Running),
            respond,
        };
        commit(&ctx, &mut written, vec![waiting]).await;
        let revision = answer.await.unwrap().unwrap();
        assert!(revision > created);
    }
}

//! Client status writes of every node, coalesced: the updates that arrive
//! while one transaction commits go together into the next, so the store's
//! disk sync is paid per batch rather than per node and per report (Nomad's
//! servers coalesce client updates the same way). Each allocation is still
//! compared on its mod revision, and every caller hears the outcome of the
//! transaction that carried its updates.
//!
//! A batch rewrites the newest copy the writer knows without reading the
//! store: the watch cache's, or the writer's own last write of the
//! allocation while the cache has not shown it yet (a node reports an
//! allocation's start and then its health within moments). Only a batch
//! that conflicts, because another writer got there first, reads the
//! stored values before it tries again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use caravan_model::now_unix_ns;
use caravan_proto::{AllocUpdate, Allocation};
use caravan_state::{Informer, Keyspace, Snapshot};
use caravan_store::{Revision, Store};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::client::updates::{Batch, build_batch};
use crate::error::{GatewayError, Result};

/// Requests waiting for the writer; beyond this, callers wait to queue
/// (the backlog bound, in updates, usually refuses them first).
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
    /// Most updates waiting for the writer (see `status_backlog_max_allocs`).
    pub(crate) max_backlog: usize,
}

/// The gateway's one writer of client status updates. Cheap to clone.
#[derive(Clone, Debug)]
pub struct StatusWrites {
    queue: mpsc::Sender<Request>,
    backlog: Backlog,
}

/// Updates sent to the writer and not yet taken by it.
#[derive(Clone, Debug)]
struct Backlog {
    waiting: Arc<AtomicUsize>,
    max: usize,
}

impl Backlog {
    /// Counts `n` more updates in, unless they would take the backlog beyond
    /// its bound; an empty backlog takes any number, so no report is too
    /// big ever to be written. Returns how many were waiting when refused.
    fn admit(&self, n: usize) -> std::result::Result<(), usize> {
        let mut waiting = self.waiting.load(Ordering::Relaxed);
        loop {
            self.room(waiting, n)?;
            match self.waiting.compare_exchange_weak(
                waiting,
                waiting + n,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(()),
                Err(now) => waiting = now,
            }
        }
    }

    /// Whether `n` more updates fit beside `waiting`; `Err(waiting)` if not.
    fn room(&self, waiting: usize, n: usize) -> std::result::Result<(), usize> {
        if waiting > 0 && waiting + n > self.max {
            return Err(waiting);
        }
        Ok(())
    }

    /// `n` updates left the queue (taken by the writer, or never sent).
    fn release(&self, n: usize) {
        self.waiting.fetch_sub(n, Ordering::Relaxed);
    }
}

impl StatusWrites {
    /// Starts the writer; it stops once `shutdown` fires and the queue is
    /// drained of what was already sent.
    pub(crate) fn start(ctx: WriterContext, shutdown: CancellationToken) -> Self {
        let (queue, rx) = mpsc::channel(QUEUE);
        let backlog = Backlog {
            waiting: Arc::new(AtomicUsize::new(0)),
            max: ctx.max_backlog.max(1),
        };
        tokio::spawn(run(ctx, rx, backlog.clone(), shutdown));
        StatusWrites { queue, backlog }
    }

    /// Writes `current` in the next batch; returns the batch's revision.
    /// Refused at once (UNAVAILABLE, which nodes retry) when the backlog
    /// is full.
    pub(crate) async fn write(&self, current: Current) -> Result<Revision> {
        let n = current.len();
        self.backlog.admit(n).map_err(backlogged)?;
        let (respond, answer) = oneshot::channel();
        if self.queue.send(Request { current, respond }).await.is_err() {
            self.backlog.release(n);
            return Err(shutting_down());
        }
        answer.await.unwrap_or_else(|_| Err(shutting_down()))
    }

    /// Refuses `n` updates now if the backlog would not take them, before
    /// the caller spends anything on them; [`StatusWrites::write`] decides.
    pub(crate) fn check_room(&self, n: usize) -> Result<()> {
        let waiting = self.backlog.waiting.load(Ordering::Relaxed);
        self.backlog.room(waiting, n).map_err(backlogged)
    }
}

fn backlogged(waiting: usize) -> GatewayError {
    GatewayError::Unavailable(format!(
        "{waiting} client updates are waiting to be written; send again shortly"
    ))
}

fn shutting_down() -> GatewayError {
    GatewayError::Unavailable("the api-gateway is shutting down".into())
}

async fn run(
    ctx: WriterContext,
    mut rx: mpsc::Receiver<Request>,
    backlog: Backlog,
    shutdown: CancellationToken,
) {
    let max = ctx.max_allocs.max(1);
    let mut own = OwnWrites::default();
    let mut carried: Option<Request> = None;
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
        // Taken: room for the reports that arrive while this one commits.
        backlog.release(size);
        commit(&ctx, &mut own, batch).await;
    }
}

/// The allocations the writer wrote last, as written, until its cache shows
/// those writes: without them a node's second report of an allocation
/// would be compared against the cache's older copy and fail.
#[derive(Debug, Default)]
struct OwnWrites {
    allocs: HashMap<String, Arc<Allocation>>,
}

impl OwnWrites {
    /// Records what a batch wrote at `revision`.
    fn record(&mut self, written: Vec<Allocation>, revision: Revision) {
        for mut alloc in written {
            alloc.modify_revision = revision;
            self.allocs.insert(alloc.id.clone(), Arc::new(alloc));
        }
    }

    /// Forgets the writes a cache at `revision` already shows.
    fn forget_seen(&mut self, revision: Revision) {
        self.allocs.retain(|_, a| a.modify_revision > revision);
    }

    /// Replaces the callers' copies by the newest one known: theirs, the
    /// cache's now, or the writer's own write. A copy no longer on the node
    /// the update was checked against is left alone.
    fn freshen(&self, snap: &Snapshot, current: &mut Current) {
        for (update, held) in current.iter_mut() {
            let Some(checked) = held.as_ref() else {
                continue;
            };
            let newest = [
                snap.alloc(&update.alloc_id),
                self.allocs.get(&update.alloc_id),
            ]
            .into_iter()
            .flatten()
            .filter(|a| a.node_id == checked.node_id)
            .max_by_key(|a| a.modify_revision);
            if let Some(newest) = newest
                && newest.modify_revision > checked.modify_revision
            {
                *held = Some(Arc::clone(newest));
            }
        }
    }
}

/// Replaces the callers' copies by the stored values, after a conflict:
/// another writer changed an allocation the cache does not show yet. An
/// allocation gone since, or no longer on the node it was checked against,
/// is left alone.
async fn read_stored(ctx: &WriterContext, current: &mut Current) -> Result<()> {
    let ids: Vec<&str> = current.iter().map(|(u, _)| u.alloc_id.as_str()).collect();
    let stored =
        crate::allocs::read_stored(ctx.store.as_ref(), &ctx.keys, &ids, ctx.max_allocs).await?;
    for ((_, held), fresh) in current.iter_mut().zip(stored) {
        *held = match (held.as_ref(), fresh) {
            (Some(checked), Some(fresh)) if fresh.node_id == checked.node_id => {
                Some(Arc::new(fresh))
            }
            _ => None,
        };
    }
    Ok(())
}

/// Writes one batch and answers each of its callers.
async fn commit(ctx: &WriterContext, own: &mut OwnWrites, mut batch: Vec<Request>) {
    // A caller that gave up waiting (its deadline passed while the queue was
    // long) sends its updates again, newest state first: writing the stale
    // copy would only lengthen the queue for everyone behind it.
    batch.retain(|r| !r.respond.is_closed());
    if batch.is_empty() {
        return;
    }
    let mut merged = merge(batch.iter_mut().map(|r| std::mem::take(&mut r.current)));
    own.forget_seen(ctx.cache.revision());
    let outcome = write_merged(ctx, own, &mut merged).await;
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
    own: &mut OwnWrites,
    current: &mut Current,
) -> Result<Revision, String> {
    for attempt in 0..ctx.attempts.max(1) {
        let snap = ctx.cache.snapshot();
        if attempt == 0 {
            own.freshen(&snap, current);
        } else {
            read_stored(ctx, current)
                .await
                .map_err(|err| format!("reading allocations: {err}"))?;
        }
        if current.iter().all(|(_, a)| a.is_none()) {
            // Every allocation is gone (garbage collected): nothing to record.
            return Ok(ctx.cache.revision());
        }
        let Batch {
            txn,
            evals,
            written,
        } = build_batch(&ctx.keys, &snap, current, now_unix_ns());
        let result = ctx
            .store
            .txn(txn)
            .await
            .map_err(|err| format!("writing client updates: {err}"))?;
        if result.succeeded {
            if !evals.is_empty() {
                tracing::info!(evals = evals.len(), "client updates created evaluations");
            }
            own.record(written, result.revision);
            return Ok(result.revision);
        }
        tracing::debug!(
            allocs = current.len(),
            attempt,
            "client updates conflicted; re-reading"
        );
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
    fn the_backlog_refuses_what_would_overfill_it_and_takes_any_report_when_empty() {
        let backlog = Backlog {
            waiting: Arc::new(AtomicUsize::new(0)),
            max: 100,
        };
        assert_eq!(
            backlog.admit(250),
            Ok(()),
            "an empty backlog takes any report"
        );
        assert_eq!(backlog.admit(1), Err(250));
        backlog.release(250);
        assert_eq!(backlog.admit(60), Ok(()));
        assert_eq!(backlog.admit(40), Ok(()), "up to the bound");
        assert_eq!(backlog.admit(1), Err(100));
        backlog.release(60);
        assert_eq!(backlog.admit(60), Ok(()));
        // Refused, a node hears a code it retries, naming the backlog.
        let status: tonic::Status = backlogged(100).into();
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert!(status.message().contains("100 client updates"), "{status}");
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

    /// A store holding allocation `alloc`, and a cache of a twin store that
    /// holds the same at the same revision and never changes: a cache that
    /// shows none of the writer's writes, however long a test runs.
    async fn with_frozen_cache(
        alloc: &Allocation,
        attempts: u32,
    ) -> (Arc<dyn Store>, WriterContext) {
        let keys = Keyspace::new("/t");
        let store: Arc<dyn Store> = Arc::new(caravan_store::MemStore::new());
        let twin: Arc<dyn Store> = Arc::new(caravan_store::MemStore::new());
        for s in [&store, &twin] {
            s.put(&keys.alloc(&alloc.id), &caravan_state::encode(alloc), 0)
                .await
                .unwrap();
        }
        let cache = Arc::new(
            Informer::start(twin, keys.clone(), crate::cache_config())
                .await
                .unwrap(),
        );
        let ctx = WriterContext {
            store: store.clone(),
            keys,
            cache,
            attempts,
            max_allocs: 100,
            max_backlog: 1_000,
        };
        (store, ctx)
    }

    async fn report(
        ctx: &WriterContext,
        own: &mut OwnWrites,
        status: AllocClientStatus,
    ) -> Result<Revision> {
        let cached = ctx.cache.snapshot().alloc("a").cloned();
        let (u, _) = update("a", status);
        let (respond, answer) = oneshot::channel();
        let request = Request {
            current: vec![(u, cached)],
            respond,
        };
        commit(ctx, own, vec![request]).await;
        answer.await.unwrap()
    }

    async fn stored(store: &Arc<dyn Store>) -> Allocation {
        let kv = store
            .get(&Keyspace::new("/t").alloc("a"))
            .await
            .unwrap()
            .unwrap();
        caravan_state::decode(&kv).unwrap()
    }

    /// A node reports an allocation twice before the cache shows the first
    /// write: the second write compares against the writer's own write, not
    /// the cache's older copy, so it needs no read and no second attempt;
    /// and what the value holds beside the status (placement metrics kept in
    /// the value of an allocation placed before they had a key) stays.
    #[tokio::test]
    async fn a_second_report_is_compared_against_the_writers_own_write() {
        let mut alloc = Allocation {
            id: "a".into(),
            node_id: "n1".into(),
            metrics: Some(Box::new(caravan_proto::AllocMetric {
                nodes_evaluated: 5,
                ..Default::default()
            })),
            ..Default::default()
        };
        alloc.set_client_status(AllocClientStatus::Pending);
        let (store, ctx) = with_frozen_cache(&alloc, 1).await;
        let mut own = OwnWrites::default();
        let first = report(&ctx, &mut own, AllocClientStatus::Running)
            .await
            .unwrap();
        assert!(
            ctx.cache.revision() < first,
            "the cache does not show the write"
        );
        let second = report(&ctx, &mut own, AllocClientStatus::Complete)
            .await
            .unwrap();
        assert!(second > first);
        let now = stored(&store).await;
        assert_eq!(now.client_status(), AllocClientStatus::Complete);
        assert_eq!(now.metrics, alloc.metrics);
        // Once the cache shows a write, the writer forgets it.
        own.forget_seen(second);
        assert!(own.allocs.is_empty());
    }

    /// Another writer changed the allocation (the servers asked it to stop)
    /// and the cache does not show it yet: the batch conflicts, reads the
    /// stored value and writes the status over it, keeping that change.
    #[tokio::test]
    async fn a_conflict_reads_the_stored_value_and_keeps_the_other_writers_change() {
        let mut alloc = Allocation {
            id: "a".into(),
            node_id: "n1".into(),
            ..Default::default()
        };
        alloc.set_client_status(AllocClientStatus::Pending);
        let (store, ctx) = with_frozen_cache(&alloc, 2).await;
        let mut stopped = alloc.clone();
        stopped.set_desired_status(caravan_proto::AllocDesiredStatus::Stop);
        store
            .put(&ctx.keys.alloc("a"), &caravan_state::encode(&stopped), 0)
            .await
            .unwrap();
        let mut own = OwnWrites::default();
        report(&ctx, &mut own, AllocClientStatus::Running)
            .await
            .unwrap();
        let now = stored(&store).await;
        assert_eq!(now.client_status(), AllocClientStatus::Running);
        assert_eq!(
            now.desired_status(),
            caravan_proto::AllocDesiredStatus::Stop
        );

        // With one attempt only, the same conflict is the callers' to hear.
        let (store, ctx) = with_frozen_cache(&alloc, 1).await;
        store
            .put(&ctx.keys.alloc("a"), &caravan_state::encode(&stopped), 0)
            .await
            .unwrap();
        let err = report(&ctx, &mut OwnWrites::default(), AllocClientStatus::Running)
            .await
            .unwrap_err();
        assert!(matches!(err, GatewayError::Conflict(_)), "{err}");
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
            max_backlog: 1_000,
        };
        let current = |status| {
            let (u, _) = update("a", status);
            let mut held = alloc.clone();
            held.modify_revision = created;
            vec![(u, Some(Arc::new(held)))]
        };
        let (respond, answer) = oneshot::channel();
        drop(answer);
        let left = Request {
            current: current(AllocClientStatus::Pending),
            respond,
        };
        commit(&ctx, &mut OwnWrites::default(), vec![left]).await;
        assert_eq!(store.current_revision().await.unwrap(), created);

        let (respond, answer) = oneshot::channel();
        let waiting = Request {
            current: current(AllocClientStatus::Running),
            respond,
        };
        commit(&ctx, &mut OwnWrites::default(), vec![waiting]).await;
        let revision = answer.await.unwrap().unwrap();
        assert!(revision > created);
    }
}

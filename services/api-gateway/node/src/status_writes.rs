//! Client status writes of every node, coalesced: the updates that arrive
//! while one transaction commits go together into the next, so the store's
//! disk sync is paid per batch rather than per node and per report (Nomad's
//! servers coalesce client updates the same way). The next batch is built
//! and written while the one before still commits, unless it names one of
//! its allocations; never more than two at once. A batch rewrites the
//! newest copy of each allocation the gateway knows, with no read of the
//! store (see [`OwnWrites`]), as one new status batch key per job; each
//! allocation's status key is still compared, every allocation read from
//! the store after a conflict, and every caller hears the outcome of the
//! transaction that carried its updates.

use std::collections::{HashMap, HashSet};

use caravan_model::now_unix_ns;

use caravan_proto::Allocation;
use caravan_state::{AllocDetail, Informer, Keyspace, read_alloc_values_of_jobs};
use caravan_store::{Revision, Store};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::own_writes::OwnWrites;
use crate::registered;
use crate::updates::{Batch, Current, build_batch};
use caravan_gateway_core::error::{GatewayError, Result};

/// Requests waiting for the writer; beyond this, callers wait to queue
/// (the backlog bound, in updates, usually holds them first).
const QUEUE: usize = 4096;

struct Request {
    current: Current,
    respond: oneshot::Sender<Result<Revision>>,
    /// The backlog's room it holds, given back when the writer takes it.
    room: usize,
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
    /// How long a batch waits for more after its first request, unless full.
    pub(crate) linger: Duration,
    /// Most updates waiting for the writer (see `status_backlog_max_allocs`).
    pub(crate) max_backlog: usize,
    /// How long a report waits for room in a full backlog before it is
    /// refused (see `status_backlog_wait_ms`).
    pub(crate) backlog_wait: Duration,
    /// The writer's last writes, until the cache shows them.
    pub(crate) own: OwnWrites,
}

/// The gateway's one writer of client status updates. Cheap to clone.
#[derive(Clone, Debug)]
pub struct StatusWrites {
    queue: mpsc::Sender<Request>,
    backlog: Backlog,
}

/// Updates sent to the writer and not yet taken by it, as room held in a
/// semaphore of `max` permits, one per update. A report waits for room in
/// the order reports came (the semaphore is fair); one larger than the
/// whole backlog takes all of it, so no report is too big ever to be
/// written.
#[derive(Clone, Debug)]
struct Backlog {
    room: Arc<Semaphore>,
    max: usize,
    wait: Duration,
}

impl Backlog {
    fn new(max: usize, wait: Duration) -> Self {
        let max = max.clamp(1, u32::MAX as usize);
        Backlog {
            room: Arc::new(Semaphore::new(max)),
            max,
            wait,
        }
    }

    /// Holds room for `n` more updates, waiting up to the backlog's wait
    /// for it; `Err(waiting)`, the updates waiting then, if none came.
    async fn admit(&self, n: usize) -> std::result::Result<Room, usize> {
        let want = n.min(self.max);
        let permits = u32::try_from(want).unwrap_or(u32::MAX);
        match crate::permits::within(&self.room, permits, self.wait).await {
            Some(permit) => {
                permit.forget();
                Ok(Room {
                    backlog: self.clone(),
                    held: want,
                })
            }
            None => Err(self.waiting()),
        }
    }

    /// Updates waiting for the writer now.
    fn waiting(&self) -> usize {
        self.max.saturating_sub(self.room.available_permits())
    }

    /// Gives back room for `n` updates (taken by the writer, or never sent).
    fn release(&self, n: usize) {
        self.room.add_permits(n);
    }
}

/// Room held in the backlog for one node's report; what its writes do not
/// take is given back when it is dropped.
#[derive(Debug)]
pub(crate) struct Room {
    backlog: Backlog,
    held: usize,
}

impl Room {
    /// Up to `n` of the room held, for one request to the writer.
    fn take(&mut self, n: usize) -> usize {
        let taken = n.min(self.held);
        self.held -= taken;
        taken
    }
}

impl Drop for Room {
    fn drop(&mut self) {
        self.backlog.release(self.held);
    }
}

impl StatusWrites {
    /// Starts the writer; it stops once `shutdown` fires and the queue is
    /// drained of what was already sent.
    pub(crate) fn start(ctx: WriterContext, shutdown: CancellationToken) -> Self {
        let (queue, rx) = mpsc::channel(QUEUE);
        let backlog = Backlog::new(ctx.max_backlog, ctx.backlog_wait);
        tokio::spawn(run(ctx, rx, backlog.clone(), shutdown));
        StatusWrites { queue, backlog }
    }

    /// Holds room in the backlog for a report of `n` updates, before the
    /// caller spends anything on them: waits for it while the backlog is
    /// full, up to `status_backlog_wait_ms`, then refuses (UNAVAILABLE,
    /// which nodes retry). A node sends one report at a time, so while its
    /// report waits here its newer states gather at the node, one per
    /// allocation, instead of its report being sent, decoded and refused
    /// again and again.
    pub(crate) async fn admit(&self, n: usize) -> Result<Room> {
        self.backlog.admit(n).await.map_err(backlogged)
    }

    /// Writes `current` in the next batch, with room for it taken from
    /// `room`; returns the batch's revision.
    pub(crate) async fn write(&self, current: Current, room: &mut Room) -> Result<Revision> {
        let room = room.take(current.len());
        let (respond, answer) = oneshot::channel();
        let request = Request {
            current,
            respond,
            room,
        };
        if self.queue.send(request).await.is_err() {
            self.backlog.release(room);
            return Err(shutting_down());
        }
        answer.await.unwrap_or_else(|_| Err(shutting_down()))
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
    let ctx = Arc::new(ctx);
    let max = ctx.max_allocs.max(1);
    let mut carried: Option<Request> = None;
    // The batch committing while the next one gathers.
    let mut previous: Option<InFlight> = None;
    loop {
        let first = match carried.take() {
            Some(r) => r,
            None => tokio::select! {
                r = rx.recv() => match r {
                    Some(r) => r,
                    None => break,
                },
                _ = shutdown.cancelled() => break,
            },
        };
        let (batch, room, next) = gather(first, &mut rx, max, ctx.linger, &shutdown).await;
        carried = next;
        // Taken: room for the reports that arrive while this one commits.
        backlog.release(room);
        // A batch that names an allocation of the one committing waits for
        // it: it rewrites the value that commit writes.
        if let Some(p) = previous.take_if(|p| p.overlaps(&batch)) {
            p.finish().await;
        }
        let started = InFlight::start(&ctx, batch);
        // At most two commits at once: the next batch gathers while this one
        // commits, not while two do.
        if let Some(p) = previous.replace(started) {
            p.finish().await;
        }
    }
    if let Some(p) = previous {
        p.finish().await;
    }
}

/// A batch being committed on its own task, with the allocations it names.
struct InFlight {
    ids: HashSet<String>,
    task: tokio::task::JoinHandle<()>,
}

impl InFlight {
    fn start(ctx: &Arc<WriterContext>, batch: Vec<Request>) -> Self {
        let ids = batch
            .iter()
            .flat_map(|r| r.current.iter().map(|(u, _)| u.alloc_id.clone()))
            .collect();
        let ctx = Arc::clone(ctx);
        let task = tokio::spawn(async move { commit(&ctx, batch).await });
        InFlight { ids, task }
    }

    /// Whether `batch` names an allocation this one does.
    fn overlaps(&self, batch: &[Request]) -> bool {
        batch
            .iter()
            .flat_map(|r| r.current.iter())
            .any(|(u, _)| self.ids.contains(&u.alloc_id))
    }

    /// Waits for the commit; its callers have their answers once it is done.
    async fn finish(self) {
        if let Err(err) = self.task.await {
            tracing::error!(%err, "a client status commit did not finish");
        }
    }
}

/// The batch that starts with `first`: what is queued already, then what
/// arrives within `linger` of now, until `max` allocations (each service
/// instance an update registers or deregisters counting as one more, as it
/// is one more operation of the transaction). A request that would
/// overfill the batch comes back to start the next one. Returns the batch,
/// the backlog's room its requests hold and that request.
async fn gather(
    first: Request,
    rx: &mut mpsc::Receiver<Request>,
    max: usize,
    linger: Duration,
    shutdown: &CancellationToken,
) -> (Vec<Request>, usize, Option<Request>) {
    let deadline = tokio::time::Instant::now() + linger;
    let mut room = first.room;
    let mut weight = first.weight();
    let mut batch = vec![first];
    while weight < max {
        let next = match rx.try_recv() {
            Ok(next) => next,
            Err(mpsc::error::TryRecvError::Disconnected) => break,
            Err(mpsc::error::TryRecvError::Empty) if linger.is_zero() => break,
            Err(mpsc::error::TryRecvError::Empty) => tokio::select! {
                r = rx.recv() => match r {
                    Some(next) => next,
                    None => break,
                },
                _ = tokio::time::sleep_until(deadline) => break,
                _ = shutdown.cancelled() => break,
            },
        };
        if weight + next.weight() > max {
            return (batch, room, Some(next));
        }
        room += next.room;
        weight += next.weight();
        batch.push(next);
    }
    (batch, room, None)
}

impl Request {
    /// Its share of a batch: its allocations and their service instances.
    fn weight(&self) -> usize {
        self.current
            .iter()
            .map(|(u, _)| 1 + registered::extra_ops(u))
            .sum()
    }
}

/// The stored allocations of the callers' updates, folded from their
/// record and status keys, after a conflict: another writer changed one the
/// cache does not show yet. An allocation gone since, or no longer on the
/// node it was checked against, is `None`: left alone.
async fn read_stored(
    ctx: &WriterContext,
    current: &Current,
) -> Result<Vec<Option<Arc<Allocation>>>> {
    // Only allocations checked against a node are read: the others are
    // left alone whatever the store holds. Their jobs are known.
    let checked: Vec<(&str, &str, &str)> = current
        .iter()
        .filter_map(|(u, a)| {
            a.as_ref()
                .map(|a| (u.alloc_id.as_str(), a.namespace.as_str(), a.job_id.as_str()))
        })
        .collect();
    let mut values =
        read_alloc_values_of_jobs(ctx.store.as_ref(), &ctx.keys, &checked, ctx.max_allocs)
            .await?
            .into_iter();
    let mut stored = Vec::with_capacity(current.len());
    for (_, checked) in current {
        let fresh = match checked {
            Some(checked) => match values.next().flatten() {
                Some(value) => Some(value.fold(AllocDetail::WithoutMetrics)?)
                    .filter(|f| f.node_id == checked.node_id)
                    .map(Arc::new),
                None => None,
            },
            None => None,
        };
        stored.push(fresh);
    }
    Ok(stored)
}

/// Writes one batch and answers each of its callers.
async fn commit(ctx: &WriterContext, mut batch: Vec<Request>) {
    // A caller that gave up waiting (its deadline passed while the queue was
    // long) sends its updates again, newest state first: writing the stale
    // copy would only lengthen the queue for everyone behind it.
    batch.retain(|r| !r.respond.is_closed());
    if batch.is_empty() {
        return;
    }
    let merged = merge(batch.iter_mut().map(|r| std::mem::take(&mut r.current)));
    let outcome = write_merged(ctx, &merged).await;
    for request in batch {
        let answer = match &outcome {
            Ok(revision) => Ok(*revision),
            // A full store is answered as such (RESOURCE_EXHAUSTED), not as
            // a conflict: the client keeps its updates and sends them again.
            Err(WriteError::Store(err)) if err.is_no_space() => {
                Err(GatewayError::Store(err.clone()))
            }
            Err(err) => Err(GatewayError::Conflict(err.to_string())),
        };
        // A caller that stopped waiting loses nothing: the write stands.
        let _ = request.respond.send(answer);
    }
}

/// The updates of a batch, one per allocation: a later report of the same
/// allocation replaces an earlier one (a transaction may name a key once),
/// keeping the service instances both registered or deregistered, the later
/// word winning per instance.
fn merge(requests: impl Iterator<Item = Current>) -> Current {
    let mut merged: Current = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    for (mut update, alloc) in requests.flatten() {
        match at.get(&update.alloc_id) {
            Some(&i) => {
                let earlier = std::mem::take(&mut merged[i].0);
                registered::fold_into(earlier, &mut update);
                merged[i].0 = update;
            }
            None => {
                at.insert(update.alloc_id.clone(), merged.len());
                merged.push((update, alloc));
            }
        }
    }
    merged
}

/// Commits the merged updates, retrying on conflict; the error is the
/// message every caller gets. The first attempt rewrites the newest copies
/// the gateway knows (its cache's, or its own last writes the cache does not
/// show yet) without reading the store; an attempt after a conflict, or one
/// with an allocation the gateway does not know on its node, reads the
/// stored values first.
async fn write_merged(ctx: &WriterContext, current: &Current) -> Result<Revision, WriteError> {
    for attempt in 0..ctx.attempts.max(1) {
        ctx.own.forget_seen(ctx.cache.revision());
        let snap = ctx.cache.snapshot();
        let known = match attempt {
            0 => ctx.own.newest(&snap, current),
            _ => None,
        };
        let stored = match known {
            Some(known) => known,
            None => read_stored(ctx, current)
                .await
                .map_err(|err| WriteError::Other(format!("reading allocations: {err}")))?,
        };
        if stored.iter().all(Option::is_none) {
            // Every allocation is gone (garbage collected): nothing to record.
            return Ok(ctx.cache.revision());
        }
        let checked = current
            .iter()
            .map(|(u, _)| u)
            .zip(stored.iter().map(Option::as_ref));
        let Batch {
            txn,
            evals,
            written,
        } = build_batch(
            &ctx.keys,
            &snap,
            checked,
            &caravan_state::status_batch::new_batch_name(),
            now_unix_ns(),
        );
        let result = ctx.store.txn(txn).await.map_err(WriteError::Store)?;
        if result.succeeded {
            if !evals.is_empty() {
                tracing::info!(evals = evals.len(), "client updates created evaluations");
            }
            ctx.own.record(written, result.revision);
            return Ok(result.revision);
        }
        tracing::debug!(
            allocs = current.len(),
            attempt,
            "client updates conflicted; re-reading"
        );
    }
    Err(WriteError::Other(
        "allocations kept changing concurrently; send the update again".into(),
    ))
}

/// Why a batch of client updates was not written.
#[derive(Debug, thiserror::Error)]
enum WriteError {
    /// The store refused the batch's transaction.
    #[error("writing client updates: {0}")]
    Store(caravan_store::StoreError),
    /// Reading failed, or the batch kept conflicting.
    #[error("{0}")]
    Other(String),
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use caravan_proto::{AllocClientStatus, AllocUpdate, Allocation};

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

    #[tokio::test(start_paused = true)]
    async fn a_full_backlog_holds_a_report_until_room_comes_or_its_wait_is_over() {
        let wait = Duration::from_secs(2);
        let backlog = Backlog::new(100, wait);
        let all = backlog
            .admit(250)
            .await
            .expect("an empty backlog takes any report");
        assert_eq!((all.held, backlog.waiting()), (100, 100), "all of it");

        // Full: a report waits out its wait, then is refused naming the backlog.
        let started = tokio::time::Instant::now();
        assert_eq!(backlog.admit(1).await.unwrap_err(), 100);
        assert_eq!(started.elapsed(), wait);
        let status: tonic::Status = backlogged(100).into();
        assert_eq!(status.code(), tonic::Code::Unavailable, "nodes retry it");
        assert!(status.message().contains("100 client updates"), "{status}");

        // Room that comes back while reports wait lets them in, first come
        // first.
        let first = tokio::spawn({
            let b = backlog.clone();
            async move { b.admit(60).await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        let second = tokio::spawn({
            let b = backlog.clone();
            async move { b.admit(40).await }
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut all = all;
        assert_eq!(all.take(30), 30, "a write takes part of the room held");
        drop(all);
        // 70 given back: the first report's 60 fit; the second, in line
        // behind it, holds the other 10 while it waits for the rest.
        let first = first.await.unwrap().expect("room for the first");
        assert_eq!((first.held, backlog.waiting()), (60, 100));
        backlog.release(30);
        let second = second.await.unwrap().expect("room for the second");
        assert_eq!((second.held, backlog.waiting()), (40, 100));
        assert_eq!(started.elapsed(), wait + Duration::from_millis(510));

        // Without a wait, a full backlog refuses at once.
        let at_once = Backlog::new(10, Duration::ZERO);
        let _held = at_once.admit(10).await.unwrap();
        assert_eq!(at_once.admit(1).await.unwrap_err(), 10);
    }

    fn request(ids: &[&str]) -> Request {
        let current: Current = ids
            .iter()
            .map(|id| update(id, AllocClientStatus::Running))
            .collect();
        Request {
            room: current.len(),
            current,
            respond: oneshot::channel().0,
        }
    }

    fn ids(batch: &[Request]) -> Vec<String> {
        batch
            .iter()
            .flat_map(|r| r.current.iter().map(|(u, _)| u.alloc_id.clone()))
            .collect()
    }

    #[tokio::test]
    async fn a_batch_lingers_for_reports_that_arrive_soon_after_its_first() {
        let (tx, mut rx) = mpsc::channel(16);
        let shutdown = CancellationToken::new();
        let late = tokio::spawn({
            let tx = tx.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(30)).await;
                tx.send(request(&["b"])).await.unwrap();
                tx.send(request(&["c", "d"])).await.unwrap();
            }
        });
        let linger = Duration::from_secs(2);
        let started = std::time::Instant::now();
        let (batch, room, next) = gather(request(&["a"]), &mut rx, 3, linger, &shutdown).await;
        late.await.unwrap();
        assert_eq!(ids(&batch), ["a", "b"], "the second report joined");
        assert_eq!(room, 2, "the room its two reports hold");
        let next = next.expect("the report that would overfill the batch comes back");
        assert_eq!(ids(&[next]), ["c", "d"]);
        assert!(
            started.elapsed() < linger,
            "a full batch does not wait out the linger"
        );

        // Nothing more arrives: the batch goes when the linger is over.
        let started = std::time::Instant::now();
        let linger = Duration::from_millis(40);
        let (batch, _, next) = gather(request(&["e"]), &mut rx, 10, linger, &shutdown).await;
        assert_eq!(ids(&batch), ["e"]);
        assert!(next.is_none());
        assert!(started.elapsed() >= linger, "{:?}", started.elapsed());
        drop(tx);
    }

    #[tokio::test]
    async fn without_a_linger_or_once_shutting_down_a_batch_takes_only_what_is_queued() {
        let (tx, mut rx) = mpsc::channel(16);
        let shutdown = CancellationToken::new();
        tx.send(request(&["b"])).await.unwrap();
        let (batch, _, _) = gather(request(&["a"]), &mut rx, 10, Duration::ZERO, &shutdown).await;
        assert_eq!(ids(&batch), ["a", "b"], "what was queued goes along");

        shutdown.cancel();
        let started = std::time::Instant::now();
        let linger = Duration::from_secs(30);
        let (batch, _, _) = gather(request(&["c"]), &mut rx, 10, linger, &shutdown).await;
        assert_eq!(ids(&batch), ["c"]);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "no linger once shutting down"
        );
        drop(tx);
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

    /// A writer's context over `store` holding `allocs`, its cache started
    /// once they are stored; with the revision of the last one.
    async fn writer_over(
        store: &Arc<dyn Store>,
        keys: &Keyspace,
        allocs: &[Allocation],
        attempts: u32,
        max_allocs: usize,
    ) -> (WriterContext, Revision) {
        let mut stored = 0;
        for alloc in allocs {
            stored = store
                .put(&keys.alloc(&alloc.id), &caravan_state::encode(alloc), 0)
                .await
                .unwrap();
        }
        let cache = Arc::new(
            Informer::start(
                store.clone(),
                keys.clone(),
                caravan_gateway_core::cache_config(),
            )
            .await
            .unwrap(),
        );
        let ctx = WriterContext {
            store: store.clone(),
            keys: keys.clone(),
            cache,
            attempts,
            max_allocs,
            linger: Duration::ZERO,
            max_backlog: 1_000,
            backlog_wait: Duration::ZERO,
            own: OwnWrites::default(),
        };
        (ctx, stored)
    }

    /// A pending allocation on node n1, placed with `evaluated` nodes in
    /// its metrics.
    fn placed(id: &str, evaluated: u32) -> Allocation {
        let mut a = Allocation {
            id: id.into(),
            node_id: "n1".into(),
            metrics: Some(Box::new(caravan_proto::AllocMetric {
                nodes_evaluated: evaluated,
                ..Default::default()
            })),
            ..Default::default()
        };
        a.set_client_status(AllocClientStatus::Pending);
        a
    }

    /// Counts the transactions that only read.
    #[derive(Default)]
    struct Reads(std::sync::atomic::AtomicUsize);

    #[async_trait::async_trait]
    impl caravan_testkit::layered::StoreLayer for Reads {
        async fn txn(
            &self,
            inner: &Arc<dyn Store>,
            txn: caravan_store::Txn,
        ) -> caravan_store::Result<caravan_store::TxnResult> {
            if txn
                .success
                .iter()
                .all(|op| matches!(op, caravan_store::Op::Get(_)))
            {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
            inner.txn(txn).await
        }
    }

    /// The cache holds the allocations a batch names (without metrics): the
    /// batch writes their status keys with no read of the store, and leaves
    /// their records (metrics and all) as they were.
    #[tokio::test]
    async fn a_batch_the_cache_knows_is_written_without_a_read() {
        let reads = caravan_testkit::layered::Layered::wrap(
            Arc::new(caravan_store::MemStore::new()),
            Reads::default(),
        );
        let store: Arc<dyn Store> = reads.clone();
        let keys = Keyspace::new("/t");
        let allocs = [placed("a", 7), placed("b", 7)];
        let (ctx, placed_at) = writer_over(&store, &keys, &allocs, 1, 100).await;
        let snap = ctx.cache.snapshot();
        let current: Current = ["a", "b"]
            .into_iter()
            .map(|id| {
                (
                    update(id, AllocClientStatus::Running).0,
                    snap.alloc(id).cloned(),
                )
            })
            .collect();
        let (respond, answer) = oneshot::channel();
        commit(
            &ctx,
            vec![Request {
                current,
                respond,
                room: 0,
            }],
        )
        .await;
        answer.await.unwrap().unwrap();
        assert_eq!(reads.0.load(Ordering::SeqCst), 0, "no read of the store");
        for a in &allocs {
            let now = caravan_state::read_alloc(store.as_ref(), &keys, &a.id)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(now.client_status(), AllocClientStatus::Running);
            assert_eq!(now.metrics, a.metrics, "the metrics as stored");
            assert!(
                now.modify_revision <= placed_at,
                "the record is not rewritten"
            );
            assert!(now.client_modify_revision > placed_at);
        }
    }

    /// A node reports an allocation twice, each time with the copy the cache
    /// held before the first write, and the cache holds no placement
    /// metrics: the second write builds on the newest copy, not the stale
    /// one (one attempt only), and keeps what the cache leaves out.
    #[tokio::test]
    async fn a_write_rewrites_the_stored_value_not_the_cached_copy() {
        let store: Arc<dyn Store> = Arc::new(caravan_store::MemStore::new());
        let keys = Keyspace::new("/t");
        let alloc = placed("a", 5);
        let (ctx, _) = writer_over(&store, &keys, std::slice::from_ref(&alloc), 1, 100).await;
        let cached = ctx.cache.snapshot().alloc("a").cloned().unwrap();
        assert!(cached.metrics.is_none(), "the cache holds no metrics");
        for status in [AllocClientStatus::Running, AllocClientStatus::Complete] {
            let (u, _) = update("a", status);
            let (respond, answer) = oneshot::channel();
            let request = Request {
                current: vec![(u, Some(Arc::clone(&cached)))],
                respond,
                room: 0,
            };
            commit(&ctx, vec![request]).await;
            answer.await.unwrap().unwrap();
        }
        let now = caravan_state::read_alloc(store.as_ref(), &keys, "a")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(now.client_status(), AllocClientStatus::Complete);
        assert_eq!(now.metrics, alloc.metrics);
    }

    #[tokio::test]
    async fn a_batch_overlaps_the_one_committing_when_it_names_one_of_its_allocations() {
        let committing = InFlight {
            ids: ["a", "b"].into_iter().map(String::from).collect(),
            task: tokio::spawn(async {}),
        };
        assert!(!committing.overlaps(&[request(&["c"]), request(&["d", "e"])]));
        assert!(committing.overlaps(&[request(&["c"]), request(&["d", "b"])]));
        committing.finish().await;
    }

    /// Reports of one allocation in consecutive batches, each written with
    /// one attempt: the later batch never reads a value the earlier one is
    /// replacing, so none conflicts; other allocations' batches commit
    /// beside them. Against etcd, whose reads and writes take long enough
    /// for batches to interleave.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn consecutive_batches_of_one_allocation_never_conflict() {
        let store: Arc<dyn Store> = Arc::new(
            caravan_store::EtcdStore::connect(&caravan_testkit::etcd_endpoints())
                .await
                .unwrap(),
        );
        let keys = Keyspace::new(&format!("/status-writes-{}", now_unix_ns()));
        let ids: Vec<String> = (0..20).map(|i| format!("a{i}")).collect();
        let allocs: Vec<Allocation> = ids
            .iter()
            .map(|id| Allocation {
                id: id.clone(),
                namespace: "default".into(),
                job_id: "web".into(),
                node_id: "n1".into(),
                ..Default::default()
            })
            .collect();
        let (ctx, _) = writer_over(&store, &keys, &allocs, 1, 1).await;
        let cache = ctx.cache.clone();
        let shutdown = CancellationToken::new();
        let writes = StatusWrites::start(ctx, shutdown.clone());
        let snap = cache.snapshot();
        let mut calls = Vec::new();
        for round in 0..10 {
            let status = if round % 2 == 0 {
                AllocClientStatus::Pending
            } else {
                AllocClientStatus::Running
            };
            for id in ["a0", ids[1 + round].as_str()] {
                let (u, _) = update(id, status);
                let held = snap.alloc(id).cloned();
                let writes = writes.clone();
                calls.push(tokio::spawn(async move {
                    let mut room = writes.admit(1).await?;
                    writes.write(vec![(u, held)], &mut room).await
                }));
            }
        }
        for call in calls {
            call.await.unwrap().expect("no batch conflicted");
        }
        // Every status went to a batch of the job; no status key was written.
        let batches = store
            .range(caravan_store::Range::prefix(
                keys.job_status_of("default", "web"),
            ))
            .await
            .unwrap();
        let mut written: HashMap<String, usize> = HashMap::new();
        for kv in &batches.kvs {
            for e in caravan_state::status_batch::decode_batch(kv).unwrap() {
                *written.entry(e.alloc_id).or_default() += 1;
            }
        }
        assert_eq!(written["a0"], 10, "a0's status written ten times");
        for id in &ids[1..11] {
            assert_eq!(written[id], 1, "{id}'s status written once");
            assert!(store.get(&keys.alloc_status(id)).await.unwrap().is_none());
            let kv = store.get(&keys.alloc(id)).await.unwrap().unwrap();
            assert_eq!(kv.version, 1, "{id}'s record never rewritten");
        }
        shutdown.cancel();
    }

    #[tokio::test]
    async fn updates_of_a_caller_that_left_are_not_written() {
        let store: Arc<dyn Store> = Arc::new(caravan_store::MemStore::new());
        let keys = Keyspace::new("/t");
        let alloc = Allocation {
            id: "a".into(),
            ..Default::default()
        };
        let (ctx, created) = writer_over(&store, &keys, std::slice::from_ref(&alloc), 3, 100).await;
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
            room: 0,
        };
        commit(&ctx, vec![left]).await;
        assert_eq!(store.current_revision().await.unwrap(), created);

        let (respond, answer) = oneshot::channel();
        let waiting = Request {
            current: current(AllocClientStatus::Running),
            respond,
            room: 0,
        };
        commit(&ctx, vec![waiting]).await;
        let revision = answer.await.unwrap().unwrap();
        assert!(revision > created);
    }
}

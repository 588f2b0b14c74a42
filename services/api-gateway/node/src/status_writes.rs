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
use std::sync::atomic::{AtomicUsize, Ordering};

use caravan_model::now_unix_ns;

use caravan_proto::Allocation;
use caravan_state::{AllocDetail, Informer, Keyspace, read_alloc_values_of_jobs};
use caravan_store::{Revision, Store};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::own_writes::OwnWrites;
use crate::registered;
use crate::updates::{Batch, Current, build_batch};
use caravan_gateway_core::error::{GatewayError, Result};

/// Requests waiting for the writer; beyond this, callers wait to queue
/// (the backlog bound, in updates, usually refuses them first).
const QUEUE: usize = 4096;

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
    /// How long a batch waits for more after its first request, unless full.
    pub(crate) linger: Duration,
    /// Most updates waiting for the writer (see `status_backlog_max_allocs`).
    pub(crate) max_backlog: usize,
    /// The writer's last writes, until the cache shows them.
    pub(crate) own: OwnWrites,
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
        let (batch, size, next) = gather(first, &mut rx, max, ctx.linger, &shutdown).await;
        carried = next;
        // Taken: room for the reports that arrive while this one commits.
        backlog.release(size);
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
/// its size in updates and that request.
async fn gather(
    first: Request,
    rx: &mut mpsc::Receiver<Request>,
    max: usize,
    linger: Duration,
    shutdown: &CancellationToken,
) -> (Vec<Request>, usize, Option<Request>) {
    let deadline = tokio::time::Instant::now() + linger;
    let mut size = first.current.len();
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
            return (batch, size, Some(next));
        }
        size += next.current.len();
        weight += next.weight();
        batch.push(next);
    }
    (batch, size, None)
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

    fn request(ids: &[&str]) -> Request {
        let current = ids
            .iter()
            .map(|id| update(id, AllocClientStatus::Running))
            .collect();
        Request {
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
        let (batch, size, next) = gather(request(&["a"]), &mut rx, 3, linger, &shutdown).await;
        late.await.unwrap();
        assert_eq!(ids(&batch), ["a", "b"], "the second report joined");
        assert_eq!(size, 2);
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
        commit(&ctx, vec![Request { current, respond }]).await;
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
                calls.push(tokio::spawn(
                    async move { writes.write(vec![(u, held)]).await },
                ));
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
        };
        commit(&ctx, vec![left]).await;
        assert_eq!(store.current_revision().await.unwrap(), created);

        let (respond, answer) = oneshot::channel();
        let waiting = Request {
            current: current(AllocClientStatus::Running),
            respond,
        };
        commit(&ctx, vec![waiting]).await;
        let revision = answer.await.unwrap().unwrap();
        assert!(revision > created);
    }
}

//! The watch cache's I/O: list the prefix at one revision, watch from the
//! next, re-list on compaction, reconnect on transient errors, and let
//! readers take snapshots and wait for revisions meanwhile.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use caravan_store::{
    Backoff, Range, Revision, Store, StoreError, WatchBatch, WatchProgress, prefix_end,
};
use futures::StreamExt;
use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::change::Change;
use crate::codec::AllocDetail;
use crate::error::{Result, StateError};
use crate::keyspace::{Keyspace, StateKey};
use crate::snapshot::Snapshot;
use crate::tables::Tables;

/// How the informer lists, retries and waits.
#[derive(Clone, Debug)]
pub struct InformerConfig {
    /// Keys per range request when listing; pages are read at one revision
    /// so the whole list is consistent.
    pub page_size: i64,
    /// First delay before reconnecting after an error.
    pub retry_min: Duration,
    /// Longest delay between reconnect attempts.
    pub retry_max: Duration,
    /// How often a waiter asks the store to confirm progress while the cache
    /// is behind the revision it waits for.
    pub progress_interval: Duration,
    /// Progress notifications are ignored for this long after a watch opens.
    /// etcd before 3.4.25 / 3.5.8 answers a progress request at once with its
    /// current revision even while a new watch is still catching up on older
    /// events (etcd issue 15220); it catches a watch up every 100 ms.
    pub catch_up_grace: Duration,
    /// A progress notification is applied only once the stream has been
    /// quiet this long, because the same etcd versions may send it ahead of
    /// events already queued for the watch.
    pub progress_settle: Duration,
    /// How much of each allocation the cache keeps.
    pub alloc_detail: AllocDetail,
}

impl Default for InformerConfig {
    fn default() -> Self {
        InformerConfig {
            // Keeps a page of ~2 KB allocs well under gRPC's 4 MiB message cap.
            page_size: 1000,
            retry_min: Duration::from_millis(50),
            retry_max: Duration::from_secs(5),
            progress_interval: Duration::from_millis(200),
            catch_up_grace: Duration::from_millis(300),
            progress_settle: Duration::from_millis(10),
            alloc_detail: AllocDetail::Full,
        }
    }
}

/// Counters of what the informer has been through.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InformerStats {
    /// Full lists after the first (each follows a compaction).
    pub relists: u64,
    /// Watches opened after the first: each one follows a lost watch.
    pub reconnects: u64,
    /// Watch batches applied, progress notifications included.
    pub batches: u64,
    /// Keys or values skipped because they did not parse or decode.
    pub decode_errors: u64,
}

#[derive(Default)]
struct Counters {
    relists: AtomicU64,
    reconnects: AtomicU64,
    batches: AtomicU64,
    decode_errors: AtomicU64,
}

/// What the informer's handle and its background task share.
struct Shared {
    keyspace: Keyspace,
    config: InformerConfig,
    tables: RwLock<Tables>,
    /// The running watch's progress handle, for waiters to poke.
    progress: Mutex<Option<Arc<dyn WatchProgress>>>,
    counters: Counters,
}

/// A typed watch cache of everything under one keyspace: stays in step with
/// the store in the background and hands out O(1) [`Snapshot`]s.
pub struct Informer {
    shared: Arc<Shared>,
    revision: watch::Receiver<Revision>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for Informer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Informer")
            .field("keyspace", &self.shared.keyspace)
            .field("revision", &*self.revision.borrow())
            .finish_non_exhaustive()
    }
}

impl Informer {
    /// Lists the keyspace and starts watching it. Returns once the first
    /// list is applied, so the first snapshot is already complete.
    pub async fn start(
        store: Arc<dyn Store>,
        keyspace: Keyspace,
        config: InformerConfig,
    ) -> Result<Informer> {
        let shared = Arc::new(Shared {
            keyspace,
            config,
            tables: RwLock::new(Tables::new()),
            progress: Mutex::new(None),
            counters: Counters::default(),
        });
        let revision = list(&*store, &shared).await?;
        let (tx, rx) = watch::channel(revision);
        let task = tokio::spawn(run(store, Arc::clone(&shared), tx));
        Ok(Informer {
            shared,
            revision: rx,
            task,
        })
    }

    /// The keyspace the cache follows.
    pub fn keyspace(&self) -> &Keyspace {
        &self.shared.keyspace
    }

    /// A consistent view of everything at the latest applied revision.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::new(self.shared.tables.read().clone())
    }

    /// The latest applied revision.
    pub fn revision(&self) -> Revision {
        *self.revision.borrow()
    }

    /// A receiver that changes whenever the cache applies a newer revision.
    pub fn subscribe(&self) -> watch::Receiver<Revision> {
        self.revision.clone()
    }

    /// What the informer has been through so far.
    pub fn stats(&self) -> InformerStats {
        let c = &self.shared.counters;
        InformerStats {
            relists: c.relists.load(Ordering::Relaxed),
            reconnects: c.reconnects.load(Ordering::Relaxed),
            batches: c.batches.load(Ordering::Relaxed),
            decode_errors: c.decode_errors.load(Ordering::Relaxed),
        }
    }

    /// Waits until the cache has applied `revision` (or later) and returns a
    /// snapshot at least that new. The revision may have been reached by
    /// writes outside the prefix, which no event announces, so while behind
    /// it the store is asked to confirm progress.
    pub async fn wait_for_revision(
        &self,
        revision: Revision,
        timeout: Duration,
    ) -> Result<Snapshot> {
        let deadline = Instant::now() + timeout;
        let mut rx = self.revision.clone();
        loop {
            let reached = *rx.borrow_and_update();
            if reached >= revision {
                return Ok(self.snapshot());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(StateError::Timeout {
                    wanted: revision,
                    reached,
                });
            }
            let step = (deadline - now).min(self.shared.config.progress_interval);
            self.request_progress(step).await;
            match tokio::time::timeout(step, rx.changed()).await {
                Ok(Ok(())) | Err(_) => {}
                Ok(Err(_)) => return Err(StateError::Closed),
            }
        }
    }

    async fn request_progress(&self, within: Duration) {
        let progress = self.shared.progress.lock().clone();
        let Some(progress) = progress else {
            // Between watches: the next one starts from the applied revision.
            return;
        };
        match tokio::time::timeout(within, progress.request_progress()).await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => tracing::debug!(%err, "progress request failed"),
            Err(_) => tracing::debug!("progress request timed out"),
        }
    }

    /// Stops the background task; snapshots already taken stay valid.
    pub async fn shutdown(mut self) {
        self.task.abort();
        // The task only ends by this abort; its result says nothing more.
        let _aborted = (&mut self.task).await;
    }
}

impl Drop for Informer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Keeps the tables in step until aborted.
async fn run(store: Arc<dyn Store>, shared: Arc<Shared>, tx: watch::Sender<Revision>) {
    let config = shared.config.clone();
    let root = shared.keyspace.root().to_vec();
    let mut backoff = Backoff::new(config.retry_min, config.retry_max);
    let mut relist = false;
    let mut opened_before = false;
    loop {
        if relist {
            match list(&*store, &shared).await {
                Ok(revision) => {
                    relist = false;
                    shared.counters.relists.fetch_add(1, Ordering::Relaxed);
                    publish(&tx, revision);
                }
                Err(err) => {
                    tracing::warn!(%err, "re-listing state failed; retrying");
                    tokio::time::sleep(backoff.next_delay()).await;
                    continue;
                }
            }
        }
        let from = shared.tables.read().revision() + 1;
        let mut watch = match store.watch(&root, from).await {
            Ok(watch) => watch,
            Err(err) if needs_relist(&err) => {
                tracing::info!(%err, "watch start is gone; re-listing");
                relist = true;
                continue;
            }
            Err(err) => {
                tracing::warn!(%err, from, "opening the state watch failed; retrying");
                tokio::time::sleep(backoff.next_delay()).await;
                continue;
            }
        };
        if opened_before {
            shared.counters.reconnects.fetch_add(1, Ordering::Relaxed);
        }
        opened_before = true;
        *shared.progress.lock() = Some(Arc::clone(&watch.progress));
        let opened_at = Instant::now();
        let mut pending_progress: Option<Revision> = None;
        loop {
            let item = match pending_progress {
                Some(progress) => {
                    match tokio::time::timeout(config.progress_settle, watch.stream.next()).await {
                        Ok(item) => item,
                        Err(_quiet) => {
                            pending_progress = None;
                            publish(&tx, advance(&shared, progress));
                            continue;
                        }
                    }
                }
                None => watch.stream.next().await,
            };
            match item {
                Some(Ok(batch)) if batch.events.is_empty() => {
                    shared.counters.batches.fetch_add(1, Ordering::Relaxed);
                    if opened_at.elapsed() >= config.catch_up_grace {
                        pending_progress = Some(pending_progress.unwrap_or(0).max(batch.revision));
                    }
                }
                Some(Ok(batch)) => {
                    backoff.reset();
                    let revision = apply_batch(&shared, batch);
                    publish(&tx, revision);
                }
                Some(Err(err)) if needs_relist(&err) => {
                    tracing::info!(%err, "state watch compacted; re-listing");
                    relist = true;
                    break;
                }
                Some(Err(err)) => {
                    tracing::warn!(%err, "state watch failed; reconnecting");
                    break;
                }
                None => {
                    tracing::warn!("state watch ended; reconnecting");
                    break;
                }
            }
        }
        *shared.progress.lock() = None;
        if !relist {
            tokio::time::sleep(backoff.next_delay()).await;
        }
    }
}

/// Errors after which watching can only resume from a fresh list: history
/// compacted, or a store whose revision went back (restored from backup).
fn needs_relist(err: &StoreError) -> bool {
    matches!(
        err,
        StoreError::Compacted { .. } | StoreError::FutureRevision { .. }
    )
}

fn publish(tx: &watch::Sender<Revision>, revision: Revision) {
    tx.send_if_modified(|seen| {
        let changed = *seen != revision;
        *seen = revision;
        changed
    });
}

/// Changes applied under one hold of the write lock before readers get a turn.
const LOCK_SLICE: usize = 64;

/// Records a progress notification: every change up to `revision` is applied.
fn advance(shared: &Shared, revision: Revision) -> Revision {
    let mut tables = shared.tables.write();
    tables.advance_to(revision);
    tables.revision()
}

/// Decodes a batch of events outside the lock, applies it under the lock,
/// and returns the revision the tables are at afterwards.
fn apply_batch(shared: &Shared, batch: WatchBatch) -> Revision {
    shared.counters.batches.fetch_add(1, Ordering::Relaxed);
    // A batch vouches only for its events: etcd may stamp a catch-up batch
    // with a later header revision than the events it carries.
    let mut revision = 0;
    let mut changes = Vec::with_capacity(batch.events.len());
    for event in &batch.events {
        revision = revision.max(event.kv.mod_revision);
        let key = match shared.keyspace.parse(&event.kv.key) {
            Ok(key) => key,
            Err(err) => {
                skipped(shared, &err);
                continue;
            }
        };
        match Change::from_event(&key, event.kind, &event.kv, shared.config.alloc_detail) {
            Ok(Some(change)) => changes.push((event.kv.mod_revision, change)),
            Ok(None) => {}
            Err(err) => {
                skipped(shared, &err);
                // The key holds no valid object any more: forget the old one
                // rather than serve it as current.
                changes.extend(Change::delete(&key).map(|c| (event.kv.mod_revision, c)));
            }
        }
    }
    let mut tables = shared.tables.write();
    let mut held = 0;
    let mut changes = changes.into_iter().peekable();
    while let Some((at, change)) = changes.next() {
        tables.apply(change);
        held += 1;
        // A catch-up batch can be thousands of events at a million allocs;
        // let snapshots in between revisions (never inside one, so every
        // snapshot stays consistent at the revision it reports).
        let revision_done = changes.peek().is_none_or(|(next, _)| *next != at);
        if revision_done && held >= LOCK_SLICE {
            tables.advance_to(at);
            parking_lot::RwLockWriteGuard::bump(&mut tables);
            held = 0;
        }
    }
    tables.advance_to(revision);
    tables.revision()
}

fn skipped(shared: &Shared, err: &StateError) {
    shared
        .counters
        .decode_errors
        .fetch_add(1, Ordering::Relaxed);
    tracing::warn!(%err, "skipping a state key");
}

/// Lists the whole keyspace at one revision, page by page, and brings the
/// tables to it: values whose revision the tables already hold are not
/// decoded again, and objects the list no longer has are deleted (with their
/// index entries and usage). Works on an O(1) copy so readers keep the old
/// tables until the new ones are complete. Returns the list's revision.
async fn list(store: &dyn Store, shared: &Shared) -> Result<Revision> {
    let mut next = shared.tables.read().clone();
    let check_vanished = !next.is_empty();
    let mut seen: HashSet<StateKey> = HashSet::new();
    let root = shared.keyspace.root();
    let end = prefix_end(root);
    let mut start = root.to_vec();
    let mut revision = 0;
    loop {
        let mut range =
            Range::between(start.clone(), end.clone()).with_limit(shared.config.page_size);
        if revision != 0 {
            range = range.at_revision(revision);
        }
        let page = store.range(range).await?;
        if revision == 0 {
            revision = page.revision;
        }
        for kv in &page.kvs {
            let key = match shared.keyspace.parse(&kv.key) {
                Ok(key) => key,
                Err(err) => {
                    skipped(shared, &err);
                    continue;
                }
            };
            if next.mod_revision_of(&key) != Some(kv.mod_revision) {
                match Change::put(&key, kv, shared.config.alloc_detail) {
                    Ok(change) => next.apply_all(change),
                    Err(err) => {
                        skipped(shared, &err);
                        next.apply_all(Change::delete(&key));
                        continue;
                    }
                }
            }
            if check_vanished {
                seen.insert(key);
            }
        }
        match page.kvs.last() {
            Some(last) if page.more => {
                start = last.key.clone();
                start.push(0);
            }
            _ => break,
        }
    }
    if check_vanished {
        for key in next.keys() {
            if !seen.contains(&key) {
                next.apply_all(Change::delete(&key));
            }
        }
    }
    // Set, not advanced: after a store restore the list is the truth even if
    // its revision is older than what was applied before.
    next.revision = revision;
    *shared.tables.write() = next;
    Ok(revision)
}

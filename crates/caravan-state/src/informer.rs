//! The watch cache's I/O: list the prefix at one revision, watch from the
//! next, re-list on compaction, reconnect on transient errors and on a watch
//! that lags the store, and let readers take snapshots and wait for
//! revisions meanwhile.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use caravan_store::{
    Backoff, Range, Revision, Store, StoreError, WatchBatch, WatchProgress, prefix_end,
    with_member_timeout,
};
use futures::StreamExt;
use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::change::Change;
use crate::codec::AllocDetail;
use crate::error::{Result, StateError};
use crate::keyspace::{Keyspace, Kind, StateKey};
use crate::list_page::PageSize;
use crate::metrics;
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
    /// How long a waiter behind the revision it wants waits for events
    /// before writing a progress mark (see [`Keyspace::progress_mark`]).
    pub progress_interval: Duration,
    /// After this long without a word from the watch, the informer asks the
    /// store for a progress notification, so [`Informer::last_contact`]
    /// stays truthful on a quiet store.
    pub quiet_probe: Duration,
    /// How long a revision the store is known to have reached may stay
    /// undelivered by a quiet watch (no event, no progress notification at
    /// or past it) before the watch is taken for stuck and opened again.
    /// An etcd member whose disk froze keeps its connections open and
    /// answers nothing through raft, so its watches go silent for as long
    /// as the disk stays frozen while the rest of the cluster carries on.
    pub stale_watch: Duration,
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
            progress_interval: Duration::from_millis(100),
            quiet_probe: Duration::from_secs(2),
            stale_watch: Duration::from_secs(4),
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
    /// Watches abandoned for lagging the store (see
    /// [`InformerConfig::stale_watch`]).
    pub stale_watches: u64,
    /// Watch batches applied, progress notifications included.
    pub batches: u64,
    /// Keys or values skipped because they did not parse or decode.
    pub decode_errors: u64,
}

#[derive(Default)]
struct Counters {
    relists: AtomicU64,
    reconnects: AtomicU64,
    stale_watches: AtomicU64,
    batches: AtomicU64,
    decode_errors: AtomicU64,
}

/// What the informer's handle and its background task share.
struct Shared {
    keyspace: Keyspace,
    config: InformerConfig,
    tables: RwLock<Tables>,
    /// When the store last answered: a list, a watch batch or a progress
    /// notification.
    heard: Mutex<Instant>,
    /// The revision of the latest progress mark written, so waiters share
    /// one mark instead of each writing their own.
    marked: AtomicI64,
    counters: Counters,
}

/// A typed watch cache of everything under one keyspace: stays in step with
/// the store in the background and hands out O(1) [`Snapshot`]s.
pub struct Informer {
    shared: Arc<Shared>,
    /// For progress marks.
    store: Arc<dyn Store>,
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
        let tables = Tables::with_detail(config.alloc_detail);
        let shared = Arc::new(Shared {
            keyspace,
            config,
            tables: RwLock::new(tables),
            heard: Mutex::new(Instant::now()),
            marked: AtomicI64::new(0),
            counters: Counters::default(),
        });
        let revision = first_list(&*store, &shared).await?;
        metrics::applied(shared.keyspace.prefix(), revision, revision);
        let (tx, rx) = watch::channel(revision);
        let task = tokio::spawn(run(Arc::clone(&store), Arc::clone(&shared), tx));
        Ok(Informer {
            shared,
            store,
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
            stale_watches: c.stale_watches.load(Ordering::Relaxed),
            batches: c.batches.load(Ordering::Relaxed),
            decode_errors: c.decode_errors.load(Ordering::Relaxed),
        }
    }

    /// How long ago the store last answered the cache: a list, a watch
    /// batch or a progress notification. A quiet watch is probed every
    /// [`InformerConfig::quiet_probe`], so on a healthy store this stays
    /// below about that interval.
    pub fn last_contact(&self) -> Duration {
        self.shared.heard.lock().elapsed()
    }

    /// Waits until the cache has applied `revision` (or later) and returns a
    /// snapshot at least that new.
    ///
    /// The revision may have been reached by writes outside the prefix,
    /// which no event announces. A progress notification cannot vouch for
    /// it: etcd before 3.4.25 / 3.5.8 may send one carrying revision R while
    /// events at or below R are still on their way to the watch (etcd issue
    /// 15220). Nor can a cheap read: a count does not see a key rewritten in
    /// between, and etcd filters a range by mod revision only after loading
    /// every value in it. So a waiter still behind after
    /// [`InformerConfig::progress_interval`] writes the keyspace's progress
    /// mark and waits for its event: a watch delivers its events in revision
    /// order on every etcd version, so once the mark's event is applied,
    /// every change before it is too.
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
            match tokio::time::timeout(step, rx.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(StateError::Closed),
                Err(_behind) => self.mark(revision, deadline).await,
            }
        }
    }

    /// Writes the progress mark unless one at `revision` or later is
    /// already on its way.
    async fn mark(&self, revision: Revision, deadline: Instant) {
        if self.shared.marked.load(Ordering::Acquire) >= revision {
            return;
        }
        let key = self.shared.keyspace.progress_mark();
        match tokio::time::timeout_at(deadline, self.store.put(&key, b"", 0)).await {
            Ok(Ok(at)) => {
                self.shared.marked.fetch_max(at, Ordering::AcqRel);
            }
            Ok(Err(err)) => tracing::debug!(%err, "writing the progress mark failed"),
            Err(_) => tracing::debug!("writing the progress mark timed out"),
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

/// The first list, tried again (logged, with growing pauses) while the
/// store is unreachable: a service starting during an etcd outage waits for
/// it rather than exiting.
async fn first_list(store: &dyn Store, shared: &Shared) -> Result<Revision> {
    let mut backoff = Backoff::new(shared.config.retry_min, shared.config.retry_max);
    let mut attempt = 1u32;
    loop {
        match list(store, shared).await {
            Err(StateError::Store(err @ StoreError::Unavailable(_))) => {
                let pause = backoff.next_delay();
                tracing::warn!(%err, attempt, retry_in = ?pause, "cannot list the state; trying again");
                tokio::time::sleep(pause).await;
                attempt = attempt.saturating_add(1);
            }
            done => return done,
        }
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
                    heard(&shared);
                    relist = false;
                    shared.counters.relists.fetch_add(1, Ordering::Relaxed);
                    metrics::event(shared.keyspace.prefix(), "relist");
                    metrics::applied(shared.keyspace.prefix(), revision, revision);
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
            metrics::event(shared.keyspace.prefix(), "reconnect");
        }
        opened_before = true;
        heard(&shared);
        let mut lag = Lag::new(from - 1);
        loop {
            let item = match tokio::time::timeout(config.quiet_probe, watch.stream.next()).await {
                Ok(item) => item,
                Err(_quiet) => {
                    // A silence the probe cannot break goes on the record
                    // (`last_contact`) rather than ending a watch that may
                    // just have nothing to say: a member that loses its
                    // leader cancels its watches itself. A member whose
                    // disk froze, or that hears its leader but is not heard
                    // (a one-way partition), does not, so a silence that
                    // outlasts a revision the store has reached ends the
                    // watch.
                    if lag.stuck(&*store, &config).await {
                        tracing::warn!(
                            delivered = lag.delivered,
                            "the state watch lags the store; opening it again"
                        );
                        // So that the watch opened next is not on the
                        // same member again.
                        watch.progress.abandon(&format!(
                            "nothing at revision {} or later within {:?}",
                            lag.behind.map_or(0, |(wanted, _)| wanted),
                            config.stale_watch
                        ));
                        shared
                            .counters
                            .stale_watches
                            .fetch_add(1, Ordering::Relaxed);
                        metrics::event(shared.keyspace.prefix(), "stale_watch");
                        break;
                    }
                    probe(&*watch.progress, config.quiet_probe).await;
                    continue;
                }
            };
            if let Some(Ok(batch)) = &item {
                lag.delivered(batch.revision);
            }
            match item {
                Some(Ok(batch)) if batch.events.is_empty() => {
                    // A progress notification: proof the store is there,
                    // but not of its revision (see `wait_for_revision`).
                    // Every event before it has arrived: no lag.
                    heard(&shared);
                    shared.counters.batches.fetch_add(1, Ordering::Relaxed);
                    let applied = shared.tables.read().revision();
                    metrics::applied(shared.keyspace.prefix(), applied, applied);
                }
                Some(Ok(batch)) => {
                    heard(&shared);
                    backoff.reset();
                    let store_revision = batch.revision;
                    let revision = apply_batch(&shared, batch);
                    metrics::applied(shared.keyspace.prefix(), revision, store_revision);
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
        if !relist {
            tokio::time::sleep(backoff.next_delay()).await;
        }
    }
}

/// How far one watch is known to lag the store: the newest revision it has
/// vouched for (by an event or a progress notification) against a revision
/// the store was read at while the watch was quiet.
struct Lag {
    delivered: Revision,
    /// A revision the store reached that the watch has not delivered yet,
    /// and since when that is known.
    behind: Option<(Revision, Instant)>,
}

impl Lag {
    fn new(delivered: Revision) -> Lag {
        Lag {
            delivered,
            behind: None,
        }
    }

    /// The watch delivered a batch at `revision`.
    fn delivered(&mut self, revision: Revision) {
        self.delivered = self.delivered.max(revision);
        if self
            .behind
            .is_some_and(|(wanted, _)| self.delivered >= wanted)
        {
            self.behind = None;
        }
    }

    /// Whether the watch has left a revision the store reached undelivered
    /// for [`InformerConfig::stale_watch`]. With no such revision pending,
    /// reads the store's current one (the progress probe that follows lets
    /// a healthy watch vouch for it); the member asked gets at most
    /// [`InformerConfig::quiet_probe`] to answer before the read moves to
    /// another, so a frozen member is left for one that answers and the
    /// watch opened again lands there.
    async fn stuck(&mut self, store: &dyn Store, config: &InformerConfig) -> bool {
        if let Some((_, since)) = self.behind {
            return since.elapsed() >= config.stale_watch;
        }
        let read = with_member_timeout(config.quiet_probe, store.current_revision());
        match tokio::time::timeout(config.stale_watch, read).await {
            Ok(Ok(revision)) if revision > self.delivered => {
                self.behind = Some((revision, Instant::now()));
            }
            Ok(Ok(_)) => {}
            Ok(Err(err)) => tracing::debug!(%err, "reading the store's revision failed"),
            Err(_) => tracing::debug!("reading the store's revision timed out"),
        }
        false
    }
}

/// Asks a quiet watch for a progress notification, bounded by `within`.
async fn probe(progress: &dyn WatchProgress, within: Duration) {
    match tokio::time::timeout(within, progress.request_progress()).await {
        Ok(Ok(())) => {}
        Ok(Err(err)) => tracing::debug!(%err, "progress request failed"),
        Err(_) => tracing::debug!("progress request timed out"),
    }
}

fn heard(shared: &Shared) {
    *shared.heard.lock() = Instant::now();
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

/// Decodes a batch of events outside the lock, applies it under the lock,
/// and returns the revision the tables are at afterwards.
fn apply_batch(shared: &Shared, batch: WatchBatch) -> Revision {
    shared.counters.batches.fetch_add(1, Ordering::Relaxed);
    // A batch vouches only for its events: etcd may stamp a catch-up batch
    // with a later header revision than the events it carries.
    let mut revision = 0;
    let mut changes = Vec::with_capacity(batch.events.len());
    let mut received = metrics::Received::default();
    for event in &batch.events {
        revision = revision.max(event.kv.mod_revision);
        let bytes = event.kv.key.len() + event.kv.value.len();
        if shared.keyspace.is_progress_mark(&event.kv.key) {
            received.add_progress(bytes);
            continue;
        }
        let key = match shared.keyspace.parse(&event.kv.key) {
            Ok(key) => key,
            Err(err) => {
                received.add(None, bytes);
                skipped(shared, &err);
                continue;
            }
        };
        received.add(Some(key.kind()), bytes);
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
    metrics::received(shared.keyspace.prefix(), &received);
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
    metrics::event(shared.keyspace.prefix(), "decode_error");
    tracing::warn!(%err, "skipping a state key");
}

/// Lists the cached kinds at one revision, page by page, and brings the
/// tables to it: values whose revision the tables already hold are not
/// decoded again, and objects the list no longer has are deleted (with their
/// index entries and usage). Works on an O(1) copy so readers keep the old
/// tables until the new ones are complete. Returns the list's revision.
async fn list(store: &dyn Store, shared: &Shared) -> Result<Revision> {
    let mut next = shared.tables.read().clone();
    let check_vanished = !next.is_empty();
    let mut seen: HashSet<StateKey> = HashSet::new();
    let mut revision = 0;
    let mut size = PageSize::new(shared.config.page_size);
    // Only what the tables hold: the keys of uncached kinds (plan marks,
    // sealed variables, election candidates) are never read on a list.
    for kind in Kind::ALL.into_iter().filter(|kind| kind.cached()) {
        let prefix = shared.keyspace.prefix_of(kind);
        let end = prefix_end(&prefix);
        let mut start = prefix;
        loop {
            let mut range = Range::between(start.clone(), end.clone()).with_limit(size.limit());
            if revision != 0 {
                range = range.at_revision(revision);
            }
            let page = match store.range(range).await {
                Ok(page) => page,
                // A reply over the client's limit: the same keys in smaller pages.
                Err(StoreError::InvalidArgument(msg)) if size.shrink() => {
                    tracing::warn!(%msg, limit = size.limit(), "list page too large; asking for fewer keys");
                    continue;
                }
                Err(err) => return Err(err.into()),
            };
            if revision == 0 {
                revision = page.revision;
            }
            size.after_page(
                page.kvs.len(),
                page.kvs
                    .iter()
                    .map(|kv| kv.key.len() + kv.value.len())
                    .sum(),
            );
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

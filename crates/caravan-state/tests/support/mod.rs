//! Helpers of the informer tests: a store that can cut its watches, and
//! builders of realistic objects.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, AllocatedPort, AllocatedResources,
    AllocatedSharedResources, AllocatedTaskResources, Allocation, Job, Node,
};
use caravan_state::{Keyspace, encode};
use caravan_store::{
    Range, RangeResult, Result, Revision, Store, StoreError, Watch, WatchBatch, WatchProgress,
};
use caravan_testkit::layered::{Layered, StoreLayer};
use futures::StreamExt;
use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};

/// A store a test can cut every watch of (as a network failure would) and
/// keep new ones from opening, silence the watches open (as a member whose
/// disk froze does), or slip a write in between list pages.
pub type FaultyStore = Layered<Faults>;

/// The controls of a [`FaultyStore`].
pub struct Faults {
    cut: watch::Sender<u64>,
    silenced: watch::Sender<u64>,
    refusing: AtomicBool,
    failing_ranges: AtomicUsize,
    write_after_first_page: Mutex<Option<(Vec<u8>, Vec<u8>)>>,
    /// Largest range reply answered, in key and value bytes (0: no limit),
    /// as a client's message size limit refuses larger ones.
    reply_cap: AtomicUsize,
}

/// `inner` with [`Faults`] a test controls.
pub fn faulty_store(inner: Arc<dyn Store>) -> Arc<FaultyStore> {
    Layered::wrap(
        inner,
        Faults {
            cut: watch::channel(0).0,
            silenced: watch::channel(0).0,
            refusing: AtomicBool::new(false),
            failing_ranges: AtomicUsize::new(0),
            write_after_first_page: Mutex::new(None),
            reply_cap: AtomicUsize::new(0),
        },
    )
}

impl Faults {
    /// Ends every open watch with `Unavailable` and refuses new ones.
    pub fn cut_watches(&self) {
        self.refusing.store(true, Ordering::SeqCst);
        self.cut.send_modify(|n| *n += 1);
    }

    /// Every watch open now stays open but delivers nothing more, neither
    /// events nor progress notifications, as the watches on an etcd member
    /// whose disk froze; watches opened later work.
    pub fn silence_watches(&self) {
        self.silenced.send_modify(|n| *n += 1);
    }

    /// Lets watches open again.
    pub fn restore_watches(&self) {
        self.refusing.store(false, Ordering::SeqCst);
    }

    /// Range replies over `bytes` fail as a client's message limit fails them.
    pub fn cap_replies(&self, bytes: usize) {
        self.reply_cap.store(bytes, Ordering::SeqCst);
    }

    /// The next `n` range reads fail with `Unavailable`, as when etcd is
    /// down.
    pub fn fail_next_ranges(&self, n: usize) {
        self.failing_ranges.store(n, Ordering::SeqCst);
    }

    /// How many of the failing range reads are still to come.
    pub fn ranges_to_fail(&self) -> usize {
        self.failing_ranges.load(Ordering::SeqCst)
    }

    /// The next range read writes `key` right after answering.
    pub fn write_after_next_range(&self, key: Vec<u8>, value: Vec<u8>) {
        *self.write_after_first_page.lock() = Some((key, value));
    }
}

#[async_trait]
impl StoreLayer for Faults {
    async fn range(&self, inner: &Arc<dyn Store>, range: Range) -> Result<RangeResult> {
        let failing = self
            .failing_ranges
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if failing.is_ok() {
            return Err(StoreError::Unavailable("etcd is down in this test".into()));
        }
        let page = inner.range(range).await?;
        let cap = self.reply_cap.load(Ordering::SeqCst);
        let bytes: usize = page
            .kvs
            .iter()
            .map(|kv| kv.key.len() + kv.value.len())
            .sum();
        if cap != 0 && bytes > cap {
            return Err(StoreError::InvalidArgument(format!(
                "decoded message length too large: found {bytes} bytes, the limit is: {cap} bytes"
            )));
        }
        let write = self.write_after_first_page.lock().take();
        if let Some((key, value)) = write {
            inner.put(&key, &value, 0).await?;
        }
        Ok(page)
    }
    async fn watch(
        &self,
        inner: &Arc<dyn Store>,
        prefix: &[u8],
        start_revision: Revision,
    ) -> Result<Watch> {
        // Subscribed before the check, so a cut landing while the watch
        // opens still ends it.
        let cut = self.cut.subscribe();
        let mut silenced = self.silenced.subscribe();
        silenced.mark_unchanged();
        if self.refusing.load(Ordering::SeqCst) {
            return Err(StoreError::Unavailable("watches cut by the test".into()));
        }
        let inner = inner.watch(prefix, start_revision).await?;
        let stream = futures::stream::unfold(
            (inner.stream, cut, silenced, false),
            |(mut stream, mut cut, mut silenced, done)| async move {
                if done {
                    return None;
                }
                // Biased: once cut or silenced, no further batch gets through.
                tokio::select! {
                    biased;
                    _ = cut.changed() => Some((
                        Err(StoreError::Unavailable("watch cut by the test".into())),
                        (stream, cut, silenced, true),
                    )),
                    _ = silenced.changed() => {
                        // Open, answering nothing, for good.
                        futures::future::pending::<()>().await;
                        None
                    }
                    item = stream.next() => item.map(|item| (item, (stream, cut, silenced, false))),
                }
            },
        );
        Ok(Watch {
            stream: Box::pin(stream),
            progress: inner.progress,
        })
    }
}

/// An allocation of `cpu` MHz and `mem` MB with one port.
pub fn alloc(id: &str, node: &str, job: &str, cpu: u32, mem: u32, port: u32) -> Allocation {
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
        disk_mb: 300,
        ..Default::default()
    });
    Allocation {
        id: id.into(),
        name: format!("{job}.main[0]"),
        namespace: "default".into(),
        job_id: job.into(),
        node_id: node.into(),
        desired_status: AllocDesiredStatus::Run as i32,
        client_status: AllocClientStatus::Running as i32,
        allocated_resources: Some(res),
        ..Default::default()
    }
}

pub fn node(id: &str) -> Node {
    Node {
        id: id.into(),
        name: format!("node-{id}"),
        datacenter: "dc1".into(),
        ..Default::default()
    }
}

pub fn job(ns: &str, id: &str, version: u64) -> Job {
    Job {
        id: id.into(),
        namespace: ns.into(),
        name: id.into(),
        version,
        ..Default::default()
    }
}

pub async fn put_alloc(store: &dyn Store, ks: &Keyspace, a: &Allocation) -> Revision {
    store.put(&ks.alloc(&a.id), &encode(a), 0).await.unwrap()
}

pub async fn delete_key(store: &dyn Store, key: Vec<u8>) -> Revision {
    store.delete(Range::key(key)).await.unwrap().revision
}

/// How far behind its progress notification [`EarlyProgressStore`] delivers
/// a batch of events.
pub const EVENTS_LATE_BY: Duration = Duration::from_millis(50);

/// Wraps a store so its watches behave as etcd before 3.4.25 / 3.5.8 may:
/// every batch of events is announced by a progress notification carrying
/// its revision, and the events themselves follow [`EVENTS_LATE_BY`] later;
/// a requested progress notification carries the store's current revision
/// at once, ahead of events still on their way.
pub type EarlyProgressStore = Layered<EarlyProgressLayer>;

/// The layer of an [`EarlyProgressStore`].
pub struct EarlyProgressLayer;

/// `inner` with its watches' progress running ahead of their events.
pub fn early_progress_store(inner: Arc<dyn Store>) -> Arc<EarlyProgressStore> {
    Layered::wrap(inner, EarlyProgressLayer)
}

struct EarlyProgress {
    store: Arc<dyn Store>,
    out: mpsc::UnboundedSender<Result<WatchBatch>>,
}

#[async_trait]
impl WatchProgress for EarlyProgress {
    async fn request_progress(&self) -> Result<()> {
        let revision = self.store.current_revision().await?;
        self.out
            .send(Ok(WatchBatch {
                revision,
                events: Vec::new(),
            }))
            .map_err(|_| StoreError::Closed("watch is gone".into()))
    }
}

#[async_trait]
impl StoreLayer for EarlyProgressLayer {
    async fn watch(
        &self,
        inner: &Arc<dyn Store>,
        prefix: &[u8],
        start_revision: Revision,
    ) -> Result<Watch> {
        let mut upstream = inner.watch(prefix, start_revision).await?;
        let (out, batches) = mpsc::unbounded_channel();
        let forward = out.clone();
        tokio::spawn(async move {
            while let Some(item) = upstream.stream.next().await {
                if let Ok(batch) = &item
                    && !batch.events.is_empty()
                {
                    let early = WatchBatch {
                        revision: batch.revision,
                        events: Vec::new(),
                    };
                    if forward.send(Ok(early)).is_err() {
                        return;
                    }
                    tokio::time::sleep(EVENTS_LATE_BY).await;
                }
                if forward.send(item).is_err() {
                    return;
                }
            }
        });
        let stream = futures::stream::unfold(batches, |mut batches| async move {
            batches.recv().await.map(|item| (item, batches))
        });
        Ok(Watch {
            stream: Box::pin(stream),
            progress: Arc::new(EarlyProgress {
                store: Arc::clone(inner),
                out,
            }),
        })
    }
}

/// A store whose first watch is opened on a member that stands still: it
/// delivers nothing and answers progress requests with nothing, as an etcd
/// member that still hears its leader but is not heard. Later watches are
/// the store's own.
pub type StaleMemberStore = Layered<StaleMember>;

/// The controls of a [`StaleMemberStore`].
pub struct StaleMember {
    opened: AtomicUsize,
}

impl StaleMember {
    /// How many watches were opened.
    pub fn watches_opened(&self) -> usize {
        self.opened.load(Ordering::SeqCst)
    }
}

/// `inner` whose first watch stands still.
pub fn stale_member_store(inner: Arc<dyn Store>) -> Arc<StaleMemberStore> {
    Layered::wrap(
        inner,
        StaleMember {
            opened: AtomicUsize::new(0),
        },
    )
}

/// Progress requests a stale member takes and never answers.
struct Unanswered;

#[async_trait]
impl WatchProgress for Unanswered {
    async fn request_progress(&self) -> Result<()> {
        Ok(())
    }
}

#[async_trait]
impl StoreLayer for StaleMember {
    async fn watch(
        &self,
        inner: &Arc<dyn Store>,
        prefix: &[u8],
        start_revision: Revision,
    ) -> Result<Watch> {
        if self.opened.fetch_add(1, Ordering::SeqCst) == 0 {
            return Ok(Watch {
                stream: Box::pin(futures::stream::pending()),
                progress: Arc::new(Unanswered),
            });
        }
        inner.watch(prefix, start_revision).await
    }
}

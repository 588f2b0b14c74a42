//! Helpers of the informer tests: a store that can cut its watches, and
//! builders of realistic objects.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use caravan_proto::{
    AllocClientStatus, AllocDesiredStatus, AllocatedPort, AllocatedResources,
    AllocatedSharedResources, AllocatedTaskResources, Allocation, Job, Node,
};
use caravan_state::{Keyspace, encode};
use caravan_store::{
    DeleteResult, LeaderInfo, LeaderKey, Lease, LeaseId, Range, RangeResult, Result, Revision,
    Store, StoreError, Txn, TxnResult, Watch,
};
use futures::StreamExt;
use parking_lot::Mutex;
use tokio::sync::watch;

/// Wraps a store so a test can cut every watch (as a network failure would)
/// and keep new ones from opening, or slip a write in between list pages.
pub struct FaultyStore {
    inner: Arc<dyn Store>,
    cut: watch::Sender<u64>,
    refusing: AtomicBool,
    write_after_first_page: Mutex<Option<(Vec<u8>, Vec<u8>)>>,
}

impl FaultyStore {
    pub fn new(inner: Arc<dyn Store>) -> Arc<Self> {
        Arc::new(FaultyStore {
            inner,
            cut: watch::channel(0).0,
            refusing: AtomicBool::new(false),
            write_after_first_page: Mutex::new(None),
        })
    }

    /// Ends every open watch with `Unavailable` and refuses new ones.
    pub fn cut_watches(&self) {
        self.refusing.store(true, Ordering::SeqCst);
        self.cut.send_modify(|n| *n += 1);
    }

    /// Lets watches open again.
    pub fn restore_watches(&self) {
        self.refusing.store(false, Ordering::SeqCst);
    }

    /// The next range read writes `key` right after answering.
    pub fn write_after_next_range(&self, key: Vec<u8>, value: Vec<u8>) {
        *self.write_after_first_page.lock() = Some((key, value));
    }
}

#[async_trait]
impl Store for FaultyStore {
    async fn range(&self, range: Range) -> Result<RangeResult> {
        let page = self.inner.range(range).await?;
        let write = self.write_after_first_page.lock().take();
        if let Some((key, value)) = write {
            self.inner.put(&key, &value, 0).await?;
        }
        Ok(page)
    }
    async fn put(&self, key: &[u8], value: &[u8], lease: LeaseId) -> Result<Revision> {
        self.inner.put(key, value, lease).await
    }
    async fn delete(&self, range: Range) -> Result<DeleteResult> {
        self.inner.delete(range).await
    }
    async fn txn(&self, txn: Txn) -> Result<TxnResult> {
        self.inner.txn(txn).await
    }
    async fn current_revision(&self) -> Result<Revision> {
        self.inner.current_revision().await
    }
    async fn watch(&self, prefix: &[u8], start_revision: Revision) -> Result<Watch> {
        // Subscribed before the check, so a cut landing while the watch
        // opens still ends it.
        let cut = self.cut.subscribe();
        if self.refusing.load(Ordering::SeqCst) {
            return Err(StoreError::Unavailable("watches cut by the test".into()));
        }
        let inner = self.inner.watch(prefix, start_revision).await?;
        let stream = futures::stream::unfold(
            (inner.stream, cut, false),
            |(mut stream, mut cut, done)| async move {
                if done {
                    return None;
                }
                // Biased: once cut, no further batch gets through.
                tokio::select! {
                    biased;
                    _ = cut.changed() => Some((
                        Err(StoreError::Unavailable("watch cut by the test".into())),
                        (stream, cut, true),
                    )),
                    item = stream.next() => item.map(|item| (item, (stream, cut, false))),
                }
            },
        );
        Ok(Watch {
            stream: Box::pin(stream),
            progress: inner.progress,
        })
    }
    async fn compact(&self, revision: Revision) -> Result<()> {
        self.inner.compact(revision).await
    }
    async fn lease_grant(&self, ttl_secs: i64) -> Result<Lease> {
        self.inner.lease_grant(ttl_secs).await
    }
    async fn lease_keep_alive(&self, lease: LeaseId) -> Result<i64> {
        self.inner.lease_keep_alive(lease).await
    }
    async fn lease_revoke(&self, lease: LeaseId) -> Result<()> {
        self.inner.lease_revoke(lease).await
    }
    async fn lease_time_to_live(&self, lease: LeaseId) -> Result<Option<i64>> {
        self.inner.lease_time_to_live(lease).await
    }
    async fn campaign(&self, name: &[u8], value: &[u8], lease: LeaseId) -> Result<LeaderKey> {
        self.inner.campaign(name, value, lease).await
    }
    async fn leader(&self, name: &[u8]) -> Result<Option<LeaderInfo>> {
        self.inner.leader(name).await
    }
    async fn resign(&self, leader: &LeaderKey) -> Result<()> {
        self.inner.resign(leader).await
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

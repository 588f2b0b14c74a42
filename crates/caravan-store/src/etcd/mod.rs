//! The etcd backend of the [`Store`] trait, over `etcd-client`: KV and
//! transactions, watches, leases, and etcd's own election service, so
//! candidate keys have the `<name>/<lease hex>` form every tool expects.

mod convert;
mod keepalive;
mod watch;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use etcd_client as ec;

use crate::error::{Result, StoreError};
use crate::store::{Store, Watch};
use crate::types::{
    DeleteResult, LeaderInfo, LeaderKey, Lease, LeaseId, Range, RangeResult, Revision, Txn,
    TxnResult,
};

use self::convert::Context;
use self::keepalive::KeepAlives;

/// How to reach etcd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdConfig {
    /// Client URLs, e.g. `http://127.0.0.1:2379`.
    pub endpoints: Vec<String>,
    /// How long connecting (and the first request proving it) may take.
    pub connect_timeout: Duration,
    /// How long one request may wait for an answer. Campaigns and open
    /// watches are not bounded by it.
    pub request_timeout: Duration,
    /// Largest answer accepted, so large ranges and watch catch-ups fit.
    pub max_message_bytes: usize,
    /// Interval of HTTP/2 pings that detect a dead connection under open
    /// watches and campaigns.
    pub keep_alive_interval: Duration,
}

impl EtcdConfig {
    /// Defaults for `endpoints`.
    pub fn new<S: AsRef<str>>(endpoints: &[S]) -> Self {
        EtcdConfig {
            endpoints: endpoints.iter().map(|e| e.as_ref().to_string()).collect(),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            max_message_bytes: 512 * 1024 * 1024,
            keep_alive_interval: Duration::from_secs(10),
        }
    }
}

/// The store on etcd. Clones share one connection.
///
/// etcd before 3.4.24 may send a requested progress notification ahead of
/// events already on their way to the watcher (etcd issue 15220); later
/// versions order them.
#[derive(Clone)]
pub struct EtcdStore {
    kv: ec::KvClient,
    watch: ec::WatchClient,
    lease: ec::LeaseClient,
    election: ec::ElectionClient,
    keepalives: Arc<KeepAlives>,
    request_timeout: Duration,
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore").finish_non_exhaustive()
    }
}

impl EtcdStore {
    /// Connects with default settings to `endpoints`.
    pub async fn connect<S: AsRef<str>>(endpoints: &[S]) -> Result<Self> {
        EtcdStore::connect_with(EtcdConfig::new(endpoints)).await
    }

    /// Connects, and proves the connection with one request so a wrong
    /// endpoint fails here rather than on first use.
    pub async fn connect_with(config: EtcdConfig) -> Result<Self> {
        if config.endpoints.is_empty() {
            return Err(StoreError::InvalidArgument("no etcd endpoints".into()));
        }
        let options = ec::ConnectOptions::new()
            .with_connect_timeout(config.connect_timeout)
            .with_keep_alive(config.keep_alive_interval, config.request_timeout);
        let connecting = async {
            let client = ec::Client::connect(&config.endpoints, Some(options))
                .await
                .map_err(|err| convert::error(err, Context::default()))?;
            client
                .maintenance_client()
                .status()
                .await
                .map_err(|err| convert::error(err, Context::default()))?;
            Ok::<_, StoreError>(client)
        };
        let client = tokio::time::timeout(config.connect_timeout, connecting)
            .await
            .map_err(|_| {
                StoreError::Unavailable(format!(
                    "no answer from etcd at {} within {:?}",
                    config.endpoints.join(","),
                    config.connect_timeout
                ))
            })??;
        Ok(EtcdStore {
            kv: client
                .kv_client()
                .max_decoding_message_size(config.max_message_bytes),
            watch: client
                .watch_client()
                .max_decoding_message_size(config.max_message_bytes),
            lease: client.lease_client(),
            election: client.election_client(),
            keepalives: Arc::new(KeepAlives::default()),
            request_timeout: config.request_timeout,
        })
    }

    /// Awaits one request, bounded by the request timeout. A request that
    /// may hang forever (the client waits for a reachable endpoint) must
    /// fail with `Unavailable` instead.
    async fn call<T>(
        &self,
        ctx: Context,
        request: impl Future<Output = std::result::Result<T, ec::Error>>,
    ) -> Result<T> {
        match tokio::time::timeout(self.request_timeout, request).await {
            Ok(answer) => answer.map_err(|err| convert::error(err, ctx)),
            Err(_) => Err(StoreError::Unavailable(format!(
                "etcd did not answer within {:?}",
                self.request_timeout
            ))),
        }
    }

    /// Fills in the current revision etcd leaves out of a future-revision
    /// error, best effort.
    async fn with_current(&self, err: StoreError) -> StoreError {
        match err {
            StoreError::FutureRevision { requested, .. } => StoreError::FutureRevision {
                requested,
                current: self.current_revision().await.unwrap_or(0),
            },
            other => other,
        }
    }
}

#[async_trait]
impl Store for EtcdStore {
    async fn range(&self, range: Range) -> Result<RangeResult> {
        let mut kv = self.kv.clone();
        let options = convert::get_options(&range);
        let ctx = Context::revision(range.revision);
        match self
            .call(ctx, kv.get(range.start.clone(), Some(options)))
            .await
        {
            Ok(resp) => Ok(convert::range_result(&resp, range.keys_only)),
            Err(err) => Err(self.with_current(err).await),
        }
    }

    async fn put(&self, key: &[u8], value: &[u8], lease: LeaseId) -> Result<Revision> {
        let mut kv = self.kv.clone();
        let options = (lease != 0).then(|| ec::PutOptions::new().with_lease(lease));
        let resp = self
            .call(Context::lease(lease), kv.put(key, value, options))
            .await?;
        Ok(resp.header().map_or(0, |h| h.revision()))
    }

    async fn delete(&self, range: Range) -> Result<DeleteResult> {
        let mut kv = self.kv.clone();
        let options = convert::delete_options(&range);
        let resp = self
            .call(
                Context::default(),
                kv.delete(range.start.clone(), Some(options)),
            )
            .await?;
        Ok(DeleteResult {
            deleted: resp.deleted(),
            revision: resp.header().map_or(0, |h| h.revision()),
        })
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResult> {
        let mut kv = self.kv.clone();
        // A put on a missing lease is the one lease error a txn can hit.
        let lease = txn
            .success
            .iter()
            .chain(&txn.failure)
            .find_map(|op| match op {
                crate::types::Op::Put { lease, .. } if *lease != 0 => Some(*lease),
                _ => None,
            })
            .unwrap_or(0);
        let resp = match self
            .call(Context::lease(lease), kv.txn(convert::txn(&txn)))
            .await
        {
            Ok(resp) => resp,
            Err(err) => return Err(self.with_current(err).await),
        };
        let revision = resp.header().map_or(0, |h| h.revision());
        let succeeded = resp.succeeded();
        let ops = if succeeded {
            &txn.success
        } else {
            &txn.failure
        };
        Ok(TxnResult {
            succeeded,
            revision,
            results: convert::op_results(&resp, ops, revision)?,
        })
    }

    async fn current_revision(&self) -> Result<Revision> {
        let mut kv = self.kv.clone();
        // Any key will do: the header carries the store's revision.
        let options = ec::GetOptions::new().with_count_only();
        let resp = self
            .call(Context::default(), kv.get(vec![0], Some(options)))
            .await?;
        Ok(resp.header().map_or(0, |h| h.revision()))
    }

    async fn watch(&self, prefix: &[u8], start_revision: Revision) -> Result<Watch> {
        watch::open(
            &self.watch,
            prefix,
            start_revision.max(0),
            self.request_timeout,
        )
        .await
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        let mut kv = self.kv.clone();
        match self
            .call(Context::revision(revision), kv.compact(revision, None))
            .await
        {
            Ok(_) => Ok(()),
            Err(err) => Err(self.with_current(err).await),
        }
    }

    async fn lease_grant(&self, ttl_secs: i64) -> Result<Lease> {
        let mut lease = self.lease.clone();
        let resp = self
            .call(Context::default(), lease.grant(ttl_secs, None))
            .await?;
        Ok(Lease {
            id: resp.id(),
            ttl_secs: resp.ttl(),
        })
    }

    async fn lease_keep_alive(&self, lease: LeaseId) -> Result<i64> {
        self.keepalives
            .renew(&self.lease, lease, self.request_timeout)
            .await
    }

    async fn lease_revoke(&self, lease: LeaseId) -> Result<()> {
        self.keepalives.forget(lease);
        let mut client = self.lease.clone();
        self.call(Context::lease(lease), client.revoke(lease))
            .await
            .map(|_| ())
    }

    async fn lease_time_to_live(&self, lease: LeaseId) -> Result<Option<i64>> {
        let mut client = self.lease.clone();
        match self
            .call(Context::lease(lease), client.time_to_live(lease, None))
            .await
        {
            // etcd answers -1 for a lease it does not know.
            Ok(resp) if resp.ttl() >= 0 => Ok(Some(resp.ttl())),
            Ok(_) | Err(StoreError::LeaseNotFound(_)) => Ok(None),
            Err(err) => Err(err),
        }
    }

    async fn campaign(&self, name: &[u8], value: &[u8], lease: LeaseId) -> Result<LeaderKey> {
        let mut election = self.election.clone();
        // Not bounded by the request timeout: a campaign waits for the
        // candidates ahead of it, which may take as long as their leases.
        let resp = election
            .campaign(name, value, lease)
            .await
            .map_err(|err| convert::error(err, Context::lease(lease)))?;
        let leader = resp.leader().ok_or_else(|| {
            StoreError::Internal("etcd's campaign answer has no leader key".into())
        })?;
        Ok(LeaderKey {
            name: leader.name().to_vec(),
            key: leader.key().to_vec(),
            create_revision: leader.rev(),
            lease: leader.lease(),
        })
    }

    async fn leader(&self, name: &[u8]) -> Result<Option<LeaderInfo>> {
        let mut election = self.election.clone();
        match self.call(Context::default(), election.leader(name)).await {
            Ok(resp) => Ok(resp.kv().map(|kv| LeaderInfo {
                key: kv.key().to_vec(),
                value: kv.value().to_vec(),
                create_revision: kv.create_revision(),
                lease: kv.lease(),
            })),
            // etcd's election service reports an empty election as an error.
            Err(StoreError::Internal(msg)) if msg.contains("election: no leader") => Ok(None),
            Err(err) => Err(err),
        }
    }

    async fn resign(&self, leader: &LeaderKey) -> Result<()> {
        let mut election = self.election.clone();
        let key = ec::LeaderKey::new()
            .with_name(leader.name.clone())
            .with_key(leader.key.clone())
            .with_rev(leader.create_revision)
            .with_lease(leader.lease);
        let options = ec::ResignOptions::new().with_leader(key);
        match self
            .call(Context::lease(leader.lease), election.resign(Some(options)))
            .await
        {
            // The key went with its lease: nothing left to resign.
            Ok(_) | Err(StoreError::LeaseNotFound(_)) => Ok(()),
            Err(err) => Err(err),
        }
    }
}

//! The etcd backend of the [`Store`] trait, over `etcd-client`: KV and
//! transactions, watches, leases, and etcd's own election service, so
//! candidate keys have the `<name>/<lease hex>` form every tool expects.

mod convert;
mod keepalive;
mod members;
mod tls;
mod watch;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use async_trait::async_trait;
use etcd_client as ec;

use crate::backoff::Backoff;
use crate::error::{Result, StoreError};
use crate::store::{Store, Watch};
use crate::types::{
    DeleteResult, LeaderInfo, LeaderKey, Lease, LeaseId, Range, RangeResult, Revision, StoreAlarm,
    StoreMember, Txn, TxnResult,
};

use self::convert::Context;
use self::keepalive::KeepAlives;
use self::members::Members;

pub use self::tls::{EtcdClientCert, EtcdTls};

/// How to reach etcd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdConfig {
    /// Client URLs, e.g. `http://127.0.0.1:2379`; all `https://` when
    /// [`tls`](Self::tls) is set, none otherwise.
    pub endpoints: Vec<String>,
    /// TLS to every member, for `https://` endpoints.
    pub tls: Option<EtcdTls>,
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
            tls: None,
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            max_message_bytes: 512 * 1024 * 1024,
            keep_alive_interval: Duration::from_secs(10),
        }
    }
}

/// The pause after a round of failed attempts on every member, doubling.
const ROUND_PAUSE_MIN: Duration = Duration::from_millis(50);
/// The longest pause between rounds.
const ROUND_PAUSE_MAX: Duration = Duration::from_secs(1);

/// Whether a request that failed on one member may be sent to the next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Retry {
    /// Reads and renewals: sending them twice changes nothing.
    Always,
    /// Writes: only if the failed attempt never reached etcd, since one
    /// whose outcome is unknown may have been applied.
    IfUnsent,
}

/// The store on etcd. Clones share one set of connections.
///
/// etcd before 3.4.24 may send a requested progress notification ahead of
/// events already on their way to the watcher (etcd issue 15220); later
/// versions order them.
///
/// Every request goes to one pinned member; a member that fails (down, or
/// without a leader: requests carry etcd's `require_leader`) is left for
/// the next, so with a quorum up requests reach a live member.
#[derive(Clone)]
pub struct EtcdStore {
    members: Arc<Members>,
    keepalives: Arc<KeepAlives>,
    request_timeout: Duration,
    max_message_bytes: usize,
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
    /// endpoint fails here rather than on first use: some member must
    /// answer within the connect timeout.
    pub async fn connect_with(config: EtcdConfig) -> Result<Self> {
        if config.endpoints.is_empty() {
            return Err(StoreError::InvalidArgument("no etcd endpoints".into()));
        }
        tls::check_endpoints(&config.endpoints, config.tls.as_ref())?;
        if let Some(tls) = &config.tls {
            tls.check()?;
        }
        // `require_leader`: a member cut off from its cluster refuses
        // requests and cancels watches instead of serving them stale or
        // keeping them silent forever.
        let options = ec::ConnectOptions::new()
            .with_connect_timeout(config.connect_timeout)
            .with_keep_alive(config.keep_alive_interval, config.request_timeout)
            .with_require_leader(true);
        let store = EtcdStore {
            members: Arc::new(Members::new(&config.endpoints, options, config.tls.clone())),
            keepalives: Arc::new(KeepAlives::default()),
            request_timeout: config.connect_timeout,
            max_message_bytes: config.max_message_bytes,
        };
        store
            .call(
                "status",
                Context::default(),
                Retry::Always,
                |client| async move { client.maintenance_client().status().await },
            )
            .await
            .map_err(|err| {
                StoreError::Unavailable(format!(
                    "no answer from etcd at {}: {err}{}",
                    store.members.endpoints(),
                    tls::refusal_hint(config.tls.as_ref(), &err)
                ))
            })?;
        Ok(EtcdStore {
            request_timeout: config.request_timeout,
            ..store
        })
    }

    /// Sends one etcd-client request to the pinned member; see
    /// [`attempt`](Self::attempt).
    async fn call<T, F, Fut>(
        &self,
        op: &'static str,
        ctx: Context,
        retry: Retry,
        request: F,
    ) -> Result<T>
    where
        F: Fn(ec::Client) -> Fut,
        Fut: Future<Output = std::result::Result<T, ec::Error>>,
    {
        self.attempt(op, retry, |_, client| {
            let answer = request(client);
            async move {
                answer.await.map_err(|err| {
                    let unsent = convert::unsent(&err);
                    (convert::error(err, ctx), unsent)
                })
            }
        })
        .await
    }

    /// Runs `request` against the pinned member until it answers, within
    /// the request timeout (a request may otherwise wait forever for a
    /// reachable endpoint). A member failing with `Unavailable` is left for
    /// the next and, as `retry` allows, the request sent there; after a
    /// round of every member the next round waits a little, so an election
    /// (no member has a leader for a second or two) is waited out. A
    /// failure carries whether the request surely never reached etcd.
    async fn attempt<T, F, Fut>(&self, op: &'static str, retry: Retry, request: F) -> Result<T>
    where
        F: Fn(usize, ec::Client) -> Fut,
        Fut: Future<Output = std::result::Result<T, (StoreError, bool)>>,
    {
        let timer = crate::metrics::request_timer(op);
        let answer = self.attempt_members(retry, request).await;
        timer.finish(answer.as_ref().err());
        answer
    }

    /// [`attempt`](Self::attempt), untimed.
    async fn attempt_members<T, F, Fut>(&self, retry: Retry, request: F) -> Result<T>
    where
        F: Fn(usize, ec::Client) -> Fut,
        Fut: Future<Output = std::result::Result<T, (StoreError, bool)>>,
    {
        // Each member gets the whole request timeout (or the caller's
        // shorter one, see `member_timeout`): a member that hangs (frozen,
        // or cut off mid-connection) must not use up the time of the
        // members after it. All of them together bound the request.
        let members = u32::try_from(self.members.len()).unwrap_or(u32::MAX);
        let deadline = Instant::now() + self.request_timeout.saturating_mul(members);
        let mut pauses = Backoff::new(ROUND_PAUSE_MIN, ROUND_PAUSE_MAX);
        let mut tried = 0;
        loop {
            let per_member = self.member_timeout(tried);
            let attempt_deadline = deadline.min(Instant::now() + per_member);
            let index = self.members.pinned_index();
            let answer = tokio::time::timeout_at(attempt_deadline, async {
                match self.members.client(index).await {
                    // Nothing was sent to a member never connected to.
                    Err(err) => Err((err, true)),
                    Ok(client) => request(index, client).await,
                }
            })
            .await;
            let (err, unsent) = match answer {
                Ok(Ok(answer)) => return Ok(answer),
                Ok(Err(failure)) => failure,
                Err(_) => (
                    StoreError::Unavailable(format!(
                        "etcd at {} did not answer within {per_member:?}",
                        self.members.endpoint(index)
                    )),
                    false,
                ),
            };
            if !matches!(err, StoreError::Unavailable(_)) {
                return Err(err);
            }
            self.members.failed(index, &err);
            if retry == Retry::IfUnsent && !unsent {
                return Err(err);
            }
            tried += 1;
            if tried % self.members.len() == 0 {
                let pause = pauses.next_delay();
                if Instant::now() + pause >= deadline {
                    return Err(err);
                }
                tokio::time::sleep(pause).await;
            }
        }
    }

    /// How long one member may take to answer the attempt after `tried`
    /// failed ones: the request timeout, or within `with_member_timeout`
    /// the caller's shorter time, doubled after each round of every member
    /// (members that are all slow, not silent, still answer in time). With
    /// one member there is nobody to move on to, so it gets the whole time.
    fn member_timeout(&self, tried: usize) -> Duration {
        let members = self.members.len();
        match crate::patience::member_timeout() {
            Some(asked) if members > 1 => {
                let round = u32::try_from(tried / members).unwrap_or(u32::MAX).min(16);
                asked.saturating_mul(1 << round).min(self.request_timeout)
            }
            _ => self.request_timeout,
        }
    }

    fn kv(&self, client: &ec::Client) -> ec::KvClient {
        client
            .kv_client()
            .max_decoding_message_size(self.max_message_bytes)
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
        let options = convert::get_options(&range);
        let ctx = Context::revision(range.revision);
        let answer = self
            .call("range", ctx, Retry::Always, |client| {
                let (mut kv, key, options) =
                    (self.kv(&client), range.start.clone(), options.clone());
                async move { kv.get(key, Some(options)).await }
            })
            .await;
        match answer {
            Ok(resp) => Ok(convert::range_result(&resp, range.keys_only)),
            Err(err) => Err(self.with_current(err).await),
        }
    }

    async fn put(&self, key: &[u8], value: &[u8], lease: LeaseId) -> Result<Revision> {
        let options = (lease != 0).then(|| ec::PutOptions::new().with_lease(lease));
        let resp = self
            .call("put", Context::lease(lease), Retry::IfUnsent, |client| {
                let (mut kv, options) = (self.kv(&client), options.clone());
                async move { kv.put(key, value, options).await }
            })
            .await?;
        Ok(resp.header().map_or(0, |h| h.revision()))
    }

    async fn delete(&self, range: Range) -> Result<DeleteResult> {
        let options = convert::delete_options(&range);
        let resp = self
            .call("delete", Context::default(), Retry::IfUnsent, |client| {
                let (mut kv, key, options) =
                    (self.kv(&client), range.start.clone(), options.clone());
                async move { kv.delete(key, Some(options)).await }
            })
            .await?;
        Ok(DeleteResult {
            deleted: resp.deleted(),
            revision: resp.header().map_or(0, |h| h.revision()),
        })
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResult> {
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
        let request = convert::txn(&txn);
        let answer = self
            .call("txn", Context::lease(lease), Retry::IfUnsent, |client| {
                let (mut kv, request) = (self.kv(&client), request.clone());
                async move { kv.txn(request).await }
            })
            .await;
        let resp = match answer {
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
        // Any key will do: the header carries the store's revision.
        let resp = self
            .call(
                "current_revision",
                Context::default(),
                Retry::Always,
                |client| {
                    let mut kv = self.kv(&client);
                    async move {
                        kv.get(vec![0], Some(ec::GetOptions::new().with_count_only()))
                            .await
                    }
                },
            )
            .await?;
        Ok(resp.header().map_or(0, |h| h.revision()))
    }

    async fn watch(&self, prefix: &[u8], start_revision: Revision) -> Result<Watch> {
        self.attempt("watch", Retry::Always, |index, client| {
            let watcher = client
                .watch_client()
                .max_decoding_message_size(self.max_message_bytes);
            let members = Arc::clone(&self.members);
            let lost = move |err: &StoreError| members.failed(index, err);
            async move {
                watch::open(
                    &watcher,
                    prefix,
                    start_revision.max(0),
                    self.request_timeout,
                    lost,
                )
                .await
                .map_err(|err| (err, false))
            }
        })
        .await
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        let answer = self
            .call(
                "compact",
                Context::revision(revision),
                Retry::IfUnsent,
                |client| {
                    let mut kv = self.kv(&client);
                    async move { kv.compact(revision, None).await }
                },
            )
            .await;
        match answer {
            Ok(_) => Ok(()),
            Err(err) => Err(self.with_current(err).await),
        }
    }

    async fn lease_grant(&self, ttl_secs: i64) -> Result<Lease> {
        // Sent again to the next member even if the first may have granted
        // it: a lease nobody holds and no key uses just runs out its TTL.
        let resp = self
            .call(
                "lease_grant",
                Context::default(),
                Retry::Always,
                |client| async move { client.lease_client().grant(ttl_secs, None).await },
            )
            .await?;
        Ok(Lease {
            id: resp.id(),
            ttl_secs: resp.ttl(),
        })
    }

    async fn lease_keep_alive(&self, lease: LeaseId) -> Result<i64> {
        // The attempt's own timeout (see `attempt`) may cut a renewal
        // shorter than this.
        self.attempt(
            "lease_keep_alive",
            Retry::Always,
            |index, client| async move {
                self.keepalives
                    .renew(&client.lease_client(), index, lease, self.request_timeout)
                    .await
                    .map_err(|err| (err, false))
            },
        )
        .await
    }

    async fn lease_revoke(&self, lease: LeaseId) -> Result<()> {
        self.keepalives.forget(lease);
        self.call(
            "lease_revoke",
            Context::lease(lease),
            Retry::IfUnsent,
            |client| async move { client.lease_client().revoke(lease).await },
        )
        .await
        .map(|_| ())
    }

    async fn lease_time_to_live(&self, lease: LeaseId) -> Result<Option<i64>> {
        match self
            .call(
                "lease_time_to_live",
                Context::lease(lease),
                Retry::Always,
                |client| async move { client.lease_client().time_to_live(lease, None).await },
            )
            .await
        {
            // etcd answers -1 for a lease it does not know.
            Ok(resp) if resp.ttl() >= 0 => Ok(Some(resp.ttl())),
            Ok(_) | Err(StoreError::LeaseNotFound(_)) => Ok(None),
            Err(err) => Err(err),
        }
    }

    async fn campaign(&self, name: &[u8], value: &[u8], lease: LeaseId) -> Result<LeaderKey> {
        // Not bounded by the request timeout: a campaign waits for the
        // candidates ahead of it, which may take as long as their leases.
        // A campaign that never reached etcd is sent to the next member.
        let mut attempts = self.members.len();
        let resp = loop {
            let index = self.members.pinned_index();
            let client = match self.members.client(index).await {
                Ok(client) => client,
                Err(err) => {
                    if let StoreError::Unavailable(_) = err {
                        self.members.failed(index, &err);
                    }
                    attempts -= 1;
                    if attempts == 0 {
                        return Err(err);
                    }
                    continue;
                }
            };
            match client.election_client().campaign(name, value, lease).await {
                Ok(resp) => break resp,
                Err(err) => {
                    let unsent = convert::unsent(&err);
                    let err = convert::error(err, Context::lease(lease));
                    // etcd waits for the candidates ahead by watching from
                    // a revision; a compaction meanwhile ends the wait. The
                    // candidate key stays, and campaigning again on the
                    // same lease picks it up and waits anew.
                    if let StoreError::Compacted { .. } = err {
                        continue;
                    }
                    if let StoreError::Unavailable(_) = err {
                        self.members.failed(index, &err);
                    }
                    attempts -= 1;
                    if !unsent || attempts == 0 {
                        return Err(err);
                    }
                }
            }
        };
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
        match self
            .call(
                "leader",
                Context::default(),
                Retry::Always,
                |client| async move { client.election_client().leader(name).await },
            )
            .await
        {
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
        let key = ec::LeaderKey::new()
            .with_name(leader.name.clone())
            .with_key(leader.key.clone())
            .with_rev(leader.create_revision)
            .with_lease(leader.lease);
        let options = ec::ResignOptions::new().with_leader(key);
        match self
            .call(
                "resign",
                Context::lease(leader.lease),
                Retry::IfUnsent,
                |client| {
                    let options = options.clone();
                    async move { client.election_client().resign(Some(options)).await }
                },
            )
            .await
        {
            // The key went with its lease: nothing left to resign.
            Ok(_) | Err(StoreError::LeaseNotFound(_)) => Ok(()),
            Err(err) => Err(err),
        }
    }

    fn failovers(&self) -> u64 {
        self.members.failovers()
    }

    fn with_own_connections(&self) -> Option<Arc<dyn Store>> {
        Some(Arc::new(EtcdStore {
            members: Arc::new(self.members.sibling()),
            keepalives: Arc::new(KeepAlives::default()),
            request_timeout: self.request_timeout,
            max_message_bytes: self.max_message_bytes,
        }))
    }

    async fn members(&self) -> Result<Vec<StoreMember>> {
        // Both answers come from the pinned member: its member list, and its
        // status naming the raft leader it follows (0 while there is none).
        let (list, status) = self
            .call(
                "members",
                Context::default(),
                Retry::Always,
                |client| async move {
                    let list = client.cluster_client().member_list().await?;
                    let status = client.maintenance_client().status().await?;
                    Ok((list, status))
                },
            )
            .await?;
        let mut members: Vec<StoreMember> = list
            .members()
            .iter()
            .map(|m| StoreMember {
                id: m.id(),
                name: m.name().to_string(),
                peer_urls: m.peer_urls().to_vec(),
                client_urls: m.client_urls().to_vec(),
                leader: m.id() == status.leader(),
                learner: m.is_learner(),
            })
            .collect();
        members.sort_by_key(|m| m.id);
        Ok(members)
    }

    async fn alarms(&self) -> Result<Vec<StoreAlarm>> {
        let answer = self
            .call("alarms", Context::default(), Retry::Always, |client| {
                let mut maintenance = client.maintenance_client();
                async move {
                    maintenance
                        .alarm(ec::AlarmAction::Get, ec::AlarmType::None, None)
                        .await
                }
            })
            .await?;
        Ok(answer
            .alarms()
            .iter()
            .map(|a| StoreAlarm {
                member_id: a.member_id(),
                kind: a.alarm().as_str_name().to_string(),
            })
            .collect())
    }
}

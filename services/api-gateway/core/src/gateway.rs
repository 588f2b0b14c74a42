//! The gateway's shared context: the store it writes to, the watch cache it
//! reads from, and the settings every domain operation needs.

use std::sync::Arc;
use std::time::Duration;

use caravan_runtime::leader::LeaderChannel;
use caravan_runtime::names::{DEPLOYMENT_WATCHER, EVAL_BROKER};
use caravan_state::{Informer, Keyspace, StateObject, decode};
use caravan_store::{
    Committer, Compare, CompareOp, GroupCommit, GroupLimits, Op, Revision, Store, StoreError, Txn,
};
use tokio_util::sync::CancellationToken;

use crate::config::GatewayConfig;
use crate::error::{GatewayError, Result};

/// How long a write waits for the cache to show it before answering, so a
/// client reading through the same gateway sees its own write.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(2);

/// How recently the cache must have heard from etcd for the gateway to
/// claim a known leader: the cache probes a quiet watch every 2 s, and etcd
/// (asked to require a leader) answers only while it has one.
const LEADER_CONTACT_FRESH: Duration = Duration::from_secs(5);

/// What Nomad's `KnownLeader` and `LastContact` report, from this gateway's
/// view of the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaderContact {
    /// The store answered recently: it has a leader and this gateway
    /// reaches it.
    pub known: bool,
    /// Milliseconds since the store last answered this gateway's cache.
    pub last_contact_ms: u64,
}

/// Everything the domain operations share. Cheap to clone.
#[derive(Clone)]
pub struct Gateway {
    /// The store every write goes to.
    pub store: Arc<dyn Store>,
    /// The keyspace of this cluster's prefix.
    pub keys: Keyspace,
    /// The watch cache every read answers from.
    pub cache: Arc<Informer>,
    /// The gateway's settings.
    pub config: Arc<GatewayConfig>,
    /// Cancelled when the process shuts down.
    pub shutdown: CancellationToken,
    /// The deployment-watcher's leader, for promotions and pauses.
    pub watcher: LeaderChannel,
    /// The eval-broker's leader, for its queues' stats and scheduler calls.
    pub broker: LeaderChannel,
    /// Where job registrations commit, grouped.
    pub job_writes: GroupCommit<StoreError>,
    /// The thread and connection `job_writes` runs on, when it has its own:
    /// held here so it lives as long as the gateway.
    _job_writes_lane: Option<crate::lane::Lane>,
    /// The key variables are sealed with; `None` when none is configured.
    pub variables_key: Option<Arc<crate::vars::seal::VariableKey>>,
    /// The ACL entries, when ACLs are enabled.
    pub acl: Option<Arc<crate::acl::AclCache>>,
    /// The workload identity signing keys, loaded on first use.
    pub keyring: Arc<tokio::sync::OnceCell<Arc<crate::identity::keyring::Keyring>>>,
    /// The store's alarms as last listed, for the health check.
    pub alarms: Arc<crate::store_health::Alarms>,
    /// The blocking queries waiting for a change.
    pub waiting: Arc<crate::waiting::Waiting>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("keys", &self.keys)
            .field("revision", &self.cache.revision())
            .finish_non_exhaustive()
    }
}

/// The group committer of job registrations, over `store`, its tasks on the
/// current runtime (`Gateway::new` enters the lane's first, when there is one).
fn start_job_writes(
    store: Arc<dyn Store>,
    config: &GatewayConfig,
    shutdown: CancellationToken,
) -> GroupCommit<StoreError> {
    let commit: Committer<StoreError> = Arc::new(move |txn| {
        let store = store.clone();
        Box::pin(async move { store.txn(txn).await })
    });
    let limits = GroupLimits {
        max_ops: config.max_txn_ops,
        // What etcd takes by default (1.5 MiB) bounds the group.
        max_bytes: 1536 * 1024,
    };
    let gone = || StoreError::Unavailable("the api-gateway is shutting down".into());
    GroupCommit::start("job_writes", commit, limits, shutdown, gone).0
}

impl Gateway {
    /// A gateway over `store`, reading through `cache` (which must follow the
    /// same keyspace as `config.store.prefix`). Job registrations commit on
    /// `job_writes_lane` (its thread and store connection, see
    /// [`crate::lane`]) when given, else on the caller's runtime and `store`.
    /// Must be called inside a tokio runtime: it starts the tasks that group
    /// job writes, list the store's alarms and follow the ACL entries.
    pub fn new(
        store: Arc<dyn Store>,
        cache: Arc<Informer>,
        config: GatewayConfig,
        shutdown: CancellationToken,
        job_writes_lane: Option<crate::lane::Lane>,
    ) -> Self {
        let keys = cache.keyspace().clone();
        let watcher = LeaderChannel::new(store.clone(), keys.prefix(), DEPLOYMENT_WATCHER);
        let broker = LeaderChannel::new(store.clone(), keys.prefix(), EVAL_BROKER);
        let job_writes = match &job_writes_lane {
            Some(lane) => {
                let _on_lane = lane.handle().enter();
                start_job_writes(Arc::clone(lane.store()), &config, shutdown.clone())
            }
            None => start_job_writes(Arc::clone(&store), &config, shutdown.clone()),
        };
        let acl = config.acl.enabled.then(|| {
            let acl = crate::acl::AclCache::new();
            tokio::spawn(
                acl.clone()
                    .run(store.clone(), keys.clone(), shutdown.clone()),
            );
            acl
        });
        let alarms = Arc::<crate::store_health::Alarms>::default();
        crate::store_health::watch(store.clone(), alarms.clone(), shutdown.clone());
        Gateway {
            acl,
            store,
            keys,
            cache,
            config: Arc::new(config),
            shutdown,
            watcher,
            broker,
            job_writes,
            _job_writes_lane: job_writes_lane,
            variables_key: None,
            keyring: Arc::default(),
            alarms,
            waiting: Arc::default(),
        }
    }

    /// The gateway with `key` sealing its variables.
    pub fn with_variables_key(mut self, key: Option<crate::vars::seal::VariableKey>) -> Self {
        self.variables_key = key.map(Arc::new);
        self
    }

    /// The watch cache.
    pub fn cache(&self) -> &Informer {
        &self.cache
    }

    /// The keyspace.
    pub fn keys(&self) -> &Keyspace {
        &self.keys
    }

    /// Reads one allocation straight from the store (not the cache), folded
    /// from its record and status keys, whole: for answers that show it and
    /// writes that compare its revisions.
    pub async fn read_alloc(&self, alloc_id: &str) -> Result<Option<caravan_proto::Allocation>> {
        Ok(caravan_state::read_alloc(self.store.as_ref(), &self.keys, alloc_id).await?)
    }

    /// Reads one object straight from the store (not the cache), for writes
    /// that compare its mod revision.
    pub async fn read<T: StateObject>(&self, key: &[u8]) -> Result<Option<T>> {
        read_from(self.store.as_ref(), key).await
    }

    /// Deletes `key` only if it is still at `mod_revision` (as read), then
    /// settles the cache on the delete; a key rewritten meanwhile is a
    /// conflict naming `what`, for the caller to look at again.
    pub async fn delete_unchanged(
        &self,
        key: Vec<u8>,
        mod_revision: Revision,
        what: &str,
    ) -> Result<Revision> {
        let res = self
            .store
            .txn(
                Txn::new()
                    .when(Compare::mod_revision(
                        key.clone(),
                        CompareOp::Equal,
                        mod_revision,
                    ))
                    .and_then(Op::delete(key)),
            )
            .await?;
        if !res.succeeded {
            return Err(GatewayError::Conflict(format!(
                "{what} changed while it was being deleted; try again"
            )));
        }
        self.settle(res.revision).await;
        Ok(res.revision)
    }

    /// How fresh this gateway's view of the store is.
    pub fn leader_contact(&self) -> LeaderContact {
        let last = self.cache.last_contact();
        LeaderContact {
            known: last < LEADER_CONTACT_FRESH,
            last_contact_ms: u64::try_from(last.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// The store's part of the gateway's health: `Ok` or why not (no
    /// leader, or an alarm raised).
    pub async fn store_health(&self) -> std::result::Result<(), String> {
        let contact = self.leader_contact();
        if !contact.known {
            return Err(format!(
                "no leader: the store has not answered for {} ms",
                contact.last_contact_ms
            ));
        }
        crate::store_health::check_alarms(&self.alarms, self.store.as_ref()).await
    }

    /// Waits (briefly, best effort) until the cache has applied `revision`,
    /// so the writer's next read through this gateway sees its write.
    pub async fn settle(&self, revision: Revision) {
        if let Err(err) = self.cache.wait_for_revision(revision, SETTLE_TIMEOUT).await {
            tracing::debug!(%err, revision, "cache has not caught up with a write yet");
        }
    }

    /// How many times a compare-and-swap write is tried.
    pub fn attempts(&self) -> u32 {
        self.config.write_attempts.max(1)
    }
}

/// Reads one object straight from `store` (the gateway's, or a lane's
/// connection), for writes that compare its mod revision.
pub async fn read_from<T: StateObject>(store: &dyn Store, key: &[u8]) -> Result<Option<T>> {
    match store.get(key).await? {
        Some(kv) => Ok(Some(decode::<T>(&kv)?)),
        None => Ok(None),
    }
}

//! ACL policies and tokens in the store, under `<prefix>/acl/`:
//! `policy/<name>` and `token/<accessor>` (JSON; a token keeps only the
//! SHA-256 of its secret) and `bootstrap`, the mark that the one bootstrap
//! happened. Writes are transactions fenced like the variables': created
//! only if absent, updated only if unchanged since read, deleted only if
//! present.
//!
//! Every request resolves its token, so the gateway keeps all ACL entries
//! in an [`AclCache`]: listed once, then kept current by a watch of the
//! `acl/` prefix (listed again if the watch breaks). A write waits until
//! the cache shows it, so the next request through the same gateway sees it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use caravan_state::Keyspace;
use caravan_store::{
    Compare, CompareOp, EventKind, KeyValue, Op, Range, Revision, Store, Txn, prefix_end,
};
use futures::StreamExt;
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::check::Acl;
use super::policy::{self, Policy};
use crate::cas;
use crate::error::{GatewayError, Result};

/// `Type` of a token that may do anything.
pub const MANAGEMENT: &str = "management";
/// `Type` of a token limited to its policies.
pub const CLIENT: &str = "client";
/// The policy that applies to requests without a token.
pub const ANONYMOUS_POLICY: &str = "anonymous";

/// How long a write waits for the cache to show it.
const SETTLE: Duration = Duration::from_secs(2);

/// A stored policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredPolicy {
    /// Unique name.
    pub name: String,
    /// Free text.
    #[serde(default)]
    pub description: String,
    /// The rules as written (HCL or JSON).
    pub rules: String,
}

/// A stored token: the secret only as its SHA-256.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredToken {
    /// Public id.
    pub accessor_id: String,
    /// Hex SHA-256 of the secret.
    pub secret_hash: String,
    /// Free text.
    #[serde(default)]
    pub name: String,
    /// `client` or `management`.
    pub token_type: String,
    /// Policy names (a client token's).
    #[serde(default)]
    pub policies: Vec<String>,
    /// Replicated to every region (Caravan runs one).
    #[serde(default)]
    pub global: bool,
    /// Creation time, Unix nanoseconds.
    pub create_time: i64,
}

/// A policy with its parsed rules and store revisions.
#[derive(Debug, Clone)]
pub struct PolicyEntry {
    /// As stored.
    pub stored: StoredPolicy,
    /// The rules parsed and expanded.
    pub parsed: Arc<Policy>,
    /// Revision of the first write.
    pub create_index: Revision,
    /// Revision of the last write.
    pub modify_index: Revision,
}

/// A token with its store revisions.
#[derive(Debug, Clone)]
pub struct TokenEntry {
    /// As stored.
    pub stored: StoredToken,
    /// Revision of the first write.
    pub create_index: Revision,
    /// Revision of the last write.
    pub modify_index: Revision,
}

/// Hex SHA-256 of a secret, the form it is stored and looked up in.
pub fn hash_secret(secret: &str) -> String {
    let digest = Sha256::digest(secret.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every ACL entry, as of one revision.
#[derive(Debug, Default)]
struct Entries {
    policies: BTreeMap<String, Arc<PolicyEntry>>,
    tokens: BTreeMap<String, Arc<TokenEntry>>,
    by_secret: HashMap<String, String>,
    bootstrap: Option<Revision>,
    /// What each token (by accessor) may do, compiled once per change of
    /// the entries rather than on every request.
    compiled: HashMap<String, Arc<Acl>>,
    /// What a request without a token may do (the `anonymous` policy).
    anonymous: Arc<Acl>,
}

impl Entries {
    /// Compiles every token's policies (and the anonymous one) again: after
    /// a list or a batch of changes, which are rare next to requests.
    fn recompile(&mut self) {
        self.anonymous = Arc::new(Acl::compile(
            self.policies
                .get(ANONYMOUS_POLICY)
                .map(|p| p.parsed.as_ref()),
        ));
        self.compiled = self
            .tokens
            .iter()
            .map(|(accessor, token)| {
                let acl = if token.stored.token_type == MANAGEMENT {
                    Acl::management()
                } else {
                    Acl::compile(
                        token
                            .stored
                            .policies
                            .iter()
                            .filter_map(|name| self.policies.get(name))
                            .map(|p| p.parsed.as_ref()),
                    )
                };
                (accessor.clone(), Arc::new(acl))
            })
            .collect();
    }

    fn apply_put(&mut self, entry: &str, kv: &KeyValue) {
        if entry == "bootstrap" {
            self.bootstrap = Some(kv.mod_revision);
        } else if let Some(name) = entry.strip_prefix("policy/") {
            let stored: StoredPolicy = match serde_json::from_slice(&kv.value) {
                Ok(p) => p,
                Err(err) => {
                    tracing::warn!(%err, name, "skipping an ACL policy that does not decode");
                    return;
                }
            };
            // Rules were checked when written; rules a newer gateway wrote
            // that this one cannot read grant nothing here.
            let parsed = policy::parse(&stored.rules).unwrap_or_default();
            self.policies.insert(
                name.to_string(),
                Arc::new(PolicyEntry {
                    stored,
                    parsed: Arc::new(parsed),
                    create_index: kv.create_revision,
                    modify_index: kv.mod_revision,
                }),
            );
        } else if let Some(accessor) = entry.strip_prefix("token/") {
            let stored: StoredToken = match serde_json::from_slice(&kv.value) {
                Ok(t) => t,
                Err(err) => {
                    tracing::warn!(%err, accessor, "skipping an ACL token that does not decode");
                    return;
                }
            };
            self.remove_token(accessor);
            self.by_secret
                .insert(stored.secret_hash.clone(), accessor.to_string());
            self.tokens.insert(
                accessor.to_string(),
                Arc::new(TokenEntry {
                    stored,
                    create_index: kv.create_revision,
                    modify_index: kv.mod_revision,
                }),
            );
        }
    }

    fn remove_token(&mut self, accessor: &str) {
        if let Some(old) = self.tokens.remove(accessor) {
            self.by_secret.remove(&old.stored.secret_hash);
        }
    }

    fn apply_delete(&mut self, entry: &str) {
        if entry == "bootstrap" {
            self.bootstrap = None;
        } else if let Some(name) = entry.strip_prefix("policy/") {
            self.policies.remove(name);
        } else if let Some(accessor) = entry.strip_prefix("token/") {
            self.remove_token(accessor);
        }
    }
}

/// The gateway's copy of every ACL entry, kept current by a watch.
#[derive(Debug)]
pub struct AclCache {
    entries: RwLock<Entries>,
    revision: tokio::sync::watch::Sender<Revision>,
}

/// Who a request is, once its token is resolved.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The token presented; `None` for an anonymous request.
    pub token: Option<Arc<TokenEntry>>,
    /// The secret presented (echoed by `/v1/acl/token/self`).
    pub secret: Option<String>,
    /// What the caller may do.
    pub acl: Arc<Acl>,
}

impl Caller {
    /// Whether the caller holds a management token.
    pub fn is_management(&self) -> bool {
        self.acl.is_management()
    }

    /// Whether the caller's token holds the policy `name`.
    pub fn holds_policy(&self, name: &str) -> bool {
        self.token
            .as_ref()
            .is_some_and(|t| t.stored.policies.iter().any(|p| p == name))
    }

    /// Whether the caller's token is the one with `accessor`.
    pub fn owns(&self, accessor: &str) -> bool {
        self.token
            .as_ref()
            .is_some_and(|t| t.stored.accessor_id == accessor)
    }

    /// Whether the caller may read the policy `name`: management, or a
    /// token holding it.
    pub fn may_read_policy(&self, name: &str) -> bool {
        self.is_management() || self.holds_policy(name)
    }
}

/// Why a token does not resolve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolveError {
    /// No token has this secret.
    NotFound,
    /// A workload identity that is not (or no longer) valid: why.
    Workload(String),
    /// The identity keyring could not be read: why.
    Unavailable(String),
}

impl ResolveError {
    /// What the caller is told.
    pub fn message(&self) -> String {
        match self {
            ResolveError::NotFound => "ACL token not found".into(),
            ResolveError::Workload(why) | ResolveError::Unavailable(why) => why.clone(),
        }
    }
}

impl AclCache {
    /// An empty cache; [`AclCache::run`] fills it.
    pub fn new() -> Arc<AclCache> {
        Arc::new(AclCache {
            entries: RwLock::new(Entries::default()),
            // -1 until the first list is in.
            revision: tokio::sync::watch::channel(-1).0,
        })
    }

    /// Lists the `acl/` prefix, then follows it with a watch until
    /// `shutdown`; a broken watch lists again.
    pub async fn run(
        self: Arc<Self>,
        store: Arc<dyn Store>,
        keys: Keyspace,
        shutdown: CancellationToken,
    ) {
        let prefix = keys.acl("");
        loop {
            if shutdown.is_cancelled() {
                return;
            }
            if let Err(err) = self.follow(&store, &keys, &prefix, &shutdown).await {
                tracing::warn!(%err, "ACL cache lost its watch; listing again");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                    _ = shutdown.cancelled() => return,
                }
            }
        }
    }

    async fn follow(
        &self,
        store: &Arc<dyn Store>,
        keys: &Keyspace,
        prefix: &[u8],
        shutdown: &CancellationToken,
    ) -> Result<()> {
        let listed = store
            .range(Range::between(prefix.to_vec(), prefix_end(prefix)))
            .await?;
        let mut fresh = Entries::default();
        for kv in &listed.kvs {
            if let Some(entry) = entry_of(keys, &kv.key) {
                fresh.apply_put(&entry, kv);
            }
        }
        fresh.recompile();
        *self.entries.write() = fresh;
        self.advance(listed.revision.max(0));
        let mut watch = store.watch(prefix, listed.revision + 1).await?;
        loop {
            let batch = tokio::select! {
                batch = watch.stream.next() => batch,
                _ = shutdown.cancelled() => return Ok(()),
            };
            let batch = match batch {
                Some(batch) => batch?,
                None => return Err(GatewayError::Unavailable("the ACL watch ended".into())),
            };
            let mut last = 0;
            {
                let mut entries = self.entries.write();
                for event in &batch.events {
                    last = last.max(event.kv.mod_revision);
                    let Some(entry) = entry_of(keys, &event.kv.key) else {
                        continue;
                    };
                    match event.kind {
                        EventKind::Put => entries.apply_put(&entry, &event.kv),
                        EventKind::Delete => entries.apply_delete(&entry),
                    }
                }
                entries.recompile();
            }
            self.advance(last);
        }
    }

    fn advance(&self, revision: Revision) {
        self.revision.send_if_modified(|current| {
            if revision > *current {
                *current = revision;
                true
            } else {
                false
            }
        });
    }

    /// Waits (briefly) until the cache holds `revision`.
    pub async fn settle(&self, revision: Revision) {
        let mut rx = self.revision.subscribe();
        let reached = tokio::time::timeout(SETTLE, rx.wait_for(|r| *r >= revision)).await;
        if reached.is_err() {
            tracing::debug!(revision, "ACL cache has not caught up with a write yet");
        }
    }

    /// Waits (briefly) until the first list is in (a request right after
    /// start); false if it still is not.
    pub async fn ready(&self) -> bool {
        let mut rx = self.revision.subscribe();
        tokio::time::timeout(SETTLE, rx.wait_for(|r| *r >= 0))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// The cache's revision (0 before the first list).
    pub fn revision(&self) -> Revision {
        (*self.revision.borrow()).max(0)
    }

    /// Resolves a request's secret (none: anonymous) to what it may do.
    pub fn resolve(&self, secret: Option<&str>) -> std::result::Result<Caller, ResolveError> {
        let entries = self.entries.read();
        let Some(secret) = secret else {
            return Ok(Caller {
                token: None,
                secret: None,
                acl: Arc::clone(&entries.anonymous),
            });
        };
        let accessor = entries
            .by_secret
            .get(&hash_secret(secret))
            .ok_or(ResolveError::NotFound)?;
        let (Some(token), Some(acl)) =
            (entries.tokens.get(accessor), entries.compiled.get(accessor))
        else {
            return Err(ResolveError::NotFound);
        };
        let (token, acl) = (Arc::clone(token), Arc::clone(acl));
        Ok(Caller {
            token: Some(token),
            secret: Some(secret.to_string()),
            acl,
        })
    }

    /// Every policy, by name.
    pub fn policies(&self) -> Vec<Arc<PolicyEntry>> {
        self.entries.read().policies.values().cloned().collect()
    }

    /// One policy.
    pub fn policy(&self, name: &str) -> Option<Arc<PolicyEntry>> {
        self.entries.read().policies.get(name).cloned()
    }

    /// Every token, by accessor.
    pub fn tokens(&self) -> Vec<Arc<TokenEntry>> {
        self.entries.read().tokens.values().cloned().collect()
    }

    /// One token.
    pub fn token(&self, accessor: &str) -> Option<Arc<TokenEntry>> {
        self.entries.read().tokens.get(accessor).cloned()
    }
}

fn entry_of(keys: &Keyspace, key: &[u8]) -> Option<String> {
    match keys.parse(key) {
        Ok(caravan_state::StateKey::Acl(entry)) => Some(entry),
        _ => None,
    }
}

/// Nomad's `ValidPolicyName`.
pub fn check_policy_name(name: &str) -> Result<()> {
    if name.is_empty()
        || name.len() > 128
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return Err(GatewayError::field(
            "Name",
            format!("invalid name '{name}': 1 to 128 letters, digits and '-'"),
        ));
    }
    Ok(())
}

/// Longest policy description, as Nomad's.
const MAX_DESCRIPTION: usize = 256;
/// Longest token name, as Nomad's.
const MAX_TOKEN_NAME: usize = 256;

/// Creates or replaces a policy after parsing its rules (a parse error is
/// a 400 naming the problem). Returns the write's revision.
pub async fn upsert_policy(
    store: &dyn Store,
    keys: &Keyspace,
    cache: &AclCache,
    stored: StoredPolicy,
) -> Result<Revision> {
    check_policy_name(&stored.name)?;
    if stored.description.len() > MAX_DESCRIPTION {
        return Err(GatewayError::field(
            "Description",
            format!("description longer than {MAX_DESCRIPTION}"),
        ));
    }
    policy::parse(&stored.rules)
        .map_err(|e| GatewayError::field("Rules", format!("failed to parse rules: {e}")))?;
    let key = keys.acl(&format!("policy/{}", stored.name));
    let value = encode(&stored)?;
    let revision = store.put(&key, &value, 0).await?;
    cache.settle(revision).await;
    Ok(revision)
}

/// Deletes policies; naming one that does not exist is an error, as
/// Nomad's. Returns the write's revision.
pub async fn delete_policy(
    store: &dyn Store,
    keys: &Keyspace,
    cache: &AclCache,
    name: &str,
) -> Result<Revision> {
    delete_existing(
        store,
        cache,
        keys.acl(&format!("policy/{name}")),
        format!("Cannot delete nonexistent policies: {name}"),
    )
    .await
}

/// Deletes `key` if it exists (else `missing`, as Nomad words it), and
/// waits until the cache has seen the delete.
async fn delete_existing(
    store: &dyn Store,
    cache: &AclCache,
    key: Vec<u8>,
    missing: String,
) -> Result<Revision> {
    let result = store
        .txn(
            Txn::new()
                .when(Compare::mod_revision(key.clone(), CompareOp::Greater, 0))
                .and_then(Op::delete(key)),
        )
        .await?;
    if !result.succeeded {
        return Err(GatewayError::FailedPrecondition(missing));
    }
    cache.settle(result.revision).await;
    Ok(result.revision)
}

/// A token to create or update, as a request gives it.
#[derive(Debug, Clone, Default)]
pub struct TokenRequest {
    /// The accessor of the token to update; empty to create one.
    pub accessor_id: String,
    /// Free text.
    pub name: String,
    /// `client` or `management`.
    pub token_type: String,
    /// Policy names; policies need not exist yet (as in Nomad).
    pub policies: Vec<String>,
    /// Replicated to every region.
    pub global: bool,
}

/// A token written, with the secret when it was just made.
#[derive(Debug, Clone)]
pub struct TokenWritten {
    /// The token.
    pub token: TokenEntry,
    /// The secret, only on creation.
    pub secret: Option<String>,
}

fn validate_token(req: &TokenRequest) -> Result<()> {
    if req.name.len() > MAX_TOKEN_NAME {
        return Err(GatewayError::field("Name", "token name too long"));
    }
    match req.token_type.as_str() {
        CLIENT if req.policies.is_empty() => Err(GatewayError::field(
            "Policies",
            "client token missing policies or roles",
        )),
        MANAGEMENT if !req.policies.is_empty() => Err(GatewayError::field(
            "Policies",
            "management token cannot be associated with policies or roles",
        )),
        CLIENT | MANAGEMENT => Ok(()),
        _ => Err(GatewayError::field(
            "Type",
            "token type must be client or management",
        )),
    }
}

/// Encodes a stored entry; the types here always encode.
fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(|e| {
        GatewayError::Upstream(tonic::Status::internal(format!(
            "encoding an ACL entry: {e}"
        )))
    })
}

/// Creates a token (a fresh accessor and secret), or updates the one named
/// by `req.accessor_id` (its secret, type' fixedness and create time kept),
/// fenced on the revision read.
pub async fn upsert_token(
    store: &dyn Store,
    keys: &Keyspace,
    cache: &AclCache,
    attempts: u32,
    req: TokenRequest,
) -> Result<TokenWritten> {
    validate_token(&req)?;
    if req.accessor_id.is_empty() {
        let secret = uuid::Uuid::new_v4().to_string();
        let stored = StoredToken {
            accessor_id: uuid::Uuid::new_v4().to_string(),
            secret_hash: hash_secret(&secret),
            name: req.name,
            token_type: req.token_type,
            policies: req.policies,
            global: req.global,
            create_time: caravan_model::now_unix_ns(),
        };
        let key = keys.acl(&format!("token/{}", stored.accessor_id));
        let result = store
            .txn(
                Txn::new()
                    .when(Compare::absent(key.clone()))
                    .and_then(Op::put(key, encode(&stored)?)),
            )
            .await?;
        if !result.succeeded {
            return Err(GatewayError::Conflict(
                "token accessor collision; try again".into(),
            ));
        }
        cache.settle(result.revision).await;
        return Ok(TokenWritten {
            token: TokenEntry {
                stored,
                create_index: result.revision,
                modify_index: result.revision,
            },
            secret: Some(secret),
        });
    }
    let key = &keys.acl(&format!("token/{}", req.accessor_id));
    let req = &req;
    cas::retry_times(
        attempts.max(1),
        || {
            GatewayError::Conflict(format!(
                "token {} kept changing under this write; try again",
                req.accessor_id
            ))
        },
        |_| async move {
            let Some(kv) = store.get(key).await? else {
                return Err(GatewayError::FailedPrecondition(format!(
                    "cannot find token {}",
                    req.accessor_id
                )));
            };
            let existing: StoredToken = serde_json::from_slice(&kv.value).map_err(|e| {
                GatewayError::Upstream(tonic::Status::internal(format!(
                    "stored token {} does not decode: {e}",
                    req.accessor_id
                )))
            })?;
            if existing.global != req.global {
                return Err(GatewayError::field("Global", "cannot toggle global mode"));
            }
            let stored = StoredToken {
                name: req.name.clone(),
                token_type: req.token_type.clone(),
                policies: req.policies.clone(),
                ..existing
            };
            let result = store
                .txn(
                    Txn::new()
                        .when(Compare::mod_revision(
                            key.clone(),
                            CompareOp::Equal,
                            kv.mod_revision,
                        ))
                        .and_then(Op::put(key.clone(), encode(&stored)?)),
                )
                .await?;
            if !result.succeeded {
                return Ok(None);
            }
            cache.settle(result.revision).await;
            Ok(Some(TokenWritten {
                token: TokenEntry {
                    stored,
                    create_index: kv.create_revision,
                    modify_index: result.revision,
                },
                secret: None,
            }))
        },
    )
    .await
}

/// Deletes a token; one that does not exist is an error, as Nomad's.
pub async fn delete_token(
    store: &dyn Store,
    keys: &Keyspace,
    cache: &AclCache,
    accessor: &str,
) -> Result<Revision> {
    delete_existing(
        store,
        cache,
        keys.acl(&format!("token/{accessor}")),
        format!("Cannot delete nonexistent tokens: {accessor}"),
    )
    .await
}

/// The one bootstrap: a management token, written with the bootstrap mark
/// only if the mark is absent. A second call fails as Nomad's does.
pub async fn bootstrap(
    store: &dyn Store,
    keys: &Keyspace,
    cache: &AclCache,
) -> Result<TokenWritten> {
    let mark = keys.acl("bootstrap");
    let secret = uuid::Uuid::new_v4().to_string();
    let stored = StoredToken {
        accessor_id: uuid::Uuid::new_v4().to_string(),
        secret_hash: hash_secret(&secret),
        name: "Bootstrap Token".into(),
        token_type: MANAGEMENT.into(),
        policies: Vec::new(),
        global: true,
        create_time: caravan_model::now_unix_ns(),
    };
    let key = keys.acl(&format!("token/{}", stored.accessor_id));
    let result = store
        .txn(
            Txn::new()
                .when(Compare::absent(mark.clone()))
                .and_then(Op::put(mark.clone(), b"{}".to_vec()))
                .and_then(Op::put(key, encode(&stored)?))
                .or_else(Op::get(mark)),
        )
        .await?;
    if !result.succeeded {
        let reset = match result.results.first() {
            Some(caravan_store::OpResult::Get(range)) => {
                range.kvs.first().map_or(0, |kv| kv.mod_revision)
            }
            _ => 0,
        };
        return Err(GatewayError::FailedPrecondition(format!(
            "ACL bootstrap already done (reset index: {reset})"
        )));
    }
    cache.settle(result.revision).await;
    Ok(TokenWritten {
        token: TokenEntry {
            stored,
            create_index: result.revision,
            modify_index: result.revision,
        },
        secret: Some(secret),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_hash_to_hex_sha256() {
        assert_eq!(
            hash_secret("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn tokens_are_checked_like_nomads() {
        let mut req = TokenRequest {
            token_type: "client".into(),
            ..Default::default()
        };
        assert!(
            validate_token(&req)
                .unwrap_err()
                .to_string()
                .contains("missing policies")
        );
        req.policies = vec!["readonly".into()];
        assert!(validate_token(&req).is_ok());
        req.token_type = "management".into();
        assert!(validate_token(&req).is_err());
        req.policies.clear();
        assert!(validate_token(&req).is_ok());
        req.token_type = "root".into();
        assert!(
            validate_token(&req)
                .unwrap_err()
                .to_string()
                .contains("client or management")
        );
        assert!(check_policy_name("read-only").is_ok());
        assert!(check_policy_name("no spaces").is_err());
        assert!(check_policy_name("").is_err());
    }
}

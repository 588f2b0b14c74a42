//! Leadership of a leader-only service: a campaign on a lease renewed in the
//! background, the leader key's create revision as a fencing token that
//! every write of the leader compares, and a signal when leadership is lost.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use crate::error::StoreError;
use crate::patience::with_member_timeout;
use crate::store::Store;
use crate::types::{
    Compare, CompareOp, EventKind, LeaderKey, LeaseId, Op, OpResult, Range, Revision, Txn,
    TxnResult,
};

/// How long a dropped handle's background revoke may take.
const REVOKE_ON_DROP_TIMEOUT: Duration = Duration::from_secs(5);
/// The least time one etcd member gets to answer a leadership request.
const MIN_MEMBER_PATIENCE: Duration = Duration::from_millis(200);

/// How long one etcd member may take to answer a leadership request on a
/// lease of `ttl` before the request moves on to the next member: short
/// enough that a renewal can try two members within half the TTL.
fn member_patience(ttl: Duration) -> Duration {
    (ttl / 8).max(MIN_MEMBER_PATIENCE)
}

/// What can go wrong leading.
#[derive(Clone, Debug, thiserror::Error)]
pub enum LeadershipError {
    /// This handle no longer leads: a fenced write was refused because the
    /// leader key is gone or belongs to a newer leader, or leadership was
    /// already known to be lost. Nothing was written.
    #[error("deposed: no longer the leader of {election}")]
    Deposed {
        /// The election that was lost.
        election: String,
    },
    /// The campaign was abandoned because its lease was lost before it won.
    #[error("leadership lost while campaigning: {0}")]
    Lost(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The proof of leadership a leader's writes compare: its key must still
/// exist with this create revision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FencingToken {
    /// The leader key, `<election>/<lease hex>`.
    pub key: Vec<u8>,
    /// The leader key's create revision.
    pub revision: Revision,
}

impl FencingToken {
    /// The compare that holds only while this token is current.
    pub fn compare(&self) -> Compare {
        Compare::create_revision(self.key.clone(), CompareOp::Equal, self.revision)
    }
}

/// The election name of a service under a key prefix:
/// `<prefix>/leader/<service>`.
pub fn election_name(prefix: &str, service: &str) -> String {
    format!("{}/leader/{service}", prefix.trim_end_matches('/'))
}

/// The address the current leader of `election` campaigned with, if any; a
/// follower names it in its UNAVAILABLE answers.
pub async fn current_leader(
    store: &dyn Store,
    election: &[u8],
) -> Result<Option<String>, StoreError> {
    Ok(store
        .leader(election)
        .await?
        .map(|leader| String::from_utf8_lossy(&leader.value).into_owned()))
}

/// Why leadership ended, shared by the background tasks and the handle.
#[derive(Clone, Default)]
struct LossSignal {
    token: CancellationToken,
    reason: Arc<Mutex<Option<String>>>,
}

impl LossSignal {
    fn fire(&self, reason: impl Into<String>) {
        let mut slot = self.reason.lock();
        if slot.is_none() {
            *slot = Some(reason.into());
        }
        self.token.cancel();
    }

    fn reason(&self) -> String {
        self.reason
            .lock()
            .clone()
            .unwrap_or_else(|| "leadership ended".into())
    }
}

/// The lease and background tasks of one candidacy. Dropping it stops the
/// tasks and, unless the lease was already revoked, revokes it in the
/// background so the next candidate need not wait for the TTL.
struct Candidacy {
    store: Arc<dyn Store>,
    lease: LeaseId,
    loss: LossSignal,
    stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    revoke_on_drop: AtomicBool,
}

impl Drop for Candidacy {
    fn drop(&mut self) {
        self.stop.cancel();
        for task in &self.tasks {
            task.abort();
        }
        self.loss.fire("the leadership handle was dropped");
        if !self.revoke_on_drop.load(Ordering::Acquire) {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (store, lease) = (self.store.clone(), self.lease);
            runtime.spawn(async move {
                let _ =
                    tokio::time::timeout(REVOKE_ON_DROP_TIMEOUT, store.lease_revoke(lease)).await;
            });
        }
    }
}

/// Leadership of one election, held until lost, resigned or dropped.
pub struct Leadership {
    store: Arc<dyn Store>,
    election: String,
    key: LeaderKey,
    candidacy: Candidacy,
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("election", &self.election)
            .field("key", &String::from_utf8_lossy(&self.key.key))
            .field("revision", &self.key.create_revision)
            .field("lost", &self.is_lost())
            .finish()
    }
}

impl Leadership {
    /// Campaigns in `election` with `address` as the value followers read,
    /// on a lease of `ttl` (rounded up to whole seconds, and up to the
    /// store's minimum) renewed every eighth of it. Returns once leading.
    pub async fn campaign(
        store: Arc<dyn Store>,
        election: &str,
        address: &str,
        ttl: Duration,
    ) -> Result<Leadership, LeadershipError> {
        loop {
            if let Some(won) = Self::campaign_once(store.clone(), election, address, ttl).await? {
                return Ok(won);
            }
            tracing::debug!(
                election,
                "the store left the member the campaign waited on; campaigning anew"
            );
        }
    }

    /// One candidacy on a lease of its own: leadership once won, or `None`
    /// when the store left the etcd member the campaign waited on. A
    /// campaign waits on one member; when a renewal or a read finds that
    /// member silent or failing, the store moves on, and the campaign must
    /// be made again through the member now in use. It is made on a new
    /// lease: the old campaign's member, once it answers again, ends the
    /// abandoned campaign by deleting its candidate key, which would be the
    /// new campaign's key too if the lease were the same. The old lease is
    /// revoked as the candidacy is dropped.
    async fn campaign_once(
        store: Arc<dyn Store>,
        election: &str,
        address: &str,
        ttl: Duration,
    ) -> Result<Option<Leadership>, LeadershipError> {
        let asked = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
        let lease = with_member_timeout(
            member_patience(ttl),
            store.lease_grant(i64::try_from(asked.max(1)).unwrap_or(i64::MAX)),
        )
        .await?;
        let ttl = Duration::from_secs(u64::try_from(lease.ttl_secs.max(1)).unwrap_or(1));

        let mut candidacy = Candidacy {
            store: store.clone(),
            lease: lease.id,
            loss: LossSignal::default(),
            stop: CancellationToken::new(),
            tasks: Vec::new(),
            revoke_on_drop: AtomicBool::new(true),
        };
        // Renewing starts before campaigning: waiting in line may outlast
        // the TTL.
        candidacy.tasks.push(tokio::spawn(keep_lease_alive(
            store.clone(),
            lease.id,
            ttl,
            candidacy.loss.clone(),
            candidacy.stop.clone(),
        )));
        // While waiting, depose a leader that holds its lease but has gone
        // silent: the lease alone can outlive a frozen holder (etcd renews
        // every lease to its full TTL when its own leader changes).
        let _watchdog = AbortOnDropHandle::new(tokio::spawn(depose_a_silent_leader(
            store.clone(),
            election.as_bytes().to_vec(),
            lease.id,
            ttl,
        )));
        let failovers = store.failovers();
        let key = {
            let campaign = store.campaign(election.as_bytes(), address.as_bytes(), lease.id);
            tokio::pin!(campaign);
            let mut check = tokio::time::interval(member_patience(ttl));
            loop {
                tokio::select! {
                    won = &mut campaign => break won?,
                    _ = check.tick() => {
                        if store.failovers() != failovers {
                            return Ok(None);
                        }
                    }
                    _ = candidacy.loss.token.cancelled() => {
                        return Err(LeadershipError::Lost(candidacy.loss.reason()));
                    }
                }
            }
        };
        // etcd's campaign can return after the candidate's own key vanished
        // (its lease ended while waiting); only a live key leads.
        let held = store.get(&key.key).await?;
        if held.is_none_or(|kv| kv.create_revision != key.create_revision) {
            return Err(LeadershipError::Lost(
                "the candidate key vanished while campaigning".into(),
            ));
        }
        candidacy.tasks.push(tokio::spawn(watch_leader_key(
            store.clone(),
            key.key.clone(),
            key.create_revision,
            candidacy.loss.clone(),
            candidacy.stop.clone(),
        )));
        candidacy.tasks.push(tokio::spawn(mark_alive(
            store.clone(),
            key.clone(),
            address.as_bytes().to_vec(),
            ttl,
            candidacy.loss.clone(),
            candidacy.stop.clone(),
        )));
        tracing::info!(election, revision = key.create_revision, "won leadership");
        Ok(Some(Leadership {
            store,
            election: election.to_string(),
            key,
            candidacy,
        }))
    }

    /// The fencing token: the leader key and its create revision.
    pub fn token(&self) -> FencingToken {
        FencingToken {
            key: self.key.key.clone(),
            revision: self.key.create_revision,
        }
    }

    /// The leader key as the store handed it out.
    pub fn leader_key(&self) -> &LeaderKey {
        &self.key
    }

    /// The election this handle leads.
    pub fn election(&self) -> &str {
        &self.election
    }

    /// Whether leadership is known to be lost.
    pub fn is_lost(&self) -> bool {
        self.candidacy.loss.token.is_cancelled()
    }

    /// Resolves once leadership is lost (the lease is gone, renewals went
    /// unanswered for half the TTL, or the leader key vanished).
    pub async fn lost(&self) {
        self.candidacy.loss.token.cancelled().await;
    }

    /// A token cancelled when leadership is lost, for leader-only tasks to
    /// stop on. Cancelling it does not give up leadership.
    pub fn lost_signal(&self) -> CancellationToken {
        self.candidacy.loss.token.child_token()
    }

    /// Why leadership was lost, once it is.
    pub fn lost_reason(&self) -> Option<String> {
        self.candidacy.loss.reason.lock().clone()
    }

    /// Runs `txn` only while this handle leads. A failed fence is
    /// [`LeadershipError::Deposed`]; a failure of the caller's own compares
    /// is an ordinary `succeeded == false` answer with the caller's failure
    /// results. The failure branch must not write: it also runs when the
    /// fence fails, and a deposed leader writes nothing.
    pub async fn fenced_txn(&self, mut txn: Txn) -> Result<TxnResult, LeadershipError> {
        if txn
            .failure
            .iter()
            .any(|op| matches!(op, Op::Put { .. } | Op::Delete(_)))
        {
            return Err(StoreError::InvalidArgument(
                "a fenced transaction's failure branch must not write".into(),
            )
            .into());
        }
        if self.is_lost() {
            return Err(self.deposed());
        }
        let token = self.token();
        txn.compares.push(token.compare());
        txn.failure.push(Op::Get(Range::key(token.key.clone())));
        let mut res = self.store.txn(txn).await?;
        if res.succeeded {
            return Ok(res);
        }
        let fence = res.results.pop();
        let held = matches!(
            &fence,
            Some(OpResult::Get(got)) if got.kvs.first().is_some_and(|kv| kv.create_revision == token.revision)
        );
        if !held {
            self.candidacy
                .loss
                .fire("a fenced write found the leader key gone or replaced");
            return Err(self.deposed());
        }
        Ok(res)
    }

    /// Gives up leadership at once: deletes the leader key so the next
    /// candidate wins without waiting for the TTL, revokes the lease and
    /// stops renewing it. Work still running under this leadership is not
    /// waited for: its fenced writes fail from the moment the key is gone.
    pub async fn resign(&self) -> Result<(), LeadershipError> {
        self.candidacy.stop.cancel();
        self.candidacy.loss.fire("resigned");
        let resigned = self.store.resign(&self.key).await;
        let revoked = match self.store.lease_revoke(self.key.lease).await {
            Ok(()) | Err(StoreError::LeaseNotFound(_)) => Ok(()),
            Err(err) => Err(err),
        };
        self.candidacy
            .revoke_on_drop
            .store(revoked.is_err(), Ordering::Release);
        resigned?;
        revoked?;
        tracing::info!(election = %self.election, "resigned leadership");
        Ok(())
    }

    fn deposed(&self) -> LeadershipError {
        LeadershipError::Deposed {
            election: self.election.clone(),
        }
    }
}

/// Renews the lease every eighth of its TTL (again soon after a failure)
/// and fires `loss` when the lease is gone or went half its TTL unrenewed:
/// past that point another candidate may win before this one notices. Each
/// member gets [`member_patience`] to answer, so a silent member costs a
/// fraction of the window and the renewal goes on to the next.
async fn keep_lease_alive(
    store: Arc<dyn Store>,
    lease: LeaseId,
    ttl: Duration,
    loss: LossSignal,
    stop: CancellationToken,
) {
    let patience = member_patience(ttl);
    let renew = || with_member_timeout(patience, store.lease_keep_alive(lease));
    renew_until_lost(renew, lease, ttl, loss, stop).await;
}

/// The renewal loop of [`keep_lease_alive`], over any `renew`.
///
/// The half-TTL window runs from when the last answered renewal was sent,
/// so a renewal may take as long as the window minus the pause before it.
/// With renewals every quarter TTL, spaced from their answers, that was
/// 0.75 s of a 3 s TTL at best and nothing at worst: a renewal answered
/// after 0.7 s left the next one 0.05 s, and a term ended on a lease etcd
/// had just renewed whenever it was busy applying a large transaction.
/// Renewals now go out an eighth of the TTL after the last answered one
/// was sent (at once if that moment has passed), leaving each 1.125 s.
async fn renew_until_lost<F, Fut>(
    mut renew: F,
    lease: LeaseId,
    ttl: Duration,
    loss: LossSignal,
    stop: CancellationToken,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<i64, StoreError>>,
{
    let mut renewed = Instant::now();
    let mut failing = false;
    loop {
        let next = if failing {
            Instant::now() + ttl / 20
        } else {
            renewed + ttl / 8
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep_until(next) => {}
        }
        let deadline = renewed + ttl / 2;
        let sent = Instant::now();
        let failure = match tokio::time::timeout_at(deadline, renew()).await {
            Ok(Ok(_)) => {
                renewed = sent;
                failing = false;
                continue;
            }
            Ok(Err(StoreError::LeaseNotFound(_))) => {
                loss.fire(format!("lease {lease:x} is gone"));
                return;
            }
            Ok(Err(err)) => {
                tracing::warn!(%err, lease, "renewing the leadership lease failed");
                err.to_string()
            }
            Err(_) => format!(
                "a renewal sent {:?} after the last one answered went unanswered",
                sent.duration_since(renewed)
            ),
        };
        failing = true;
        if Instant::now() >= deadline {
            loss.fire(format!(
                "lease {lease:x} went unrenewed for half its TTL ({:?}): {failure}",
                ttl / 2
            ));
            return;
        }
    }
}

/// Rewrites the leader key (same value, same lease) every third of the TTL,
/// fenced by its create revision, so candidates see a live leader's key
/// change; a candidate that sees it unchanged for a whole TTL deposes the
/// leader ([`depose_a_silent_leader`]).
async fn mark_alive(
    store: Arc<dyn Store>,
    key: LeaderKey,
    value: Vec<u8>,
    ttl: Duration,
    loss: LossSignal,
    stop: CancellationToken,
) {
    let token = FencingToken {
        key: key.key.clone(),
        revision: key.create_revision,
    };
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(ttl / 3) => {}
        }
        let txn = Txn::new()
            .when(token.compare())
            .and_then(Op::put_with_lease(
                key.key.clone(),
                value.clone(),
                key.lease,
            ));
        // A member that does not answer costs a mark, not the whole request
        // timeout: candidates depose a leader whose key stays unmarked for a
        // TTL, so the next mark must not wait behind a silent member.
        match with_member_timeout(member_patience(ttl), store.txn(txn)).await {
            Ok(res) if res.succeeded => {}
            Ok(_) => {
                loss.fire("the leader key was deleted or replaced");
                return;
            }
            // A full store refuses the mark until it is freed; candidates
            // leave the leader be meanwhile (see `depose_a_silent_leader`),
            // and the alarm is reported where it is watched, not per mark.
            Err(err) if err.is_no_space() => {
                tracing::debug!(%err, "marking the leader key alive failed");
            }
            Err(err) => tracing::warn!(%err, "marking the leader key alive failed"),
        }
    }
}

/// What a candidate last saw of the leader's key: which key, its last
/// write, and when the candidate first saw that write.
struct LeaderMark {
    key: Vec<u8>,
    written: Revision,
    seen: Instant,
}

/// Watches the leader of `election` while this candidate (on `own_lease`)
/// waits, and revokes the leader's lease once its key has gone a whole
/// `ttl` without the leader's mark ([`mark_alive`], every third of it) in
/// reads that all succeeded: a frozen leader whose lease outlives it would
/// otherwise hold the election past its TTL. Any failed read starts the
/// count again, so a store that this candidate cannot reach either (an
/// etcd election, a partition) never deposes a leader, and neither does a
/// store with an alarm raised (a full etcd refuses the leader's marks and
/// any new leader's writes alike). A live leader that
/// is deposed by mistake only loses its term: every leader write is fenced.
async fn depose_a_silent_leader(
    store: Arc<dyn Store>,
    election: Vec<u8>,
    own_lease: LeaseId,
    ttl: Duration,
) {
    let patience = member_patience(ttl);
    let mut last: Option<LeaderMark> = None;
    loop {
        tokio::time::sleep(ttl / 3).await;
        let leader = match with_member_timeout(patience, store.leader(&election)).await {
            Ok(Some(leader)) if leader.lease != own_lease => leader,
            Ok(Some(_)) => return,
            Ok(None) | Err(_) => {
                last = None;
                continue;
            }
        };
        let read = with_member_timeout(patience, store.range(Range::key(leader.key.clone())));
        let written = match read.await {
            Ok(res) => res.kvs.first().map(|kv| kv.mod_revision),
            Err(_) => None,
        };
        let Some(written) = written else {
            last = None;
            continue;
        };
        match &last {
            Some(mark) if mark.key == leader.key && mark.written == written => {
                if mark.seen.elapsed() < ttl {
                    continue;
                }
                if alarm_raised(&store, patience).await {
                    // No write lands while etcd has an alarm raised (NOSPACE
                    // refuses every put): the leader cannot mark its key, and
                    // this candidate could not write as leader either.
                    // Deposing it would leave the election to replicas that
                    // can only fail to campaign until the store is freed.
                    last = None;
                    continue;
                }
                tracing::warn!(
                    leader = %String::from_utf8_lossy(&leader.value),
                    silent_for = ?mark.seen.elapsed(),
                    "the leader holds its lease but has not marked its key; revoking its lease"
                );
                match store.lease_revoke(leader.lease).await {
                    Ok(()) | Err(StoreError::LeaseNotFound(_)) => {}
                    Err(err) => tracing::warn!(%err, "revoking a silent leader's lease failed"),
                }
                last = None;
            }
            _ => {
                last = Some(LeaderMark {
                    key: leader.key,
                    written,
                    seen: Instant::now(),
                });
            }
        }
    }
}

/// Whether the store reports an alarm (etcd's NOSPACE or CORRUPT), under
/// which it refuses writes. A store that does not answer counts as none:
/// the reads before this one succeeded, so it is the leader that is silent.
async fn alarm_raised(store: &Arc<dyn Store>, patience: Duration) -> bool {
    match with_member_timeout(patience, store.alarms()).await {
        Ok(alarms) => !alarms.is_empty(),
        Err(_) => false,
    }
}

/// Fires `loss` when the leader key is deleted or replaced.
async fn watch_leader_key(
    store: Arc<dyn Store>,
    key: Vec<u8>,
    token: Revision,
    loss: LossSignal,
    stop: CancellationToken,
) {
    let mut from = token + 1;
    loop {
        let opened = tokio::select! {
            _ = stop.cancelled() => return,
            opened = store.watch(&key, from) => opened,
        };
        if let Ok(mut watch) = opened {
            loop {
                let item = tokio::select! {
                    _ = stop.cancelled() => return,
                    item = watch.stream.next() => item,
                };
                let Some(Ok(batch)) = item else { break };
                // The watch is a prefix watch; only the exact key matters.
                for event in batch.events.iter().filter(|e| e.kv.key == key) {
                    if event.kind == EventKind::Delete || event.kv.create_revision != token {
                        loss.fire("the leader key was deleted");
                        return;
                    }
                }
                from = batch.revision + 1;
            }
        }
        // The watch broke (compaction, a lost connection): look at the key
        // itself, then watch again from there. Renewals catch a store that
        // stays unreachable.
        match store.range(Range::key(key.clone())).await {
            Ok(res)
                if res
                    .kvs
                    .first()
                    .is_some_and(|kv| kv.create_revision == token) =>
            {
                from = res.revision + 1;
            }
            Ok(_) => {
                loss.fire("the leader key was deleted");
                return;
            }
            Err(err) => tracing::warn!(%err, "checking the leader key failed"),
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
    }
}

#[cfg(test)]
mod tests;

//! Sends alloc status to the servers in batches: the newest update of each
//! alloc waits at most one interval (or until a batch is full), and a failed
//! send is retried without ever replacing a newer state with an older one.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::sync::Arc;
use std::time::Duration;

use caravan_proto::{AllocUpdate, UpdateAllocationsRequest};
use caravan_runtime::Backoff;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::gateway::{Gateway, is_retryable};

/// Longest wait between retries of a failed send.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How long the last updates may take to send at shutdown: the gateways may
/// be the ones that cannot reach etcd, and the exit should not wait for their
/// timeouts.
const LAST_FLUSH_TIMEOUT: Duration = Duration::from_secs(3);

/// Where alloc runners put their updates; cheap to clone.
#[derive(Debug, Clone)]
pub struct StatusSink {
    inner: Arc<SinkInner>,
}

#[derive(Debug)]
struct SinkInner {
    pending: Mutex<BTreeMap<String, AllocUpdate>>,
    notify: Notify,
    max_batch: usize,
}

impl StatusSink {
    /// A sink that sends at most `max_batch` updates per call.
    pub fn new(max_batch: usize) -> Self {
        StatusSink {
            inner: Arc::new(SinkInner {
                pending: Mutex::new(BTreeMap::new()),
                notify: Notify::new(),
                max_batch: max_batch.max(1),
            }),
        }
    }

    /// Queues the newest state of an alloc, replacing any older one not yet
    /// sent. An update without task states says they did not change since
    /// the alloc's last report; the states of a replaced report go with it.
    pub fn report(&self, mut update: AllocUpdate) {
        let mut p = self.inner.pending.lock();
        if let Some(older) = p.remove(&update.alloc_id) {
            carry_states(&mut update, older);
        }
        p.insert(update.alloc_id.clone(), update);
        drop(p);
        self.inner.notify.notify_one();
    }

    /// Updates waiting to be sent.
    pub fn pending(&self) -> usize {
        self.inner.pending.lock().len()
    }

    /// Takes up to one batch of the updates waiting to be sent.
    pub(crate) fn take(&self) -> Vec<AllocUpdate> {
        let mut p = self.inner.pending.lock();
        let keys: Vec<String> = p.keys().take(self.inner.max_batch).cloned().collect();
        keys.iter().filter_map(|k| p.remove(k)).collect()
    }

    /// Puts back updates whose send failed, unless a newer one arrived
    /// meanwhile; a newer one without task states takes the failed one's.
    fn requeue(&self, updates: Vec<AllocUpdate>) {
        let mut p = self.inner.pending.lock();
        for u in updates {
            match p.entry(u.alloc_id.clone()) {
                Entry::Occupied(mut newer) => carry_states(newer.get_mut(), u),
                Entry::Vacant(slot) => {
                    slot.insert(u);
                }
            }
        }
    }

    /// Gives the task states of updates the servers refused to the newer
    /// updates of the same allocs that left theirs out, so the next send
    /// carries them.
    fn carry_refused(&self, updates: Vec<AllocUpdate>) {
        let mut p = self.inner.pending.lock();
        for u in updates {
            if let Some(newer) = p.get_mut(&u.alloc_id) {
                carry_states(newer, u);
            }
        }
    }

    /// Sends batches through `gateway` for `node_id` (whose secret is
    /// `secret_id`) until `shutdown`, then makes one last attempt to send
    /// what is left.
    pub async fn run(
        self,
        gateway: Gateway,
        node_id: String,
        secret_id: String,
        interval: Duration,
        shutdown: CancellationToken,
    ) {
        let mut backoff = Backoff::new(Duration::from_millis(100), MAX_BACKOFF);
        loop {
            if self.pending() == 0 {
                tokio::select! {
                    _ = self.inner.notify.notified() => {}
                    _ = shutdown.cancelled() => break,
                }
            }
            // Gather for one interval unless a batch fills first.
            let deadline = Instant::now() + interval;
            while self.pending() < self.inner.max_batch {
                tokio::select! {
                    _ = tokio::time::sleep_until(deadline) => break,
                    _ = self.inner.notify.notified() => {}
                    _ = shutdown.cancelled() => break,
                }
            }
            while self.pending() > 0 {
                let req = UpdateAllocationsRequest {
                    node_id: node_id.clone(),
                    updates: self.take(),
                    secret_id: secret_id.clone(),
                };
                let n = req.updates.len();
                let sent = tokio::select! {
                    sent = gateway.update_allocations(&req) => sent,
                    _ = shutdown.cancelled() => {
                        // Sent again, bounded, by the last flush below.
                        self.requeue(req.updates);
                        break;
                    }
                };
                let batch = req.updates;
                crate::metrics::alloc_updates(sent.is_ok(), n);
                match sent {
                    Ok(_) => {
                        backoff.reset();
                        tracing::trace!(node = %node_id, updates = n, "sent alloc updates");
                    }
                    Err(status) if !is_retryable(&status) => {
                        // Sending the same batch again would fail the same way.
                        tracing::error!(node = %node_id, updates = n, %status, "alloc updates refused; dropped");
                        self.carry_refused(batch);
                    }
                    Err(status) => {
                        tracing::warn!(node = %node_id, updates = n, %status, "alloc updates not sent; will retry");
                        self.requeue(batch);
                        tokio::select! {
                            _ = backoff.wait() => {}
                            _ = shutdown.cancelled() => {}
                        }
                        if shutdown.is_cancelled() {
                            break;
                        }
                    }
                }
            }
            if shutdown.is_cancelled() {
                break;
            }
        }
        let rest = self.take();
        if !rest.is_empty() {
            let req = UpdateAllocationsRequest {
                node_id: node_id.clone(),
                updates: rest,
                secret_id: secret_id.clone(),
            };
            match tokio::time::timeout(LAST_FLUSH_TIMEOUT, gateway.update_allocations(&req)).await {
                Ok(Ok(_)) => {}
                Ok(Err(status)) => {
                    tracing::warn!(node = %node_id, %status, "last alloc updates lost at shutdown");
                }
                Err(_) => tracing::warn!(
                    node = %node_id,
                    "last alloc updates lost at shutdown: no answer in {LAST_FLUSH_TIMEOUT:?}"
                ),
            }
        }
    }
}

/// `newer` with `older`'s task states when it left its own out, and with
/// `older`'s service registrations and removals of instances `newer` says
/// nothing of (what `newer` says of an instance is the newer word).
fn carry_states(newer: &mut AllocUpdate, older: AllocUpdate) {
    if newer.task_states.is_empty() {
        newer.task_states = older.task_states;
    }
    if older.registered.is_empty() && older.deregistered.is_empty() {
        return;
    }
    let said: std::collections::HashSet<String> = newer
        .registered
        .iter()
        .chain(&newer.deregistered)
        .map(|r| r.id.clone())
        .collect();
    newer.registered.extend(
        older
            .registered
            .into_iter()
            .filter(|r| !said.contains(&r.id)),
    );
    newer.deregistered.extend(
        older
            .deregistered
            .into_iter()
            .filter(|r| !said.contains(&r.id)),
    );
}

#[cfg(test)]
mod tests {
    use caravan_proto::AllocClientStatus;

    use super::*;

    fn update(id: &str, status: AllocClientStatus) -> AllocUpdate {
        let mut u = AllocUpdate {
            alloc_id: id.into(),
            ..Default::default()
        };
        u.set_client_status(status);
        u
    }

    #[test]
    fn newest_state_wins_and_requeue_never_overrides_it() {
        let s = StatusSink::new(2);
        s.report(update("a", AllocClientStatus::Pending));
        s.report(update("a", AllocClientStatus::Running));
        s.report(update("b", AllocClientStatus::Pending));
        s.report(update("c", AllocClientStatus::Pending));
        assert_eq!(s.pending(), 3);
        let first = s.take();
        assert_eq!(first.len(), 2, "batches are capped");
        assert_eq!(first[0].client_status(), AllocClientStatus::Running);
        // While the send fails, a newer state of "a" arrives.
        s.report(update("a", AllocClientStatus::Complete));
        s.requeue(first);
        let all: BTreeMap<String, AllocUpdate> = s
            .take()
            .into_iter()
            .chain(s.take())
            .map(|u| (u.alloc_id.clone(), u))
            .collect();
        assert_eq!(all["a"].client_status(), AllocClientStatus::Complete);
        assert_eq!(all["b"].client_status(), AllocClientStatus::Pending);
        assert_eq!(all.len(), 3);
    }

    fn reg(id: &str) -> caravan_proto::ServiceRegistration {
        caravan_proto::ServiceRegistration {
            id: id.into(),
            service_name: "web".into(),
            ..Default::default()
        }
    }

    fn ids(v: &[caravan_proto::ServiceRegistration]) -> Vec<&str> {
        v.iter().map(|r| r.id.as_str()).collect()
    }

    /// A registration never gets lost because a newer report of the same
    /// alloc replaced the one carrying it, and the newer word on an
    /// instance wins.
    #[test]
    fn registrations_are_carried_into_the_report_that_replaces_theirs() {
        let s = StatusSink::new(10);
        let mut first = update("a", AllocClientStatus::Running);
        first.registered = vec![reg("x"), reg("y")];
        s.report(first);
        let mut second = update("a", AllocClientStatus::Running);
        second.deregistered = vec![reg("y")];
        s.report(second);
        let sent = s.take();
        assert_eq!(ids(&sent[0].registered), vec!["x"]);
        assert_eq!(ids(&sent[0].deregistered), vec!["y"]);

        // A failed send is requeued into the newer report.
        let mut later = update("a", AllocClientStatus::Running);
        later.registered = vec![reg("y")];
        s.report(later);
        s.requeue(sent);
        let again = s.take();
        assert_eq!(ids(&again[0].registered), vec!["y", "x"]);
        assert!(again[0].deregistered.is_empty(), "y registered again since");
    }

    fn with_states(id: &str, status: AllocClientStatus, state: &str) -> AllocUpdate {
        let mut u = update(id, status);
        u.task_states.insert(
            "t".to_string(),
            caravan_proto::TaskState {
                state: state.into(),
                ..Default::default()
            },
        );
        u
    }

    fn state_of(u: &AllocUpdate) -> Option<&str> {
        u.task_states.get("t").map(|s| s.state.as_str())
    }

    /// A report that leaves its task states out (unchanged since the last
    /// one) never makes the servers miss states an unsent report carried.
    #[test]
    fn task_states_left_out_are_carried_from_the_report_they_replace() {
        let s = StatusSink::new(10);
        // Replaced before it was sent.
        s.report(with_states("a", AllocClientStatus::Running, "running"));
        s.report(update("a", AllocClientStatus::Running));
        let sent = s.take();
        assert_eq!(state_of(&sent[0]), Some("running"));

        // Sent and failed while a newer report waited: requeued into it.
        s.report(with_states("b", AllocClientStatus::Running, "running"));
        let failed = s.take();
        s.report(update("b", AllocClientStatus::Running));
        s.requeue(failed);
        assert_eq!(state_of(&s.take()[0]), Some("running"));

        // Refused (not retried): a newer report still carries its states,
        // and nothing is put back when there is none.
        s.report(with_states("c", AllocClientStatus::Running, "running"));
        let refused = s.take();
        s.report(update("c", AllocClientStatus::Running));
        s.carry_refused(refused.clone());
        assert_eq!(state_of(&s.take()[0]), Some("running"));
        s.carry_refused(refused);
        assert_eq!(s.pending(), 0);

        // A newer report with states of its own keeps them.
        s.report(with_states("d", AllocClientStatus::Running, "running"));
        let failed = s.take();
        s.report(with_states("d", AllocClientStatus::Complete, "dead"));
        s.requeue(failed);
        let newest = s.take();
        assert_eq!(newest[0].client_status(), AllocClientStatus::Complete);
        assert_eq!(state_of(&newest[0]), Some("dead"));
    }
}

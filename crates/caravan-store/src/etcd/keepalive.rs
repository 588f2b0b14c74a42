//! Lease renewals over etcd's bidirectional keepalive stream. etcd-client
//! ties a stream to one lease, so each lease keeps its stream open between
//! renewals (all multiplexed on the one HTTP/2 connection) instead of
//! opening one per renewal: a gateway renewing thousands of node heartbeats
//! pays one round trip per heartbeat, not a stream setup. Streams of leases
//! nobody renews any more are closed after a while.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use etcd_client as ec;
use parking_lot::Mutex;
use tokio::time::Instant;

use crate::error::{Result, StoreError};
use crate::types::LeaseId;

use super::convert::{self, Context};

/// How long a lease's stream stays open without a renewal.
const IDLE_STREAM: Duration = Duration::from_secs(120);

/// One lease's open stream.
struct Channel {
    /// The member the stream is open to.
    member: usize,
    keeper: ec::LeaseKeeper,
    answers: ec::LeaseKeepAliveStream,
    /// Requests sent whose answers were not read (their caller gave up).
    unanswered: usize,
}

#[derive(Default)]
struct Slot {
    channel: tokio::sync::Mutex<Option<Channel>>,
    last_used: Mutex<Option<Instant>>,
}

/// The open keepalive streams, by lease.
#[derive(Default)]
pub(super) struct KeepAlives {
    slots: Mutex<HashMap<LeaseId, Arc<Slot>>>,
    last_sweep: Mutex<Option<Instant>>,
}

impl KeepAlives {
    /// Renews `lease` through member `member`'s `client`; returns its TTL.
    /// A stream open to another member (the one before a failover) is
    /// closed and a new one opened here.
    pub async fn renew(
        &self,
        client: &ec::LeaseClient,
        member: usize,
        lease: LeaseId,
        timeout: Duration,
    ) -> Result<i64> {
        self.sweep();
        let slot = self.slots.lock().entry(lease).or_default().clone();
        *slot.last_used.lock() = Some(Instant::now());
        let mut channel = slot.channel.lock().await;
        if channel.as_ref().is_some_and(|open| open.member != member) {
            *channel = None;
        }
        // A stream that broke since its last use is reopened once.
        for attempt in 0..2 {
            let open = match channel.as_mut() {
                Some(open) => open,
                None => match open(client, member, lease, timeout).await {
                    Ok(opened) => channel.insert(opened),
                    Err(err) => {
                        if matches!(err, StoreError::LeaseNotFound(_)) {
                            self.forget(lease);
                        }
                        return Err(err);
                    }
                },
            };
            match tokio::time::timeout(timeout, renew_on(open, lease)).await {
                Ok(Ok(ttl)) if ttl > 0 => return Ok(ttl),
                Ok(Ok(_)) => {
                    *channel = None;
                    self.forget(lease);
                    return Err(StoreError::LeaseNotFound(lease));
                }
                Ok(Err(err)) => {
                    *channel = None;
                    if attempt > 0 {
                        return Err(err);
                    }
                }
                Err(_) => {
                    *channel = None;
                    return Err(StoreError::Unavailable(format!(
                        "etcd did not answer the keepalive of lease {lease:x} within {timeout:?}"
                    )));
                }
            }
        }
        Err(StoreError::Unavailable(format!(
            "keepalive stream of lease {lease:x} keeps breaking"
        )))
    }

    /// Closes the stream of a lease that is gone.
    pub fn forget(&self, lease: LeaseId) {
        self.slots.lock().remove(&lease);
    }

    /// Closes the streams of leases not renewed for a while.
    fn sweep(&self) {
        let now = Instant::now();
        {
            let mut last = self.last_sweep.lock();
            if last.is_some_and(|at| now.duration_since(at) < IDLE_STREAM / 2) {
                return;
            }
            *last = Some(now);
        }
        self.slots.lock().retain(|_, slot| {
            slot.last_used
                .lock()
                .is_some_and(|at| now.duration_since(at) < IDLE_STREAM)
        });
    }
}

/// Opens a stream; etcd-client renews once while opening it.
async fn open(
    client: &ec::LeaseClient,
    member: usize,
    lease: LeaseId,
    timeout: Duration,
) -> Result<Channel> {
    let mut client = client.clone();
    match tokio::time::timeout(timeout, client.keep_alive(lease)).await {
        Ok(Ok((keeper, answers))) => Ok(Channel {
            member,
            keeper,
            answers,
            unanswered: 0,
        }),
        Ok(Err(err)) => Err(convert::error(err, Context::lease(lease))),
        Err(_) => Err(StoreError::Unavailable(format!(
            "etcd did not open a keepalive stream within {timeout:?}"
        ))),
    }
}

async fn renew_on(channel: &mut Channel, lease: LeaseId) -> Result<i64> {
    while channel.unanswered > 0 {
        next_answer(channel, lease).await?;
        channel.unanswered -= 1;
    }
    channel
        .keeper
        .keep_alive()
        .await
        .map_err(|err| convert::error(err, Context::lease(lease)))?;
    channel.unanswered += 1;
    let answer = next_answer(channel, lease).await?;
    channel.unanswered -= 1;
    Ok(answer.ttl())
}

async fn next_answer(channel: &mut Channel, lease: LeaseId) -> Result<ec::LeaseKeepAliveResponse> {
    match channel.answers.message().await {
        Ok(Some(answer)) => Ok(answer),
        Ok(None) => Err(StoreError::Closed(
            "etcd closed the keepalive stream".into(),
        )),
        Err(err) => Err(convert::error(err, Context::lease(lease))),
    }
}

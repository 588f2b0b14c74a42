//! One node's conversation with the servers: register, heartbeat every half
//! TTL (registering again when the servers have forgotten the node), follow
//! the node's alloc stream, and send status batches.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use caravan_proto::Node;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::alloc_runner::NodeContext;
use caravan_runtime::Backoff;

use crate::gateway::Gateway;
use crate::node_allocs::NodeAllocs;
use crate::state_dir::AllocRecord;

/// TTL assumed until the servers name one.
const DEFAULT_TTL: Duration = Duration::from_secs(10);

/// Everything one node (real or simulated) runs.
#[derive(Debug)]
pub struct NodeAgent {
    /// The shared context of the node's alloc runners.
    pub ctx: Arc<NodeContext>,
    /// The api-gateways.
    pub gateway: Gateway,
    /// The node's secret, generated once with its id; every call presents it.
    pub secret_id: String,
    /// Status batching interval.
    pub update_interval: Duration,
    /// Delay before the first registration (spreads simulated nodes out).
    pub initial_delay: Duration,
    /// Alloc records found on disk.
    pub recovered: BTreeMap<String, AllocRecord>,
    /// New versions of the node when its drivers change (registered
    /// again); `None` when they never do.
    pub node_updates: Option<watch::Receiver<Arc<Node>>>,
}

impl NodeAgent {
    fn node(&self) -> &Node {
        &self.ctx.node
    }

    /// Runs until the context's shutdown token fires, then waits for the
    /// alloc runners and flushes the last status updates.
    pub async fn run(self) {
        let shutdown = self.ctx.shutdown.clone();
        let node_id = self.node().id.clone();
        let (registered_tx, registered) = watch::channel(false);
        let reporter_stop = CancellationToken::new();
        let reporter = tokio::spawn(self.ctx.sink.clone().run(
            self.gateway.clone(),
            node_id.clone(),
            self.secret_id.clone(),
            self.update_interval,
            reporter_stop.clone(),
        ));
        // On the heartbeat thread: however busy this runtime gets with the
        // node's allocs, its heartbeats go out on time.
        let heartbeat = self.gateway.spawn_heartbeats(heartbeat_loop(
            self.gateway.clone(),
            self.ctx.node.clone(),
            self.node_updates,
            self.secret_id.clone(),
            self.initial_delay,
            Reached {
                registered: registered_tx,
                contact: self.ctx.contact.clone(),
            },
            shutdown.clone(),
        ));
        let mut allocs = NodeAllocs::new(self.ctx.clone(), self.recovered);
        let who = (node_id.as_str(), self.secret_id.as_str());
        watch_loop(&self.gateway, who, registered, &mut allocs, &shutdown).await;
        allocs.join_all().await;
        reporter_stop.cancel();
        let _ = reporter.await;
        let _ = heartbeat.await;
    }
}

/// What the heartbeat loop tells the rest of the node: that it registered
/// (the alloc stream may open), and when the servers last answered.
struct Reached {
    registered: watch::Sender<bool>,
    contact: Arc<crate::server_contact::ServerContact>,
}

/// Registers, then heartbeats every half TTL; registers again on NOT_FOUND,
/// and with the new node when its drivers changed.
async fn heartbeat_loop(
    gateway: Gateway,
    mut node: Arc<Node>,
    mut node_updates: Option<watch::Receiver<Arc<Node>>>,
    secret_id: String,
    initial_delay: Duration,
    reached: Reached,
    shutdown: CancellationToken,
) {
    if !initial_delay.is_zero() {
        tokio::select! {
            _ = tokio::time::sleep(initial_delay) => {}
            _ = shutdown.cancelled() => return,
        }
    }
    let mut backoff =
        Backoff::new(Duration::from_millis(200), Duration::from_secs(5)).with_jitter(0.2);
    'register: loop {
        let ttl = loop {
            // A call to a gateway that cannot reach etcd may hang for its
            // whole timeout: shutdown does not wait for it.
            let registered = tokio::select! {
                r = gateway.register(&node, &secret_id) => r,
                _ = shutdown.cancelled() => return,
            };
            match registered {
                Ok(resp) => {
                    backoff.reset();
                    reached.contact.ok();
                    let ttl = ttl_of(resp.heartbeat_ttl_ns);
                    tracing::info!(node = %node.id, name = %node.name, ?ttl, "registered");
                    break ttl;
                }
                Err(status) if status.code() == tonic::Code::PermissionDenied => {
                    // Only an operator can mend this: the data dir lost its
                    // secret, or another machine runs with a copy of its id.
                    tracing::error!(node = %node.id, %status,
                        "the servers know this node id with another secret; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff.next_delay()) => {}
                        _ = shutdown.cancelled() => return,
                    }
                }
                Err(status) => {
                    tracing::warn!(node = %node.id, %status, "registration failed; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff.next_delay()) => {}
                        _ = shutdown.cancelled() => return,
                    }
                }
            }
        };
        reached.registered.send_replace(true);
        let mut ttl = ttl;
        let mut wait = half_with_jitter(ttl);
        loop {
            let due = tokio::time::Instant::now() + wait;
            tokio::select! {
                _ = tokio::time::sleep_until(due) => {}
                changed = crate::driver_health::changed(&mut node_updates) => {
                    tracing::info!(node = %node.id, "the node's drivers changed; registering it again");
                    node = changed;
                    continue 'register;
                }
                _ = shutdown.cancelled() => return,
            }
            let sent = tokio::time::Instant::now();
            let beat = tokio::select! {
                r = gateway.heartbeat(&node.id, &secret_id) => r,
                _ = shutdown.cancelled() => return,
            };
            // Sent late (this thread starved) or answered late (the
            // gateway or etcd starved): either eats the lease's margin.
            let late = sent.duration_since(due);
            let took = sent.elapsed();
            if late + took > ttl / 2 {
                tracing::warn!(node = %node.id, late_ms = late.as_millis() as u64,
                    took_ms = took.as_millis() as u64, ok = beat.is_ok(), "slow heartbeat");
            } else {
                tracing::debug!(node = %node.id, late_ms = late.as_millis() as u64,
                    took_ms = took.as_millis() as u64, ok = beat.is_ok(), "heartbeat");
            }
            crate::metrics::heartbeat(beat.is_ok());
            match beat {
                Ok(resp) => {
                    backoff.reset();
                    reached.contact.ok();
                    if resp.heartbeat_ttl_ns > 0 {
                        ttl = ttl_of(resp.heartbeat_ttl_ns);
                    }
                    wait = half_with_jitter(ttl);
                }
                Err(status) if status.code() == tonic::Code::NotFound => {
                    tracing::warn!(node = %node.id, %status, "servers forgot the node; registering again");
                    continue 'register;
                }
                Err(status) => {
                    tracing::warn!(node = %node.id, %status, "heartbeat failed; retrying");
                    // Retry soon: the lease runs out at the TTL.
                    wait = backoff.next_delay().min(ttl / 4);
                }
            }
        }
    }
}

fn ttl_of(ns: i64) -> Duration {
    u64::try_from(ns)
        .ok()
        .filter(|n| *n > 0)
        .map_or(DEFAULT_TTL, Duration::from_nanos)
}

/// Half the TTL, less up to 10% so heartbeats of many nodes spread out and
/// none comes late.
fn half_with_jitter(ttl: Duration) -> Duration {
    let half = ttl / 2;
    half.saturating_sub(half.mul_f64(rand::random::<f64>() * 0.1))
}

/// Follows the node's alloc stream, reconnecting (to any gateway) on errors.
async fn watch_loop(
    gateway: &Gateway,
    (node_id, secret_id): (&str, &str),
    mut registered: watch::Receiver<bool>,
    allocs: &mut NodeAllocs,
    shutdown: &CancellationToken,
) {
    tokio::select! {
        r = registered.wait_for(|r| *r) => if r.is_err() { return },
        _ = shutdown.cancelled() => return,
    }
    let mut backoff =
        Backoff::new(Duration::from_millis(200), Duration::from_secs(5)).with_jitter(0.2);
    loop {
        // Never a whole set older than what this node already acts on.
        let seen = allocs.revision();
        let opened = tokio::select! {
            r = gateway.watch_allocations(node_id, secret_id, seen) => r,
            _ = shutdown.cancelled() => return,
        };
        match opened {
            Ok(mut stream) => {
                allocs.stream_restarted();
                loop {
                    let msg = tokio::select! {
                        m = stream.message() => m,
                        _ = shutdown.cancelled() => return,
                    };
                    match msg {
                        Ok(Some(set)) => {
                            backoff.reset();
                            tracing::debug!(node = %node_id, allocs = set.allocs.len(), revision = set.revision, "alloc set");
                            allocs.apply(set);
                        }
                        Ok(None) => {
                            tracing::info!(node = %node_id, "alloc stream ended; reopening");
                            break;
                        }
                        Err(status) => {
                            tracing::warn!(node = %node_id, %status, "alloc stream failed; reopening");
                            break;
                        }
                    }
                }
            }
            Err(status) => {
                tracing::warn!(node = %node_id, %status, "cannot open the alloc stream; retrying");
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff.next_delay()) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_interval_is_under_half_the_ttl() {
        let ttl = Duration::from_secs(10);
        for _ in 0..100 {
            let w = half_with_jitter(ttl);
            assert!(
                w <= Duration::from_secs(5) && w >= Duration::from_millis(4500),
                "{w:?}"
            );
        }
        assert_eq!(ttl_of(0), DEFAULT_TTL);
        assert_eq!(ttl_of(-5), DEFAULT_TTL);
        assert_eq!(ttl_of(2_000_000_000), Duration::from_secs(2));
    }
}

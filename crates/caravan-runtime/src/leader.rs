//! Leadership for leader-only services, and reaching the leader of another.
//!
//! [`serve_as_leader`] keeps a replica campaigning: while it leads, the
//! service's leader work runs with the [`Leadership`] handle (whose fenced
//! writes a deposed leader cannot commit); when leadership is lost the work is
//! dropped and the replica campaigns again from scratch; [`serve_and_lead`]
//! runs it beside the replica's gRPC server. [`LeaderChannel`] finds and
//! follows the current leader of a service.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::grpc::Router;
use crate::local::Transport;
use caravan_store::{Leadership, LeadershipError, Store, current_leader, election_name};
use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::grpc;
use crate::status::leader_hint;

/// Pause between campaigns after an error, so a broken store isn't hammered.
const RETRY_PAUSE: Duration = Duration::from_millis(500);
/// How long a leader's work may take to wind down once shutdown is asked
/// (a term catching up or writing to an etcd that does not answer would
/// otherwise wait out the store's request timeout).
const STOP_GRACE: Duration = Duration::from_secs(3);
/// How long resigning may take. When etcd does not answer, the lease lapses
/// after its TTL anyway: waiting longer only delays the exit.
const RESIGN_TIMEOUT: Duration = Duration::from_secs(2);

/// Campaigns for `service` under `prefix` with `address`, runs `lead` for as
/// long as this replica leads, and campaigns again when leadership is lost.
/// On `shutdown` a leader stops its work and resigns, so a standby takes over
/// at once.
pub async fn serve_as_leader<F, Fut>(
    store: Arc<dyn Store>,
    prefix: &str,
    service: &str,
    address: &str,
    ttl: Duration,
    shutdown: CancellationToken,
    mut lead: F,
) where
    F: FnMut(Arc<Leadership>, CancellationToken) -> Fut,
    Fut: Future<Output = ()>,
{
    let election = election_name(prefix, service);
    while !shutdown.is_cancelled() {
        let won = tokio::select! {
            won = Leadership::campaign(store.clone(), &election, address, ttl) => won,
            _ = shutdown.cancelled() => return,
        };
        let leadership = match won {
            Ok(l) => Arc::new(l),
            Err(err) => {
                tracing::warn!(service, error = %err, "campaign failed; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(RETRY_PAUSE) => continue,
                    _ = shutdown.cancelled() => return,
                }
            }
        };
        tracing::info!(service, address, "leading");
        crate::metrics::leading(service, true);
        // The work stops when leadership is lost or the service shuts down.
        let stop = shutdown.child_token();
        let lost = leadership.lost_signal();
        let stopper = stop.clone();
        let gauge = service.to_string();
        // The gauge drops the moment leadership is known lost, not when the
        // work has wound down: a term's last commit may wait out a store
        // timeout (fenced, so it cannot land), and a replica that knows it
        // lost must not go on claiming to lead meanwhile.
        let relay = tokio::spawn(async move {
            lost.cancelled().await;
            crate::metrics::leading(&gauge, false);
            stopper.cancel();
        });
        let leading = lead(leadership.clone(), stop.clone());
        let what = format!("leader work of {service}");
        let work_ended = CancellationToken::new();
        // Only a shutdown cuts the work short: on lost leadership it winds
        // down at its own pace before the next campaign.
        let work = async {
            let _ = crate::shutdown::within_grace(&what, leading, &shutdown, STOP_GRACE).await;
            work_ended.cancel();
        };
        // On shutdown, hand over at once rather than after the work wound
        // down or the lease lapsed: every write of the work is fenced by the
        // leader key, so none lands once the key is gone. (Both run in this
        // future, so a replica aborted mid-term holds no handle on.)
        let resigner = async {
            tokio::select! {
                _ = shutdown.cancelled() => {
                    resign(&leadership, service).await;
                    true
                }
                _ = work_ended.cancelled() => false,
            }
        };
        let ((), resigned) = tokio::join!(work, resigner);
        stop.cancel();
        crate::metrics::leading(service, false);
        relay.abort();
        if resigned {
            continue;
        }
        if leadership.is_lost() {
            tracing::warn!(service, reason = ?leadership.lost_reason(), "leadership lost");
            continue;
        }
        // The work ended by itself: make way for the next campaign now.
        resign(&leadership, service).await;
    }
}

/// Resigns, waiting at most [`RESIGN_TIMEOUT`] for etcd.
async fn resign(leadership: &Leadership, service: &str) {
    match tokio::time::timeout(RESIGN_TIMEOUT, leadership.resign()).await {
        Ok(Ok(())) => {}
        Ok(Err(err)) => tracing::warn!(service, error = %err, "resign failed"),
        Err(_) => tracing::warn!(
            service,
            "resign got no answer in {RESIGN_TIMEOUT:?}; the lease will lapse"
        ),
    }
}

/// What a replica campaigns as: the election (the store, the key prefix and
/// the service it is named by), the address it advertises, and the lease TTL.
pub struct Candidate {
    /// The store holding the election.
    pub store: Arc<dyn Store>,
    /// The key prefix of the cluster.
    pub prefix: String,
    /// The service name the election is named by.
    pub service: &'static str,
    /// The address written as the leader's.
    pub address: String,
    /// The leadership lease's TTL.
    pub ttl: Duration,
}

/// Serves `router` on `listener` and campaigns as `candidate`, running
/// `lead` while it leads (see [`serve_as_leader`]), until `shutdown` fires.
/// Both run in the caller's task, so dropping the future ends both, and a
/// failure to serve stops the campaign too.
pub async fn serve_and_lead<F, Fut>(
    router: Router,
    listener: TcpListener,
    candidate: Candidate,
    shutdown: CancellationToken,
    lead: F,
) -> Result<(), tonic::transport::Error>
where
    F: FnMut(Arc<Leadership>, CancellationToken) -> Fut,
    Fut: Future<Output = ()>,
{
    let stop = shutdown.child_token();
    let leading = serve_as_leader(
        candidate.store,
        &candidate.prefix,
        candidate.service,
        &candidate.address,
        candidate.ttl,
        stop.clone(),
        lead,
    );
    let serving = async {
        let served = grpc::serve(router, listener, stop.clone()).await;
        stop.cancel();
        served
    };
    let ((), served) = tokio::join!(leading, serving);
    served
}

/// The way to the current leader of a service, re-resolved when the leader
/// changes: a gRPC channel, or the service itself when the leader is a
/// service of this process ([`crate::local`]).
#[derive(Clone)]
pub struct LeaderChannel {
    store: Arc<dyn Store>,
    election: String,
    cached: Arc<Mutex<Option<(String, Transport)>>>,
}

impl LeaderChannel {
    /// Follows the leader of `service` under `prefix`.
    pub fn new(store: Arc<dyn Store>, prefix: &str, service: &str) -> Self {
        LeaderChannel {
            store,
            election: election_name(prefix, service),
            cached: Arc::new(Mutex::new(None)),
        }
    }

    /// The way to the leader: the cached one, or a fresh lookup.
    pub async fn channel(&self) -> Result<Transport, tonic::Status> {
        if let Some((_, ch)) = self.cached.lock().as_ref() {
            return Ok(ch.clone());
        }
        let addr = current_leader(self.store.as_ref(), self.election.as_bytes())
            .await
            .map_err(|e| crate::status::from_store(&e))?
            .ok_or_else(|| crate::status::not_leader(&self.election, None))?;
        self.connect(addr)
    }

    /// The handler of type `H` of the leader, when the leader
    /// [`Self::channel`] found is a service of this process that registered
    /// one ([`crate::local::Registration::with_handler`]).
    pub fn local_handler<H: std::any::Any + Clone>(&self) -> Option<H> {
        let cached = self.cached.lock();
        match cached.as_ref()? {
            (addr, Transport::Local(_)) => crate::local::handler(addr),
            (_, Transport::Remote(_)) => None,
        }
    }

    /// The leader's address, if one is known right now.
    pub fn cached_address(&self) -> Option<String> {
        self.cached.lock().as_ref().map(|(a, _)| a.clone())
    }

    /// Forgets the cached leader after a failed call; follows the leader hint
    /// of `status` when it carries one.
    pub fn on_error(&self, status: &tonic::Status) {
        match leader_hint(status) {
            Some(addr) => {
                let _ = self.connect(addr);
            }
            None if matches!(
                status.code(),
                tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Cancelled
            ) =>
            {
                *self.cached.lock() = None;
            }
            None => {}
        }
    }

    fn connect(&self, addr: String) -> Result<Transport, tonic::Status> {
        let ch = match crate::local::lookup(&addr) {
            Some(service) => Transport::Local(service),
            None => Transport::Remote(
                grpc::channel(&addr)
                    .map_err(|e| tonic::Status::unavailable(format!("{addr}: {e}")))?,
            ),
        };
        *self.cached.lock() = Some((addr, ch.clone()));
        Ok(ch)
    }
}

/// Whether an error from a fenced write means this replica no longer leads.
pub fn is_deposed(err: &LeadershipError) -> bool {
    matches!(
        err,
        LeadershipError::Deposed { .. } | LeadershipError::Lost(_)
    )
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use caravan_store::MemStore;

    use super::*;

    async fn replica(
        store: Arc<dyn Store>,
        address: &'static str,
        shutdown: CancellationToken,
        terms: Arc<AtomicUsize>,
    ) {
        replica_winding_down(store, address, shutdown, terms, Duration::ZERO).await
    }

    /// A replica whose leader work takes `wind_down` to stop.
    async fn replica_winding_down(
        store: Arc<dyn Store>,
        address: &'static str,
        shutdown: CancellationToken,
        terms: Arc<AtomicUsize>,
        wind_down: Duration,
    ) {
        serve_as_leader(
            store,
            "/t",
            "broker",
            address,
            Duration::from_secs(5),
            shutdown,
            |_l, stop| {
                let terms = terms.clone();
                async move {
                    terms.fetch_add(1, Ordering::SeqCst);
                    stop.cancelled().await;
                    tokio::time::sleep(wind_down).await;
                }
            },
        )
        .await;
    }

    #[tokio::test]
    async fn shutdown_hands_leadership_over_at_once() {
        let store: Arc<dyn Store> = Arc::new(MemStore::new());
        let (a_stop, b_stop) = (CancellationToken::new(), CancellationToken::new());
        let (a_terms, b_terms) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let a = tokio::spawn(replica(
            store.clone(),
            "a:1",
            a_stop.clone(),
            a_terms.clone(),
        ));
        let channel = LeaderChannel::new(store.clone(), "/t", "broker");
        tokio::time::timeout(Duration::from_secs(2), async {
            while a_terms.load(Ordering::SeqCst) == 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("a leads");
        let b = tokio::spawn(replica(
            store.clone(),
            "b:1",
            b_stop.clone(),
            b_terms.clone(),
        ));
        channel.channel().await.expect("leader known");
        assert_eq!(channel.cached_address().as_deref(), Some("a:1"));

        let handed_over = tokio::time::Instant::now();
        a_stop.cancel();
        a.await.expect("a stops");
        tokio::time::timeout(Duration::from_secs(2), async {
            while b_terms.load(Ordering::SeqCst) == 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("b leads well before the 5 s TTL");
        assert!(handed_over.elapsed() < Duration::from_secs(2));

        // A refusal naming the new leader moves the channel there.
        channel.on_error(&crate::status::not_leader("broker", Some("b:1")));
        // Without a leader the channel answers as a follower would.
        let none = LeaderChannel::new(store.clone(), "/t", "nobody");
        let refused = none.channel().await.expect_err("no leader elected");
        assert!(crate::status::is_not_leader(&refused), "{refused:?}");
        assert_eq!(channel.cached_address().as_deref(), Some("b:1"));
        channel.on_error(&tonic::Status::unavailable("connection reset"));
        assert_eq!(channel.cached_address(), None);
        channel.channel().await.expect("re-resolved");
        assert_eq!(channel.cached_address().as_deref(), Some("b:1"));

        b_stop.cancel();
        b.await.expect("b stops");
        assert_eq!(a_terms.load(Ordering::SeqCst), 1);
        assert_eq!(b_terms.load(Ordering::SeqCst), 1);
    }

    async fn until_leading(terms: &AtomicUsize, within: Duration) -> bool {
        tokio::time::timeout(within, async {
            while terms.load(Ordering::SeqCst) == 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .is_ok()
    }

    /// `caravan_leader` of `service` in this process.
    fn gauge(service: &str) -> i64 {
        crate::metrics::leading_now(service)
    }

    #[tokio::test]
    async fn a_leader_that_lost_its_lease_stops_claiming_to_lead_before_its_work_ends() {
        // A service name of its own: the gauge is process-wide.
        const SERVICE: &str = "gauge-test";
        let store: Arc<dyn Store> = Arc::new(MemStore::new());
        let shutdown = CancellationToken::new();
        let terms = Arc::new(AtomicUsize::new(0));
        let lead = {
            let (store, shutdown, terms) = (store.clone(), shutdown.clone(), terms.clone());
            tokio::spawn(async move {
                serve_as_leader(
                    store,
                    "/g",
                    SERVICE,
                    "a:1",
                    Duration::from_secs(2),
                    shutdown,
                    |_l, stop| {
                        let terms = terms.clone();
                        async move {
                            terms.fetch_add(1, Ordering::SeqCst);
                            stop.cancelled().await;
                            // A last commit waiting out a store timeout.
                            tokio::time::sleep(Duration::from_secs(3)).await;
                        }
                    },
                )
                .await;
            })
        };
        assert!(until_leading(&terms, Duration::from_secs(2)).await, "leads");
        assert_eq!(gauge(SERVICE), 1);
        // The lease goes (as when etcd expired it behind a partition).
        let election = caravan_store::election_name("/g", SERVICE);
        let leader = store
            .leader(election.as_bytes())
            .await
            .expect("store answers")
            .expect("a leader");
        store.lease_revoke(leader.lease).await.expect("revoked");
        let lost = tokio::time::Instant::now();
        tokio::time::timeout(Duration::from_secs(2), async {
            while gauge(SERVICE) != 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("the gauge drops within a renewal of the loss");
        assert!(
            lost.elapsed() < Duration::from_secs(3),
            "dropped before the work wound down"
        );
        shutdown.cancel();
        lead.await.expect("stops");
    }

    #[tokio::test]
    async fn a_leader_winding_down_slowly_hands_over_before_it_is_done() {
        let store: Arc<dyn Store> = Arc::new(MemStore::new());
        let (a_stop, b_stop) = (CancellationToken::new(), CancellationToken::new());
        let (a_terms, b_terms) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let a = tokio::spawn(replica_winding_down(
            store.clone(),
            "a:1",
            a_stop.clone(),
            a_terms.clone(),
            Duration::from_millis(2500),
        ));
        assert!(
            until_leading(&a_terms, Duration::from_secs(2)).await,
            "a leads"
        );
        let b = tokio::spawn(replica(
            store.clone(),
            "b:1",
            b_stop.clone(),
            b_terms.clone(),
        ));
        let asked = tokio::time::Instant::now();
        a_stop.cancel();
        assert!(
            until_leading(&b_terms, Duration::from_secs(1)).await,
            "b leads while a's work still winds down"
        );
        assert!(!a.is_finished(), "a's work is still winding down");
        a.await.expect("a stops");
        assert!(asked.elapsed() >= Duration::from_millis(2500));
        b_stop.cancel();
        b.await.expect("b stops");
    }
}

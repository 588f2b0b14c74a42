//! Who leads each leader-elected service, polled from its election in etcd,
//! and every change seen with its time: a failover is timed from the fault
//! to the first change to another leader (the new leader's election write).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use caravan_integration_tests::{ClusterState, Service};
use caravan_store::with_member_timeout;
use parking_lot::Mutex;
use tokio::task::JoinHandle;

/// The services that elect a leader.
pub const ELECTED: [Service; 3] = [
    Service::EvalBroker,
    Service::PlanApplier,
    Service::DeploymentWatcher,
];

/// How often the elections are read.
const POLL_EVERY: Duration = Duration::from_millis(50);
/// How long one read may take (a member may be down or frozen).
const READ_TIMEOUT: Duration = Duration::from_secs(1);
/// How long one etcd member may take to answer a read before the store
/// moves on to the next: a read dropped at [`READ_TIMEOUT`] alone would
/// leave the store on a frozen member (its own request timeout is longer),
/// and every poll until the member thaws would go unanswered, timing the
/// bench's stall instead of the failover.
const MEMBER_TIMEOUT: Duration = Duration::from_millis(200);

/// One change of a service's leader.
#[derive(Clone, Debug)]
pub struct Change {
    /// The service.
    pub service: Service,
    /// When the poll saw it.
    pub at: Instant,
    /// The new leader's address, `None` while there is none.
    pub leader: Option<String>,
}

/// The leaders now and every change seen.
#[derive(Debug, Default)]
pub struct Leaders {
    current: BTreeMap<&'static str, Option<String>>,
    changes: Vec<Change>,
}

impl Leaders {
    /// The leader of `service` as last read.
    pub fn of(&self, service: Service) -> Option<String> {
        self.current.get(service.name()).cloned().flatten()
    }

    /// When `service` first had a leader other than `old` at or after
    /// `since`.
    pub fn replaced_after(&self, service: Service, old: &str, since: Instant) -> Option<Instant> {
        self.changes
            .iter()
            .find(|c| {
                c.service == service
                    && c.at >= since
                    && c.leader.as_deref().is_some_and(|l| l != old)
            })
            .map(|c| c.at)
    }
}

/// Polls the elections until aborted.
pub fn monitor(state: ClusterState) -> (Arc<Mutex<Leaders>>, JoinHandle<()>) {
    let leaders = Arc::new(Mutex::new(Leaders::default()));
    let shared = leaders.clone();
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(POLL_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            for service in ELECTED {
                let read = with_member_timeout(MEMBER_TIMEOUT, state.leader(service.name()));
                let read = tokio::time::timeout(READ_TIMEOUT, read).await;
                // An unanswered read says nothing: keep what was seen.
                let Ok(Ok(leader)) = read else { continue };
                let mut l = shared.lock();
                let before = l.current.insert(service.name(), leader.clone());
                if before.as_ref() != Some(&leader) {
                    l.changes.push(Change {
                        service,
                        at: Instant::now(),
                        leader,
                    });
                }
            }
        }
    });
    (leaders, task)
}

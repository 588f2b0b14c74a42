//! Driver health over time: drivers whose fingerprint can change (a Docker
//! daemon that goes away and comes back) are fingerprinted again every
//! period, and a node whose drivers changed is handed to the heartbeat
//! loop, which registers it again, so the servers stop (and resume) placing
//! the driver's tasks there, as Nomad's client updates its node.

use std::sync::Arc;

use caravan_proto::Node;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::driver::{Drivers, Health};
use crate::fingerprint::apply_drivers;

/// Starts watching `drivers` for `node`; `None` when no driver's fingerprint
/// ever changes. The receiver sees each new version of the node.
pub fn watch(
    drivers: Drivers,
    node: Arc<Node>,
    shutdown: CancellationToken,
) -> Option<watch::Receiver<Arc<Node>>> {
    let period = drivers.fingerprint_period()?;
    let (tx, rx) = watch::channel(node);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(period) => {}
                _ = shutdown.cancelled() => return,
            }
            let fingerprints = drivers.fingerprints().await;
            let mut next = Node::clone(&tx.borrow());
            let before = next.drivers.clone();
            if !apply_drivers(&mut next, &fingerprints) {
                continue;
            }
            for (name, fp) in &fingerprints {
                let was = before.get(name.as_str());
                if was.is_none_or(|w| w.healthy != (fp.health == Health::Healthy)) {
                    tracing::info!(driver = %name, health = ?fp.health,
                        description = %fp.description, "driver health changed");
                }
            }
            tx.send_replace(Arc::new(next));
        }
    });
    Some(rx)
}

/// Waits until `updates` has a new node; never, without a watch.
pub async fn changed(updates: &mut Option<watch::Receiver<Arc<Node>>>) -> Arc<Node> {
    match updates {
        Some(rx) => match rx.changed().await {
            Ok(()) => rx.borrow_and_update().clone(),
            Err(_) => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::{
        Capabilities, Driver, DriverError, Fingerprint, HandleState, MockDriver, TaskHandle,
        TaskSpec,
    };
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    /// A driver whose health a test flips.
    #[derive(Debug, Default)]
    struct Flaky(AtomicBool);

    #[async_trait::async_trait]
    impl Driver for Flaky {
        fn name(&self) -> &'static str {
            "flaky"
        }
        fn capabilities(&self) -> Capabilities {
            MockDriver::new().capabilities()
        }
        async fn fingerprint(&self) -> Fingerprint {
            if self.0.load(Ordering::SeqCst) {
                Fingerprint::failed(Health::Unhealthy, "down")
            } else {
                Fingerprint::healthy(Default::default())
            }
        }
        fn fingerprint_period(&self) -> Option<Duration> {
            Some(Duration::from_secs(1))
        }
        fn wants_env(&self) -> bool {
            false
        }
        async fn start(&self, _spec: TaskSpec) -> Result<Arc<dyn TaskHandle>, DriverError> {
            Err(DriverError::fatal("no"))
        }
        async fn recover(&self, _: &TaskSpec, _: &HandleState) -> Option<Arc<dyn TaskHandle>> {
            None
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_driver_that_goes_down_and_up_updates_the_node() {
        let flaky = Arc::new(Flaky::default());
        let mut drivers = Drivers::default();
        drivers.add(flaky.clone());
        let mut node = Node::default();
        apply_drivers(&mut node, &drivers.fingerprints().await);
        assert!(node.drivers["flaky"].healthy);
        let shutdown = CancellationToken::new();
        let mut updates = watch(drivers.clone(), Arc::new(node), shutdown.clone());
        assert!(updates.is_some());
        flaky.0.store(true, Ordering::SeqCst);
        let down = changed(&mut updates).await;
        assert!(!down.drivers["flaky"].healthy);
        assert_eq!(down.drivers["flaky"].health_description, "down");
        flaky.0.store(false, Ordering::SeqCst);
        let up = changed(&mut updates).await;
        assert!(up.drivers["flaky"].healthy);
        // Nothing changes: no new node.
        let quiet = tokio::time::timeout(Duration::from_secs(5), changed(&mut updates)).await;
        assert!(quiet.is_err());
        shutdown.cancel();
        assert!(watch(Drivers::simulated(), up, shutdown).is_none());
    }
}

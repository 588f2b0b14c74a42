//! Which store a service talks to: the `[store]` section of every service's
//! configuration, and the connection a service waits for before it serves.

use std::sync::Arc;
use std::time::Duration;

use caravan_store::{Backoff, EtcdConfig, EtcdStore, Store, StoreError};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

/// The first pause before connecting again after a failed attempt.
const RECONNECT_FIRST: Duration = Duration::from_millis(250);
/// The longest pause between attempts.
const RECONNECT_MAX: Duration = Duration::from_secs(5);

/// Where the state lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StoreConfig {
    /// etcd endpoints, e.g. `http://127.0.0.1:2379`.
    pub endpoints: Vec<String>,
    /// Key prefix of all of Caravan's state.
    pub prefix: String,
    /// How long to wait for etcd when connecting, in milliseconds.
    pub connect_timeout_ms: u64,
    /// How long a single request may take, in milliseconds.
    pub request_timeout_ms: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            endpoints: vec!["http://127.0.0.1:2379".into()],
            prefix: "/caravan".into(),
            connect_timeout_ms: 5_000,
            request_timeout_ms: 10_000,
        }
    }
}

/// Configuration keys holding lists, for [`ConfigLoader::list_keys`](crate::config::ConfigLoader::list_keys).
pub const STORE_LIST_KEYS: &[&str] = &["store.endpoints"];

impl StoreConfig {
    /// Connects to etcd.
    pub async fn connect(&self) -> Result<Arc<dyn Store>, StoreError> {
        let mut config = EtcdConfig::new(&self.endpoints);
        config.connect_timeout = Duration::from_millis(self.connect_timeout_ms);
        config.request_timeout = Duration::from_millis(self.request_timeout_ms);
        Ok(Arc::new(EtcdStore::connect_with(config).await?))
    }

    /// Connects to etcd, trying again after each failure (logged) with
    /// pauses that double up to 5 s, so a service started before its store
    /// comes up waits for it; `None` once `shutdown` fires first.
    pub async fn connect_until(&self, shutdown: &CancellationToken) -> Option<Arc<dyn Store>> {
        let mut pauses = reconnect_pauses();
        let mut attempt = 1u32;
        loop {
            let connected = tokio::select! {
                connected = self.connect() => connected,
                () = shutdown.cancelled() => return None,
            };
            let err = match connected {
                Ok(store) => {
                    if attempt > 1 {
                        tracing::info!(attempt, endpoints = ?self.endpoints, "reached the store");
                    }
                    return Some(store);
                }
                Err(err) => err,
            };
            let pause = pauses.next_delay();
            tracing::warn!(
                error = %err,
                endpoints = ?self.endpoints,
                attempt,
                retry_in = ?pause,
                "cannot reach the store; trying again"
            );
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = shutdown.cancelled() => return None,
            }
            attempt = attempt.saturating_add(1);
        }
    }
}

/// The pauses between connection attempts: doubling from
/// [`RECONNECT_FIRST`], then [`RECONNECT_MAX`] for ever.
fn reconnect_pauses() -> Backoff {
    Backoff::new(RECONNECT_FIRST, RECONNECT_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_up_to_the_cap() {
        let mut pauses = reconnect_pauses();
        let pauses: Vec<u64> = (0..7)
            .map(|_| u64::try_from(pauses.next_delay().as_millis()).unwrap())
            .collect();
        assert_eq!(pauses, [250, 500, 1_000, 2_000, 4_000, 5_000, 5_000]);
    }

    #[tokio::test]
    async fn an_unreachable_store_is_retried_until_shutdown() {
        let config = StoreConfig {
            // Nothing listens on port 1: every attempt is refused at once.
            endpoints: vec!["http://127.0.0.1:1".into()],
            connect_timeout_ms: 200,
            ..StoreConfig::default()
        };
        let shutdown = CancellationToken::new();
        let stopper = shutdown.clone();
        let started = tokio::time::Instant::now();
        tokio::spawn(async move {
            // Past the first pauses (250 + 500 ms): several attempts failed.
            tokio::time::sleep(Duration::from_millis(1_200)).await;
            stopper.cancel();
        });
        assert!(config.connect_until(&shutdown).await.is_none());
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(1_200),
            "gave up early: {took:?}"
        );
        assert!(
            took < Duration::from_secs(3),
            "shutdown not heeded: {took:?}"
        );
    }
}

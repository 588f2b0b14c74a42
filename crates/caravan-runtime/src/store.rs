//! Which store a service talks to: the `[store]` section of every service's
//! configuration.

use std::sync::Arc;
use std::time::Duration;

use caravan_store::{EtcdConfig, EtcdStore, Store, StoreError};
use serde::{Deserialize, Serialize};

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
}

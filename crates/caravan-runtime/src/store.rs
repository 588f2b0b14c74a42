//! Which store a service talks to: the `[store]` section of every service's
//! configuration, and the connection a service waits for before it serves.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use caravan_store::{Backoff, EtcdClientCert, EtcdConfig, EtcdStore, EtcdTls, Store, StoreError};
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
    /// etcd endpoints, e.g. `http://127.0.0.1:2379`; all `https://`
    /// (with `ca_file`) or none.
    pub endpoints: Vec<String>,
    /// Key prefix of all of Caravan's state.
    pub prefix: String,
    /// How long to wait for etcd when connecting, in milliseconds.
    pub connect_timeout_ms: u64,
    /// How long a single request may take, in milliseconds.
    pub request_timeout_ms: u64,
    /// The CA that signs etcd's certificate (PEM); required by `https://`
    /// endpoints, empty for plaintext ones.
    pub ca_file: PathBuf,
    /// The client certificate etcd asks for with `--client-cert-auth`
    /// (PEM, `clientAuth` usage); empty for none.
    pub cert_file: PathBuf,
    /// Its private key (PEM); given exactly when `cert_file` is.
    pub key_file: PathBuf,
    /// The name etcd's certificate must carry; empty means the endpoint's
    /// host.
    pub tls_server_name: String,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            endpoints: vec!["http://127.0.0.1:2379".into()],
            prefix: "/caravan".into(),
            connect_timeout_ms: 5_000,
            request_timeout_ms: 10_000,
            ca_file: PathBuf::new(),
            cert_file: PathBuf::new(),
            key_file: PathBuf::new(),
            tls_server_name: String::new(),
        }
    }
}

/// Configuration keys holding lists, for [`ConfigLoader::list_keys`](crate::config::ConfigLoader::list_keys).
pub const STORE_LIST_KEYS: &[&str] = &["store.endpoints"];

impl StoreConfig {
    /// Checks that the settings fit together, naming the first bad key.
    /// The files are not read here: that happens on every connection, so
    /// a rotated client certificate is used from the next one on.
    pub fn validate(&self) -> anyhow::Result<()> {
        self.tls().map(drop)
    }

    /// The TLS to etcd these settings ask for, if any.
    pub fn tls(&self) -> anyhow::Result<Option<EtcdTls>> {
        let invalid = |msg: String| Err(anyhow::anyhow!(msg));
        let set = |path: &PathBuf| !path.as_os_str().is_empty();
        let https = self.endpoints.iter().filter(|e| is_https(e)).count();
        if https != 0 && https != self.endpoints.len() {
            return invalid(format!(
                "store.endpoints: mixes https:// and plaintext endpoints ({}); use one scheme",
                self.endpoints.join(",")
            ));
        }
        let tls_settings = set(&self.ca_file)
            || set(&self.cert_file)
            || set(&self.key_file)
            || !self.tls_server_name.is_empty();
        if https == 0 {
            if tls_settings {
                return invalid(format!(
                    "store.endpoints: TLS settings are given but the endpoints are not https:// ({})",
                    self.endpoints.join(",")
                ));
            }
            return Ok(None);
        }
        if !set(&self.ca_file) {
            return invalid(
                "store.ca_file: https:// endpoints need the CA that signs etcd's certificate"
                    .to_string(),
            );
        }
        let client_cert = match (set(&self.cert_file), set(&self.key_file)) {
            (true, true) => Some(EtcdClientCert {
                cert_file: self.cert_file.clone(),
                key_file: self.key_file.clone(),
            }),
            (false, false) => None,
            (true, false) => {
                return invalid("store.key_file: store.cert_file needs its key".to_string());
            }
            (false, true) => {
                return invalid(
                    "store.cert_file: store.key_file needs its certificate".to_string(),
                );
            }
        };
        Ok(Some(EtcdTls {
            ca_file: self.ca_file.clone(),
            client_cert,
            server_name: (!self.tls_server_name.is_empty()).then(|| self.tls_server_name.clone()),
        }))
    }

    /// How to reach etcd, checked.
    pub fn etcd_config(&self) -> anyhow::Result<EtcdConfig> {
        let mut config = EtcdConfig::new(&self.endpoints);
        config.tls = self.tls()?;
        config.connect_timeout = Duration::from_millis(self.connect_timeout_ms);
        config.request_timeout = Duration::from_millis(self.request_timeout_ms);
        Ok(config)
    }

    /// Connects to etcd.
    pub async fn connect(&self) -> Result<Arc<dyn Store>, StoreError> {
        let config = self
            .etcd_config()
            .map_err(|err| StoreError::InvalidArgument(err.to_string()))?;
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

/// Whether `endpoint` is a TLS one.
fn is_https(endpoint: &str) -> bool {
    endpoint
        .get(..8)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"))
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

    fn secure(endpoints: &[&str]) -> StoreConfig {
        StoreConfig {
            endpoints: endpoints.iter().map(|e| (*e).to_string()).collect(),
            ca_file: "/etc/caravan/etcd-ca.pem".into(),
            cert_file: "/etc/caravan/etcd-client.pem".into(),
            key_file: "/etc/caravan/etcd-client-key.pem".into(),
            ..StoreConfig::default()
        }
    }

    fn refusal(config: &StoreConfig) -> String {
        match config.validate() {
            Err(err) => err.to_string(),
            Ok(()) => panic!("expected a refusal of {config:?}"),
        }
    }

    #[test]
    fn plaintext_is_the_default_and_needs_no_files() {
        let config = StoreConfig::default();
        assert_eq!(config.tls().unwrap(), None);
        assert_eq!(config.etcd_config().unwrap().tls, None);
    }

    #[test]
    fn https_endpoints_carry_every_tls_setting() {
        let config = StoreConfig {
            tls_server_name: "etcd.internal".into(),
            ..secure(&["https://10.0.0.1:2379", "https://10.0.0.2:2379"])
        };
        let tls = config.etcd_config().unwrap().tls.unwrap();
        assert_eq!(tls.ca_file, PathBuf::from("/etc/caravan/etcd-ca.pem"));
        let client = tls.client_cert.unwrap();
        assert_eq!(
            client.cert_file,
            PathBuf::from("/etc/caravan/etcd-client.pem")
        );
        assert_eq!(
            client.key_file,
            PathBuf::from("/etc/caravan/etcd-client-key.pem")
        );
        assert_eq!(tls.server_name.as_deref(), Some("etcd.internal"));
        // Without a client certificate: etcd without --client-cert-auth.
        let config = StoreConfig {
            cert_file: PathBuf::new(),
            key_file: PathBuf::new(),
            ..secure(&["https://10.0.0.1:2379"])
        };
        assert_eq!(config.tls().unwrap().unwrap().client_cert, None);
    }

    #[test]
    fn bad_tls_settings_name_the_key() {
        let config = StoreConfig {
            ca_file: PathBuf::new(),
            ..secure(&["https://10.0.0.1:2379"])
        };
        assert!(refusal(&config).starts_with("store.ca_file:"));
        let config = StoreConfig {
            key_file: PathBuf::new(),
            ..secure(&["https://10.0.0.1:2379"])
        };
        assert!(refusal(&config).starts_with("store.key_file:"));
        let config = StoreConfig {
            cert_file: PathBuf::new(),
            ..secure(&["https://10.0.0.1:2379"])
        };
        assert!(refusal(&config).starts_with("store.cert_file:"));
        let config = secure(&["https://10.0.0.1:2379", "http://10.0.0.2:2379"]);
        assert!(refusal(&config).starts_with("store.endpoints:"));
        let config = secure(&["http://10.0.0.1:2379"]);
        assert!(refusal(&config).starts_with("store.endpoints:"));
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

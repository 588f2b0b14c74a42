//! Mutual TLS on every gRPC hop and HTTPS on the HTTP API: the `[tls]`
//! section every service shares, the process's identity that its servers
//! present and its channels dial with — reloaded when its files change —,
//! the roles certificates name, and making them (`caravan tls`).

pub mod accept;
pub mod certs;
mod configs;
mod connect;
mod material;
mod reload;
pub mod roles;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use anyhow::Context;
use rustls_pki_types::ServerName;
use serde::{Deserialize, Serialize};

pub use accept::TlsIncoming;
use configs::ClientAuth;
pub use connect::TlsConnector;
use reload::Reloadable;
pub use reload::{RELOAD_PERIOD, Reload};
pub use roles::RoleCheckLayer;

/// The `[tls]` section of every service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TlsConfig {
    /// Whether every gRPC server requires a client certificate signed by
    /// `ca_file` and every channel dials with TLS.
    pub enabled: bool,
    /// The CA that signs every peer's certificate (PEM).
    pub ca_file: PathBuf,
    /// This process's certificate (PEM), e.g. `global-server-caravan.pem`.
    pub cert_file: PathBuf,
    /// Its private key (PEM).
    pub key_file: PathBuf,
    /// The region in role names: `server.<region>.caravan`.
    pub region: String,
    /// Whether the HTTP API (the gateway's) serves HTTPS with `cert_file`
    /// (Nomad's `tls.http`); `enabled` is the gRPC side.
    pub http: bool,
    /// Whether HTTPS requires a client certificate signed by `ca_file`, of
    /// any role (Nomad's `tls.verify_https_client`); without it one is
    /// checked when presented.
    pub verify_https_client: bool,
}

impl TlsConfig {
    /// Refuses HTTP TLS settings that cannot work, naming them.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.verify_https_client && !self.http {
            anyhow::bail!(
                "tls.verify_https_client: asks HTTPS clients for a certificate, so it needs tls.http = true"
            );
        }
        let unset = [
            ("ca_file", &self.ca_file),
            ("cert_file", &self.cert_file),
            ("key_file", &self.key_file),
        ]
        .into_iter()
        .filter(|(_, path)| path.as_os_str().is_empty())
        .map(|(key, _)| format!("tls.{key}"))
        .collect::<Vec<_>>();
        if self.http && !unset.is_empty() {
            anyhow::bail!(
                "tls.http: serving the HTTP API over TLS needs {} set",
                unset.join(", ")
            );
        }
        Ok(())
    }
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig {
            enabled: false,
            ca_file: PathBuf::new(),
            cert_file: PathBuf::new(),
            key_file: PathBuf::new(),
            region: "global".to_string(),
            http: false,
            verify_https_client: false,
        }
    }
}

/// The role a certificate names, as `<role>.<region>.caravan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// The control plane's services (and the gateway).
    Server,
    /// A client node.
    Client,
    /// The `caravan` command line and other API users.
    Cli,
}

impl Role {
    /// Every role, most trusted first.
    pub const ALL: [Role; 3] = [Role::Server, Role::Client, Role::Cli];

    /// `server`, `client` or `cli`.
    pub fn name(self) -> &'static str {
        match self {
            Role::Server => "server",
            Role::Client => "client",
            Role::Cli => "cli",
        }
    }

    /// The DNS name a certificate of this role carries in `region`.
    pub fn dns_name(self, region: &str) -> String {
        format!("{}.{region}.caravan", self.name())
    }

    /// [`Role::dns_name`] as the name a TLS peer is checked against.
    pub fn server_name(self, region: &str) -> Result<ServerName<'static>, String> {
        let name = self.dns_name(region);
        ServerName::try_from(name.clone()).map_err(|_| format!("{name:?} is not a DNS name"))
    }
}

/// The TLS of a process with `[tls]` enabled (gRPC) or `tls.http` set:
/// configurations built once whose certificate and CA come from material
/// that [`Tls::watch`] reloads when the files change. Clones share it.
#[derive(Debug, Clone)]
pub struct Tls {
    config: TlsConfig,
    holder: Arc<Reloadable>,
    grpc_server: Arc<rustls::ServerConfig>,
    https_server: Arc<rustls::ServerConfig>,
    client: Arc<rustls::ClientConfig>,
}

impl Tls {
    /// Reads and checks the files `config` names; the error names the key
    /// and file at fault.
    pub fn load(config: &TlsConfig) -> anyhow::Result<Tls> {
        for role in Role::ALL {
            role.server_name(&config.region)
                .map_err(|err| anyhow::anyhow!("tls.region: {err}"))?;
        }
        let holder = Arc::new(Reloadable::load(config).map_err(anyhow::Error::msg)?);
        let https_auth = if config.verify_https_client {
            ClientAuth::Required
        } else {
            ClientAuth::Optional
        };
        let unusable = "tls: cannot build a TLS configuration";
        Ok(Tls {
            grpc_server: configs::server(&holder, ClientAuth::Required, configs::ALPN_H2)
                .context(unusable)?,
            https_server: configs::server(&holder, https_auth, configs::ALPN_HTTP1)
                .context(unusable)?,
            client: configs::client(&holder).context(unusable)?,
            config: config.clone(),
            holder,
        })
    }

    /// The region whose role names peers must carry.
    pub fn region(&self) -> &str {
        &self.config.region
    }

    /// gRPC servers present the current certificate and require a client
    /// certificate signed by the current CA.
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        self.grpc_server.clone()
    }

    /// The HTTP API presents the same certificate; it requires a client
    /// certificate with `verify_https_client` and checks one when presented
    /// otherwise.
    pub fn https_config(&self) -> Arc<rustls::ServerConfig> {
        self.https_server.clone()
    }

    /// Channels dial with the current certificate and accept only a peer
    /// whose certificate names `peer`'s role (the control plane's services
    /// are servers; the gateway dials client nodes), whatever address they
    /// dial.
    pub fn connector(&self, peer: Role) -> TlsConnector {
        let name = peer
            .server_name(self.region())
            .expect("role names checked by Tls::load");
        TlsConnector::new(self.client.clone(), name)
    }

    /// Reads the files once, swapping in their material when they changed
    /// and are usable ([`Tls::watch`] does this periodically).
    pub fn reload(&self) -> Reload {
        self.holder.check()
    }

    /// Starts re-reading the files every [`RELOAD_PERIOD`] for as long as
    /// the process runs.
    pub fn watch(&self) -> anyhow::Result<()> {
        self.holder
            .watch()
            .context("tls: cannot start the thread that reloads certificates")
    }
}

/// The process's TLS, set once at start. Process-wide because every
/// channel a service dials (leader channels, the gateway's to client
/// nodes, a node's to the gateway) must carry the same identity, wherever
/// it is built.
static CURRENT: OnceLock<Option<Tls>> = OnceLock::new();

/// Loads `config` as the process's TLS (nothing when neither gRPC nor HTTP
/// TLS is on) and starts reloading it when its files change. The first
/// call wins: a process has one identity.
pub fn install(config: &TlsConfig) -> anyhow::Result<()> {
    config.validate()?;
    if CURRENT.get().is_some() {
        // A later call (an in-process service beside another) keeps the first.
        return Ok(());
    }
    let tls = if config.enabled || config.http {
        Some(Tls::load(config)?)
    } else {
        None
    };
    if CURRENT.set(tls).is_ok()
        && let Some(tls) = CURRENT.get().and_then(Option::as_ref)
    {
        tls.watch()?;
    }
    Ok(())
}

/// The process's TLS for gRPC, when `[tls]` is enabled.
pub fn current() -> Option<&'static Tls> {
    installed().filter(|tls| tls.config.enabled)
}

/// The process's TLS for the HTTP API, when `tls.http` is set.
pub fn https() -> Option<&'static Tls> {
    installed().filter(|tls| tls.config.http)
}

fn installed() -> Option<&'static Tls> {
    CURRENT.get().and_then(Option::as_ref)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(dir: &std::path::Path, role: &str) -> TlsConfig {
        TlsConfig {
            enabled: true,
            ca_file: dir.join(certs::CA_CERT_FILE),
            cert_file: dir.join(format!("global-{role}-caravan.pem")),
            key_file: dir.join(format!("global-{role}-caravan-key.pem")),
            ..TlsConfig::default()
        }
    }

    #[test]
    fn files_are_read_and_checked_at_start_naming_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let missing = Tls::load(&config(dir.path(), "server")).unwrap_err();
        assert!(
            format!("{missing:#}").starts_with("tls.ca_file: cannot read"),
            "{missing:#}"
        );

        certs::create_ca(dir.path(), 10).unwrap();
        let request = certs::CertRequest {
            role: Role::Server,
            region: "global".into(),
            days: 10,
            dns_names: Vec::new(),
            ip_addresses: Vec::new(),
            ca_cert: dir.path().join(certs::CA_CERT_FILE),
            ca_key: dir.path().join(certs::CA_KEY_FILE),
        };
        certs::create_cert(dir.path(), &request).unwrap();
        let tls = Tls::load(&config(dir.path(), "server")).unwrap();
        assert_eq!(tls.region(), "global");

        // A key that is not a key stops the start rather than a later dial.
        let mut bad = config(dir.path(), "server");
        bad.key_file = dir.path().join(certs::CA_CERT_FILE);
        let unusable = Tls::load(&bad).unwrap_err();
        assert!(
            format!("{unusable:#}").starts_with("tls.key_file: ")
                && format!("{unusable:#}").contains("no PEM private key"),
            "{unusable:#}"
        );

        let mut bad = config(dir.path(), "server");
        bad.region = "no region".into();
        let unusable = Tls::load(&bad).unwrap_err();
        assert!(
            format!("{unusable:#}").starts_with("tls.region: "),
            "{unusable:#}"
        );
    }

    #[test]
    fn https_settings_need_the_files_and_each_other() {
        let http = TlsConfig {
            http: true,
            ..TlsConfig::default()
        };
        let err = http.validate().unwrap_err().to_string();
        assert!(
            err.starts_with("tls.http: ")
                && err.contains("tls.ca_file, tls.cert_file, tls.key_file"),
            "{err}"
        );
        let verify_only = TlsConfig {
            verify_https_client: true,
            ca_file: "ca.pem".into(),
            cert_file: "cert.pem".into(),
            key_file: "key.pem".into(),
            ..TlsConfig::default()
        };
        let err = verify_only.validate().unwrap_err().to_string();
        assert!(
            err.starts_with("tls.verify_https_client: ") && err.contains("tls.http"),
            "{err}"
        );
        let both = TlsConfig {
            http: true,
            ..verify_only
        };
        both.validate().unwrap();
        TlsConfig::default().validate().unwrap();
    }

    #[test]
    fn tls_is_off_by_default() {
        let config = TlsConfig::default();
        assert!(!config.enabled && !config.http && !config.verify_https_client);
        assert_eq!(config.region, "global");
    }
}

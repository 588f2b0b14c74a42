//! Mutual TLS on every gRPC hop: the `[tls]` section every service shares,
//! the process's identity that its servers present and its channels dial
//! with, the roles certificates name, and making them (`caravan tls`).

pub mod certs;
pub mod roles;

use std::path::PathBuf;
use std::sync::OnceLock;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

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
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig {
            enabled: false,
            ca_file: PathBuf::new(),
            cert_file: PathBuf::new(),
            key_file: PathBuf::new(),
            region: "global".to_string(),
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
}

/// The TLS material of a process with `[tls]` enabled, loaded once.
#[derive(Debug, Clone)]
pub struct Tls {
    ca: Certificate,
    identity: Identity,
    region: String,
}

impl Tls {
    /// Reads the files `config` names.
    pub fn load(config: &TlsConfig) -> anyhow::Result<Tls> {
        let read = |key: &str, path: &PathBuf| {
            std::fs::read(path)
                .with_context(|| format!("tls.{key}: cannot read {}", path.display()))
        };
        let ca = read("ca_file", &config.ca_file)?;
        let cert = read("cert_file", &config.cert_file)?;
        let key = read("key_file", &config.key_file)?;
        let tls = Tls {
            ca: Certificate::from_pem(ca),
            identity: Identity::from_pem(cert, key),
            region: config.region.clone(),
        };
        // tonic parses the PEM when a server or channel is built: parse it
        // now so a bad file stops the start instead of a later dial.
        tonic::transport::Server::builder()
            .tls_config(tls.server_config())
            .context("tls: the certificate, key or CA is not usable")?;
        tonic::transport::Endpoint::from_static("https://127.0.0.1")
            .tls_config(tls.client_config(Role::Server))
            .context("tls: the certificate, key or CA is not usable")?;
        Ok(tls)
    }

    /// The region whose role names peers must carry.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// Servers present this identity and require a client certificate
    /// signed by the CA.
    pub fn server_config(&self) -> ServerTlsConfig {
        ServerTlsConfig::new()
            .identity(self.identity.clone())
            .client_ca_root(self.ca.clone())
    }

    /// Channels dial with this identity and accept only a peer whose
    /// certificate names `peer`'s role (the control plane's services are
    /// servers; the gateway dials client nodes), whatever address they dial.
    pub fn client_config(&self, peer: Role) -> ClientTlsConfig {
        ClientTlsConfig::new()
            .ca_certificate(self.ca.clone())
            .identity(self.identity.clone())
            .domain_name(peer.dns_name(&self.region))
    }
}

/// The process's TLS, set once at start. Process-wide because every
/// channel a service dials (leader channels, the gateway's to client
/// nodes, a node's to the gateway) must carry the same identity, wherever
/// it is built.
static CURRENT: OnceLock<Option<Tls>> = OnceLock::new();

/// Loads `config` as the process's TLS (nothing when it is disabled).
/// The first call wins: a process has one identity.
pub fn install(config: &TlsConfig) -> anyhow::Result<()> {
    let tls = if config.enabled {
        Some(Tls::load(config)?)
    } else {
        None
    };
    // A later call (an in-process service beside another) keeps the first.
    let _first = CURRENT.set(tls);
    Ok(())
}

/// The process's TLS, when enabled.
pub fn current() -> Option<&'static Tls> {
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
            region: "global".into(),
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
            format!("{unusable:#}").contains("not usable"),
            "{unusable:#}"
        );
    }

    #[test]
    fn tls_is_off_by_default() {
        let config = TlsConfig::default();
        assert!(!config.enabled);
        assert_eq!(config.region, "global");
    }
}

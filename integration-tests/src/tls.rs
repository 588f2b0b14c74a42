//! Mutual TLS in the harness: whether the suite runs with `[tls]` on
//! (`CARAVAN_TEST_TLS`), a cluster's CA and certificates (made with
//! `caravan tls`), the settings a service runs with, and gRPC channels that
//! present one of the certificates.

use std::path::{Path, PathBuf};
use std::time::Duration;

use caravan_runtime::tls::Role;
use caravan_runtime::tls::certs::CA_CERT_FILE;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

/// The environment variable that turns TLS on for every [`crate::Cluster`].
pub const ENV: &str = "CARAVAN_TEST_TLS";

/// The region in the certificates' role names (`caravan tls`'s default).
const REGION: &str = "global";

/// Whether `CARAVAN_TEST_TLS` asks every cluster to run with mutual TLS:
/// `1`/`true`/`yes`/`on` turn it on, unset, empty, `0`/`false`/`no`/`off`
/// leave it off; anything else is an error naming the variable.
pub fn requested() -> anyhow::Result<bool> {
    match std::env::var(ENV) {
        Err(std::env::VarError::NotPresent) => Ok(false),
        Err(std::env::VarError::NotUnicode(v)) => {
            anyhow::bail!("{ENV}={v:?} is not UTF-8; use 1 or 0")
        }
        Ok(v) => parse(&v),
    }
}

fn parse(value: &str) -> anyhow::Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "" | "0" | "false" | "no" | "off" => Ok(false),
        other => anyhow::bail!("{ENV}={other:?}: expected 1 (TLS on) or 0 (off)"),
    }
}

/// A directory holding a CA and a server, a client and a CLI certificate
/// signed by it, under the names `caravan tls` gives them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    dir: PathBuf,
}

impl TlsFiles {
    /// Runs `caravan` (`bin`) to make the CA and the three certificates in
    /// `dir` (created if missing).
    pub async fn create(bin: &Path, dir: &Path) -> anyhow::Result<TlsFiles> {
        std::fs::create_dir_all(dir)?;
        for args in [
            &["ca", "create"][..],
            &["cert", "create", "-server"],
            &["cert", "create", "-client"],
            &["cert", "create", "-cli"],
        ] {
            let out = tokio::process::Command::new(bin)
                .arg("tls")
                .args(args)
                .current_dir(dir)
                .output()
                .await?;
            anyhow::ensure!(
                out.status.success(),
                "caravan tls {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(TlsFiles {
            dir: dir.to_path_buf(),
        })
    }

    /// The directory of the files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The CA certificate.
    pub fn ca(&self) -> PathBuf {
        self.dir.join(CA_CERT_FILE)
    }

    /// The certificate of `role`.
    pub fn cert(&self, role: Role) -> PathBuf {
        self.dir
            .join(format!("{REGION}-{}-caravan.pem", role.name()))
    }

    /// The private key of `role`'s certificate.
    pub fn key(&self, role: Role) -> PathBuf {
        self.dir
            .join(format!("{REGION}-{}-caravan-key.pem", role.name()))
    }

    /// The `[tls]` settings of a process presenting `role`'s certificate.
    pub fn settings(&self, role: Role) -> Vec<(String, String)> {
        let path = |p: PathBuf| p.display().to_string();
        vec![
            ("tls.enabled".into(), "true".into()),
            ("tls.ca_file".into(), path(self.ca())),
            ("tls.cert_file".into(), path(self.cert(role))),
            ("tls.key_file".into(), path(self.key(role))),
        ]
    }

    /// A lazily connecting channel to `addr` presenting `own`'s certificate
    /// and accepting only a server whose certificate names `peer` (client
    /// nodes' servers carry the client certificate).
    pub fn channel(&self, addr: &str, own: Role, peer: Role) -> anyhow::Result<Channel> {
        let read = |p: PathBuf| {
            std::fs::read(&p).map_err(|e| anyhow::anyhow!("reading {}: {e}", p.display()))
        };
        let config = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(read(self.ca())?))
            .identity(Identity::from_pem(
                read(self.cert(own))?,
                read(self.key(own))?,
            ))
            .domain_name(peer.dns_name(REGION));
        let authority = addr.split_once("://").map_or(addr, |(_, rest)| rest);
        Ok(Channel::from_shared(format!("https://{authority}"))?
            .tls_config(config)?
            .connect_timeout(Duration::from_secs(3))
            .connect_lazy())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switch_reads_the_usual_spellings_and_refuses_others() {
        for on in ["1", "true", "TRUE", " yes ", "on"] {
            assert!(parse(on).unwrap(), "{on:?}");
        }
        for off in ["", "0", "false", "No", "off"] {
            assert!(!parse(off).unwrap(), "{off:?}");
        }
        let err = parse("mtls").unwrap_err().to_string();
        assert!(err.contains(ENV) && err.contains("mtls"), "{err}");
    }

    #[test]
    fn file_names_are_those_caravan_tls_writes() {
        let files = TlsFiles {
            dir: PathBuf::from("/certs"),
        };
        assert_eq!(files.ca(), Path::new("/certs/caravan-agent-ca.pem"));
        assert_eq!(
            files.cert(Role::Client),
            Path::new("/certs/global-client-caravan.pem")
        );
        assert_eq!(
            files.key(Role::Cli),
            Path::new("/certs/global-cli-caravan-key.pem")
        );
        let settings = files.settings(Role::Server);
        assert!(settings.contains(&(
            "tls.cert_file".to_string(),
            "/certs/global-server-caravan.pem".to_string()
        )));
    }
}

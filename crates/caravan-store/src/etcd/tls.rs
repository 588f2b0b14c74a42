//! TLS to etcd: the CA that signs etcd's certificate, the client
//! certificate etcd asks for (`--client-cert-auth`), and the name etcd's
//! certificate must carry. The files are read each time a member's
//! connection is made, so a rotated client certificate is used from the
//! next connection on.

use std::path::{Path, PathBuf};

use etcd_client as ec;

use crate::error::{Result, StoreError};

use super::convert;

/// How a PEM certificate starts.
const PEM_CERT: &str = "-----BEGIN CERTIFICATE-----";

/// A client certificate and its key (PEM files).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdClientCert {
    /// The certificate, signed by a CA etcd trusts (`--trusted-ca-file`)
    /// and carrying the `clientAuth` extended key usage.
    pub cert_file: PathBuf,
    /// Its private key.
    pub key_file: PathBuf,
}

/// How to reach etcd over TLS (`https://` endpoints).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdTls {
    /// The CA etcd's server certificate must be signed by (PEM). System
    /// roots are never used: Caravan cannot assume they are installed.
    pub ca_file: PathBuf,
    /// The certificate presented to etcd, when it requires one.
    pub client_cert: Option<EtcdClientCert>,
    /// The name etcd's certificate must carry; by default the endpoint's
    /// host (an IP address or a DNS name).
    pub server_name: Option<String>,
}

impl EtcdTls {
    /// etcd-client's TLS options, from the files as they are now.
    pub(super) fn options(&self) -> Result<ec::TlsOptions> {
        let ca = read("CA", &self.ca_file)?;
        // An empty trust store would refuse every etcd with an unhelpful
        // "unknown issuer": say what is wrong with the file instead.
        if !ca.windows(PEM_CERT.len()).any(|w| w == PEM_CERT.as_bytes()) {
            return Err(StoreError::InvalidArgument(format!(
                "etcd TLS: the CA file {} holds no PEM certificate",
                self.ca_file.display()
            )));
        }
        let mut options = ec::TlsOptions::new().ca_certificate(ec::Certificate::from_pem(ca));
        if let Some(client) = &self.client_cert {
            let cert = read("client certificate", &client.cert_file)?;
            let key = read("client key", &client.key_file)?;
            options = options.identity(ec::Identity::from_pem(cert, key));
        }
        if let Some(name) = &self.server_name {
            options = options.domain_name(name.clone());
        }
        Ok(options)
    }

    /// Reads and parses the files once, so a missing or broken one stops
    /// connecting with its name instead of failing every member.
    pub(super) fn check(&self) -> Result<()> {
        let options = self.options()?;
        tonic::transport::Endpoint::from_static("https://127.0.0.1")
            .tls_config(options)
            .map_err(|err| {
                StoreError::InvalidArgument(format!(
                    "etcd TLS: the CA ({}) or client certificate is not usable: {}",
                    self.ca_file.display(),
                    convert::error_chain(&err)
                ))
            })?;
        Ok(())
    }
}

/// What to add to a failure to reach etcd over `tls`: an etcd with
/// `--client-cert-auth` refuses a client's certificate, or its absence,
/// after the TLS 1.3 handshake, with an alert that often reaches the client
/// (`CertificateRequired`, `BadCertificate`) but may not, when etcd has
/// closed the connection first: the client then sees it close (or a broken
/// pipe, or a reset) without a reason, and the likely one is added.
pub(super) fn refusal_hint(tls: Option<&EtcdTls>, err: &StoreError) -> &'static str {
    match tls {
        Some(tls) if closed_without_reason(&err.to_string()) => {
            if tls.client_cert.is_none() {
                " (etcd closed the TLS connection: an etcd with --client-cert-auth does so \
                 when, as here, no client certificate is configured)"
            } else {
                " (etcd closed the TLS connection: an etcd with --client-cert-auth does so \
                 when the client certificate is not signed by its --trusted-ca-file or \
                 lacks the clientAuth usage)"
            }
        }
        _ => "",
    }
}

/// Whether a failure reads as the peer closing the connection (seen as a
/// close, a broken pipe or a reset, depending on when the client writes).
fn closed_without_reason(message: &str) -> bool {
    ["connection closed", "broken pipe", "connection reset"]
        .iter()
        .any(|sign| message.contains(sign))
}

fn read(what: &str, path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|err| {
        StoreError::InvalidArgument(format!(
            "etcd TLS: cannot read the {what} {}: {err}",
            path.display()
        ))
    })
}

/// Checks that the endpoints agree with `tls`: all `https://` with TLS,
/// none without.
pub(super) fn check_endpoints(endpoints: &[String], tls: Option<&EtcdTls>) -> Result<()> {
    let https = endpoints.iter().filter(|e| is_https(e)).count();
    if https != 0 && https != endpoints.len() {
        return Err(StoreError::InvalidArgument(format!(
            "etcd endpoints mix https:// and plaintext: {}",
            endpoints.join(",")
        )));
    }
    match (https != 0, tls.is_some()) {
        (true, false) => Err(StoreError::InvalidArgument(format!(
            "etcd endpoints use https:// but no CA is given to check etcd's certificate: {}",
            endpoints.join(",")
        ))),
        (false, true) => Err(StoreError::InvalidArgument(format!(
            "etcd TLS is configured but the endpoints are not https://: {}",
            endpoints.join(",")
        ))),
        _ => Ok(()),
    }
}

/// Whether `endpoint` is a TLS one.
pub(super) fn is_https(endpoint: &str) -> bool {
    endpoint
        .get(..8)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tls() -> EtcdTls {
        EtcdTls {
            ca_file: PathBuf::from("/nonexistent/ca.pem"),
            client_cert: None,
            server_name: None,
        }
    }

    fn endpoints(list: &[&str]) -> Vec<String> {
        list.iter().map(|e| (*e).to_string()).collect()
    }

    #[test]
    fn endpoints_must_agree_with_tls() {
        let plain = endpoints(&["http://a:2379", "http://b:2379"]);
        let secure = endpoints(&["https://a:2379", "HTTPS://b:2379"]);
        let mixed = endpoints(&["https://a:2379", "http://b:2379"]);
        assert!(check_endpoints(&plain, None).is_ok());
        assert!(check_endpoints(&secure, Some(&tls())).is_ok());
        let err = check_endpoints(&mixed, Some(&tls())).unwrap_err();
        assert!(err.to_string().contains("mix"), "{err}");
        let err = check_endpoints(&secure, None).unwrap_err();
        assert!(err.to_string().contains("no CA"), "{err}");
        let err = check_endpoints(&plain, Some(&tls())).unwrap_err();
        assert!(err.to_string().contains("not https://"), "{err}");
    }

    #[test]
    fn a_missing_file_is_named() {
        let err = tls().check().unwrap_err();
        assert!(
            matches!(&err, StoreError::InvalidArgument(m) if m.contains("/nonexistent/ca.pem")),
            "{err:?}"
        );
    }

    #[test]
    fn a_file_that_is_not_pem_is_refused() {
        let dir = std::env::temp_dir().join(format!("caravan-etcd-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, "not a certificate").unwrap();
        let err = EtcdTls {
            ca_file: ca,
            ..tls()
        }
        .check()
        .unwrap_err();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            matches!(&err, StoreError::InvalidArgument(m) if m.contains("holds no PEM certificate")),
            "{err:?}"
        );
    }
}

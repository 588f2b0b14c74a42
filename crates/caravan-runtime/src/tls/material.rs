//! One reading of `[tls]`'s files, parsed and checked: the CA peers are
//! verified against, this process's certificate with its key, and the
//! verifiers built from them. A reading is whole or refused; the holder in
//! [`super::reload`] swaps whole readings.

use std::path::Path;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, UnixTime};

use super::TlsConfig;

/// The crypto every Caravan TLS configuration uses: ring.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The contents of the three files, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Files {
    pub ca: Vec<u8>,
    pub cert: Vec<u8>,
    pub key: Vec<u8>,
}

impl Files {
    /// Reads the files `config` names; the error names the key whose file
    /// cannot be read.
    pub fn read(config: &TlsConfig) -> Result<Files, String> {
        let read = |key: &str, path: &Path| {
            std::fs::read(path)
                .map_err(|err| format!("tls.{key}: cannot read {}: {err}", path.display()))
        };
        Ok(Files {
            ca: read("ca_file", &config.ca_file)?,
            cert: read("cert_file", &config.cert_file)?,
            key: read("key_file", &config.key_file)?,
        })
    }
}

/// A usable reading of the files.
#[derive(Debug)]
pub struct Material {
    /// This process's certificate chain and key.
    pub identity: Arc<CertifiedKey>,
    /// Requires a client certificate signed by the CA (gRPC, and HTTPS with
    /// `verify_https_client`).
    pub client_required: Arc<dyn ClientCertVerifier>,
    /// Checks a client certificate when one is presented (HTTPS).
    pub client_optional: Arc<dyn ClientCertVerifier>,
    /// Checks a server's certificate against the CA.
    pub server: Arc<dyn ServerCertVerifier>,
}

impl Material {
    /// Parses `files` read from `config`'s paths; the error names the key
    /// and the file at fault. The certificate must match the key and be
    /// signed by the CA, so a rotation caught between two of its writes
    /// (a new CA beside the old certificate) is refused rather than served.
    pub fn parse(config: &TlsConfig, files: &Files) -> Result<Material, String> {
        let at =
            |key: &str, path: &Path, what: String| format!("tls.{key}: {}: {what}", path.display());
        let ca_at = |what: String| at("ca_file", &config.ca_file, what);
        let cert_at = |what: String| at("cert_file", &config.cert_file, what);
        let key_at = |what: String| at("key_file", &config.key_file, what);

        let cas = pem_certs(&files.ca).map_err(ca_at)?;
        let mut roots = RootCertStore::empty();
        for ca in cas {
            roots
                .add(ca)
                .map_err(|err| ca_at(format!("not a usable CA certificate: {err}")))?;
        }
        let roots = Arc::new(roots);
        let chain = pem_certs(&files.cert).map_err(cert_at)?;
        let key = PrivateKeyDer::from_pem_slice(&files.key)
            .map_err(|err| key_at(format!("no PEM private key: {err}")))?;

        let provider = provider();
        let identity = CertifiedKey::from_der(chain, key, &provider).map_err(|err| {
            cert_at(format!(
                "does not go with {} ({err})",
                config.key_file.display()
            ))
        })?;
        let verifier = |optional: bool| {
            let builder =
                WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone());
            let builder = if optional {
                builder.allow_unauthenticated()
            } else {
                builder
            };
            builder
                .build()
                .map_err(|err| ca_at(format!("cannot verify clients with it: {err}")))
        };
        let client_required = verifier(false)?;
        let client_optional = verifier(true)?;
        let server = WebPkiServerVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(|err| ca_at(format!("cannot verify servers with it: {err}")))?;

        // Every role's certificate is good for client auth (servers dial
        // each other): the CA must vouch for this one as the peers will.
        let (leaf, intermediates) = identity
            .cert
            .split_first()
            .ok_or_else(|| cert_at("holds no certificate".to_string()))?;
        client_required
            .verify_client_cert(leaf, intermediates, UnixTime::now())
            .map_err(|err| {
                cert_at(format!(
                    "not signed by {} ({err})",
                    config.ca_file.display()
                ))
            })?;
        Ok(Material {
            identity: Arc::new(identity),
            client_required,
            client_optional,
            server,
        })
    }
}

/// Every certificate of a PEM file; none is an error.
fn pem_certs(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| format!("not PEM certificates: {err}"))?;
    if certs.is_empty() {
        return Err("holds no PEM certificate".to_string());
    }
    Ok(certs)
}

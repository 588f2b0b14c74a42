//! rustls configurations built once per process whose certificate and
//! verifiers are looked up in the [`Reloadable`] holder at each handshake,
//! so new connections use reloaded files without a new configuration.

use std::sync::Arc;

use rustls::client::ResolvesClientCert;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{
    ClientConfig, DigitallySignedStruct, DistinguishedName, Error, ServerConfig, SignatureScheme,
};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use super::material::provider;
use super::reload::Reloadable;

/// ALPN of gRPC.
pub const ALPN_H2: &[u8] = b"h2";
/// ALPN of the HTTP API (axum serves HTTP/1.1).
pub const ALPN_HTTP1: &[u8] = b"http/1.1";

/// How a server treats client certificates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// One signed by the CA is required.
    Required,
    /// One is asked for and checked when presented, but not required.
    Optional,
}

/// A server configuration presenting the current certificate and verifying
/// client certificates against the current CA.
pub fn server(
    holder: &Arc<Reloadable>,
    auth: ClientAuth,
    alpn: &[u8],
) -> Result<Arc<ServerConfig>, Error> {
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(Arc::new(ClientVerifier {
            holder: holder.clone(),
            auth,
        }))
        .with_cert_resolver(Arc::new(Identity(holder.clone())));
    config.alpn_protocols = vec![alpn.to_vec()];
    Ok(Arc::new(config))
}

/// A client configuration (gRPC) presenting the current certificate and
/// verifying servers against the current CA; the name checked is the one
/// a connection is made with (see [`super::connect`]).
pub fn client(holder: &Arc<Reloadable>) -> Result<Arc<ClientConfig>, Error> {
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(ServerVerifier(holder.clone())))
        .with_client_cert_resolver(Arc::new(Identity(holder.clone())));
    config.alpn_protocols = vec![ALPN_H2.to_vec()];
    Ok(Arc::new(config))
}

/// This process's certificate, as a server and as a client.
#[derive(Debug)]
struct Identity(Arc<Reloadable>);

impl ResolvesServerCert for Identity {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.current().identity.clone())
    }
}

impl ResolvesClientCert for Identity {
    fn resolve(&self, _: &[&[u8]], _: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        Some(self.0.current().identity.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// Client certificates, checked against the current CA.
#[derive(Debug)]
struct ClientVerifier {
    holder: Arc<Reloadable>,
    auth: ClientAuth,
}

impl ClientVerifier {
    fn current(&self) -> Arc<dyn ClientCertVerifier> {
        let material = self.holder.current();
        match self.auth {
            ClientAuth::Required => material.client_required.clone(),
            ClientAuth::Optional => material.client_optional.clone(),
        }
    }
}

impl ClientCertVerifier for ClientVerifier {
    fn client_auth_mandatory(&self) -> bool {
        self.auth == ClientAuth::Required
    }

    /// No hints: a client sends the certificate it has, which is what
    /// Caravan's processes and Nomad's tools do anyway; hints would borrow
    /// from material that a reload may replace.
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        self.current()
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.current().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.current().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.current().supported_verify_schemes()
    }
}

/// Server certificates, checked against the current CA.
#[derive(Debug)]
struct ServerVerifier(Arc<Reloadable>);

impl ServerCertVerifier for ServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        self.0.current().server.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0
            .current()
            .server
            .verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0
            .current()
            .server
            .verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.current().server.supported_verify_schemes()
    }
}

//! A small client of Nomad's HTTP API: one HTTP/1.1 connection per request
//! (the CLI sends a handful), over rustls for `https://`, sending the token as
//! `X-Nomad-Token` and the namespace and region as query parameters, as
//! Nomad's `api` package does. Failures become [`Error`]s of the kind the
//! status names, with Nomad's wording (`Unexpected response code: 404
//! (job not found)`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use serde_json::Value;
use tokio::net::TcpStream;
use tonic::Code;

use crate::backend::{Error, Method, Result};
use crate::connection::{Connection, Endpoint, TlsSettings};

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one request may take beyond a blocking query's wait: long
/// enough for a plan or a garbage collection of a big cluster.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// The parts of the base URL.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Base {
    https: bool,
    host: String,
    port: u16,
    /// A path prefix before `/v1` (a gateway behind a proxy path), no trailing slash.
    prefix: String,
}

fn parse_base(url: &str) -> std::result::Result<Base, String> {
    let (https, rest) = if let Some(r) = strip_prefix_ci(url, "https://") {
        (true, r)
    } else if let Some(r) = strip_prefix_ci(url, "http://") {
        (false, r)
    } else {
        return Err("the address must start with http:// or https://".into());
    };
    let (authority, prefix) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].trim_end_matches('/').to_string()),
        None => (rest, String::new()),
    };
    let default_port = if https { 443 } else { 80 };
    let (host, port) = if let Some(inner) = authority.strip_prefix('[') {
        let (h, after) = inner
            .split_once(']')
            .ok_or_else(|| "an IPv6 host needs its closing ]".to_string())?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().map_err(|_| format!("invalid port {p:?}"))?,
            None => default_port,
        };
        (h.to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (
                h.to_string(),
                p.parse().map_err(|_| format!("invalid port {p:?}"))?,
            ),
            None => (authority.to_string(), default_port),
        }
    };
    if host.is_empty() {
        return Err("no host".into());
    }
    Ok(Base {
        https,
        host,
        port,
        prefix,
    })
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    (s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix))
        .then(|| &s[prefix.len()..])
}

/// Escapes a path segment as Go's `url.PathEscape` does.
pub fn escape_segment(segment: &str) -> String {
    escape(segment, |b| {
        b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&b)
    })
}

/// Escapes a query key or value as Go's `url.QueryEscape` does (space as `+`).
fn escape_query(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else if b == b' ' {
            out.push('+');
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn escape(text: &str, keep: impl Fn(u8) -> bool) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if keep(b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// An answer: its status, `X-Nomad-Index` and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// The `X-Nomad-Index` header, if sent.
    pub index: Option<i64>,
    /// The body.
    pub body: Vec<u8>,
}

impl Reply {
    /// The body as JSON (`None` when empty).
    pub fn json(&self, address: &str) -> Result<Option<Value>> {
        if self.body.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        serde_json::from_slice(&self.body)
            .map(Some)
            .map_err(|e| unexpected_body(address, &e.to_string()))
    }
}

/// An answer whose body is not what Nomad's API sends.
pub fn unexpected_body(address: &str, why: &str) -> Error {
    Error::Other {
        code: Code::Internal,
        message: format!("unexpected answer from {address}: {why}"),
    }
}

/// The client of one gateway's HTTP API.
#[derive(Clone)]
pub struct HttpClient {
    address: String,
    base: Base,
    tls: Option<Arc<ClientConfig>>,
    server_name: Option<ServerName<'static>>,
    token: Option<String>,
    namespace: String,
    region: Option<String>,
    basic_auth: Option<String>,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient")
            .field("address", &self.address)
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl HttpClient {
    /// A client for `connection`, whose endpoint must be HTTP. Reads the TLS files now.
    pub fn new(connection: &Connection) -> Result<HttpClient> {
        let Endpoint::Http(address) = &connection.endpoint else {
            return Err(Error::Config("not an HTTP address".into()));
        };
        let base = parse_base(address).map_err(|reason| Error::InvalidAddress {
            address: address.clone(),
            reason,
        })?;
        let tls = if base.https {
            Some(Arc::new(tls_config(&connection.tls)?))
        } else {
            None
        };
        let name = connection
            .tls
            .server_name
            .clone()
            .unwrap_or_else(|| base.host.clone());
        let server_name = if base.https {
            Some(
                ServerName::try_from(name.clone())
                    .map_err(|e| Error::Config(format!("invalid TLS server name {name:?}: {e}")))?,
            )
        } else {
            None
        };
        if let Some(token) = &connection.token
            && !token.bytes().all(|b| (0x20..0x7f).contains(&b))
        {
            return Err(Error::InvalidToken);
        }
        let basic_auth = connection
            .http_auth
            .as_ref()
            .map(|auth| base64::engine::general_purpose::STANDARD.encode(auth.as_bytes()));
        Ok(HttpClient {
            address: address.clone(),
            base,
            tls,
            server_name,
            token: connection.token.clone(),
            namespace: connection.namespace.clone(),
            region: connection.region.clone(),
            basic_auth,
        })
    }

    /// The base address.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The namespace sent with requests.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The request target: prefix, path and query with the namespace and region.
    fn target(&self, path: &str, query: &[(String, String)]) -> String {
        let mut params: Vec<(String, String)> = query.to_vec();
        if !params.iter().any(|(k, _)| k == "namespace") {
            params.push(("namespace".into(), self.namespace.clone()));
        }
        if let Some(region) = &self.region
            && !params.iter().any(|(k, _)| k == "region")
        {
            params.push(("region".into(), region.clone()));
        }
        let mut target = format!("{}{path}", self.base.prefix);
        for (i, (k, v)) in params.iter().enumerate() {
            target.push(if i == 0 { '?' } else { '&' });
            target.push_str(&escape_query(k));
            target.push('=');
            target.push_str(&escape_query(v));
        }
        target
    }

    fn host_header(&self) -> String {
        let host = if self.base.host.contains(':') {
            format!("[{}]", self.base.host)
        } else {
            self.base.host.clone()
        };
        let default = if self.base.https { 443 } else { 80 };
        if self.base.port == default {
            host
        } else {
            format!("{host}:{}", self.base.port)
        }
    }

    fn unreachable(&self, reason: impl std::fmt::Display) -> Error {
        Error::Unreachable {
            address: self.address.clone(),
            reason: reason.to_string(),
        }
    }

    /// Sends one request; answers the response as it starts, or the error of
    /// a status outside 2xx with the body read.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        query: &[(String, String)],
        body: Option<Vec<u8>>,
    ) -> Result<Response<Incoming>> {
        let response = self.send_raw(method, path, query, body).await?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body = read_body(response, &self.address).await?;
        Err(status_error(status, &String::from_utf8_lossy(&body)))
    }

    /// Sends one request; answers the response as it starts, whatever its status.
    async fn send_raw(
        &self,
        method: Method,
        path: &str,
        query: &[(String, String)],
        body: Option<Vec<u8>>,
    ) -> Result<Response<Incoming>> {
        let host = (self.base.host.as_str(), self.base.port);
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(host))
            .await
            .map_err(|_| self.unreachable("connection timed out"))?
            .map_err(|e| self.unreachable(e))?;
        let _ = tcp.set_nodelay(true);
        let request = self.request(method, path, query, body)?;
        let response = match (&self.tls, &self.server_name) {
            (Some(config), Some(name)) => {
                let connector = tokio_rustls::TlsConnector::from(config.clone());
                let stream = connector
                    .connect(name.clone(), tcp)
                    .await
                    .map_err(|e| self.unreachable(format!("TLS handshake failed: {e}")))?;
                self.exchange(TokioIo::new(stream), request).await?
            }
            _ => self.exchange(TokioIo::new(tcp), request).await?,
        };
        Ok(response)
    }

    fn request(
        &self,
        method: Method,
        path: &str,
        query: &[(String, String)],
        body: Option<Vec<u8>>,
    ) -> Result<Request<Full<Bytes>>> {
        let mut builder = Request::builder()
            .method(method.as_str())
            .uri(self.target(path, query))
            .header(hyper::header::HOST, self.host_header())
            .header(hyper::header::USER_AGENT, "caravan-cli");
        if let Some(token) = &self.token {
            builder = builder.header("X-Nomad-Token", token);
        }
        if let Some(auth) = &self.basic_auth {
            builder = builder.header(hyper::header::AUTHORIZATION, format!("Basic {auth}"));
        }
        if body.is_some() {
            builder = builder.header(hyper::header::CONTENT_TYPE, "application/json");
        }
        builder
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| Error::Config(format!("cannot build the request for {path}: {e}")))
    }

    async fn exchange<S>(
        &self,
        io: TokioIo<S>,
        request: Request<Full<Bytes>>,
    ) -> Result<Response<Incoming>>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(|e| self.unreachable(e))?;
        // The connection is driven apart from the response, so a streamed
        // body (a followed log) keeps flowing after this returns.
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let sent = tokio::time::timeout(REQUEST_TIMEOUT, sender.send_request(request)).await;
        match sent {
            Err(_) => Err(Error::Unavailable {
                message: format!("no answer from {} in {REQUEST_TIMEOUT:?}", self.address),
                leader: None,
            }),
            // The request may have been acted on: not "unreachable".
            Ok(Err(e)) => Err(Error::Unavailable {
                message: format!("the request to {} failed: {e}", self.address),
                leader: None,
            }),
            Ok(Ok(response)) => Ok(response),
        }
    }

    /// Opens a WebSocket at `path` (`alloc exec`): the upgrade request
    /// carries the token and namespace as every request does, over the same
    /// TCP or TLS connection; an answer other than 101 is the error its
    /// status and body say (a 403 for a token without `alloc-exec`).
    pub async fn websocket(
        &self,
        path: &str,
        query: &[(String, String)],
    ) -> Result<super::super::ExecSocket> {
        let host = (self.base.host.as_str(), self.base.port);
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(host))
            .await
            .map_err(|_| self.unreachable("connection timed out"))?
            .map_err(|e| self.unreachable(e))?;
        let _ = tcp.set_nodelay(true);
        let mut request = self.request(Method::Get, path, query, None)?;
        let headers = request.headers_mut();
        for (name, value) in [
            (hyper::header::CONNECTION, "Upgrade".to_string()),
            (hyper::header::UPGRADE, "websocket".to_string()),
            (hyper::header::SEC_WEBSOCKET_VERSION, "13".to_string()),
            (
                hyper::header::SEC_WEBSOCKET_KEY,
                tokio_tungstenite::tungstenite::handshake::client::generate_key(),
            ),
        ] {
            let value = hyper::header::HeaderValue::from_str(&value)
                .map_err(|e| Error::Config(format!("cannot build the upgrade request: {e}")))?;
            headers.insert(name, value);
        }
        let response = match (&self.tls, &self.server_name) {
            (Some(config), Some(name)) => {
                let connector = tokio_rustls::TlsConnector::from(config.clone());
                let stream = connector
                    .connect(name.clone(), tcp)
                    .await
                    .map_err(|e| self.unreachable(format!("TLS handshake failed: {e}")))?;
                self.upgrade(TokioIo::new(stream), request).await?
            }
            _ => self.upgrade(TokioIo::new(tcp), request).await?,
        };
        if response.status() != StatusCode::SWITCHING_PROTOCOLS {
            let status = response.status();
            let body = read_body(response, &self.address).await?;
            return Err(status_error(status, &String::from_utf8_lossy(&body)));
        }
        let upgraded = hyper::upgrade::on(response)
            .await
            .map_err(|e| Error::Unavailable {
                message: format!("the WebSocket upgrade at {} failed: {e}", self.address),
                leader: None,
            })?;
        Ok(tokio_tungstenite::WebSocketStream::from_raw_socket(
            TokioIo::new(upgraded),
            tokio_tungstenite::tungstenite::protocol::Role::Client,
            None,
        )
        .await)
    }

    /// Sends an upgrade request on its own connection, driven with upgrades.
    async fn upgrade<S>(
        &self,
        io: TokioIo<S>,
        request: Request<Full<Bytes>>,
    ) -> Result<Response<Incoming>>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(|e| self.unreachable(e))?;
        tokio::spawn(async move {
            let _ = conn.with_upgrades().await;
        });
        tokio::time::timeout(REQUEST_TIMEOUT, sender.send_request(request))
            .await
            .map_err(|_| Error::Unavailable {
                message: format!("no answer from {} in {REQUEST_TIMEOUT:?}", self.address),
                leader: None,
            })?
            .map_err(|e| Error::Unavailable {
                message: format!("the request to {} failed: {e}", self.address),
                leader: None,
            })
    }

    /// Sends one request and reads the whole answer; a status outside 2xx is an error.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        query: &[(String, String)],
        body: Option<&Value>,
    ) -> Result<Reply> {
        let body = body.map(|b| b.to_string().into_bytes());
        let response = self.send(method, path, query, body).await?;
        Self::read_reply(response, &self.address).await
    }

    /// Sends one request and reads the whole answer, whatever its status.
    pub async fn call_any(
        &self,
        method: Method,
        path: &str,
        query: &[(String, String)],
        body: Option<&Value>,
    ) -> Result<Reply> {
        let body = body.map(|b| b.to_string().into_bytes());
        let response = self.send_raw(method, path, query, body).await?;
        Self::read_reply(response, &self.address).await
    }

    async fn read_reply(response: Response<Incoming>, address: &str) -> Result<Reply> {
        let status = response.status().as_u16();
        let index = response
            .headers()
            .get("X-Nomad-Index")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        let body = read_body(response, address).await?;
        Ok(Reply {
            status,
            index,
            body,
        })
    }

    /// Sends one request and answers its body as a stream of bytes.
    pub async fn stream(
        &self,
        path: &str,
        query: &[(String, String)],
    ) -> Result<BoxStream<'static, Result<Bytes>>> {
        let response = self.send(Method::Get, path, query, None).await?;
        let address = self.address.clone();
        let body = response.into_body().into_data_stream();
        Ok(body
            .map(move |chunk| {
                chunk.map_err(|e| Error::Unavailable {
                    message: format!("reading the answer of {address} failed: {e}"),
                    leader: None,
                })
            })
            .boxed())
    }
}

async fn read_body(response: Response<Incoming>, address: &str) -> Result<Vec<u8>> {
    response
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes().to_vec())
        .map_err(|e| Error::Unavailable {
            message: format!("reading the answer of {address} failed: {e}"),
            leader: None,
        })
}

/// The error of a status outside 2xx, worded as Nomad's `api` package words it.
pub fn status_error(status: StatusCode, body: &str) -> Error {
    let message = format!(
        "Unexpected response code: {} ({})",
        status.as_u16(),
        body.trim()
    );
    match status.as_u16() {
        400 | 413 | 422 => Error::InvalidArgument {
            field: None,
            message,
        },
        401 | 403 => Error::PermissionDenied { message },
        404 => Error::NotFound { message },
        409 => Error::Conflict {
            code: Code::Aborted,
            message,
        },
        429 | 502 | 503 | 504 => Error::Unavailable {
            message,
            leader: None,
        },
        _ => Error::Other {
            code: Code::Internal,
            message,
        },
    }
}

fn read_pem_certs(path: &Path, flag: &str) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<std::result::Result<Vec<_>, _>>())
        .map_err(|e| Error::Config(format!("Error reading {flag} {}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(Error::Config(format!(
            "Error reading {flag} {}: no PEM certificate in it",
            path.display()
        )));
    }
    Ok(certs)
}

/// The rustls configuration of `tls`: the CA files as roots (or no check at
/// all with skip-verify), and the client certificate when named.
fn tls_config(tls: &TlsSettings) -> Result<ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config(format!("TLS: {e}")))?;
    let builder = if tls.skip_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
    } else {
        let mut roots = RootCertStore::empty();
        if let Some(ca) = &tls.ca_cert {
            for cert in read_pem_certs(ca, "-ca-cert")? {
                roots.add(cert).map_err(|e| {
                    Error::Config(format!("Error reading -ca-cert {}: {e}", ca.display()))
                })?;
            }
        }
        if let Some(dir) = &tls.ca_path {
            let entries = std::fs::read_dir(dir).map_err(|e| {
                Error::Config(format!("Error reading -ca-path {}: {e}", dir.display()))
            })?;
            let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
            paths.sort();
            for path in paths.into_iter().filter(|p| p.is_file()) {
                for cert in read_pem_certs(&path, "-ca-path")? {
                    roots.add(cert).map_err(|e| {
                        Error::Config(format!("Error reading -ca-path {}: {e}", path.display()))
                    })?;
                }
            }
        }
        builder.with_root_certificates(roots)
    };
    match (&tls.client_cert, &tls.client_key) {
        (Some(cert), Some(key)) => {
            let chain = read_pem_certs(cert, "-client-cert")?;
            let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
                Error::Config(format!("Error reading -client-key {}: {e}", key.display()))
            })?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| Error::Config(format!("TLS client certificate: {e}")))
        }
        _ => Ok(builder.with_no_client_auth()),
    }
}

/// `-tls-skip-verify`: any certificate is accepted, though the handshake's
/// signatures are still checked.
#[derive(Debug)]
struct NoVerification(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_are_split() {
        assert_eq!(
            parse_base("http://127.0.0.1:4646").unwrap(),
            Base {
                https: false,
                host: "127.0.0.1".into(),
                port: 4646,
                prefix: String::new()
            }
        );
        let b = parse_base("HTTPS://[::1]/nomad/").unwrap();
        assert_eq!((b.https, b.host.as_str(), b.port), (true, "::1", 443));
        assert_eq!(b.prefix, "/nomad");
        assert!(parse_base("http://:1").is_err());
        assert!(parse_base("http://h:x").is_err());
    }

    #[test]
    fn segments_and_queries_are_escaped_as_go_does() {
        assert_eq!(escape_segment("web app/1"), "web%20app%2F1");
        assert_eq!(escape_segment("a:b@c"), "a:b@c");
        assert_eq!(escape_query("a b&c=d"), "a+b%26c%3Dd");
    }

    #[test]
    fn targets_carry_namespace_and_region() {
        let connection = Connection {
            endpoint: Endpoint::Http("http://h:1/p".into()),
            token: Some("t".into()),
            namespace: "prod".into(),
            region: Some("eu".into()),
            http_auth: None,
            tls: TlsSettings::default(),
        };
        let c = HttpClient::new(&connection).unwrap();
        assert_eq!(
            c.target("/v1/jobs", &[("prefix".into(), "we b".into())]),
            "/p/v1/jobs?prefix=we+b&namespace=prod&region=eu"
        );
        assert_eq!(
            c.target("/v1/jobs", &[("namespace".into(), "*".into())]),
            "/p/v1/jobs?namespace=%2A&region=eu"
        );
        assert_eq!(c.host_header(), "h:1");
    }

    #[test]
    fn statuses_map_to_error_kinds_in_nomads_words() {
        let e = status_error(StatusCode::NOT_FOUND, "job not found\n");
        assert!(e.is_not_found());
        assert_eq!(
            e.to_string(),
            "Unexpected response code: 404 (job not found)"
        );
        assert!(matches!(
            status_error(StatusCode::FORBIDDEN, "Permission denied"),
            Error::PermissionDenied { .. }
        ));
        assert!(matches!(
            status_error(StatusCode::BAD_REQUEST, "x"),
            Error::InvalidArgument { .. }
        ));
        assert!(matches!(
            status_error(StatusCode::CONFLICT, "x"),
            Error::Conflict { .. }
        ));
        assert!(matches!(
            status_error(StatusCode::SERVICE_UNAVAILABLE, "x"),
            Error::Unavailable { .. }
        ));
    }
}

//! Downloads over HTTP(S): headers sent, redirects followed, the client's
//! time and size limits enforced while the body streams to a file.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::Uri;
use hyper::header::{HeaderName, HeaderValue, LOCATION};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::io::AsyncWriteExt;

use super::ArtifactError;
use super::limits::ArtifactLimits;

/// Redirects followed before a download is given up.
const MAX_REDIRECTS: usize = 10;

/// The HTTP(S) client artifacts are fetched with (rustls on ring, the
/// node's trusted roots).
#[derive(Clone, Debug)]
pub struct HttpFetcher {
    client: Client<HttpsConnector<HttpConnector>, Empty<Bytes>>,
}

impl HttpFetcher {
    /// A client trusting the node's native root certificates. A node with
    /// none still fetches over plain HTTP; HTTPS then fails naming the
    /// unknown issuer.
    pub fn new() -> Result<HttpFetcher, ArtifactError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = match hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(Arc::clone(&provider))
        {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "no root certificates on this node: https artifacts will fail");
                let tls = rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| ArtifactError::Http(format!("TLS setup: {e}")))?
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth();
                hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls)
            }
        };
        let connector = builder.https_or_http().enable_http1().build();
        Ok(HttpFetcher {
            client: Client::builder(TokioExecutor::new()).build(connector),
        })
    }

    /// Fetches `uri` into `dst` with `headers`, within `limits`; returns the
    /// bytes written.
    pub async fn download(
        &self,
        uri: Uri,
        headers: &[(String, String)],
        dst: &Path,
        limits: &ArtifactLimits,
    ) -> Result<u64, ArtifactError> {
        let shown = uri.to_string();
        let fetch = self.fetch(uri, headers, dst, limits.http_max_size);
        match limits.http_read_timeout {
            Some(t) => tokio::time::timeout(t, fetch).await.map_err(|_| {
                ArtifactError::Http(format!(
                    "download of {shown} took longer than the client's artifact \
                     http_read_timeout of {}",
                    humantime::format_duration(t)
                ))
            })?,
            None => fetch.await,
        }
    }

    async fn fetch(
        &self,
        mut uri: Uri,
        headers: &[(String, String)],
        dst: &Path,
        max_size: Option<u64>,
    ) -> Result<u64, ArtifactError> {
        let mut redirects = 0;
        let response = loop {
            let mut req = hyper::Request::get(uri.clone());
            for (k, v) in headers {
                let name = HeaderName::from_bytes(k.as_bytes())
                    .map_err(|_| ArtifactError::Http(format!("bad header name {k:?}")))?;
                let value = HeaderValue::from_str(v)
                    .map_err(|_| ArtifactError::Http(format!("bad value of header {k:?}")))?;
                req = req.header(name, value);
            }
            let req = req
                .body(Empty::new())
                .map_err(|e| ArtifactError::Http(format!("request for {uri}: {e}")))?;
            let resp = self
                .client
                .request(req)
                .await
                .map_err(|e| ArtifactError::Http(format!("GET {uri}: {}", error_chain(&e))))?;
            if resp.status().is_redirection()
                && let Some(location) = resp.headers().get(LOCATION)
            {
                redirects += 1;
                if redirects > MAX_REDIRECTS {
                    return Err(ArtifactError::Http(format!(
                        "GET {uri}: stopped after {MAX_REDIRECTS} redirects"
                    )));
                }
                uri = resolve(&uri, location)?;
                continue;
            }
            break resp;
        };
        if !response.status().is_success() {
            return Err(ArtifactError::Http(format!(
                "bad response code: {}",
                response.status().as_u16()
            )));
        }
        let too_big = |n: u64| {
            ArtifactError::Http(format!(
                "download of {uri} is larger than the client's artifact http_max_size of {n} bytes"
            ))
        };
        let declared = response
            .headers()
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if let (Some(max), Some(len)) = (max_size, declared)
            && len > max
        {
            return Err(too_big(max));
        }
        let mut file = tokio::fs::File::create(dst)
            .await
            .map_err(|e| ArtifactError::io("create", dst, e))?;
        let mut body = response.into_body();
        let mut written = 0u64;
        while let Some(frame) = body.frame().await {
            let frame = frame
                .map_err(|e| ArtifactError::Http(format!("reading {uri}: {}", error_chain(&e))))?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            written += data.len() as u64;
            if let Some(max) = max_size
                && written > max
            {
                return Err(too_big(max));
            }
            file.write_all(&data)
                .await
                .map_err(|e| ArtifactError::io("write", dst, e))?;
        }
        file.flush()
            .await
            .map_err(|e| ArtifactError::io("write", dst, e))?;
        Ok(written)
    }
}

/// The target of a redirect: absolute, host-relative or path-relative.
fn resolve(base: &Uri, location: &HeaderValue) -> Result<Uri, ArtifactError> {
    let loc = location
        .to_str()
        .map_err(|_| ArtifactError::Http(format!("GET {base}: unreadable redirect location")))?;
    let bad = |e: String| ArtifactError::Http(format!("GET {base}: bad redirect {loc:?}: {e}"));
    if loc.contains("://") {
        return loc
            .parse()
            .map_err(|e: hyper::http::uri::InvalidUri| bad(e.to_string()));
    }
    let path = if loc.starts_with('/') {
        loc.to_string()
    } else {
        let dir = base.path().rsplit_once('/').map_or("", |(d, _)| d);
        format!("{dir}/{loc}")
    };
    let mut parts = base.clone().into_parts();
    parts.path_and_query = Some(
        path.parse()
            .map_err(|e: hyper::http::uri::InvalidUri| bad(e.to_string()))?,
    );
    Uri::from_parts(parts).map_err(|e| bad(e.to_string()))
}

/// An error with its causes, which hyper keeps out of its `Display`.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        out.push_str(": ");
        out.push_str(&s.to_string());
        src = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_resolve_against_the_current_url() {
        let base: Uri = "http://h:1/a/b.tgz?q=1".parse().unwrap();
        let to = |l: &str| {
            resolve(&base, &HeaderValue::from_str(l).unwrap())
                .unwrap()
                .to_string()
        };
        assert_eq!(to("/c.tgz"), "http://h:1/c.tgz");
        assert_eq!(to("c.tgz"), "http://h:1/a/c.tgz");
        assert_eq!(to("https://o/x"), "https://o/x");
    }
}

//! A small client of the gateway's Nomad-compatible HTTP API.

use std::net::SocketAddr;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long one HTTP request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The gateway's HTTP API at one address.
#[derive(Clone, Debug)]
pub struct HttpApi {
    base: String,
    client: Client<HttpConnector, Full<Bytes>>,
}

/// A status code and body.
#[derive(Clone, Debug)]
pub struct HttpReply {
    /// The HTTP status code.
    pub status: u16,
    /// The body as received.
    pub body: Vec<u8>,
    /// The headers, names in lower case.
    pub headers: Vec<(String, String)>,
}

impl HttpReply {
    /// The value of header `name` (any case), if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON.
    pub fn json(&self) -> anyhow::Result<Value> {
        serde_json::from_slice(&self.body).map_err(|e| {
            anyhow::anyhow!(
                "HTTP {}: body is not JSON ({e}): {}",
                self.status,
                self.text()
            )
        })
    }

    /// The body as JSON, or an error when the status is not 2xx.
    pub fn ok_json(&self) -> anyhow::Result<Value> {
        if (200..300).contains(&self.status) {
            self.json()
        } else {
            anyhow::bail!("HTTP {}: {}", self.status, self.text())
        }
    }
}

impl HttpApi {
    /// A client of the HTTP API listening on `addr`.
    pub fn new(addr: SocketAddr) -> HttpApi {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        HttpApi {
            base: format!("http://{addr}"),
            client: Client::builder(TokioExecutor::new()).build(connector),
        }
    }

    /// Sends one request; `path` starts with `/v1/`.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> anyhow::Result<HttpReply> {
        self.request_with(method, path, body, &[]).await
    }

    /// Sends one request with extra `headers`.
    pub async fn request_with(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        headers: &[(&str, &str)],
    ) -> anyhow::Result<HttpReply> {
        let uri = format!("{}{path}", self.base);
        let mut builder = Request::builder().method(method.clone()).uri(&uri);
        if body.is_some() {
            builder = builder.header("content-type", "application/json");
        }
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let request = builder.body(Full::new(Bytes::from(body.unwrap_or_default())))?;
        let exchange = async {
            let response = self.client.request(request).await?;
            let status = response.status().as_u16();
            let headers = response
                .headers()
                .iter()
                .map(|(n, v)| {
                    (
                        n.to_string(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect();
            let body = response.into_body().collect().await?.to_bytes().to_vec();
            anyhow::Ok(HttpReply {
                status,
                body,
                headers,
            })
        };
        tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| anyhow::anyhow!("{method} {uri}: no answer in {REQUEST_TIMEOUT:?}"))?
            .map_err(|e| anyhow::anyhow!("{method} {uri}: {e:#}"))
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> anyhow::Result<HttpReply> {
        self.request(Method::GET, path, None).await
    }

    /// `GET path`, a 2xx JSON answer.
    pub async fn get_json(&self, path: &str) -> anyhow::Result<Value> {
        self.get(path).await?.ok_json()
    }

    /// `PUT path` with a JSON body.
    pub async fn put_json(&self, path: &str, body: &Value) -> anyhow::Result<HttpReply> {
        self.request(Method::PUT, path, Some(serde_json::to_vec(body)?))
            .await
    }

    /// `PUT path` with raw bytes.
    pub async fn put_bytes(&self, path: &str, body: Vec<u8>) -> anyhow::Result<HttpReply> {
        self.request(Method::PUT, path, Some(body)).await
    }

    /// `PUT path` announcing a body of `length` bytes and sending none of it:
    /// how a server that refuses by the announced length answers. (A client
    /// that sends such a body may find the connection closed under it
    /// before it reads the answer.)
    pub async fn put_announced(&self, path: &str, length: usize) -> anyhow::Result<HttpReply> {
        let addr = self.base.trim_start_matches("http://");
        let exchange = async {
            let mut stream = TcpStream::connect(addr).await?;
            let head = format!(
                "PUT {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
                 content-length: {length}\r\nconnection: close\r\n\r\n"
            );
            stream.write_all(head.as_bytes()).await?;
            // The server may keep the connection open for the body it was
            // told about: read one answer, not to the end of the stream.
            let mut raw = Vec::new();
            let mut chunk = [0u8; 4096];
            while !answer_complete(&raw) {
                let n = stream.read(&mut chunk).await?;
                if n == 0 {
                    break;
                }
                raw.extend_from_slice(&chunk[..n]);
            }
            anyhow::Ok(raw)
        };
        let raw = tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| anyhow::anyhow!("PUT {path}: no answer in {REQUEST_TIMEOUT:?}"))??;
        let text = String::from_utf8_lossy(&raw);
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| anyhow::anyhow!("PUT {path}: not an HTTP answer: {text:?}"))?;
        let body = text
            .split_once("\r\n\r\n")
            .map_or_else(Vec::new, |(_, body)| body.as_bytes().to_vec());
        Ok(HttpReply {
            status,
            body,
            headers: Vec::new(),
        })
    }

    /// `DELETE path`.
    pub async fn delete(&self, path: &str) -> anyhow::Result<HttpReply> {
        self.request(Method::DELETE, path, None).await
    }
}

/// Whether `raw` holds a whole HTTP/1.1 answer: its head, then as many body
/// bytes as its content-length says, or a chunked body's last chunk.
fn answer_complete(raw: &[u8]) -> bool {
    let text = String::from_utf8_lossy(raw);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    let head = head.to_ascii_lowercase();
    let length = head.lines().find_map(|line| {
        line.strip_prefix("content-length:")
            .and_then(|v| v.trim().parse::<usize>().ok())
    });
    match length {
        Some(length) => body.len() >= length,
        None if head.contains("transfer-encoding: chunked") => body.ends_with("0\r\n\r\n"),
        None => false,
    }
}

//! One run of a check: what it saw and what that means, as Nomad's client
//! judges it (a connection for `tcp`; a status below 400 for `http`, 429 a
//! warning as Consul has it; `SERVING` for `grpc`; the exit code of a
//! `script`).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use caravan_proto::ServiceCheck;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::grpc::GrpcProbe;
use super::script::ScriptProbe;
use super::status::Outcome;
use crate::driver::TaskHandle;

/// How much of an answer's body a result keeps as its output.
pub(super) const OUTPUT_LIMIT: usize = 3 * 1024;

/// What one run of a check saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    /// What the result means for the check.
    pub outcome: Outcome,
    /// The HTTP status, 0 for other checks or when there was no answer.
    pub status_code: u16,
    /// The first 3 KiB of the answer, or what went wrong.
    pub output: String,
}

impl Observation {
    fn failure(output: impl Into<String>) -> Self {
        Observation {
            outcome: Outcome::Failure,
            status_code: 0,
            output: output.into(),
        }
    }
}

/// A check that can be run: its kind and what it sends.
#[derive(Clone, Debug)]
pub enum Probe {
    /// A connection is all it asks.
    Tcp,
    /// A request and an answer below 400.
    Http(HttpProbe),
    /// A gRPC health call answered `SERVING`.
    Grpc(GrpcProbe),
    /// A command inside the task exiting 0.
    Script(ScriptProbe),
}

/// What an `http` check sends.
#[derive(Clone, Debug)]
pub struct HttpProbe {
    method: hyper::Method,
    path: String,
    headers: Vec<(hyper::header::HeaderName, hyper::header::HeaderValue)>,
    body: Bytes,
}

impl Probe {
    /// The probe of `check`, or why it cannot be run by this client;
    /// `task` is the run a `script` check runs in.
    pub fn of(check: &ServiceCheck, task: Option<&Arc<dyn TaskHandle>>) -> Result<Probe, String> {
        match check.r#type.as_str() {
            "tcp" => Ok(Probe::Tcp),
            "http" => http_probe(check).map(Probe::Http),
            "grpc" => GrpcProbe::new(check).map(Probe::Grpc),
            "script" => match task {
                Some(task) => ScriptProbe::new(check, Arc::clone(task)).map(Probe::Script),
                None => Err(format!(
                    "check {:?}: a script check needs a running task to run in",
                    check.name
                )),
            },
            other => Err(format!(
                "check {:?}: type {other:?} is not supported by Caravan's client",
                check.name
            )),
        }
    }

    /// Runs the probe against `addr` (`host:port`) within `timeout`.
    pub async fn run(&self, addr: &str, timeout: Duration) -> Observation {
        match tokio::time::timeout(timeout, self.attempt(addr)).await {
            Ok(seen) => seen,
            Err(_) => Observation::failure(format!("timed out after {timeout:?}")),
        }
    }

    async fn attempt(&self, addr: &str) -> Observation {
        match self {
            Probe::Grpc(grpc) => return grpc.run(addr).await,
            Probe::Script(script) => return script.run().await,
            Probe::Tcp | Probe::Http(_) => {}
        }
        let stream = match TcpStream::connect(addr).await {
            Ok(stream) => stream,
            Err(e) => return Observation::failure(format!("dial tcp {addr}: {e}")),
        };
        match self {
            Probe::Tcp => Observation {
                outcome: Outcome::Success,
                status_code: 0,
                output: "tcp ok".into(),
            },
            Probe::Http(http) => http.send(stream, addr).await,
            Probe::Grpc(_) | Probe::Script(_) => Observation::failure("not a network probe"),
        }
    }
}

fn http_probe(check: &ServiceCheck) -> Result<HttpProbe, String> {
    let named = |what: &str| format!("check {:?}: {what}", check.name);
    match check.protocol.as_str() {
        "" | "http" => {}
        other => {
            return Err(named(&format!(
                "protocol {other:?} is not supported by Caravan's client (http only)"
            )));
        }
    }
    let method = match check.method.as_str() {
        "" => hyper::Method::GET,
        m => hyper::Method::from_bytes(m.as_bytes())
            .map_err(|_| named(&format!("method {m:?} is not an HTTP method")))?,
    };
    let path = match check.path.as_str() {
        "" => "/".to_owned(),
        p if p.starts_with('/') => p.to_owned(),
        p => format!("/{p}"),
    };
    let mut headers = Vec::new();
    for (name, values) in &check.headers {
        let header = hyper::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| named(&format!("header {name:?} is not a header name")))?;
        for value in &values.values {
            let value = hyper::header::HeaderValue::from_str(value)
                .map_err(|_| named(&format!("header {name:?}: {value:?} is not a header value")))?;
            headers.push((header.clone(), value));
        }
    }
    Ok(HttpProbe {
        method,
        path,
        headers,
        body: Bytes::from(check.body.clone()),
    })
}

impl HttpProbe {
    async fn send(&self, stream: TcpStream, addr: &str) -> Observation {
        let (mut sender, connection) =
            match hyper::client::conn::http1::handshake(TokioIo::new(stream)).await {
                Ok(pair) => pair,
                Err(e) => return Observation::failure(format!("http {addr}: {e}")),
            };
        let driver = tokio::spawn(connection);
        let mut request = Request::builder()
            .method(self.method.clone())
            .uri(&self.path)
            .header(hyper::header::USER_AGENT, "Caravan health check");
        // A `Host` header of the check's own replaces the address.
        if !self
            .headers
            .iter()
            .any(|(name, _)| name == hyper::header::HOST)
        {
            request = request.header(hyper::header::HOST, addr);
        }
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        let request = match request.body(Full::new(self.body.clone())) {
            Ok(request) => request,
            Err(e) => return Observation::failure(format!("http {addr}: {e}")),
        };
        let seen = match sender.send_request(request).await {
            Ok(response) => {
                let code = response.status().as_u16();
                let output = read_limited(response.into_body()).await;
                Observation {
                    outcome: match code {
                        429 => Outcome::Warning,
                        c if c < 400 => Outcome::Success,
                        _ => Outcome::Failure,
                    },
                    status_code: code,
                    output: if code == 200 {
                        "http ok".into()
                    } else {
                        output
                    },
                }
            }
            Err(e) => Observation::failure(format!("http {addr}: {e}")),
        };
        driver.abort();
        seen
    }
}

/// The first [`OUTPUT_LIMIT`] bytes of `body`, as text.
async fn read_limited(mut body: hyper::body::Incoming) -> String {
    let mut out = Vec::new();
    while out.len() < OUTPUT_LIMIT {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    let room = OUTPUT_LIMIT - out.len();
                    out.extend_from_slice(&data[..data.len().min(room)]);
                }
            }
            Some(Err(e)) => return format!("reading the answer: {e}"),
            None => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use caravan_proto::CheckHeaderValues;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A loopback server answering each connection with `answer` after
    /// sending what it read to the test.
    async fn server(answer: &'static str) -> (String, tokio::sync::mpsc::Receiver<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (tx, rx) = tokio::sync::mpsc::channel(8);
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let mut buf = vec![0; 4096];
                let n = conn.read(&mut buf).await.unwrap_or(0);
                let _ = tx
                    .send(String::from_utf8_lossy(&buf[..n]).into_owned())
                    .await;
                let _ = conn.write_all(answer.as_bytes()).await;
                let _ = conn.shutdown().await;
            }
        });
        (addr, rx)
    }

    fn http(path: &str) -> ServiceCheck {
        ServiceCheck {
            name: "alive".into(),
            r#type: "http".into(),
            path: path.into(),
            ..Default::default()
        }
    }

    const SECOND: Duration = Duration::from_secs(1);

    #[tokio::test]
    async fn http_sends_method_path_headers_and_body_and_judges_the_status() {
        let (addr, mut seen) =
            server("HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok").await;
        let mut check = http("/health?deep=1");
        check.method = "POST".into();
        check.body = "ping".into();
        check.headers.insert(
            "X-Probe".into(),
            CheckHeaderValues {
                values: vec!["a".into(), "b".into()],
            },
        );
        let got = Probe::of(&check, None).unwrap().run(&addr, SECOND).await;
        assert_eq!(got.outcome, Outcome::Success);
        assert_eq!(got.status_code, 200);
        let request = seen.recv().await.unwrap();
        assert!(
            request.starts_with("POST /health?deep=1 HTTP/1.1\r\n"),
            "{request}"
        );
        assert!(
            request
                .to_lowercase()
                .contains("x-probe: a\r\nx-probe: b\r\n"),
            "{request}"
        );
        assert!(request.ends_with("\r\n\r\nping"), "{request}");
    }

    #[tokio::test]
    async fn http_errors_fail_with_the_answer_as_output_and_429_warns() {
        let (addr, _seen) = server(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 4\r\nconnection: close\r\n\r\ndown",
        )
        .await;
        let got = Probe::of(&http("/"), None)
            .unwrap()
            .run(&addr, SECOND)
            .await;
        assert_eq!(
            (got.outcome, got.status_code, got.output.as_str()),
            (Outcome::Failure, 503, "down")
        );
        let (addr, _seen) =
            server("HTTP/1.1 429 Too Many Requests\r\ncontent-length: 0\r\n\r\n").await;
        let got = Probe::of(&http("/"), None)
            .unwrap()
            .run(&addr, SECOND)
            .await;
        assert_eq!(got.outcome, Outcome::Warning);
        let (addr, _seen) =
            server("HTTP/1.1 302 Found\r\nlocation: /x\r\ncontent-length: 0\r\n\r\n").await;
        let got = Probe::of(&http("/"), None)
            .unwrap()
            .run(&addr, SECOND)
            .await;
        assert_eq!(got.outcome, Outcome::Success, "below 400 passes");
    }

    #[tokio::test]
    async fn a_silent_server_times_out_and_a_closed_port_fails() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let got = Probe::of(&http("/"), None)
            .unwrap()
            .run(&addr, Duration::from_millis(200))
            .await;
        assert_eq!(got.outcome, Outcome::Failure);
        assert!(got.output.contains("timed out"), "{}", got.output);
        drop(listener);
        let tcp = Probe::of(
            &ServiceCheck {
                r#type: "tcp".into(),
                ..Default::default()
            },
            None,
        )
        .unwrap();
        let got = tcp.run(&addr, SECOND).await;
        assert_eq!(got.outcome, Outcome::Failure);
        assert!(got.output.starts_with("dial tcp"), "{}", got.output);
    }

    #[tokio::test]
    async fn tcp_passes_on_a_connection() {
        let (addr, _seen) = server("").await;
        let tcp = Probe::of(
            &ServiceCheck {
                r#type: "tcp".into(),
                ..Default::default()
            },
            None,
        )
        .unwrap();
        assert_eq!(tcp.run(&addr, SECOND).await.outcome, Outcome::Success);
    }

    #[test]
    fn checks_this_client_cannot_run_are_refused_by_name() {
        let mut https = http("/");
        https.protocol = "https".into();
        assert!(
            Probe::of(&https, None)
                .unwrap_err()
                .contains("protocol \"https\"")
        );
        let script = ServiceCheck {
            name: "s".into(),
            r#type: "script".into(),
            ..Default::default()
        };
        assert!(
            Probe::of(&script, None)
                .unwrap_err()
                .contains("needs a running task")
        );
        let ttl = ServiceCheck {
            name: "t".into(),
            r#type: "ttl".into(),
            ..Default::default()
        };
        assert!(Probe::of(&ttl, None).unwrap_err().contains("type \"ttl\""));
        let mut bad = http("/");
        bad.method = "GE T".into();
        assert!(Probe::of(&bad, None).unwrap_err().contains("method"));
    }
}

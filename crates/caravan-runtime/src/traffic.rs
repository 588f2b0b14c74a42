//! What a server's gRPC calls cost on the wire: calls, and the bytes of
//! their request and response bodies (gRPC frames, headers left out), by
//! method. A streaming call's bytes are counted as its frames pass, so a
//! long-lived stream shows up while it runs. Summed over the processes of a
//! run and divided by its placements, these are the per-hop figures of
//! `docs/benchmarks.md`.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::LazyLock;
use std::task::{Context, Poll};

use caravan_metrics::{IntCounter, IntCounterVec};
use futures::future::BoxFuture;
use http_body::{Body, Frame, SizeHint};
use parking_lot::Mutex;
use tonic::codegen::Bytes;
use tonic::codegen::http;

/// Methods counted by name; calls to any further method (a peer probing
/// random paths) share the label [`OTHER`], so the label set stays bounded.
const MAX_METHODS: usize = 256;
/// The label of methods beyond [`MAX_METHODS`].
const OTHER: &str = "other";

struct TrafficMetrics {
    calls: IntCounterVec,
    received: IntCounterVec,
    sent: IntCounterVec,
    /// The methods seen so far, with their counters resolved once.
    methods: Mutex<Methods>,
}

/// The methods seen so far, each with its counters.
#[derive(Default)]
struct Methods(HashMap<String, Counters>);

impl Methods {
    /// The counters of the method at `path`: its own while fewer than
    /// [`MAX_METHODS`] have been seen, else those of [`OTHER`].
    fn counters(&mut self, metrics: &TrafficMetrics, path: &str) -> Counters {
        if let Some(c) = self.0.get(path) {
            return c.clone();
        }
        let label = if self.0.len() < MAX_METHODS {
            path
        } else {
            OTHER
        };
        let c = Counters {
            calls: metrics.calls.with_label_values(&[label]),
            received: metrics.received.with_label_values(&[label]),
            sent: metrics.sent.with_label_values(&[label]),
        };
        if label != OTHER {
            self.0.insert(path.to_string(), c.clone());
        }
        c
    }
}

/// The counters of one method.
#[derive(Clone)]
struct Counters {
    calls: IntCounter,
    received: IntCounter,
    sent: IntCounter,
}

static METRICS: LazyLock<TrafficMetrics> = LazyLock::new(|| TrafficMetrics {
    calls: caravan_metrics::counter_vec(
        "caravan_grpc_server_calls_total",
        "gRPC calls this process served, by method (`other` past the first 256 methods seen).",
        &["method"],
    ),
    received: caravan_metrics::counter_vec(
        "caravan_grpc_server_received_bytes_total",
        "Bytes of gRPC request bodies this process received, by method.",
        &["method"],
    ),
    sent: caravan_metrics::counter_vec(
        "caravan_grpc_server_sent_bytes_total",
        "Bytes of gRPC response bodies this process sent, streams included as they go, by method.",
        &["method"],
    ),
    methods: Mutex::new(Methods::default()),
});

/// Registers the traffic metrics in the process registry.
pub fn register() {
    LazyLock::force(&METRICS);
}

/// The counters of the method at `path`.
fn counters(path: &str) -> Counters {
    let metrics = &*METRICS;
    metrics.methods.lock().counters(metrics, path)
}

/// A server layer counting each call and its body bytes by method.
#[derive(Debug, Clone, Copy, Default)]
pub struct TrafficLayer;

impl<S> tower::Layer<S> for TrafficLayer {
    type Service = Traffic<S>;

    fn layer(&self, inner: S) -> Traffic<S> {
        Traffic { inner }
    }
}

/// The service [`TrafficLayer`] wraps around a server's routes.
#[derive(Debug, Clone)]
pub struct Traffic<S> {
    inner: S,
}

impl<S> tower::Service<http::Request<tonic::body::Body>> for Traffic<S>
where
    S: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
        >,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let c = counters(req.uri().path());
        c.calls.inc();
        let received = c.received;
        let req = req.map(|body| tonic::body::Body::new(Counted::new(body, received)));
        let answer = self.inner.call(req);
        Box::pin(async move {
            let response = answer.await?;
            Ok(response.map(|body| tonic::body::Body::new(Counted::new(body, c.sent))))
        })
    }
}

/// A body that adds the length of each data frame passing through to a
/// counter.
struct Counted<B> {
    inner: B,
    counter: IntCounter,
}

impl<B> Counted<B> {
    fn new(inner: B, counter: IntCounter) -> Self {
        Counted { inner, counter }
    }
}

impl<B> Body for Counted<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            self.counter.inc_by(data.len() as u64);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    fn sample(name: &str, method: &str) -> u64 {
        caravan_metrics::gather()
            .iter()
            .filter(|f| f.name() == name)
            .flat_map(|f| f.get_metric().iter())
            .filter(|m| m.get_label().iter().any(|l| l.value() == method))
            .map(|m| m.get_counter().get_value() as u64)
            .sum()
    }

    #[tokio::test]
    async fn counts_calls_and_body_bytes_by_method() {
        register();
        let method = "/caravan.test.Traffic/Echo";
        let echo = tower::service_fn(|req: http::Request<tonic::body::Body>| async move {
            let bytes = req.into_body().collect().await.unwrap().to_bytes();
            let mut twice = bytes.to_vec();
            twice.extend_from_slice(&bytes);
            Ok::<_, std::convert::Infallible>(http::Response::new(tonic::body::Body::new(
                http_body_util::Full::new(Bytes::from(twice)),
            )))
        });
        let mut service = tower::Layer::layer(&TrafficLayer, echo);
        for _ in 0..2 {
            let req = http::Request::builder()
                .uri(format!("http://x{method}"))
                .body(tonic::body::Body::new(http_body_util::Full::new(
                    Bytes::from_static(b"hello"),
                )))
                .unwrap();
            let response = tower::Service::call(&mut service, req).await.unwrap();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(&body[..], b"hellohello");
        }
        assert_eq!(sample("caravan_grpc_server_calls_total", method), 2);
        assert_eq!(
            sample("caravan_grpc_server_received_bytes_total", method),
            10
        );
        assert_eq!(sample("caravan_grpc_server_sent_bytes_total", method), 20);
    }

    #[test]
    fn methods_past_the_limit_share_one_label() {
        register();
        // A table of its own: the process's table stays free for the
        // other tests' methods.
        let mut methods = Methods::default();
        for i in 0..MAX_METHODS + 10 {
            methods
                .counters(&METRICS, &format!("/probe/{i}"))
                .calls
                .inc();
        }
        assert_eq!(methods.0.len(), MAX_METHODS);
        assert_eq!(sample("caravan_grpc_server_calls_total", "/probe/0"), 1);
        assert!(sample("caravan_grpc_server_calls_total", OTHER) >= 10);
    }
}

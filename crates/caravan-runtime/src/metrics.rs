//! Metrics every service shares: the admin listener that serves the
//! process registry at `/metrics` (`metrics_addr`), and leadership changes.

use std::net::SocketAddr;
use std::sync::LazyLock;

use anyhow::Context;
use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use caravan_metrics::{IntCounterVec, IntGaugeVec, MetricFamily};
use tokio_util::sync::CancellationToken;

use crate::grpc;

struct LeaderMetrics {
    changes: IntCounterVec,
    leading: IntGaugeVec,
}

static LEADER: LazyLock<LeaderMetrics> = LazyLock::new(|| LeaderMetrics {
    changes: caravan_metrics::counter_vec(
        "caravan_leader_changes_total",
        "Terms this process won as the leader of a service; summed over replicas, the service's leader changes.",
        &["service"],
    ),
    leading: caravan_metrics::gauge_vec(
        "caravan_leader",
        "1 while this process leads the service, else 0.",
        &["service"],
    ),
});

/// Registers the metrics of the runtime, the store and the watch cache in
/// the process registry, so they are exported before their first sample.
pub fn register() {
    LazyLock::force(&LEADER);
    caravan_store::metrics::register();
    caravan_state::metrics::register();
    crate::traffic::register();
}

/// Records that this process started (`true`) or ended a term as `service`'s leader.
pub(crate) fn leading(service: &str, now: bool) {
    let metrics = &*LEADER;
    if now {
        metrics.changes.with_label_values(&[service]).inc();
    }
    metrics
        .leading
        .with_label_values(&[service])
        .set(i64::from(now));
}

/// `caravan_leader` of `service` in this process (for tests).
#[cfg(test)]
pub(crate) fn leading_now(service: &str) -> i64 {
    LEADER.leading.with_label_values(&[service]).get()
}

/// `families` as a text exposition response.
pub fn text_response(families: &[MetricFamily]) -> Response {
    let mut response = caravan_metrics::encode_text(families).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(caravan_metrics::TEXT_CONTENT_TYPE),
    );
    response
}

/// `GET /metrics`: the process registry.
async fn metrics() -> Response {
    text_response(&caravan_metrics::gather())
}

/// A router serving the process registry at `/metrics`.
pub fn router() -> Router {
    Router::new().route("/metrics", get(metrics))
}

/// Binds `addr` (the `metrics_addr` key; port 0 picks a free port) and
/// serves [`router`] on it until `shutdown` fires; `None` when `addr` is
/// empty (the service serves `/metrics` on a port of its own, or not at all).
pub async fn serve_admin(
    addr: &str,
    shutdown: CancellationToken,
) -> anyhow::Result<Option<SocketAddr>> {
    register();
    if addr.is_empty() {
        return Ok(None);
    }
    let (listener, local) = grpc::bind(addr)
        .await
        .with_context(|| format!("metrics_addr: cannot listen on {addr}"))?;
    tracing::info!(addr = %local, "serving /metrics");
    tokio::spawn(async move {
        let served = axum::serve(listener, router())
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
        if let Err(err) = served {
            tracing::warn!(error = %err, "the metrics listener failed");
        }
    });
    Ok(Some(local))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::*;

    /// One plain HTTP/1.0 GET of `path`; the whole answer as text.
    async fn get(addr: SocketAddr, path: &str) -> String {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        answer
    }

    #[tokio::test]
    async fn the_admin_listener_serves_the_registry_until_shutdown() {
        let shutdown = CancellationToken::new();
        let addr = serve_admin("127.0.0.1:0", shutdown.clone())
            .await
            .unwrap()
            .unwrap();
        leading("test-service", true);
        let answer = get(addr, "/metrics").await;
        assert!(answer.starts_with("HTTP/1.0 200"), "{answer}");
        assert!(answer.contains("text/plain; version=0.0.4"), "{answer}");
        assert!(
            answer.contains("caravan_leader_changes_total{service=\"test-service\"} 1"),
            "{answer}"
        );
        assert!(
            answer.contains("caravan_leader{service=\"test-service\"} 1"),
            "{answer}"
        );
        assert!(get(addr, "/nothing").await.starts_with("HTTP/1.0 404"));
        shutdown.cancel();
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(TcpStream::connect(addr).await.is_err(), "still listening");
    }

    #[tokio::test]
    async fn an_empty_address_serves_nothing() {
        assert_eq!(
            serve_admin("", CancellationToken::new()).await.unwrap(),
            None
        );
    }

    #[test]
    fn every_runtime_store_and_cache_metric_is_documented() {
        register();
        let wrong = caravan_metrics::undocumented(include_str!("../../../docs/metrics.md"));
        assert!(wrong.is_empty(), "docs/metrics.md: {wrong:#?}");
    }
}

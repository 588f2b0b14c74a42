//! One trace per evaluation: the W3C trace context of the request that
//! created an evaluation travels with it (in `Evaluation.trace_context`, then
//! in each `Allocation.trace_context` it places), and every service that
//! handles it opens its spans as children of that context. gRPC calls between
//! services carry the current span's context in their metadata.
//!
//! Without span export configured ([`crate::telemetry`]) no propagator is
//! installed: [`capture`] returns an empty map and [`follow`] does nothing,
//! so carrying a context costs nothing when tracing is off.

use std::collections::BTreeMap;

use opentelemetry::propagation::{Extractor, Injector};
use tonic::codegen::http;
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The W3C fields of the current span's context (`traceparent` and, when
/// set, `tracestate`); empty when tracing is off or no span is current.
pub fn capture() -> BTreeMap<String, String> {
    of(&tracing::Span::current())
}

/// The W3C fields of `span`'s context; empty when tracing is off.
pub fn of(span: &tracing::Span) -> BTreeMap<String, String> {
    let context = span.context();
    let mut carrier = BTreeMap::new();
    opentelemetry::global::get_text_map_propagator(|p| {
        p.inject_context(&context, &mut MapInjector(&mut carrier));
    });
    carrier
}

/// Makes `span` a child of the context in `carrier` (as captured by
/// [`capture`]); an empty or unreadable carrier leaves `span` where it was.
pub fn follow(span: &tracing::Span, carrier: &BTreeMap<String, String>) {
    if carrier.is_empty() {
        return;
    }
    let parent =
        opentelemetry::global::get_text_map_propagator(|p| p.extract(&MapExtractor(carrier)));
    // Without an OpenTelemetry layer installed there is nothing to attach to.
    let _ = span.set_parent(parent);
}

/// Makes `span` a child of the context an HTTP or gRPC caller sent in its
/// `traceparent` and `tracestate` headers, if any.
pub fn follow_headers(span: &tracing::Span, headers: &http::HeaderMap) {
    if !headers.contains_key("traceparent") {
        return;
    }
    let parent =
        opentelemetry::global::get_text_map_propagator(|p| p.extract(&HeaderExtractor(headers)));
    let _ = span.set_parent(parent);
}

/// Adds the current span's context to outgoing gRPC `metadata`.
pub fn inject(metadata: &mut MetadataMap) {
    let context = tracing::Span::current().context();
    opentelemetry::global::get_text_map_propagator(|p| {
        p.inject_context(&context, &mut MetadataInjector(metadata));
    });
}

/// A gRPC request carrying `message` and the current span's context, so the
/// callee's request span continues the caller's trace.
pub fn request<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    inject(request.metadata_mut());
    request
}

struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

struct MetadataInjector<'a>(&'a mut MetadataMap);

impl Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(key), Ok(value)) = (
            MetadataKey::from_bytes(key.as_bytes()),
            MetadataValue::try_from(value),
        ) {
            self.0.insert(key, value);
        }
    }
}

struct MapInjector<'a>(&'a mut BTreeMap<String, String>);

impl Injector for MapInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_string(), value);
    }
}

struct MapExtractor<'a>(&'a BTreeMap<String, String>);

impl Extractor for MapExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    fn trace_id(span: &tracing::Span) -> String {
        span.context().span().span_context().trace_id().to_string()
    }

    // One test: the propagator is process-wide, so its absence is checked
    // before it is installed.
    #[test]
    fn a_captured_context_is_continued_and_nothing_is_carried_without_tracing() {
        let span = tracing::info_span!("nothing");
        assert!(of(&span).is_empty());
        follow(
            &span,
            &BTreeMap::from([("traceparent".into(), "junk".into())]),
        );
        assert!(request(()).metadata().is_empty());

        opentelemetry::global::set_text_map_propagator(
            opentelemetry_sdk::propagation::TraceContextPropagator::new(),
        );
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        tracing::subscriber::with_default(subscriber, || {
            let root = tracing::info_span!("register");
            let carrier = of(&root);
            let parent = &carrier["traceparent"];
            assert!(parent.contains(&trace_id(&root)), "{parent}");

            // Another service, later: a span that follows the carrier joins
            // the trace; one that does not starts its own.
            let child = tracing::info_span!("schedule");
            follow(&child, &carrier);
            assert_eq!(trace_id(&child), trace_id(&root));
            let unrelated = tracing::info_span!("other");
            assert_ne!(trace_id(&unrelated), trace_id(&root));

            let _entered = child.enter();
            let sent = request(());
            let mut headers = http::HeaderMap::new();
            for (k, v) in sent.metadata().clone().into_headers() {
                if let Some(k) = k {
                    headers.insert(k, v);
                }
            }
            let callee = tracing::info_span!("commit");
            follow_headers(&callee, &headers);
            assert_eq!(trace_id(&callee), trace_id(&root));
        });
    }
}

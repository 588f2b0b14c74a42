//! Tracing for every service: structured logs, and OpenTelemetry spans
//! exported over OTLP when an endpoint is configured.

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracerProvider,
};
use serde::{Deserialize, Serialize};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Logging and tracing settings, the `[telemetry]` section of every service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TelemetryConfig {
    /// `tracing` filter directives, e.g. `info,caravan_plan_applier=debug`.
    pub log_filter: String,
    /// `text` or `json`.
    pub log_format: String,
    /// OTLP/gRPC collector, e.g. `http://127.0.0.1:4317`; empty disables export.
    pub otlp_endpoint: String,
    /// The share of new traces recorded, from 0.0 to 1.0 (default 1.0). A
    /// span whose caller (or evaluation) was sampled is always recorded, so
    /// a trace is kept whole or not at all.
    pub sample_ratio: f64,
    /// How long finished spans wait to be sent in a batch, in milliseconds.
    pub export_delay_ms: u64,
}

// `sample_ratio` is checked to lie in 0.0..=1.0 before use (never NaN), so
// equality is reflexive.
impl Eq for TelemetryConfig {}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            log_filter: "info".into(),
            log_format: "text".into(),
            otlp_endpoint: String::new(),
            sample_ratio: 1.0,
            export_delay_ms: 5_000,
        }
    }
}

/// Why tracing could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The filter directives do not parse.
    #[error("telemetry.log_filter: {0}")]
    Filter(String),
    /// The sample ratio is not a share.
    #[error("telemetry.sample_ratio: must be between 0.0 and 1.0, got {0}")]
    SampleRatio(f64),
    /// The OTLP exporter could not be built.
    #[error("telemetry.otlp_endpoint: {0}")]
    Exporter(String),
}

/// Keeps span export alive; flushes and stops it when dropped.
#[derive(Debug)]
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(err) = provider.shutdown()
        {
            eprintln!("span export shutdown: {err}");
        }
    }
}

/// Installs the global subscriber for `service`. When a subscriber is already
/// installed (several services in one process, as in `caravan dev`), the first
/// one stays and this is a no-op.
pub fn init(service: &str, config: &TelemetryConfig) -> Result<TelemetryGuard, TelemetryError> {
    let filter = EnvFilter::try_new(&config.log_filter)
        .map_err(|e| TelemetryError::Filter(e.to_string()))?;
    if !(0.0..=1.0).contains(&config.sample_ratio) {
        return Err(TelemetryError::SampleRatio(config.sample_ratio));
    }
    let fmt = if config.log_format == "json" {
        tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
            .boxed()
    } else {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .boxed()
    };
    let provider = if config.otlp_endpoint.is_empty() {
        None
    } else {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(config.otlp_endpoint.clone())
            .build()
            .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
        Some(
            SdkTracerProvider::builder()
                .with_resource(
                    Resource::builder()
                        .with_service_name(service.to_string())
                        .build(),
                )
                .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                    config.sample_ratio,
                ))))
                .with_span_processor(
                    BatchSpanProcessor::builder(exporter)
                        .with_batch_config(
                            BatchConfigBuilder::default()
                                .with_scheduled_delay(Duration::from_millis(
                                    config.export_delay_ms.max(1),
                                ))
                                .build(),
                        )
                        .build(),
                )
                .build(),
        )
    };
    let otel = provider
        .as_ref()
        .map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer(service.to_string())));
    let installed = tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .with(otel)
        .try_init()
        .is_ok();
    if installed && let Some(p) = &provider {
        opentelemetry::global::set_tracer_provider(p.clone());
        opentelemetry::global::set_text_map_propagator(
            opentelemetry_sdk::propagation::TraceContextPropagator::new(),
        );
    }
    Ok(TelemetryGuard {
        provider: if installed { provider } else { None },
    })
}

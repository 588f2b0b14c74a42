//! What every Caravan service shares: the [`service::Service`] abstraction
//! and the one bootstrap that runs it (as a process or in-process), layered
//! configuration, the watch cache's start and stop, tracing, graceful
//! shutdown, gRPC serving with health and reflection, leadership loops and
//! terms, the service names, the `/metrics` admin listener, mutual TLS with roles, and the
//! mapping of errors to gRPC statuses.

pub mod cache;
pub mod config;
pub mod decode_errors;
pub mod grpc;
pub mod huge_pages;
pub mod leader;
pub mod local;
pub mod metrics;
pub mod names;
pub mod service;
pub mod shutdown;
pub mod status;
pub mod store;
pub mod telemetry;
pub mod term;
pub mod tls;
pub mod trace;
pub mod traffic;

/// Pauses between attempts, for the services' retry loops.
pub use caravan_store::Backoff;
